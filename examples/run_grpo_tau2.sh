#!/usr/bin/env bash
# GRPO on tau2-bench (airline, retail, telecom; tau2's train split) with a simulated user, as Tau2-RL-Pipeline's
# GRPO stage runs it: Qwen3-4B-Instruct-2507 as the policy, tau2's reward + 0.25 x partial score, task
# weighting on, 100 steps. config/agent_tune_tau2.yaml and config/recipe/tau2.yaml hold every hyper-parameter;
# one node: training on 4 GPUs (0-3; the pipeline's README runs its GRPO stage on 2, its script's default is 4:
# TRAIN_GPUS=0,1 GPUS_PER_NODE=2 USER_GPUS=2,3 does it on 2) and the user simulator
# (Qwen3-4B-Instruct-2507 on vLLM, served as `user-simulator`) on 2 others (4,5).
# The pipeline starts from its SFT+RFT checkpoint (Jarrodbarnes/Qwen3-4B-tau2-sft1), which speaks the pipeline's
# protocol, not tau2's native one: with it, set PROTOCOL=pipeline (the tau2 env's protocol, docs/tau2.md).
#   bash examples/run_grpo_tau2.sh
#   MODEL_PATH=Jarrodbarnes/Qwen3-4B-tau2-sft1 PROTOCOL=pipeline EXPERIMENT=tau2_from_sft1 bash examples/run_grpo_tau2.sh
#   USER_BASE_URL=http://10.0.0.5:30001/v1 bash examples/run_grpo_tau2.sh   (a user server already running)
# The rows are built once into DATA_DIR with data_preprocess/tau2.py (train and test splits; their prompt in the
# protocol's form: DATA_DIR defaults to $WORK_DIR/data, $WORK_DIR/data_pipeline with PROTOCOL=pipeline).
#
# The user simulator: unless USER_BASE_URL names a running one, the script starts
#   python -m vllm.entrypoints.openai.api_server --model USER_MODEL --served-model-name user-simulator
# on USER_GPUS (tensor parallel over them) at USER_PORT, with USER_GPU_MEMORY of each GPU's memory
# (--gpu-memory-utilization, default 0.85) and contexts of USER_MAX_MODEL_LEN tokens (--max-model-len,
# default 32768: the user's side of a whole episode; vLLM would otherwise reserve the model's native 256k),
# waits until it answers, and stops it on exit; its log is $WORK_DIR/user_server.log. The trainer checks it
# at start-up (GET /v1/models must list user-simulator).
# GPUs are kept apart by CUDA_VISIBLE_DEVICES: TRAIN_GPUS for the trainer, USER_GPUS for the server. Before
# anything starts, agent_tune.launch.gpu_lists checks that the lists share no GPU, that TRAIN_GPUS holds
# trainer.n_gpus_per_node GPUs (4 in the config; GPUS_PER_NODE overrides it) on one node, and that no Ray
# cluster is already running (RAY_ADDRESS, or a `ray start` on this machine): the trainer would join it and
# its GPUs, the server's included, whatever CUDA_VISIBLE_DEVICES says.
#
# Paths and infrastructure: WORK_DIR (outputs/tau2), DATA_DIR ($WORK_DIR/data), CKPT_DIR, USER_MODEL
# (Qwen/Qwen3-4B-Instruct-2507), USER_GPUS (4,5), USER_PORT (30001), USER_GPU_MEMORY (0.85),
# USER_MAX_MODEL_LEN (32768), USER_BASE_URL, TRAIN_GPUS (0,1,2,3).
# Variables, passed only when set: MODEL_PATH, PROTOCOL (native/pipeline), BATCH_SIZE, MINI_BATCH_SIZE, GROUP_SIZE, LR, TOTAL_STEPS,
# SAVE_FREQ, TEST_FREQ, TP, EXPERIMENT, NNODES, GPUS_PER_NODE, ALPHA (the shaping's alpha), TASK_WEIGHTING
# (true/false); CONFIG_NAME picks the config (default agent_tune_tau2). Re-running resumes from CKPT_DIR.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

CONFIG_NAME="${CONFIG_NAME:-agent_tune_tau2}"
WORK_DIR="${WORK_DIR:-$REPO_DIR/outputs/tau2}"
if [[ "${PROTOCOL:-native}" == native ]]; then
  DATA_DIR="${DATA_DIR:-$WORK_DIR/data}"
else
  DATA_DIR="${DATA_DIR:-$WORK_DIR/data_$PROTOCOL}"
fi
CKPT_DIR="${CKPT_DIR:-$WORK_DIR/checkpoints}"
USER_MODEL="${USER_MODEL:-Qwen/Qwen3-4B-Instruct-2507}"
USER_GPUS="${USER_GPUS:-4,5}"
USER_PORT="${USER_PORT:-30001}"
USER_BASE_URL="${USER_BASE_URL:-}"
TRAIN_GPUS="${TRAIN_GPUS:-0,1,2,3}"
USER_GPU_MEMORY="${USER_GPU_MEMORY:-0.85}"
USER_MAX_MODEL_LEN="${USER_MAX_MODEL_LEN:-32768}"

if [[ ! -f "$DATA_DIR/train.parquet" || ! -f "$DATA_DIR/test.parquet" ]]; then
  "$PYTHON" "$REPO_DIR/data_preprocess/tau2.py" --out "$DATA_DIR" --splits train,test \
    --protocol "${PROTOCOL:-native}"
fi

served_gpus=""
if [[ -z "$USER_BASE_URL" ]]; then
  USER_BASE_URL="http://127.0.0.1:$USER_PORT/v1"
  served_gpus="$USER_GPUS"
fi

OVERRIDES+=(data.train_files="$DATA_DIR/train.parquet" data.val_files="$DATA_DIR/test.parquet"
  trainer.default_local_dir="$CKPT_DIR" agent_tune.env_kwargs.tau2.user.base_url="$USER_BASE_URL")
pass MODEL_PATH actor_rollout_ref.model.path
pass PROTOCOL agent_tune.env_kwargs.tau2.protocol
pass BATCH_SIZE data.train_batch_size
pass MINI_BATCH_SIZE actor_rollout_ref.actor.ppo_mini_batch_size
pass GROUP_SIZE actor_rollout_ref.rollout.n
pass LR actor_rollout_ref.actor.optim.lr
pass TOTAL_STEPS trainer.total_training_steps
pass SAVE_FREQ trainer.save_freq
pass TEST_FREQ trainer.test_freq
pass TP actor_rollout_ref.rollout.tensor_model_parallel_size
pass EXPERIMENT trainer.experiment_name
pass NNODES trainer.nnodes
pass GPUS_PER_NODE trainer.n_gpus_per_node
pass ALPHA agent_tune.env_kwargs.tau2.reward_shaping.alpha
pass TASK_WEIGHTING agent_tune.task_weighting.enable

cd "$REPO_DIR"
# the GPU lists against the config, and no running Ray cluster, before the user server starts
"$PYTHON" -m agent_tune.launch.gpu_lists --train-gpus "$TRAIN_GPUS" --user-gpus "$served_gpus" \
  --config-name "$CONFIG_NAME" -- "${OVERRIDES[@]}" "$@"

if [[ -n "$served_gpus" ]]; then
  IFS=, read -r -a user_gpu_list <<< "$served_gpus"
  CUDA_VISIBLE_DEVICES="$served_gpus" serve_vllm "$WORK_DIR/user_server.log" "$USER_PORT" "$USER_MODEL" \
    user-simulator --tensor-parallel-size "${#user_gpu_list[@]}" --gpu-memory-utilization "$USER_GPU_MEMORY" \
    --max-model-len "$USER_MAX_MODEL_LEN"
  user_pid=$SERVED_PID
  trap 'stop_served "$user_pid"' EXIT
  wait_openai "$USER_BASE_URL" "$user_pid" "$WORK_DIR/user_server.log"
fi

CUDA_VISIBLE_DEVICES="$TRAIN_GPUS" "$PYTHON" -m agent_tune.launch.train --config-name "$CONFIG_NAME" "${OVERRIDES[@]}" "$@"
