#!/usr/bin/env bash
# BFCL's official scorer on the results of `agent-tune eval` (the bfcl env, multi-turn; or the toolcall env on
# BFCL's single-turn entries), in one go:
#   1. the result files bfcl-eval reads, written from RESULTS (`agent-tune eval report --results-dir`);
#   2. `bfcl evaluate --partial-eval` on every category those files hold (partial: the entries present, so a
#      subset scores as it is; on all entries of a category it is the leaderboard's number);
#   3. its accuracy per category beside agent-tune's (sample 0 of each entry, as the result files hold).
#   BFCL=".venv-bfcl-cli/bin/python -m bfcl_eval" bash examples/eval/bfcl_official.sh outputs/eval/qwen3_4b_bfcl_test.jsonl
# bfcl-eval's CLI lives in a venv of its own: scripts/install_bfcl_cli.sh builds .venv-bfcl-cli (docs/eval.md,
# "Re-scoring with the official tool").
# Variables: BFCL (the bfcl command, default `bfcl`; a command with arguments works, e.g.
# "/opt/bfcl/bin/python -m bfcl_eval"), MODEL (bfcl-eval's registry name whose handler decodes the result files,
# default Qwen/Qwen3-4B-Instruct-2507-FC: Hermes <tool_call> blocks), FORMAT (canonical, the calls our env ran,
# or raw, the policy's text; docs/eval.md), OUT_DIR (default: RESULTS without .jsonl, plus _official), PYTHON
# (agent-tune's interpreter). OUT_DIR gets result/ (the files scored), score/ (bfcl evaluate's scores and CSVs)
# and bfcl_root/ (BFCL_PROJECT_ROOT, where bfcl-eval keeps its own files); result/ and score/ are rewritten.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/../_common.sh"

if [[ $# -ne 1 || ! -f "$1" ]]; then
  echo "usage: [BFCL=...] [MODEL=...] [FORMAT=canonical|raw] [OUT_DIR=...] bash $0 RESULTS.jsonl" >&2
  exit 2
fi
RESULTS="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
MODEL="${MODEL:-Qwen/Qwen3-4B-Instruct-2507-FC}"
FORMAT="${FORMAT:-canonical}"
OUT_DIR="${OUT_DIR:-${RESULTS%.jsonl}_official}"
read -r -a BFCL_CMD <<< "${BFCL:-bfcl}"

mkdir -p "$OUT_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"  # bfcl-eval reads relative paths from its project root: give it absolute ones
rm -rf "$OUT_DIR/result" "$OUT_DIR/score"

cd "$REPO_DIR"
"$PYTHON" -m agent_tune.cli eval report "$RESULTS" --results-dir "$OUT_DIR/result" \
  --results-options "{\"model\": \"$MODEL\", \"format\": \"$FORMAT\"}" > "$OUT_DIR/agent_tune_report.txt"

categories=()
for file in "$OUT_DIR"/result/*/*/BFCL_v4_*_result.json; do
  [[ -f "$file" ]] || continue
  name="$(basename "$file")"
  name="${name#BFCL_v4_}"
  categories+=("${name%_result.json}")
done
if [[ ${#categories[@]} -eq 0 ]]; then
  echo "no BFCL results in $RESULTS (is it a results file of agent-tune eval with the bfcl or toolcall env?)" >&2
  exit 1
fi
joined="$(IFS=,; echo "${categories[*]}")"  # bfcl evaluate takes its categories comma-separated
echo "bfcl evaluate: $MODEL on $joined ($FORMAT result files in $OUT_DIR/result)"

BFCL_PROJECT_ROOT="$OUT_DIR/bfcl_root" "${BFCL_CMD[@]}" evaluate --model "$MODEL" --test-category "$joined" \
  --result-dir "$OUT_DIR/result" --score-dir "$OUT_DIR/score" --partial-eval > "$OUT_DIR/bfcl_evaluate.log" 2>&1 \
  || { tail -n 20 "$OUT_DIR/bfcl_evaluate.log" >&2; echo "bfcl evaluate failed; see $OUT_DIR/bfcl_evaluate.log" >&2
       exit 1; }

"$PYTHON" -m agent_tune.envs.bfcl.official_scores "$RESULTS" "$OUT_DIR/score"
echo "scores: $OUT_DIR/score (data_overall.csv and per-category score files)"
