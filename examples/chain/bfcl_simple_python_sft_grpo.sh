#!/usr/bin/env bash
# GRPO from the SFT model (not RFT) on BFCL simple_python, on the training entries where SFT left room: the SFT
# model samples every training entry 4 times, the entries with 1-3 right samples are kept (all right or all wrong
# give a GRPO group no gradient), GRPO trains on them, and every checkpoint is evaluated on the test split.
#   CHAIN_UNTIL=sft bash examples/chain/bfcl_simple_python.sh    # first: data, base, SFT (the chain's)
#   bash examples/chain/bfcl_simple_python_sft_grpo.sh
# Settings: config/agent_tune_toolcall_bfcl_cpu.yaml + config/chain/bfcl_simple_python_sft_grpo.yaml (GRPO),
# examples/eval/chain_bfcl_simple_python_train_cpu.yaml (the sampling of the training entries),
# examples/eval/chain_bfcl_simple_python_cpu.yaml (the test evals, as the chain's). Outputs under the chain's
# $WORK_DIR/sft_grpo (samples.jsonl, mixed_ids.txt, data/train.parquet, checkpoints) and $WORK_DIR/eval
# (sft_grpo_step_K.*); records in $RESULTS (default $WORK_DIR/results.json).
set -euo pipefail
CHAIN=bfcl_simple_python
ENV_NAME=toolcall
RESULT_ENV="bfcl simple_python"
GRPO_CONFIG=agent_tune_toolcall_bfcl_cpu
# a variant (bfcl_simple_python_sft_grpo_long.sh) sets these before sourcing this script
GRPO_OVERLAY="${GRPO_OVERLAY:-+chain=bfcl_simple_python_sft_grpo}"
EVAL_PRESET="${EVAL_PRESET:-examples/eval/chain_bfcl_simple_python_cpu.yaml}"
SAMPLE_PRESET="${SAMPLE_PRESET:-examples/eval/chain_bfcl_simple_python_train_cpu.yaml}"
. "$(dirname "${BASH_SOURCE[0]}")/_chain.sh"

chain_data() {
  "$PYTHON" data_preprocess/toolcall.py --source bfcl --categories simple_python --shots 2 --out "$DATA_DIR"
}

chain_start
sft_hf=$(latest_hf "$WORK_DIR/sft/ckpt")
[[ -n "$sft_hf" ]] || { say "no SFT model under $WORK_DIR/sft/ckpt: run CHAIN_UNTIL=sft bash examples/chain/bfcl_simple_python.sh"; exit 1; }
test_eval "$sft_hf" sft
STAGE="sft_grpo${RUN_SUFFIX:-}"
OUT="$WORK_DIR/$STAGE"
mkdir -p "$OUT/data"

# the training entries where the SFT model's samples disagree
if [[ ! -s "$OUT/mixed_ids.txt" ]]; then
  say "sft_grpo: the SFT model samples every training entry"
  start_server "$sft_hf" sft_sample
  eval_args "$sft_hf"
  EVAL_ARGS[1]=$SAMPLE_PRESET
  "$PYTHON" -m agent_tune.cli eval "${EVAL_ARGS[@]}" --rows "$DATA_DIR/train.parquet" --output "$OUT/samples.jsonl" \
    > "$LOG_DIR/sft_grpo_sample.log" 2>&1 || { say "sampling failed, see $LOG_DIR/sft_grpo_sample.log"; exit 1; }
  stop_server
  "$PYTHON" -m agent_tune.cli eval report "$OUT/samples.jsonl" --mixed-ids "$OUT/mixed_ids.txt" \
    > "$LOG_DIR/sft_grpo_mixed.log" 2>&1 || { say "mixed ids failed, see $LOG_DIR/sft_grpo_mixed.log"; exit 1; }
fi
say "sft_grpo: $(grep -m1 '^mixed entries' "$LOG_DIR/sft_grpo_mixed.log")"
if [[ ! -f "$OUT/data/train.parquet" ]]; then
  "$PYTHON" -m agent_tune.cli data --env toolcall --split train --ids-file "$OUT/mixed_ids.txt" --out "$OUT/data" \
    --options '{"source": "bfcl", "categories": ["simple_python"], "shots": 2}' > "$LOG_DIR/sft_grpo_data.log" 2>&1 \
    || { say "rows failed, see $LOG_DIR/sft_grpo_data.log"; exit 1; }
fi
ln -sfn "$DATA_DIR/test.parquet" "$OUT/data/test.parquet"

# GRPO on them from the SFT model, every checkpoint on the test split
DATA_DIR="$OUT/data"
grpo_stage "$STAGE" "$sft_hf"
record_eval base base "" 0
sft_steps=$("$PYTHON" -m agent_tune.launch.config_value --config-name agent_tune_sft_cpu \
  trainer.total_training_steps +chain=sft_bfcl_simple_python)
record_eval sft SFT base "$sft_steps"
for step_dir in $(ls -d "$OUT"/checkpoints/global_step_* | sort -V); do
  k=${step_dir##*_}
  record_eval "${STAGE}_step_$k" "SFT+GRPO step $k" SFT "$k" "$OUT/checkpoints/metrics.jsonl"
done

# the entries GRPO trained on, with the test evals' sampling: the SFT model against the last checkpoint, to tell
# learning the trained entries from moving the held-out ones
test_eval "$sft_hf" sft_on_trained "$OUT/data/train.parquet"
test_eval "$OUT/hf_step_$k" "${STAGE}_on_trained" "$OUT/data/train.parquet"
record_eval sft_on_trained SFT base "$sft_steps" "" "trained entries"
record_eval "${STAGE}_on_trained" "SFT+GRPO step $k" SFT "$k" "$OUT/checkpoints/metrics.jsonl" "trained entries"
say "done: $RESULTS"
