#!/usr/bin/env bash
# ReTool's recipe in one script: the SFT cold start on code-interpreter conversations (agent-tune sft with
# +sft_format=retool: the <interpreter> blocks are env tokens, as in the GRPO rollout), then GRPO on ReTool
# (examples/run_grpo_retool.sh) from the Hugging Face folder the SFT exported.
#   GPU (one node of 8): SFT_DATA=retool_sft.parquet INPUT=math.jsonl bash examples/run_retool_sft_grpo.sh
#   CPU: SFT_CONFIG=agent_tune_sft_cpu GRPO_CONFIG=agent_tune_retool_cpu bash examples/run_retool_sft_grpo.sh
#   bash examples/run_retool_sft_grpo.sh [SFT overrides...] [-- GRPO overrides...]
# Every hyper-parameter is in the configs (SFT_CONFIG, default agent_tune_sft, with config/sft_format/retool.yaml;
# GRPO_CONFIG, default agent_tune_retool); the script passes paths, and the variables you set
# (SFT_STEPS: trainer.total_training_steps of the SFT; TOTAL_STEPS, GROUP_SIZE, BATCH_SIZE as in
# run_grpo_retool.sh).
#   SFT_DATA  ReTool conversations (.parquet/.jsonl: messages = system, user, one assistant message with the
#             policy's text, <code> programs and <interpreter> outputs; see docs/sft.md). Unset: 32 synthetic
#             arithmetic conversations (data_preprocess/retool_sft_synthetic.py), and the GRPO problems
#             default to its math.jsonl (other problems than the conversations').
#   INPUT / DATASET, QUESTION_FIELD, ANSWER_FIELD, VAL_SIZE: the GRPO data, as run_grpo_retool.sh.
#   WORK_DIR  outputs/retool_sft_grpo: sft/ (SFT run), grpo/ (GRPO data and checkpoints).
# Running it again resumes: the SFT from its latest checkpoint (nothing left to do when it finished), then
# GRPO from its own latest checkpoint.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

SFT_CONFIG="${SFT_CONFIG:-agent_tune_sft}"
GRPO_CONFIG="${GRPO_CONFIG:-agent_tune_retool}"
WORK_DIR="${WORK_DIR:-$REPO_DIR/outputs/retool_sft_grpo}"
SFT_DIR="$WORK_DIR/sft"

sft_args=()
grpo_args=()
while [[ $# -gt 0 ]]; do
  if [[ "$1" == "--" ]]; then
    shift
    grpo_args=("$@")
    break
  fi
  sft_args+=("$1")
  shift
done

if [[ -z "${SFT_DATA:-}" ]]; then
  SYNTH_DIR="$WORK_DIR/sft_data"
  if [[ ! -f "$SYNTH_DIR/train.parquet" ]]; then
    "$PYTHON" "$REPO_DIR/data_preprocess/retool_sft_synthetic.py" --out "$SYNTH_DIR" >/dev/null
    echo "[agent-tune] synthetic ReTool conversations and problems written to $SYNTH_DIR"
  fi
  SFT_DATA="$SYNTH_DIR/train.parquet"
  if [[ -z "${INPUT:-}" && -z "${DATASET:-}" ]]; then
    export INPUT="$SYNTH_DIR/math.jsonl"
  fi
fi

cd "$REPO_DIR"
SFT_OVERRIDES=(+sft_format=retool data.train_files="$SFT_DATA" trainer.default_local_dir="$SFT_DIR")
if [[ -n "${SFT_STEPS:-}" ]]; then
  SFT_OVERRIDES+=(trainer.total_training_steps="$SFT_STEPS")
fi
echo "[agent-tune] 1/2 SFT cold start: $SFT_CONFIG on $SFT_DATA -> $SFT_DIR"
"$PYTHON" -m agent_tune.launch.sft --config-name "$SFT_CONFIG" "${SFT_OVERRIDES[@]}" "${sft_args[@]}"

ckpt="$(ls -d "$SFT_DIR"/global_step_* 2>/dev/null | sort -V | tail -1 || true)"
if [[ -n "$ckpt" && -f "$ckpt/lora_train_meta.json" ]]; then
  echo "[agent-tune] the SFT trained a LoRA adapter ($ckpt): export it with verl's model merger and start GRPO" \
       "with +lora=grpo from the export (docs/lora.md, 'From a LoRA SFT to a LoRA GRPO run')" >&2
  exit 1
fi
if [[ -z "$ckpt" || ! -f "$ckpt/huggingface/config.json" ]]; then
  echo "[agent-tune] no Hugging Face folder in the SFT's latest checkpoint (${ckpt:-none}): the SFT config must" \
       "save hf_model (checkpoint.save_contents); a LoRA SFT is exported with verl's model merger (docs/lora.md)" >&2
  exit 1
fi

echo "[agent-tune] 2/2 GRPO: $GRPO_CONFIG from $ckpt/huggingface"
export WORK_DIR="$WORK_DIR/grpo"
export MODEL_PATH="$ckpt/huggingface"
export CONFIG_NAME="$GRPO_CONFIG"
exec bash "$REPO_DIR/examples/run_grpo_retool.sh" "${grpo_args[@]}"
