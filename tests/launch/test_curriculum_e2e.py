"""End to end on CPU: a two-stage curriculum (config/curriculum/cpu_tiny.yaml) with verl's real trainer,
killed during its second stage and run again: it resumes in the second stage, from the first stage's
exported model, and finishes.

Slow (about 10 minutes on 2 cores, ~12 GB RAM): three trainer starts (stage 1, the killed stage 2, stage 2
again) of one GRPO step each, with SmolLM2-135M, and two exports with verl's model merger.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 1500

pytestmark = pytest.mark.slow


def _shm_files() -> set[str]:
    try:
        return {n for n in os.listdir("/dev/shm") if n.startswith(("psm_", "sem.mp-"))}
    except OSError:
        return set()


def _cmd(run_dir: Path, data_dir: Path) -> list[str]:
    return [sys.executable, "-m", "agent_tune.launch.curriculum", "--curriculum", "cpu_tiny", "--run-dir", str(run_dir),
            f"curriculum.data_dir={data_dir}"]


def _state(run_dir: Path) -> dict:
    path = run_dir / "curriculum_state.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def _wait_for(predicate, proc: subprocess.Popen, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert proc.poll() is None, f"the curriculum exited ({proc.returncode}) before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(2)


def test_two_stages_killed_in_the_second_then_resumed(tmp_path):
    pytest.importorskip("verl")
    pytest.importorskip("vllm")
    data_dir, run_dir = tmp_path / "data", tmp_path / "run"
    subprocess.run([sys.executable, str(REPO / "data_preprocess" / "toolcall.py"), "--synthetic", "arith", "--n", "8",
                    "--val-size", "2", "--out", str(data_dir)], check=True, cwd=REPO, capture_output=True)
    first_ckpt, second_ckpt = run_dir / "first" / "checkpoints", run_dir / "second" / "checkpoints"
    first_model = run_dir / "first" / "model"
    shm_before = _shm_files()

    # first run: stage 1 trains and is exported; killed (SIGTERM, as a scheduler would) once stage 2's
    # trainer has started Ray
    log1 = tmp_path / "first_run.log"
    with log1.open("w") as out:
        proc = subprocess.Popen(_cmd(run_dir, data_dir), cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
        try:
            _wait_for(lambda: (second_ckpt / "train.log").is_file()
                      and "Started a local Ray instance" in (second_ckpt / "train.log").read_text(errors="replace"),
                      proc, RUN_TIMEOUT_S, "stage 2's trainer started")
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(600)
        finally:
            if proc.poll() is None:
                proc.kill()
    text1 = log1.read_text(errors="replace")
    assert code == 128 + signal.SIGTERM, text1[-4000:]
    state = _state(run_dir)
    assert state["stages"] == ["first", "second"] and state["current"] == 1
    assert state["records"]["first"]["status"] == "exported"
    # saved relative to the curriculum's folder, so the folder can move (agent_tune.utils.run_paths)
    assert state["records"]["first"]["checkpoint"] == str((first_ckpt / "global_step_1").relative_to(run_dir))
    assert state["records"]["first"]["model"] == str(first_model.relative_to(run_dir))
    assert state["records"]["second"]["status"] == "training"
    assert (first_model / "config.json").is_file() and list(first_model.glob("*.safetensors"))
    assert (first_ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "1"
    assert (second_ckpt / "latest_checkpointed_iteration.txt").exists() is False  # killed before its step

    # second run: stage 1 is skipped, stage 2 starts again from stage 1's model and finishes
    log2 = tmp_path / "second_run.log"
    with log2.open("w") as out:
        code = subprocess.run(_cmd(run_dir, data_dir), cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                              timeout=RUN_TIMEOUT_S).returncode
    text2 = log2.read_text(errors="replace")
    assert code == 0, text2[-6000:]
    assert "Stage 1/2 first: done before" in text2
    assert "Stage 2/2 second: config agent_tune_toolcall_cpu, from " + str(first_model) in text2
    assert f"Model: {first_model}" in text2  # the launcher's line: the model the trainer loads
    assert "Curriculum cpu_tiny done" in text2
    # stage 1 trained once (one launch in its log); stage 2 launched twice (killed, then complete)
    assert (first_ckpt / "train.log").read_text(errors="replace").count("===== agent-tune train") == 1
    assert (second_ckpt / "train.log").read_text(errors="replace").count("===== agent-tune train") == 2
    child_config = yaml.safe_load((second_ckpt / "train_config.yaml").read_text())
    assert child_config["actor_rollout_ref"]["model"]["path"] == str(first_model)
    assert (second_ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "1"
    assert (second_ckpt / "global_step_1" / "actor").is_dir()
    metrics = [json.loads(line) for line in (second_ckpt / "metrics.jsonl").read_text().splitlines()]
    assert [row["step"] for row in metrics] == [1]
    state = _state(run_dir)
    assert state["current"] == 2
    assert state["records"]["second"]["status"] == "exported"
    assert state["records"]["second"]["ended_by"] == "max_steps"
    assert (run_dir / "second" / "model" / "config.json").is_file()
    assert not list(run_dir.glob("*/model.partial"))

    leftover = _shm_files() - shm_before
    from verl_ext.cpu.shm import paths_in_use

    in_use = set(paths_in_use())
    assert {n for n in leftover if n not in in_use} == set()
