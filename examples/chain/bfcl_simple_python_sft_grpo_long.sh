#!/usr/bin/env bash
# The longer run of GRPO from the SFT model on BFCL simple_python, long enough to read a trend: the SFT model samples
# every training entry 8 times (examples/eval/chain_bfcl_simple_python_train8_cpu.yaml), the entries with 1-7 right
# are kept, GRPO trains 24 steps on them (config/chain/bfcl_simple_python_sft_grpo_long.yaml), and the base, the SFT
# model and every checkpoint (8, 16, 24) are evaluated on all 150 test entries
# (examples/eval/chain_bfcl_simple_python_all_cpu.yaml).
#   CHAIN_UNTIL=sft bash examples/chain/bfcl_simple_python.sh    # first: data, base, SFT (the chain's)
#   bash examples/chain/bfcl_simple_python_sft_grpo_long.sh
# Outputs beside the 8-step run's, under the chain's $WORK_DIR: sft_grpo_long/, eval_long/, logs_long/ and the records
# in results_long.json.
GRPO_OVERLAY=+chain=bfcl_simple_python_sft_grpo_long
EVAL_PRESET=examples/eval/chain_bfcl_simple_python_all_cpu.yaml
SAMPLE_PRESET=examples/eval/chain_bfcl_simple_python_train8_cpu.yaml
RUN_SUFFIX=_long
. "$(dirname "${BASH_SOURCE[0]}")/bfcl_simple_python_sft_grpo.sh"
