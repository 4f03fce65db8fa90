#!/usr/bin/env bash
# The GPU recipes exercised on CPU (not run in CI): one training step of each shipped GPU recipe (agent_tune_bfcl,
# agent_tune_toolrl, agent_tune_tau2, agent_tune_retool) with config/device/cpu_probe.yaml appended, which changes
# only the device, the model (SmolLM2-135M) and the sizes: each recipe's algorithm keys (rollout correction,
# dynamic sampling, group size, loss, task weighting) run for real. What cannot run on CPU is listed in docs/gpu.md.
#   bash examples/cpu/gpu_recipes_on_cpu.sh [hydra overrides for every run...]
# Runs every recipe even when one fails, each under TIMEOUT_S (default 3600: dynamic sampling regenerates until
# it has groups whose rewards differ), and ends with one line per recipe (exit code, wall time, log);
# exits 1 when any failed. RECIPES picks some (default: all four); RLLA_FILE gives ToolRL's rlla data (else
# synthetic arithmetic tool tasks). tau2's user simulator is SmolLM2 served by vLLM on USER_PORT (default 30001).
# SmolLM2 scored 0 on every bfcl (progress) and retool (correct answer) episode measured, so those recipes' dynamic
# sampling regenerates until the timeout; to reach their update, switch that one key off (measured, docs/gpu.md):
#   RECIPES="agent_tune_retool agent_tune_bfcl" bash examples/cpu/gpu_recipes_on_cpu.sh algorithm.filter_groups.enable=false
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../_common.sh"

WORK_DIR="${WORK_DIR:-$REPO_DIR/outputs/gpu_recipes_on_cpu}"
RECIPES="${RECIPES:-agent_tune_bfcl agent_tune_toolrl agent_tune_tau2 agent_tune_retool}"
RLLA_FILE="${RLLA_FILE:-}"
USER_PORT="${USER_PORT:-30001}"
TIMEOUT_S="${TIMEOUT_S:-3600}"

# data_args RECIPE DIR: build the recipe's rows in DIR once; print the train and val files
data_args() {
  local recipe="$1" dir="$2"
  case "$recipe" in
    agent_tune_bfcl)  # 3 worked examples per row: without them SmolLM2 never calls (docs/cpu.md)
      [[ -f "$dir/train_base.parquet" ]] || "$PYTHON" "$REPO_DIR/data_preprocess/bfcl.py" --out "$dir" --shots 3 >&2
      echo "$dir/train_base.parquet $dir/val.parquet" ;;
    agent_tune_toolrl)
      if [[ ! -f "$dir/train.parquet" ]]; then
        if [[ -n "$RLLA_FILE" ]]; then
          "$PYTHON" "$REPO_DIR/data_preprocess/toolcall.py" --source rlla "$RLLA_FILE" --val-size 16 --out "$dir" >&2
        else
          "$PYTHON" "$REPO_DIR/data_preprocess/toolcall.py" --synthetic arith --n 64 --val-size 8 --shots 0 \
            --out "$dir" >&2
        fi
      fi
      echo "$dir/train.parquet $dir/val.parquet" ;;
    agent_tune_tau2)
      [[ -f "$dir/train.parquet" ]] || "$PYTHON" "$REPO_DIR/data_preprocess/tau2.py" --out "$dir" --domains airline \
        --splits train >&2
      echo "$dir/train.parquet $dir/train.parquet" ;;
    agent_tune_retool)
      [[ -f "$dir/train.parquet" ]] || "$PYTHON" "$REPO_DIR/data_preprocess/retool.py" \
        --input "$REPO_DIR/tests/fixtures/retool/math_small.jsonl" --answer-marker '####' --out "$dir" --val-size 2 >&2
      echo "$dir/train.parquet $dir/val.parquet" ;;
    *) echo "unknown recipe $recipe" >&2; exit 2 ;;
  esac
}

user_pid=""
stop_user() { [[ -z "$user_pid" ]] || stop_served "$user_pid"; }
trap stop_user EXIT

cd "$REPO_DIR"
summary=()
failed=0
for recipe in $RECIPES; do
  run_dir="$WORK_DIR/$recipe"
  read -r train_file val_file < <(data_args "$recipe" "$WORK_DIR/data/$recipe")
  extra=()
  if [[ "$recipe" == agent_tune_tau2 ]]; then
    if [[ -z "$user_pid" ]]; then
      model="$("$PYTHON" -c "from agent_tune.models.smollm2 import ensure_smollm2; print(ensure_smollm2())")"
      VLLM_CPU_KVCACHE_SPACE=1 serve_vllm "$WORK_DIR/user_server.log" "$USER_PORT" "$model" user-simulator \
        --max-model-len 8192 --dtype float32 --max-num-seqs 4 --enforce-eager
      user_pid=$SERVED_PID
      wait_openai "http://127.0.0.1:$USER_PORT/v1" "$user_pid" "$WORK_DIR/user_server.log"
    fi
    extra=(agent_tune.env_kwargs.tau2.user.base_url="http://127.0.0.1:$USER_PORT/v1")
  fi
  started=$SECONDS
  set +e
  timeout "$TIMEOUT_S" "$PYTHON" -m agent_tune.launch.train --config-name "$recipe" +device=cpu_probe \
    "${OVERRIDES[@]}" data.train_files="$train_file" data.val_files="$val_file" \
    trainer.default_local_dir="$run_dir/checkpoints" "${extra[@]}" "$@"
  code=$?
  set -e
  [[ $code -eq 0 ]] || failed=1
  summary+=("$recipe: exit $code, $((SECONDS - started)) s, log $run_dir/checkpoints/train.log")
done
printf '%s\n' "${summary[@]}"
exit "$failed"
