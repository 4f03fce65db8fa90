# Sourced by the install scripts of overlay venvs (scripts/install_trl.sh, install_bfcl_cli.sh), after _steps.sh; not
# run on its own.
#   overlay_venv DIR   make DIR a venv of the trainer's Python (./.venv, scripts/install.sh) whose path also holds the
#                      trainer's site-packages, through a .pth file: DIR then adds only what the trainer's venv must not
#                      have, its own site-packages first, and the trainer's venv is never touched. Idempotent; rebuilt
#                      when the trainer's venv has moved to another Python version (a site-packages loads only into
#                      its own version). Leaves DIR's interpreter in PY. Exit 2 without ./.venv.
overlay_venv() {
  local dir="$1" trainer=.venv/bin/python trainer_site own_site
  if [[ ! -x $trainer ]]; then
    echo "$(basename "$0"): no ./.venv (the trainer's venv): run bash scripts/install.sh first" >&2
    exit 2
  fi
  PY="$dir/bin/python"
  if [[ ! -x $PY ]] || [[ $(_python_version "$PY") != $(_python_version "$trainer") ]]; then
    step "venv $dir (the trainer's Python)" "$trainer" -m venv --clear "$dir"
  fi
  trainer_site="$("$trainer" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
  own_site="$("$PY" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
  echo "$trainer_site" > "$own_site/trainer.pth"
}

_python_version() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])'; }
