#!/usr/bin/env bash
# TRL 1.16.0 in ./.venv-trl, for the TRL side of benchmarks/vs_trl.py (agent-tune next to TRL's GRPOTrainer) and its
# tests (tests/benchmarks/test_vs_trl.py, skipped without it). Idempotent; run it after scripts/install.sh, whose
# ./.venv it builds on.
#   bash scripts/install_trl.sh
# Why a venv of its own, and not the dev extra: verl 0.9.1 cannot build a model while trl >= 1.0 is importable.
# verl/models/transformers/monkey_patch.py (apply_monkey_patch, run for every actor, reference and critic) does
# `if is_trl_available(): from trl.experimental.ppo import AutoModelForCausalLMWithValueHead`, falling back to
# `from trl import ...`; TRL 1.16 has neither (its PPO trainer and value-head models are gone), so with trl in the
# trainer's venv every `agent-tune train` and `agent-tune sft` stops with an ImportError at the model build
# (measured: the CPU GRPO run, and the lead's SFT and GRPO runs). This one is an overlay (scripts/_overlay_venv.sh):
# the trainer's site-packages (torch, transformers, accelerate, datasets, vLLM, agent-tune's own deps) are on its
# path, and it adds trl alone, --no-deps (its requirements are all met by the trainer's venv: `pip install --dry-run
# trl==1.16.0` there installs trl and nothing else, no pin moved). Not trl[vllm]: it pulls the CUDA vllm.
set -euo pipefail
cd "$(dirname "$0")/.."

. scripts/_steps.sh
. scripts/_overlay_venv.sh

overlay_venv .venv-trl
step "pip install --no-deps trl==1.16.0" "$PY" -m pip install -q --disable-pip-version-check --no-deps trl==1.16.0
import_check "$PY" "trl trl.trainer.grpo_trainer trl.chat_template_utils" ""
echo "TRL ready: $(pwd)/$PY (benchmarks/vs_trl.py runs TRL's side with it)"
