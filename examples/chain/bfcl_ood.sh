#!/usr/bin/env bash
# A model trained on BFCL simple_python, evaluated on BFCL single-turn categories it was not trained on (each
# category's test split, split by id as the chain's: data_preprocess/toolcall.py, seed 42, 2 worked examples from
# the category's own train split), each category recorded in $RESULTS as out of distribution.
#   bash examples/chain/bfcl_ood.sh MODEL_DIR STAGE [FROM [STEPS]]
#   bash examples/chain/bfcl_ood.sh "$(.venv/bin/python -m agent_tune.models.smollm2)" base
#   bash examples/chain/bfcl_ood.sh outputs/chain/bfcl_simple_python/sft/ckpt/global_step_10/huggingface SFT base 10
# Categories: OOD_CATEGORIES (default: multiple parallel parallel_multiple); sampling:
# examples/eval/bfcl_ood_cpu.yaml; template, parser and dtype: the simple_python chain's GRPO config. Outputs under
# $WORK_DIR (the chain's, default outputs/chain/bfcl_simple_python)/ood: data/<category>/test.parquet,
# eval/<STAGE>_<category>.report.json; records in $RESULTS (default $WORK_DIR/ood/results.json).
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: bash examples/chain/bfcl_ood.sh MODEL_DIR STAGE [FROM [STEPS]]" >&2; exit 2; }
MODEL_DIR="$1"
STAGE="$2"
FROM="${3:-}"
STEPS="${4:-0}"
CHAIN=bfcl_simple_python
ENV_NAME=toolcall
GRPO_CONFIG=agent_tune_toolcall_bfcl_cpu
GRPO_OVERLAY=+chain=bfcl_simple_python
EVAL_PRESET=examples/eval/bfcl_ood_cpu.yaml
. "$(dirname "${BASH_SOURCE[0]}")/_chain.sh"
OOD_DIR="$WORK_DIR/ood"
RESULTS="${RESULTS_OOD:-$OOD_DIR/results.json}"
read -r -a categories <<< "${OOD_CATEGORIES:-multiple parallel parallel_multiple}"
mkdir -p "$OOD_DIR/eval"

chain_values

for cat in "${categories[@]}"; do
  if [[ ! -f "$OOD_DIR/data/$cat/test.parquet" ]]; then
    "$PYTHON" data_preprocess/toolcall.py --source bfcl --categories "$cat" --shots 2 --out "$OOD_DIR/data/$cat" \
      > "$LOG_DIR/ood_data_$cat.log" 2>&1 || { say "ood data $cat failed, see $LOG_DIR/ood_data_$cat.log"; exit 1; }
  fi
done

say "ood: $STAGE ($MODEL_DIR) on ${categories[*]}"
for cat in "${categories[@]}"; do
  out="$OOD_DIR/eval/${STAGE// /_}_$cat"
  if [[ ! -f "$out.report.json" ]]; then
    [[ -n "$SERVER_PID" ]] || start_server "$MODEL_DIR" "ood_${STAGE// /_}"
    eval_args "$MODEL_DIR"
    "$PYTHON" -m agent_tune.cli eval "${EVAL_ARGS[@]}" --rows "$OOD_DIR/data/$cat/test.parquet" --output "$out.jsonl" \
      --report-json "$out.report.json" > "$LOG_DIR/ood_${STAGE// /_}_$cat.log" 2>&1 \
      || { say "ood eval $cat failed, see $LOG_DIR/ood_${STAGE// /_}_$cat.log"; exit 1; }
  fi
  args=(--results "$RESULTS" --env "bfcl single-turn" --stage "$STAGE" --split "$cat" --ood --steps "$STEPS"
    --command "bash examples/chain/bfcl_ood.sh MODEL_DIR $STAGE${FROM:+ $FROM $STEPS}")
  [[ -n "$FROM" ]] && args+=(--from "$FROM")
  "$PYTHON" -m agent_tune.cli eval record "$out.report.json" "${args[@]}" >> "$LOG_DIR/results.log" 2>&1 \
    || { say "recording $cat failed, see $LOG_DIR/results.log"; exit 1; }
  say "ood $STAGE $cat: $(grep -m1 '  all entries: pass@1' "$LOG_DIR/ood_${STAGE// /_}_$cat.log" 2>/dev/null | sed 's/^ *//')"
done
stop_server
