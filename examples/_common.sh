# Sourced by the launch scripts (examples/*.sh, benchmarks/*.sh); not run on its own.
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
