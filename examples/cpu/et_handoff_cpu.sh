#!/usr/bin/env bash
# Environment Tuning's hand-off on real BFCL, on CPU (not run in CI): the bfcl_cpu curriculum
# (config/curriculum/bfcl_cpu.yaml) end to end with SmolLM2-135M. Stage 1 trains with the syntax reward on the
# train_base entries; its last checkpoint is exported; stage 2 starts from that model with the progress reward
# and actionable augmentation. The BFCL splits are built with the main job's worked examples (3 shots).
# Writes both stages' per-step metrics ($RUN_DIR/<stage>/checkpoints/metrics.jsonl), one PNG over both stages
# ($WORK_DIR/et_handoff_cpu.png) and prints each stage's first against its last steps.
#   bash examples/cpu/et_handoff_cpu.sh [overrides for every stage, or curriculum.KEY=VALUE]
# Paths: WORK_DIR (outputs/et_handoff_cpu). Killed and run again, the curriculum resumes where it was.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../_common.sh"

WORK_DIR="${WORK_DIR:-$REPO_DIR/outputs/et_handoff_cpu}"
DATA_DIR="$WORK_DIR/data"
RUN_DIR="$WORK_DIR/run"
SHOTS=3   # as the main job (examples/run_grpo_bfcl_cpu.sh)

cd "$REPO_DIR"
if ! grep -qs "\"shots\": $SHOTS," "$DATA_DIR/splits.json"; then
  "$PYTHON" data_preprocess/bfcl.py --out "$DATA_DIR" --shots "$SHOTS"
fi
"$PYTHON" -m agent_tune.launch.curriculum --curriculum bfcl_cpu --run-dir "$RUN_DIR" \
  curriculum.data_dir="$DATA_DIR" "$@"
"$PYTHON" -m agent_tune.cli plot "$RUN_DIR/syntax/checkpoints/metrics.jsonl" \
  "$RUN_DIR/base/checkpoints/metrics.jsonl" --labels "1 syntax" "2 progress+augment" --window 2 \
  --keys reward progress acc valid_call_rate zero_call groups_with_signal --out "$WORK_DIR/et_handoff_cpu.png" \
  --title "Environment Tuning's hand-off, SmolLM2-135M on BFCL (CPU)"
