#!/usr/bin/env bash
# GRPO with ToolRL's reward (Qian et al., 2025, "ToolRL: Reward is All Tool Learning Needs") on its rlla
# data: Qwen2.5-3B-Instruct (or 7B), GRPO with 4 samples per prompt, 512 prompts per step, lr 1e-6, 15
# epochs, ToolRL's answer format (<think> / <tool_call> / <response>). config/agent_tune_toolrl.yaml and
# config/recipe/toolrl.yaml hold every hyper-parameter; one node of 8 GPUs by default.
#   RLLA_FILE=/data/rlla_rl.json bash examples/run_grpo_toolrl.sh
#   MODEL_PATH=Qwen/Qwen2.5-7B-Instruct EXPERIMENT=toolrl_qwen2_5_7b RLLA_FILE=... bash examples/run_grpo_toolrl.sh
#   CONFIG_NAME=agent_tune_toolrl_cpu bash examples/run_grpo_toolrl.sh     (CPU, SmolLM2-135M: plumbing only)
# RLLA_FILE is ToolRL's dataset/rlla_4k_raw/rlla_rl.json; the rows are built once into DATA_DIR with
#   data_preprocess/toolcall.py --source rlla "$RLLA_FILE" --val-size "$VAL_SIZE" --out "$DATA_DIR"
#
# ToolRL's reward variants are options of the toolcall env (config/env/toolcall.yaml lists them all), set by
# Hydra override (extra arguments), by REWARD_LENGTH / REWARD_SCALE / REWARD_GRANULARITY, or by ToolRL's own
# environment variables, which this script maps to those keys and prints (R=agent_tune.env_kwargs.toolcall.reward;
# the Python side reads only the config):
#   WITHLENGTH=1                     R.length=fixed          (Section 5.1; R.length_target=512)
#   WITHLENGTH=1 SCHEDULELENGTH=1    R.length=scheduled      (5.1; 384 -> 640 words over trainer.total_training_steps)
#   CORRECTMAX1=1                    R.scale=max1            (5.2)
#   MAX1STEP30MAX3=1                 R.scale=two_stage       (5.2; R.two_stage_step=30)
#   SCHEDULEREWARD=1                 R.scale=smooth          (5.2; R.smooth_schedule_steps=150)
#   REFINEDREWARD=1                  R.granularity=finegrained   (5.3)
#   INTERMEDIATEREWARD=1             R.granularity=intermediate  (5.3)
#   COARSEREWARD=1                   R.granularity=coarse        (5.3)
# As in ToolRL's reward module, a switch is on only when set to 1 (unset, empty or 0: off). Refused (exit 2,
# before anything runs), because ToolRL's module would ignore a switch or run no variant of the paper:
#   - a value other than 1 or 0 (ToolRL ignores it: the switch stays off there);
#   - SCHEDULELENGTH=1 without WITHLENGTH=1 (ToolRL adds no length reward then: the switch does nothing);
#   - two or three of CORRECTMAX1, MAX1STEP30MAX3, SCHEDULEREWARD (ToolRL rescales each on top of the other,
#     a reward range of no variant; ToolRL's README enables one at a time and R.scale holds one);
#   - COARSEREWARD with REFINEDREWARD or INTERMEDIATEREWARD (ToolRL's coarse rule decides first: the other is
#     ignored), and REFINEDREWARD with INTERMEDIATEREWARD (ToolRL stacks both: a granularity of neither);
#   - a switch whose key REWARD_LENGTH / REWARD_SCALE / REWARD_GRANULARITY or an argument sets otherwise.
# e.g. bash examples/run_grpo_toolrl.sh agent_tune.env_kwargs.toolcall.reward.scale=two_stage \
#        trainer.experiment_name=toolrl_two_stage
#   MAX1STEP30MAX3=1 EXPERIMENT=toolrl_two_stage bash examples/run_grpo_toolrl.sh     (the same run)
#   REWARD_LENGTH=scheduled EXPERIMENT=toolrl_dynamic_length bash examples/run_grpo_toolrl.sh
# The schedules read the trainer's global step (verl's global_steps, handed to the env by the agent loop).
#
# Paths: WORK_DIR (outputs/toolrl), DATA_DIR ($WORK_DIR/data), CKPT_DIR, RLLA_FILE, VAL_SIZE (rows held out
# for validation when the data is built: 80, ToolRL's 2%). Variables, passed only when set: MODEL_PATH,
# BATCH_SIZE, MINI_BATCH_SIZE, GROUP_SIZE, LR, EPOCHS, TOTAL_STEPS, SAVE_FREQ, TEST_FREQ, TP, EXPERIMENT,
# NNODES, GPUS_PER_NODE, REWARD_LENGTH, REWARD_SCALE, REWARD_GRANULARITY and ToolRL's switches above; CONFIG_NAME
# picks the config (default agent_tune_toolrl). Re-running resumes from CKPT_DIR.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/_common.sh"

CONFIG_NAME="${CONFIG_NAME:-agent_tune_toolrl}"
WORK_DIR="${WORK_DIR:-$REPO_DIR/outputs/toolrl}"
DATA_DIR="${DATA_DIR:-$WORK_DIR/data}"
CKPT_DIR="${CKPT_DIR:-$WORK_DIR/checkpoints}"
RLLA_FILE="${RLLA_FILE:-}"
VAL_SIZE="${VAL_SIZE:-80}"
REWARD_KEY=agent_tune.env_kwargs.toolcall.reward
TOOLRL_SWITCHES=(WITHLENGTH SCHEDULELENGTH CORRECTMAX1 MAX1STEP30MAX3 SCHEDULEREWARD REFINEDREWARD
  INTERMEDIATEREWARD COARSEREWARD)

refuse() {
  echo "ToolRL switches: $*" >&2
  exit 2
}

# switched_on VAR: whether ToolRL's switch VAR is on (1); unset, empty or 0 is off, anything else is refused
switched_on() {
  case "${!1:-}" in
    1) return 0 ;;
    "" | 0) return 1 ;;
    *) refuse "$1=${!1}: ToolRL turns a switch on only with 1 and ignores any other value; give 1 or 0" ;;
  esac
}

# toolrl_key KEY VALUE VAR SWITCHES: pass R.KEY=VALUE for SWITCHES (the variables set), unless REWARD_VAR or an
# argument of this script sets R.KEY to something else; print the mapping
toolrl_key() {
  local key="$1" value="$2" var="$3" switches="$4" arg
  if [[ -n "${!var:-}" && "${!var}" != "$value" ]]; then
    refuse "$switches means $REWARD_KEY.$key=$value but $var=${!var}: set one of them"
  fi
  for arg in "${ARGS[@]}"; do
    arg="${arg#+}" && arg="${arg#+}"
    if [[ "$arg" == "$REWARD_KEY.$key="* && "$arg" != "$REWARD_KEY.$key=$value" ]]; then
      refuse "$switches means $REWARD_KEY.$key=$value but the argument $arg sets it too: set one of them"
    fi
  done
  echo "ToolRL switches: $switches -> $REWARD_KEY.$key=$value"
  OVERRIDES+=("$REWARD_KEY.$key=$value")
}

# the switches that are on, each mapped to its key (the refusals are listed at the top of this file)
toolrl_switches() {
  local on=() s scales=()
  for s in "${TOOLRL_SWITCHES[@]}"; do
    if switched_on "$s"; then on+=("$s"); fi
  done
  is_on() { [[ " ${on[*]} " == *" $1 "* ]]; }
  if is_on SCHEDULELENGTH && ! is_on WITHLENGTH; then
    refuse "SCHEDULELENGTH=1 without WITHLENGTH=1: ToolRL adds the length reward only with WITHLENGTH=1, so" \
      "SCHEDULELENGTH alone changes nothing there; set WITHLENGTH=1 too (the scheduled length reward) or drop it"
  fi
  for s in CORRECTMAX1 MAX1STEP30MAX3 SCHEDULEREWARD; do
    if is_on "$s"; then scales+=("$s=1"); fi
  done
  if (( ${#scales[@]} > 1 )); then
    refuse "${scales[*]}: ToolRL rescales the reward with each on top of the other, a range of no variant of" \
      "the paper (ToolRL's README enables one at a time); $REWARD_KEY.scale holds one: set one of them"
  fi
  if is_on COARSEREWARD && { is_on REFINEDREWARD || is_on INTERMEDIATEREWARD; }; then
    refuse "COARSEREWARD=1 with $(is_on REFINEDREWARD && echo REFINEDREWARD || echo INTERMEDIATEREWARD)=1:" \
      "ToolRL's coarse rule scores the answer first, so the other switch is ignored there; set one of them"
  fi
  if is_on REFINEDREWARD && is_on INTERMEDIATEREWARD; then
    refuse "REFINEDREWARD=1 with INTERMEDIATEREWARD=1: ToolRL applies both (exact name lists and exact calls)," \
      "a granularity of neither variant; set one of them"
  fi
  if is_on SCHEDULELENGTH; then toolrl_key length scheduled REWARD_LENGTH "WITHLENGTH=1 SCHEDULELENGTH=1"
  elif is_on WITHLENGTH; then toolrl_key length fixed REWARD_LENGTH "WITHLENGTH=1"; fi
  if is_on CORRECTMAX1; then toolrl_key scale max1 REWARD_SCALE "CORRECTMAX1=1"; fi
  if is_on MAX1STEP30MAX3; then toolrl_key scale two_stage REWARD_SCALE "MAX1STEP30MAX3=1"; fi
  if is_on SCHEDULEREWARD; then toolrl_key scale smooth REWARD_SCALE "SCHEDULEREWARD=1"; fi
  if is_on REFINEDREWARD; then toolrl_key granularity finegrained REWARD_GRANULARITY "REFINEDREWARD=1"; fi
  if is_on INTERMEDIATEREWARD; then toolrl_key granularity intermediate REWARD_GRANULARITY "INTERMEDIATEREWARD=1"; fi
  if is_on COARSEREWARD; then toolrl_key granularity coarse REWARD_GRANULARITY "COARSEREWARD=1"; fi
  return 0
}

ARGS=("$@")
toolrl_switches

if [[ ! -f "$DATA_DIR/train.parquet" || ! -f "$DATA_DIR/val.parquet" ]]; then
  if [[ -z "$RLLA_FILE" ]]; then
    echo "no rows in $DATA_DIR: set RLLA_FILE to ToolRL's dataset/rlla_4k_raw/rlla_rl.json to build them" >&2
    exit 2
  fi
  "$PYTHON" "$REPO_DIR/data_preprocess/toolcall.py" --source rlla "$RLLA_FILE" --val-size "$VAL_SIZE" --out "$DATA_DIR"
fi

OVERRIDES+=(data.train_files="$DATA_DIR/train.parquet" data.val_files="$DATA_DIR/val.parquet"
  trainer.default_local_dir="$CKPT_DIR")
pass MODEL_PATH actor_rollout_ref.model.path
pass BATCH_SIZE data.train_batch_size
pass MINI_BATCH_SIZE actor_rollout_ref.actor.ppo_mini_batch_size
pass GROUP_SIZE actor_rollout_ref.rollout.n
pass LR actor_rollout_ref.actor.optim.lr
pass EPOCHS trainer.total_epochs
pass TOTAL_STEPS trainer.total_training_steps
pass SAVE_FREQ trainer.save_freq
pass TEST_FREQ trainer.test_freq
pass TP actor_rollout_ref.rollout.tensor_model_parallel_size
pass EXPERIMENT trainer.experiment_name
pass NNODES trainer.nnodes
pass GPUS_PER_NODE trainer.n_gpus_per_node
pass REWARD_LENGTH agent_tune.env_kwargs.toolcall.reward.length
pass REWARD_SCALE agent_tune.env_kwargs.toolcall.reward.scale
pass REWARD_GRANULARITY agent_tune.env_kwargs.toolcall.reward.granularity

cd "$REPO_DIR"
exec "$PYTHON" -m agent_tune.launch.train --config-name "$CONFIG_NAME" "${OVERRIDES[@]}" "$@"
