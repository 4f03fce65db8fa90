#!/usr/bin/env bash
# Learning signal through an MCP server on CPU (not run in CI): ~20 GRPO steps of verl's real trainer with
# SmolLM2-135M on the notes example (examples/mcp/: a 6-tool MCP server started per episode, 40 training tasks of
# one call and an answer, 3 worked examples before each question, a verifier on the server's final state;
# config/agent_tune_mcp_notes_cpu.yaml holds every hyper-parameter). Writes the per-step metrics ($WORK_DIR/checkpoints/metrics.jsonl), a PNG of reward, accuracy
# and valid-call rate ($WORK_DIR/learning_signal_mcp.png), and prints the first 5 against the last 5 steps.
#   bash examples/cpu/learning_signal_mcp.sh [hydra overrides...]
# Passed only when set: STEPS (trainer.total_training_steps), LR (actor_rollout_ref.actor.optim.lr).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../_common.sh"

WORK_DIR="${WORK_DIR:-$REPO_DIR/outputs/learning_signal_mcp}"

cd "$REPO_DIR"
"$PYTHON" -m agent_tune.cli data --env mcp --split train test --out "$WORK_DIR/data" \
  --options '{"path": "examples/mcp/tasks.jsonl", "shots": 3}'
OVERRIDES+=(data.train_files="$WORK_DIR/data/train.parquet" data.val_files="$WORK_DIR/data/test.parquet"
  trainer.default_local_dir="$WORK_DIR/checkpoints")
pass STEPS trainer.total_training_steps
pass LR actor_rollout_ref.actor.optim.lr

"$PYTHON" -m agent_tune.launch.train --config-name agent_tune_mcp_notes_cpu "${OVERRIDES[@]}" "$@"
"$PYTHON" -m agent_tune.cli plot "$WORK_DIR/checkpoints/metrics.jsonl" --window 5 \
  --keys reward acc valid_call_rate --out "$WORK_DIR/learning_signal_mcp.png" \
  --title "GRPO, SmolLM2-135M, the notes MCP server (CPU)"
