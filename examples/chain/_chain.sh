# Sourced by the chain scripts (examples/chain/*.sh); not run on its own. One chain, every stage's Hugging Face
# folder evaluated on the env's TEST rows only:
#   0. data    chain_data (the env script's function) writes $DATA_DIR/train.parquet and test.parquet: the same
#              rows in every stage (SFT references, RFT samples, GRPO, every eval)
#   1. base    the base model (MODEL_PATH, default SmolLM2-135M-Instruct)
#   2. sft     `agent-tune sft-data --format reference` on the train rows (each env's reference answers played by
#              the episode runner, the successes kept as token rows), then `agent-tune sft` from the base
#   3. rft     the SFT model served by vLLM samples the train rows (`agent-tune eval --rows train --sft-out`,
#              EVAL_PRESET's sampling: n 4), its successes with their exact tokens, then `agent-tune sft` from
#              the SFT model on them
#   4. grpo    `agent-tune train` from the RFT model (GRPO_CONFIG + the chain's overlay: its few steps), the
#              last checkpoint exported with verl's model merger; its curve drawn by `agent-tune plot`
#   each stage: its folder served by vLLM, `agent-tune eval --config EVAL_PRESET --rows test.parquet`
#              -> $WORK_DIR/eval/<stage>.jsonl, .report.json (pass@k with 95% intervals), .passk.json
#   at the end $WORK_DIR/table.md: one row per stage, pass@1 and pass@4 [95% interval], overall and per category.
# Every hyper-parameter is in the YAML files the env script names (GRPO_CONFIG and GRPO_OVERLAY, SFT_CONFIG and
# SFT_OVERLAY, EVAL_PRESET); the template, tool parser, env kwargs and vLLM dtype of every stage are GRPO_CONFIG's,
# so SFT, RFT, GRPO and the evals see the same tokens and compute in the same precision. Resumable: a stage whose
# output exists is skipped (an eval resumes its results file). A progress line per stage; each stage's full output in $WORK_DIR/logs/<stage>.log.
#
# run_rl (the *_rl.sh scripts) is GRPO from the base model instead: data, base, GRPO with every saved checkpoint
# evaluated on the test rows and recorded in $RESULTS (`agent-tune eval record`, docs/eval.md).
#
# Set by the env script: CHAIN, ENV_NAME (the key of the env's kwargs in agent_tune.env_kwargs), GRPO_CONFIG,
# GRPO_OVERLAY, SFT_CONFIG, SFT_OVERLAY, EVAL_PRESET, and a function chain_data. The user may set: WORK_DIR,
# MODEL_PATH, PORT (the vLLM server's, default 8100), GRPO_WRAP (a command the GRPO run is started under, e.g.
# `nice -n 5`), VLLM_ARGS (extra arguments of the vLLM server), CHAIN_UNTIL=sft (stop after the SFT stage).
# run_rl also needs RESULT_ENV (the env's name in the records; RESULT_COMMAND the command they name, default the
# script's; RESULT_VARIANT a variant's name, added to its stages; RESULT_CATEGORIES=1 also records each category)
# and takes RESULTS (the results file, default $WORK_DIR/results.json). A variant script that evaluates with
# presets of its own sets RUN_SUFFIX (e.g. _long): its evals, logs and records go to $WORK_DIR/eval_long, logs_long
# and results_long.json, every stage evaluated afresh.
. "$(dirname "${BASH_SOURCE[0]}")/../_common.sh"

WORK_DIR="${WORK_DIR:-$REPO_DIR/outputs/chain/$CHAIN}"
DATA_DIR="$WORK_DIR/data"
# a variant that evaluates with other presets (RUN_SUFFIX, e.g. _long) keeps its evals, logs and records apart
LOG_DIR="$WORK_DIR/logs${RUN_SUFFIX:-}"
EVAL_DIR="$WORK_DIR/eval${RUN_SUFFIX:-}"
PORT="${PORT:-8100}"
RESULTS="${RESULTS:-$WORK_DIR/results${RUN_SUFFIX:-}.json}"
read -r -a vllm_args <<< "${VLLM_ARGS:-}"
read -r -a grpo_wrap <<< "${GRPO_WRAP:-}"
mkdir -p "$LOG_DIR" "$EVAL_DIR"
cd "$REPO_DIR"
export HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-1}"

say() { echo "[chain $CHAIN] $(date -u +%H:%M:%S) $*"; }
since() { echo "$(( $(date +%s) - $1 )) s"; }

config_value() {  # config_value KEY: GRPO_CONFIG's value (with the chain's overlay) at KEY
  "$PYTHON" -m agent_tune.launch.config_value --config-name "$GRPO_CONFIG" "$1" "$GRPO_OVERLAY"
}

# the newest Hugging Face folder an `agent-tune sft` run exported under $1 (nothing when none)
latest_hf() {
  local dirs
  dirs=$(ls -d "$1"/global_step_*/huggingface 2>/dev/null || true)
  [[ -n "$dirs" ]] && sort -V <<< "$dirs" | tail -n 1
  return 0
}

SERVER_PID=""
stop_server() {
  if [[ -n "$SERVER_PID" ]]; then
    stop_served "$SERVER_PID"
    SERVER_PID=""
  fi
}
trap stop_server EXIT

# start_server MODEL_DIR STAGE: vLLM serving MODEL_DIR as `policy` on 127.0.0.1:$PORT, waited for
start_server() {
  serve_vllm "$LOG_DIR/serve_$2.log" "$PORT" "$1" policy --dtype "$DTYPE" --max-model-len "$MAX_MODEL_LEN" \
    "${vllm_args[@]}"
  SERVER_PID=$SERVED_PID
  wait_openai "http://127.0.0.1:$PORT/v1" "$SERVER_PID" "$LOG_DIR/serve_$2.log"
}

# eval_args MODEL_DIR: the flags every eval of the chain shares (sampling: EVAL_PRESET)
eval_args() {
  EVAL_ARGS=(--config "$EVAL_PRESET" --base-url "http://127.0.0.1:$PORT/v1" --model policy --tokenizer "$1"
    --template "$TEMPLATE" --tool-parser "$TOOL_PARSER" --env-kwargs "$ENV_KWARGS")
}

# test_eval MODEL_DIR STAGE [ROWS]: the stage's model on the test rows (or ROWS, a parquet file)
# -> $EVAL_DIR/STAGE.{jsonl,report.json,passk.json}
test_eval() {
  local model="$1" stage="$2" out="$EVAL_DIR/$2" rows="${3:-$DATA_DIR/test.parquet}" t0
  if [[ -f "$out.report.json" ]]; then
    say "eval $stage: done before ($out.report.json)"
    return 0
  fi
  t0=$(date +%s)
  say "eval $stage on $(basename "$rows" .parquet) rows: $model"
  start_server "$model" "$stage"
  eval_args "$model"
  "$PYTHON" -m agent_tune.cli eval "${EVAL_ARGS[@]}" --rows "$rows" --output "$out.jsonl" \
    --report-json "$out.report.json" --passk-json "$out.passk.json" --png "$out.png" > "$LOG_DIR/eval_$stage.log" 2>&1
  stop_server
  say "eval $stage: $(grep -m1 '  all entries: pass@1' "$LOG_DIR/eval_$stage.log" | sed 's/^ *//') ($(since "$t0"))"
}

# sft_run NAME ROWS MODEL: `agent-tune sft` (SFT_CONFIG + SFT_OVERLAY) from MODEL on ROWS -> $WORK_DIR/NAME/ckpt
sft_run() {
  local t0
  t0=$(date +%s)
  say "$1: agent-tune sft on $(grep -c . "$2") rows from $3"
  "$PYTHON" -m agent_tune.launch.sft --config-name "$SFT_CONFIG" "$SFT_OVERLAY" data.train_files="$2" \
    data.chat_template="$TEMPLATE" model.path="$3" trainer.default_local_dir="$WORK_DIR/$1/ckpt" \
    > "$LOG_DIR/$1_sft.log" 2>&1 || { say "$1: the SFT failed, see $LOG_DIR/$1_sft.log"; exit 1; }
  say "$1: SFT done ($(since "$t0"))"
}

# grpo_stage NAME MODEL: `agent-tune train` (GRPO_CONFIG + GRPO_OVERLAY) from MODEL on the train rows ->
# $WORK_DIR/NAME/checkpoints (resumed where it stopped); every saved checkpoint exported with verl's model merger to
# $WORK_DIR/NAME/hf_step_K and evaluated on the test rows as NAME_step_K, the last one also as NAME; the training
# curve drawn by `agent-tune plot`.
grpo_stage() {
  local name="$1" from="$2" steps step_dir last t0 hf
  steps=$(config_value trainer.total_training_steps)
  last=$(ls -d "$WORK_DIR/$name"/checkpoints/global_step_* 2>/dev/null | sort -V | tail -n 1 || true)
  if [[ "$last" != *"/global_step_$steps" ]]; then
    t0=$(date +%s)
    say "$name: $steps steps of $GRPO_CONFIG $GRPO_OVERLAY from $from"
    "${grpo_wrap[@]}" "$PYTHON" -m agent_tune.launch.train --config-name "$GRPO_CONFIG" "$GRPO_OVERLAY" \
      actor_rollout_ref.model.path="$from" data.train_files="$DATA_DIR/train.parquet" \
      data.val_files="$DATA_DIR/test.parquet" trainer.default_local_dir="$WORK_DIR/$name/checkpoints" \
      > "$LOG_DIR/$name.log" 2>&1 || { say "$name: GRPO failed, see $LOG_DIR/$name.log"; exit 1; }
    say "$name: trained ($(since "$t0"))"
  fi
  [[ -n "$(ls -d "$WORK_DIR/$name"/checkpoints/global_step_*/actor 2>/dev/null)" ]] \
    || { say "$name: no checkpoint under $WORK_DIR/$name/checkpoints"; exit 1; }
  if [[ -f "$WORK_DIR/$name/checkpoints/metrics.jsonl" && ! -f "$WORK_DIR/$name/curve.png" ]]; then
    "$PYTHON" -m agent_tune.cli plot "$WORK_DIR/$name/checkpoints/metrics.jsonl" --window 1 \
      --keys reward acc valid_call_rate --out "$WORK_DIR/$name/curve.png" \
      --title "$name stage of the $CHAIN chain (SmolLM2-135M, CPU)" > "$LOG_DIR/${name}_plot.log" 2>&1 || true
  fi
  for step_dir in $(ls -d "$WORK_DIR/$name"/checkpoints/global_step_* | sort -V); do
    hf="$WORK_DIR/$name/hf_step_${step_dir##*_}"
    if [[ ! -f "$hf/config.json" ]]; then
      "$PYTHON" -m verl.model_merger merge --backend fsdp --local_dir "$step_dir/actor" --target_dir "$hf" \
        > "$LOG_DIR/${name}_export.log" 2>&1 || { say "$name: export failed, see $LOG_DIR/${name}_export.log"; exit 1; }
      say "$name: $step_dir exported to $hf"
    fi
    test_eval "$hf" "${name}_step_${step_dir##*_}"
  done
  for ext in jsonl report.json passk.json png; do  # the last checkpoint's eval is the stage's
    cp -f "$EVAL_DIR/${name}_step_${step_dir##*_}.$ext" "$EVAL_DIR/$name.$ext" 2>/dev/null || true
  done
}

# chain_values: the values every stage shares (GRPO_CONFIG's template, parser, dtype, env kwargs, lengths)
chain_values() {
  TEMPLATE=$(config_value agent_tune.template)
  TOOL_PARSER=$(config_value agent_tune.tool_parser)
  DTYPE=$(config_value actor_rollout_ref.rollout.dtype)
  ENV_KWARGS=$(config_value "agent_tune.env_kwargs.$ENV_NAME" || echo '{}')
  MAX_PROMPT=$(config_value data.max_prompt_length)
  MAX_RESPONSE=$(config_value data.max_response_length)
  MAX_MODEL_LEN="${MAX_MODEL_LEN:-$(( MAX_PROMPT + MAX_RESPONSE > 2048 ? MAX_PROMPT + MAX_RESPONSE : 2048 ))}"
}

# chain_start: chain_values, the data (stage 0) and the base model's eval (stage 1); leaves the base model's folder
# in BASE.
chain_start() {
  chain_values
  say "start: $GRPO_CONFIG $GRPO_OVERLAY (template $TEMPLATE, tool parser $TOOL_PARSER, vLLM in $DTYPE)," \
      "work dir $WORK_DIR;" \
      "load $(cut -d' ' -f1-3 /proc/loadavg)"

  # ---- 0. data
  if [[ ! -f "$DATA_DIR/train.parquet" || ! -f "$DATA_DIR/test.parquet" ]]; then
    mkdir -p "$WORK_DIR/logs"  # the data's log is the chain's, a variant's too
    chain_data > "$WORK_DIR/logs/data.log" 2>&1 || { say "data failed, see $WORK_DIR/logs/data.log"; exit 1; }
  fi
  say "data: $(tail -n 1 "$WORK_DIR/logs/data.log" 2>/dev/null)"

  # ---- 1. base
  BASE="${MODEL_PATH:-$("$PYTHON" -m agent_tune.models.smollm2)}"
  test_eval "$BASE" base
}

# record_eval NAME LABEL FROM STEPS [METRICS [SPLIT]]: the eval $EVAL_DIR/NAME.report.json as LABEL's record in
# $RESULTS (`agent-tune eval record`: pass@1 and pass@4 with their intervals; trained from FROM for STEPS steps, the
# training seconds read from the run's METRICS file when given; the split's name, default test)
record_eval() {
  local args=(--results "$RESULTS" --env "$RESULT_ENV" --stage "$2" --split "${6:-test}" --steps "$4"
    --command "${RESULT_COMMAND:-bash examples/chain/$(basename "$0")}")
  [[ -n "$3" ]] && args+=(--from "$3")
  [[ -n "${5:-}" ]] && args+=(--train-metrics "$5")
  [[ -n "${RESULT_CATEGORIES:-}" ]] && args+=(--categories)
  "$PYTHON" -m agent_tune.cli eval record "$EVAL_DIR/$1.report.json" "${args[@]}" >> "$LOG_DIR/results.log" 2>&1 \
    || { say "recording $1 failed, see $LOG_DIR/results.log"; exit 1; }
}

# stage_table OUT.md NAME:LABEL...: one row per evaluated stage ($EVAL_DIR/NAME.jsonl), labelled LABEL
stage_table() {
  local out="$1" files=() labels=() pair
  shift
  for pair in "$@"; do
    files+=("$EVAL_DIR/${pair%%:*}.jsonl")
    labels+=("${pair#*:}")
  done
  "$PYTHON" -m agent_tune.cli eval report "${files[@]}" --labels "${labels[@]}" --stage-table "$out" \
    > "$LOG_DIR/table.log" 2>&1 || { say "table failed, see $LOG_DIR/table.log"; exit 1; }
  say "done: $out"
  cat "$out"
}

# run_rl: GRPO from the base model, no SFT (cold start): data, base, then GRPO with every saved checkpoint
# evaluated on the test rows; $WORK_DIR/table.md has one row per checkpoint, $RESULTS one record each.
run_rl() {
  local step_dir k pairs=(base:base)
  chain_start
  grpo_stage grpo "$BASE"
  record_eval base base "" 0
  for step_dir in $(ls -d "$WORK_DIR"/grpo/checkpoints/global_step_* | sort -V); do
    k=${step_dir##*_}
    pairs+=("grpo_step_$k:GRPO step $k")
    record_eval "grpo_step_$k" "GRPO step $k${RESULT_VARIANT:+ ($RESULT_VARIANT)}" base "$k" \
      "$WORK_DIR/grpo/checkpoints/metrics.jsonl"
  done
  stage_table "$WORK_DIR/table.md" "${pairs[@]}"
}

run_chain() {
  local t0 base sft_hf rft_hf
  chain_start
  base="$BASE"

  # ---- 2. SFT on the reference rows
  sft_hf=$(latest_hf "$WORK_DIR/sft/ckpt")
  if [[ -z "$sft_hf" ]]; then
    t0=$(date +%s)
    if [[ ! -s "$WORK_DIR/sft/reference.jsonl" ]]; then
      "$PYTHON" -m agent_tune.cli sft-data --format reference "$DATA_DIR/train.parquet" \
        "$WORK_DIR/sft/reference.jsonl" --tokenizer "$base" --template "$TEMPLATE" --tool-parser "$TOOL_PARSER" \
        --env-kwargs "$ENV_KWARGS" --max-prompt-length "$MAX_PROMPT" --max-response-length "$MAX_RESPONSE" \
        > "$LOG_DIR/sft_reference.log" 2>&1 || { say "reference rows failed, see $LOG_DIR/sft_reference.log"; exit 1; }
    fi
    say "sft: $(grep -m1 'reference rows kept' "$LOG_DIR/sft_reference.log") ($(since "$t0"))"
    sft_run sft "$WORK_DIR/sft/reference.jsonl" "$base"
    sft_hf=$(latest_hf "$WORK_DIR/sft/ckpt")
    [[ -n "$sft_hf" ]] || { say "the SFT exported no Hugging Face folder under $WORK_DIR/sft/ckpt"; exit 1; }
  fi
  test_eval "$sft_hf" sft
  if [[ "${CHAIN_UNTIL:-}" == sft ]]; then
    say "stopping after the SFT stage (CHAIN_UNTIL=sft): $sft_hf"
    return 0
  fi

  # ---- 3. RFT: the SFT model's successful samples of the train rows, then SFT on them from the SFT model
  rft_hf=$(latest_hf "$WORK_DIR/rft/ckpt")
  if [[ -z "$rft_hf" ]]; then
    if [[ ! -f "$WORK_DIR/rft/.sampled" ]]; then
      t0=$(date +%s)
      mkdir -p "$WORK_DIR/rft"
      say "rft: sampling the train rows with $sft_hf"
      start_server "$sft_hf" rft
      eval_args "$sft_hf"
      "$PYTHON" -m agent_tune.cli eval "${EVAL_ARGS[@]}" --rows "$DATA_DIR/train.parquet" \
        --output "$WORK_DIR/rft/episodes.jsonl" --sft-out "$WORK_DIR/rft/rft_rows.jsonl" \
        > "$LOG_DIR/rft_sample.log" 2>&1 || { say "RFT sampling failed, see $LOG_DIR/rft_sample.log"; exit 1; }
      stop_server
      touch "$WORK_DIR/rft/.sampled"
      say "rft: $(grep -m1 '^RFT:' "$LOG_DIR/rft_sample.log") ($(since "$t0"))"
    fi
    [[ -s "$WORK_DIR/rft/rft_rows.jsonl" ]] || { say "rft: no successful sample to train on"; exit 1; }
    sft_run rft "$WORK_DIR/rft/rft_rows.jsonl" "$sft_hf"
    rft_hf=$(latest_hf "$WORK_DIR/rft/ckpt")
    [[ -n "$rft_hf" ]] || { say "the RFT SFT exported no Hugging Face folder under $WORK_DIR/rft/ckpt"; exit 1; }
  fi
  test_eval "$rft_hf" rft

  # ---- 4. GRPO from the RFT model
  grpo_stage grpo "$rft_hf"

  # ---- the table: one row per stage
  stage_table "$WORK_DIR/table.md" base:base sft:SFT rft:RFT grpo:GRPO
}
