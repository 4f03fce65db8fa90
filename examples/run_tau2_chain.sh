#!/usr/bin/env bash
# Tau2-RL-Pipeline's chain as one script: SFT -> RFT -> GRPO on tau2-bench, each stage starting from the Hugging
# Face folder the previous one exported.
#   1. SFT   `agent-tune sft --config-name $SFT_CONFIG` on CONVERSATIONS (rows of messages + tools, docs/sft.md),
#            from the SFT config's model (MODEL_PATH overrides it)     -> $WORK_DIR/sft/global_step_N/huggingface
#   2. RFT   that folder served by vLLM as `policy`; examples/run_rft.sh plays tau2's train rows N times
#            (`agent-tune eval --rows ... --sft-out`, the env options and the simulated user as GRPO_CONFIG has
#            them), keeps the successes (MIN_ACCURACY, default 1, or MIN_REWARD) with their exact tokens, stops
#            the policy server, and SFTs again on them from stage 1's folder -> $WORK_DIR/rft/sft/.../huggingface
#   3. GRPO  examples/run_grpo_tau2.sh (CONFIG_NAME=$GRPO_CONFIG) from that folder, the same user server.
# Hyper-parameters come from the configs: the chat template of every stage is GRPO_CONFIG's agent_tune.template
# (and its tool parser), so SFT, RFT and RL see the same tokens. SFT_ARGS adds Hydra overrides to both SFT
# runs; this script's arguments go to the GRPO run; run_grpo_tau2.sh's variables (TOTAL_STEPS, ...) pass through.
#
# GPUs (one node of 8):
#   CONVERSATIONS=data/tau2_sft.parquet bash examples/run_tau2_chain.sh
# In the pipeline's own protocol (its SFT seed converted with `agent-tune sft-data --format tau2_seed ... --form
# pipeline`; docs/tau2.md, "Protocols"): PROTOCOL=pipeline, for the rows, the RFT episodes and the GRPO run.
# CPU, the tiniest scale (SmolLM2 as policy and user; plumbing, not learning): the command in docs/tau2.md.
#
# Variables: CONVERSATIONS (required), SFT_CONFIG (agent_tune_sft), GRPO_CONFIG (agent_tune_tau2), MODEL_PATH,
# PROTOCOL (the tau2 env's: native or pipeline; default the config's), DOMAINS (airline,retail,telecom),
# WORK_DIR (outputs/tau2_chain), DATA_DIR ($WORK_DIR/data, $WORK_DIR/data_pipeline with PROTOCOL=pipeline); the user simulator:
# USER_BASE_URL (a running one), else USER_MODEL (Qwen/Qwen3-4B-Instruct-2507) served here on USER_GPUS (4,5) at
# USER_PORT (30001) for stages 2 and 3; the RFT policy server: POLICY_GPUS (0), POLICY_PORT (30002); VLLM_ARGS
# (extra arguments of both vLLM servers); RFT: N, TEMPERATURE, MIN_ACCURACY / MIN_REWARD, LIMIT, MAX_TOKENS
# (examples/run_rft.sh). Rerunning resumes: a stage whose Hugging Face folder exists is skipped.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

: "${CONVERSATIONS:?set CONVERSATIONS (SFT rows: messages + tools, .parquet or .jsonl)}"
SFT_CONFIG="${SFT_CONFIG:-agent_tune_sft}"
GRPO_CONFIG="${GRPO_CONFIG:-agent_tune_tau2}"
DOMAINS="${DOMAINS:-airline,retail,telecom}"
WORK_DIR="${WORK_DIR:-$REPO_DIR/outputs/tau2_chain}"
if [[ "${PROTOCOL:-native}" == native ]]; then
  DATA_DIR="${DATA_DIR:-$WORK_DIR/data}"
else
  DATA_DIR="${DATA_DIR:-$WORK_DIR/data_$PROTOCOL}"
fi
protocol_override=()  # the env's protocol for the RFT episodes (stage 3 reads PROTOCOL itself)
if [[ -n "${PROTOCOL:-}" ]]; then protocol_override=("agent_tune.env_kwargs.tau2.protocol=$PROTOCOL"); fi
USER_MODEL="${USER_MODEL:-Qwen/Qwen3-4B-Instruct-2507}"
USER_GPUS="${USER_GPUS:-4,5}"
USER_PORT="${USER_PORT:-30001}"
USER_BASE_URL="${USER_BASE_URL:-}"
POLICY_GPUS="${POLICY_GPUS:-0}"
POLICY_PORT="${POLICY_PORT:-30002}"
read -r -a vllm_args <<< "${VLLM_ARGS:-}"
read -r -a sft_args <<< "${SFT_ARGS:-}"
mkdir -p "$WORK_DIR"
cd "$REPO_DIR"

# the newest Hugging Face folder an `agent-tune sft` run exported under $1 (nothing when none)
latest_hf() {
  local dirs
  dirs=$(ls -d "$1"/global_step_*/huggingface 2>/dev/null || true)
  [[ -n "$dirs" ]] && sort -V <<< "$dirs" | tail -n 1
  return 0
}
config_value() {  # config_value KEY [override...]: GRPO_CONFIG's value at KEY
  "$PYTHON" -m agent_tune.launch.config_value --config-name "$GRPO_CONFIG" "$@"
}

TEMPLATE=$(config_value agent_tune.template)
TOOL_PARSER=$(config_value agent_tune.tool_parser)
echo "[agent-tune] chain: template $TEMPLATE, tool parser $TOOL_PARSER (from $GRPO_CONFIG)"

if [[ ! -f "$DATA_DIR/train.parquet" || ! -f "$DATA_DIR/test.parquet" ]]; then
  "$PYTHON" data_preprocess/tau2.py --out "$DATA_DIR" --domains "$DOMAINS" --splits train,test \
    --protocol "${PROTOCOL:-native}"
fi

pids=()
stop_servers() { ((${#pids[@]} == 0)) || stop_served "${pids[@]}"; }
trap stop_servers EXIT

# ---- 1. SFT on the given conversations
SFT1_HF=$(latest_hf "$WORK_DIR/sft")
if [[ -z "$SFT1_HF" ]]; then
  model=()
  if [[ -n "${MODEL_PATH:-}" ]]; then model=(model.path="$MODEL_PATH"); fi
  "$PYTHON" -m agent_tune.launch.sft --config-name "$SFT_CONFIG" data.train_files="$CONVERSATIONS" \
    data.chat_template="$TEMPLATE" trainer.default_local_dir="$WORK_DIR/sft" "${model[@]}" "${sft_args[@]}"
  SFT1_HF=$(latest_hf "$WORK_DIR/sft")
  [[ -n "$SFT1_HF" ]] || { echo "stage 1 (SFT) exported no Hugging Face folder under $WORK_DIR/sft" >&2; exit 1; }
fi
echo "[agent-tune] chain 1/3 SFT: $SFT1_HF"

# ---- the simulated user, for stages 2 and 3
if [[ -z "$USER_BASE_URL" ]]; then
  USER_BASE_URL="http://127.0.0.1:$USER_PORT/v1"
  IFS=, read -r -a gpu_list <<< "$USER_GPUS"
  CUDA_VISIBLE_DEVICES="$USER_GPUS" serve_vllm "$WORK_DIR/user_server.log" "$USER_PORT" "$USER_MODEL" \
    user-simulator --tensor-parallel-size "${#gpu_list[@]}" "${vllm_args[@]}"
  pids+=("$SERVED_PID")
  wait_openai "$USER_BASE_URL" "$SERVED_PID" "$WORK_DIR/user_server.log"
fi

# ---- 2. RFT: the stage-1 policy plays the train rows, its successes become SFT rows, SFT again
RFT_HF=$(latest_hf "$WORK_DIR/rft/sft")
if [[ -z "$RFT_HF" ]]; then
  ENV_KWARGS=$(config_value agent_tune.env_kwargs.tau2 "agent_tune.env_kwargs.tau2.user.base_url=$USER_BASE_URL" \
    "${protocol_override[@]}")
  rft_env=(BASE_URL="http://127.0.0.1:$POLICY_PORT/v1" MODEL=policy TOKENIZER="$SFT1_HF" SFT_MODEL="$SFT1_HF"
    ROWS="$DATA_DIR/train.parquet" TEMPLATE="$TEMPLATE" TOOL_PARSER="$TOOL_PARSER" SFT_CONFIG="$SFT_CONFIG"
    ENV_KWARGS="$ENV_KWARGS" WORK_DIR="$WORK_DIR/rft")
  if [[ ! -f "$WORK_DIR/rft/.eval_done" ]]; then  # a killed eval resumes where it stopped
    IFS=, read -r -a gpu_list <<< "$POLICY_GPUS"
    CUDA_VISIBLE_DEVICES="$POLICY_GPUS" serve_vllm "$WORK_DIR/policy_server.log" "$POLICY_PORT" "$SFT1_HF" \
      policy --tensor-parallel-size "${#gpu_list[@]}" "${vllm_args[@]}"
    policy_pid=$SERVED_PID
    pids+=("$policy_pid")
    wait_openai "http://127.0.0.1:$POLICY_PORT/v1" "$policy_pid" "$WORK_DIR/policy_server.log"
    env "${rft_env[@]}" RFT_STAGES=eval bash examples/run_rft.sh
    touch "$WORK_DIR/rft/.eval_done"
    stop_served "$policy_pid"  # its GPUs go to the SFT run
  fi
  env "${rft_env[@]}" RFT_STAGES=sft bash examples/run_rft.sh "${sft_args[@]}"
  RFT_HF=$(latest_hf "$WORK_DIR/rft/sft")
  [[ -n "$RFT_HF" ]] || { echo "stage 2 (RFT) exported no Hugging Face folder under $WORK_DIR/rft/sft" >&2; exit 1; }
fi
echo "[agent-tune] chain 2/3 RFT: $RFT_HF"

# ---- 3. GRPO from the RFT model, with the same user server
echo "[agent-tune] chain 3/3 GRPO ($GRPO_CONFIG) from $RFT_HF"
MODEL_PATH="$RFT_HF" USER_BASE_URL="$USER_BASE_URL" CONFIG_NAME="$GRPO_CONFIG" DATA_DIR="$DATA_DIR" \
  WORK_DIR="$WORK_DIR/grpo" bash examples/run_grpo_tau2.sh "$@"
