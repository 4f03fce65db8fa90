#!/usr/bin/env bash
# Export a verl FSDP checkpoint (CKPT_DIR/global_step_N) to a Hugging Face folder, with verl's own
# model merger. The folder loads with transformers and serves with vLLM (agent-tune eval, stage 2).
#   bash examples/export_hf.sh outputs/bfcl_stage1/checkpoints/global_step_100 outputs/models/bfcl_stage1
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_common.sh"
if [[ $# -ne 2 ]]; then
  echo "usage: $0 CHECKPOINT_STEP_DIR OUT_DIR" >&2
  exit 2
fi
STEP_DIR="$1"
OUT_DIR="$2"
if [[ ! -d "$STEP_DIR/actor" ]]; then
  echo "$STEP_DIR/actor not found: give a global_step_N folder of a training run" >&2
  exit 2
fi
exec "$PYTHON" -m verl.model_merger merge --backend fsdp --local_dir "$STEP_DIR/actor" --target_dir "$OUT_DIR"
