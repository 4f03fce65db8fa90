# Sourced by the launch scripts (examples/*.sh, examples/cpu/*.sh); not run on its own.
#   REPO_DIR    the checkout
#   PYTHON      the interpreter every script runs (default: the checkout's .venv, as scripts/install.sh makes it)
#   OVERRIDES   Hydra overrides the script passes: paths, and only the variables the user set
#   pass VAR KEY...   append KEY=$VAR for each KEY, only when the user set VAR (non-empty)
# The config (config/*.yaml) is the single source of every hyper-parameter: a variable the user did not
# set passes nothing, so editing the YAML changes the run.
REPO_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-$REPO_DIR/.venv/bin/python}"
OVERRIDES=()

pass() {
  local var="$1" key
  shift
  if [[ -n "${!var:-}" ]]; then
    for key in "$@"; do
      OVERRIDES+=("$key=${!var}")
    done
  fi
}

# serve_vllm LOG PORT MODEL NAME [vLLM args...]: start vLLM's OpenAI server in the background, serving MODEL as
# NAME on 127.0.0.1:PORT (its output in LOG); its pid is left in SERVED_PID.
serve_vllm() {
  local log="$1" port="$2" model="$3" name="$4"
  shift 4
  mkdir -p "$(dirname "$log")"
  "$PYTHON" -m vllm.entrypoints.openai.api_server --model "$model" --served-model-name "$name" \
    --host 127.0.0.1 --port "$port" "$@" > "$log" 2>&1 &
  SERVED_PID=$!
}

# wait_openai URL PID LOG [TRIES]: wait (5 s between TRIES, default 180) until URL/models answers; exit 1 naming
# LOG when the server PID exits first or never answers.
wait_openai() {
  local url="$1" pid="$2" log="$3" tries="${4:-180}"
  for _ in $(seq 1 "$tries"); do
    if "$PYTHON" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)" \
        "$url/models" 2>/dev/null; then
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "the server for $url exited; see $log" >&2
      exit 1
    fi
    sleep 5
  done
  echo "the server for $url did not answer; see $log" >&2
  exit 1
}

# stop_served PID...: stop servers serve_vllm started: SIGTERM to each, SIGKILL to any still running SERVED_GRACE_S
# seconds later; waits for each (as agent_tune/testing/server_process.py stops the tests' servers).
SERVED_GRACE_S=60
stop_served() {
  local pid ticks=0
  for pid in "$@"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "$@"; do
    while kill -0 "$pid" 2>/dev/null && ((ticks < SERVED_GRACE_S * 10)); do
      sleep 0.1
      ticks=$((ticks + 1))
    done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}
