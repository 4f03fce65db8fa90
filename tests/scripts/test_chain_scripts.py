"""examples/chain/*.sh with a fake interpreter: which stages run, from which model, and what each evaluates."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.scripts.test_launch_scripts import _read_calls

REPO = Path(__file__).resolve().parents[2]

# Logs each call's argv; answers the config lookups; makes what each stage leaves behind: GRPO's checkpoints
# (every SAVE steps up to STEPS), the merger's exported folder, the eval's report and the stage table.
FAKE = r'''#!/usr/bin/env bash
record=$(printf "%s\n" CALL "$@"; echo .)
printf "%s" "${record%.}" >> "LOG"
if [[ "$2" == agent_tune.launch.config_value ]]; then
  case "$5" in
    agent_tune.template) echo smollm2_tools ;;
    agent_tune.tool_parser) echo hermes ;;
    actor_rollout_ref.rollout.dtype) echo bfloat16 ;;
    data.max_prompt_length) echo 512 ;;
    data.max_response_length) echo 128 ;;
    trainer.total_training_steps) echo STEPS ;;
    *) echo '{}' ;;
  esac
  exit 0
fi
prev=""
for a in "$@"; do
  if [[ "$2" == agent_tune.launch.train && "$a" == trainer.default_local_dir=* ]]; then
    for k in $(seq SAVE SAVE STEPS); do mkdir -p "${a#*=}/global_step_$k/actor"; done
  fi
  if [[ "$2" == verl.model_merger && "$prev" == --target_dir ]]; then mkdir -p "$a"; touch "$a/config.json"; fi
  if [[ "$2" == agent_tune.cli && ( "$prev" == --report-json || "$prev" == --stage-table ) ]]; then touch "$a"; fi
  if [[ "$2" == agent_tune.cli && "$prev" == --mixed-ids ]]; then echo simple_python_7 > "$a"; fi
  if [[ "$3" == data && "$prev" == --out ]]; then mkdir -p "$a"; touch "$a/train.parquet"; fi
  prev="$a"
done
exit 0
'''


def _run(script: str, tmp_path: Path, steps: int, save: int, sft: bool = False) -> list[list[str]]:
    fake, log = tmp_path / "fake_python", tmp_path / "calls.txt"
    log.unlink(missing_ok=True)
    fake.write_text(FAKE.replace("LOG", str(log)).replace("STEPS", str(steps)).replace("SAVE", str(save)))
    fake.chmod(0o755)
    work = tmp_path / "work"
    (work / "data").mkdir(parents=True, exist_ok=True)
    for name in ("train.parquet", "test.parquet"):
        (work / "data" / name).write_bytes(b"")
    if sft:
        (work / "sft/ckpt/global_step_10/huggingface").mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("MODEL_PATH", "GRPO_WRAP", "VLLM_ARGS", "PORT", "OVERLAY",
                                                          "GRPO_OVERLAY", "EVAL_PRESET", "SAMPLE_PRESET",
                                                          "RUN_SUFFIX", "RESULTS", "RESULT_CATEGORIES")}
    env.update(PYTHON=str(fake), WORK_DIR=str(work), MODEL_PATH="/m/base")
    result = subprocess.run(["bash", str(REPO / script)], env=env, capture_output=True, text=True, timeout=60,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    return _read_calls(log)


def _evaluated(calls: list[list[str]]) -> list[tuple[str, str]]:
    """(model folder, output stem) of each test-split eval."""
    out = []
    for c in calls:
        rows = c[c.index("--rows") + 1] if c[:3] == ["-m", "agent_tune.cli", "eval"] and "--rows" in c else ""
        if rows.endswith("test.parquet"):
            out.append((c[c.index("--tokenizer") + 1], Path(c[c.index("--output") + 1]).stem))
    return out


def test_cold_start_trains_from_the_base_model_and_evaluates_every_checkpoint(tmp_path):
    calls = _run("examples/chain/calculator_rl.sh", tmp_path, steps=24, save=8)
    work = tmp_path / "work"
    (train,) = [c for c in calls if c[:2] == ["-m", "agent_tune.launch.train"]]
    assert "actor_rollout_ref.model.path=/m/base" in train and "+chain=calculator_rl" in train
    assert not [c for c in calls if c[:2] == ["-m", "agent_tune.launch.sft"]]  # no SFT stage
    merged = [c[c.index("--target_dir") + 1] for c in calls if c[:2] == ["-m", "verl.model_merger"]]
    assert merged == [str(work / f"grpo/hf_step_{k}") for k in (8, 16, 24)]
    assert _evaluated(calls) == [("/m/base", "base")] + [
        (str(work / f"grpo/hf_step_{k}"), f"grpo_step_{k}") for k in (8, 16, 24)]
    (table,) = [c for c in calls if "--stage-table" in c]
    labels = table[table.index("--labels") + 1:table.index("--stage-table")]
    assert labels == ["base", "GRPO step 8", "GRPO step 16", "GRPO step 24"]
    assert (work / "eval/grpo.report.json").is_file()  # the last checkpoint's eval is the stage's


def test_a_rerun_trains_and_evaluates_nothing_again(tmp_path):
    _run("examples/chain/calculator_rl.sh", tmp_path, steps=16, save=8)
    again = _run("examples/chain/calculator_rl.sh", tmp_path, steps=16, save=8)
    assert not [c for c in again if c[:2] in (["-m", "agent_tune.launch.train"], ["-m", "verl.model_merger"])]
    assert _evaluated(again) == []


def test_grpo_where_sft_left_room_trains_from_the_sft_model_on_the_mixed_entries_only(tmp_path):
    calls = _run("examples/chain/bfcl_simple_python_sft_grpo.sh", tmp_path, steps=16, save=8, sft=True)
    work, sft = tmp_path / "work", str(tmp_path / "work/sft/ckpt/global_step_10/huggingface")
    evals = [c for c in calls if c[:3] == ["-m", "agent_tune.cli", "eval"] and "--rows" in c]
    sample = [c for c in evals if c[c.index("--output") + 1].endswith("samples.jsonl")]
    assert len(sample) == 1 and sample[0][sample[0].index("--tokenizer") + 1] == sft
    assert sample[0][sample[0].index("--rows") + 1] == str(work / "data/train.parquet")
    assert sample[0][sample[0].index("--config") + 1] == "examples/eval/chain_bfcl_simple_python_train_cpu.yaml"
    (data,) = [c for c in calls if c[:3] == ["-m", "agent_tune.cli", "data"]]
    assert data[data.index("--ids-file") + 1] == str(work / "sft_grpo/mixed_ids.txt")
    (train,) = [c for c in calls if c[:2] == ["-m", "agent_tune.launch.train"]]
    assert f"actor_rollout_ref.model.path={sft}" in train
    assert f"data.train_files={work}/sft_grpo/data/train.parquet" in train
    assert _evaluated(calls) == [("/m/base", "base"), (sft, "sft")] + [
        (str(work / f"sft_grpo/hf_step_{k}"), f"sft_grpo_step_{k}") for k in (8, 16)]
    recorded = [(c[c.index("--stage") + 1], c[c.index("--split") + 1])
                for c in calls if c[:4] == ["-m", "agent_tune.cli", "eval", "record"]]
    assert recorded == [("base", "test"), ("SFT", "test"), ("SFT+GRPO step 8", "test"), ("SFT+GRPO step 16", "test"),
                        ("SFT", "trained entries"), ("SFT+GRPO step 16", "trained entries")]
    # the trained entries themselves: the SFT model and the last checkpoint, with the test evals' sampling
    trained = [(c[c.index("--tokenizer") + 1], c[c.index("--config") + 1]) for c in evals
               if c[c.index("--rows") + 1] == str(work / "sft_grpo/data/train.parquet")]
    assert trained == [(sft, "examples/eval/chain_bfcl_simple_python_cpu.yaml"),
                       (str(work / "sft_grpo/hf_step_16"), "examples/eval/chain_bfcl_simple_python_cpu.yaml")]


def test_the_longer_variant_keeps_its_samples_evals_and_records_apart_and_evaluates_every_stage_afresh(tmp_path):
    _run("examples/chain/bfcl_simple_python_sft_grpo.sh", tmp_path, steps=8, save=4, sft=True)
    calls = _run("examples/chain/bfcl_simple_python_sft_grpo_long.sh", tmp_path, steps=24, save=8, sft=True)
    work, sft = tmp_path / "work", str(tmp_path / "work/sft/ckpt/global_step_10/huggingface")
    evals = [c for c in calls if c[:3] == ["-m", "agent_tune.cli", "eval"] and "--rows" in c]
    presets = {Path(c[c.index("--output") + 1]).stem: c[c.index("--config") + 1] for c in evals}
    assert presets.pop("samples") == "examples/eval/chain_bfcl_simple_python_train8_cpu.yaml"
    assert set(presets.values()) == {"examples/eval/chain_bfcl_simple_python_all_cpu.yaml"}
    (train,) = [c for c in calls if c[:2] == ["-m", "agent_tune.launch.train"]]
    assert "+chain=bfcl_simple_python_sft_grpo_long" in train and f"actor_rollout_ref.model.path={sft}" in train
    assert f"data.train_files={work}/sft_grpo_long/data/train.parquet" in train
    # base and SFT were evaluated by the 8-step run, on 50 entries: evaluated again, into the variant's folder
    outputs = [c[c.index("--output") + 1] for c in evals if c[c.index("--rows") + 1].endswith("test.parquet")]
    assert outputs == [str(work / f"eval_long/{stem}.jsonl")
                       for stem in ("base", "sft", "sft_grpo_long_step_8", "sft_grpo_long_step_16",
                                    "sft_grpo_long_step_24")]
    records = [c for c in calls if c[:4] == ["-m", "agent_tune.cli", "eval", "record"]]
    assert {c[c.index("--results") + 1] for c in records} == {str(work / "results_long.json")}
    assert [c[c.index("--stage") + 1] for c in records] == [
        "base", "SFT", "SFT+GRPO step 8", "SFT+GRPO step 16", "SFT+GRPO step 24", "SFT", "SFT+GRPO step 24"]
    assert {c[c.index("--command") + 1] for c in records} == {"bash examples/chain/bfcl_simple_python_sft_grpo_long.sh"}


def test_a_cold_start_that_asks_for_categories_records_each_and_one_that_does_not_only_the_whole(tmp_path):
    records = {}
    for script in ("mcp_notes_rl", "calculator_rl"):
        (tmp_path / script).mkdir()
        calls = _run(f"examples/chain/{script}.sh", tmp_path / script, steps=16, save=8)
        records[script] = [c for c in calls if c[:4] == ["-m", "agent_tune.cli", "eval", "record"]]
    assert len(records["mcp_notes_rl"]) == 3 and all("--categories" in c for c in records["mcp_notes_rl"])
    assert len(records["calculator_rl"]) == 3 and not any("--categories" in c for c in records["calculator_rl"])
