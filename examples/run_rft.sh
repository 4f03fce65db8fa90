#!/usr/bin/env bash
# Rejection-sampling fine-tuning (RFT) for any env: play every training row N times against a served policy
# (`agent-tune eval --rows`, the training episode runner), keep each successful episode with the exact
# tokens the policy generated (`--sft-out`: prompt + response ids and the loss mask), then train on them with
# `agent-tune sft` (the rows' own tokens are used as they are). See docs/sft.md.
#
#   BASE_URL=http://127.0.0.1:8000/v1 MODEL=served-name TOKENIZER=/path/to/model ROWS=data/train.parquet \
#     bash examples/run_rft.sh [hydra overrides for agent-tune sft ...]
#
# Required: BASE_URL (an OpenAI-compatible server, token mode: vLLM), MODEL (its served name), TOKENIZER (the
# policy's local Hugging Face folder), ROWS (training rows of any env: data_preprocess/*.py output, .parquet or
# .jsonl). Optional: TEMPLATE (chat template: the GRPO run's agent_tune.template, default tokenizer), N (samples
# per row, default 4), TEMPERATURE (default 1.0), MIN_ACCURACY (default 1) or MIN_REWARD, LIMIT (first rows
# only), WORK_DIR (default outputs/rft), SFT_CONFIG (default agent_tune_sft_cpu; agent_tune_sft on GPUs),
# SFT_MODEL (model.path of the SFT run; it must share the policy's tokenizer, default: TOKENIZER), ENV_KWARGS
# (JSON for the env, e.g. tau2's simulated user: `agent-tune eval --env-kwargs`), TOOL_PARSER (the GRPO run's
# agent_tune.tool_parser; default hermes), MAX_TOKENS (per generation; eval's default 2048), RFT_STAGES
# (`eval,sft` by default; `eval` or `sft` runs one half, e.g. to stop the policy server in between).
# Rerunning resumes: finished episodes are skipped, the SFT run resumes from its latest checkpoint.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/_common.sh"
: "${BASE_URL:?set BASE_URL (the served policy, ending in /v1)}"
: "${MODEL:?set MODEL (the served model name)}"
: "${TOKENIZER:?set TOKENIZER (the local Hugging Face folder of the policy)}"
: "${ROWS:?set ROWS (training rows, .parquet or .jsonl)}"
WORK_DIR="${WORK_DIR:-$REPO_DIR/outputs/rft}"
TEMPLATE="${TEMPLATE:-tokenizer}"
SFT_CONFIG="${SFT_CONFIG:-agent_tune_sft_cpu}"
mkdir -p "$WORK_DIR"

FILTER=()
if [[ -n "${MIN_REWARD:-}" ]]; then FILTER+=(--sft-min-reward "$MIN_REWARD"); fi
if [[ -n "${MIN_ACCURACY:-}" || -z "${MIN_REWARD:-}" ]]; then FILTER+=(--sft-min-accuracy "${MIN_ACCURACY:-1}"); fi
EXTRA=()
if [[ -n "${LIMIT:-}" ]]; then EXTRA+=(--limit "$LIMIT"); fi
if [[ -n "${ENV_KWARGS:-}" ]]; then EXTRA+=(--env-kwargs "$ENV_KWARGS"); fi
if [[ -n "${TOOL_PARSER:-}" ]]; then EXTRA+=(--tool-parser "$TOOL_PARSER"); fi
if [[ -n "${MAX_TOKENS:-}" ]]; then EXTRA+=(--max-tokens "$MAX_TOKENS"); fi
RFT_STAGES="${RFT_STAGES:-eval,sft}"

cd "$REPO_DIR"
if [[ ",$RFT_STAGES," == *",eval,"* ]]; then
  set +e
  "$PYTHON" -m agent_tune.cli eval --base-url "$BASE_URL" --model "$MODEL" --tokenizer "$TOKENIZER" \
    --template "$TEMPLATE" --rows "$ROWS" --n "${N:-4}" --temperature "${TEMPERATURE:-1.0}" \
    --output "$WORK_DIR/episodes.jsonl" --sft-out "$WORK_DIR/rft_rows.jsonl" "${FILTER[@]}" "${EXTRA[@]}" --no-progress
  rc=$?
  set -e
else
  rc=skipped
fi
kept=$(grep -c . "$WORK_DIR/rft_rows.jsonl" 2>/dev/null || true)
echo "[agent-tune] RFT: ${kept:-0} successful episodes in $WORK_DIR/rft_rows.jsonl (eval exit $rc)"
if [[ "${kept:-0}" -eq 0 ]]; then
  echo "[agent-tune] no successful episode to train on" >&2
  exit 1
fi
if [[ ",$RFT_STAGES," != *",sft,"* ]]; then
  exit 0
fi

exec "$PYTHON" -m agent_tune.launch.sft --config-name "$SFT_CONFIG" \
  data.train_files="$WORK_DIR/rft_rows.jsonl" data.chat_template="$TEMPLATE" \
  model.path="${SFT_MODEL:-$TOKENIZER}" trainer.default_local_dir="$WORK_DIR/sft" "$@"
