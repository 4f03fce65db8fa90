#!/usr/bin/env bash
# Stage 2 of the BFCL curriculum on GPUs: GRPO on train (all four categories, 400 entries) from the
# stage-1 model exported to a Hugging Face folder, with a longer context and Ulysses sequence parallelism
# (config/agent_tune_bfcl_stage2.yaml holds its values).
#   bash examples/export_hf.sh outputs/bfcl_stage1/checkpoints/global_step_N outputs/models/bfcl_stage1
#   MODEL_PATH=outputs/models/bfcl_stage1 bash examples/run_grpo_bfcl_stage2.sh
# Every variable of run_grpo_bfcl.sh applies (passed only when set); re-running resumes from the latest
# checkpoint. Defaults that differ from stage 1: the model (outputs/models/bfcl_stage1), the train split
# (train.parquet), WORK_DIR (outputs/bfcl_stage2) and the config.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

export CONFIG_NAME="${CONFIG_NAME:-agent_tune_bfcl_stage2}"
export MODEL_PATH="${MODEL_PATH:-$REPO_DIR/outputs/models/bfcl_stage1}"
export DATA_DIR="${DATA_DIR:-$REPO_DIR/outputs/bfcl_data}"
export TRAIN_FILE="${TRAIN_FILE:-$DATA_DIR/train.parquet}"
export WORK_DIR="${WORK_DIR:-$REPO_DIR/outputs/bfcl_stage2}"

if [[ ! -f "$MODEL_PATH/config.json" && "$MODEL_PATH" == "$REPO_DIR/outputs/models/bfcl_stage1" ]]; then
  echo "stage 2 starts from the stage-1 model: export it first (examples/export_hf.sh), or set MODEL_PATH" >&2
  exit 2
fi
exec bash "$REPO_DIR/examples/run_grpo_bfcl.sh" "$@"
