# Helpers sourced by the install scripts (scripts/install*.sh; not run on its own).
#   step NAME CMD...        run CMD quietly and print one line: the step's name and its seconds; on failure stop
#                           the script naming the step, with CMD's exit status
#   import_check PY MODULES DATA_PACKAGES
#                           import each module of MODULES and locate each package of DATA_PACKAGES (both
#                           space-separated) with interpreter PY; name every one that fails, then fail

# Lines pip prints that are harmless here: a user-site warning, and "Skipping X as it is not installed".
HARMLESS='^WARNING: (Location|Skipping .* as it is not installed)'

step() {
  local name="$1" log rc=0 started=$SECONDS
  shift
  log="$(mktemp)"
  "$@" >"$log" 2>&1 || rc=$?
  grep -Ev "$HARMLESS" "$log" >&2 || true
  rm -f "$log"
  if [[ $rc -ne 0 ]]; then
    echo "$(basename "$0"): step '$name' failed (exit $rc)" >&2
    exit "$rc"
  fi
  echo "$(basename "$0"): $name ($((SECONDS - started)) s)"
}

import_check() {
  step "import check" "$1" -c '
import importlib, importlib.util, sys
modules, data_packages = sys.argv[1].split(), sys.argv[2].split()
failed = []
for name in modules:
    try:
        importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - any failure to import is reported by name
        failed.append(name)
        print(f"cannot import {name}: {type(exc).__name__}: {exc}", file=sys.stderr)
for name in data_packages:
    if importlib.util.find_spec(name) is None:
        failed.append(name)
        print(f"cannot find {name}", file=sys.stderr)
if failed:
    print("modules that failed to import: " + " ".join(failed), file=sys.stderr)
    sys.exit(1)
' "$2" "$3"
}
