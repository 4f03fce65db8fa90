"""Several envs in one run, and the debugging modes, end to end on CPU: two trainer start-ups serve both.

The data: one row each of bfcl (2 worked examples), tau2 (its mock domain; a scripted user, so no user server),
retool (the fixture's problems, run in the local sandbox) and the mcp notes server (2 worked examples), each file
written by ``agent-tune data``; ``data.train_files`` lists the four (config/agent_tune_mixed_cpu.yaml: SmolLM2-135M,
4 rows x 2 samples a step, so every step plays every env).

1. ``+debug=rollout_only``, 2 steps: verl's v1 trainer reads the four files as one dataset and plays every row
   through agent-tune's agent loop; each sample is dumped (tokens, mask, log-probs, reward, metrics) and no
   update runs. Checked: every env played at each step, named apart in the dump (every file's row is index 0),
   no server or user failed, nothing updated or saved.
2. ``+debug=replay`` of that dump, 2 steps: the update trains on the dumped samples without generating.
   Checked: verl's own record of the batch it trained on is the dump's at each step (inputs, outputs, scores),
   the same lengths and scores as the rollout-only run, and a gradient at each step.

This is the CI check of the debugging modes (a broken dump or replay fails it) and of a mixed-env run training;
``examples/cpu/debug_modes_cpu.py`` is the longer side-by-side print. Slow: measured in docs/debugging.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 900
STEPS, ROWS, N = 2, 4, 2
ENVS = {"bfcl", "tau2", "retool", "mcp"}
# `agent-tune data` per env: one row each (folder, split file, arguments)
DATA = {
    "bfcl": ("train", ["--split", "train", "--options", '{"shots": 2}', "--categories", "base", "--limit", "1"]),
    "tau2": ("all", ["--split", "all", "--categories", "mock", "--limit", "1"]),
    "retool": ("train", ["--split", "train", "--options",
                         json.dumps({"input": str(REPO / "tests" / "fixtures" / "retool" / "math_small.jsonl")}),
                         "--limit", "1"]),
    "mcp": ("train", ["--split", "train", "--options",
                      json.dumps({"path": str(REPO / "examples" / "mcp" / "tasks.jsonl"), "shots": 2}),
                      "--categories", "add", "--limit", "1"]),
}
USER = ["agent_tune.env_kwargs.tau2.user.kind=scripted",
        "+agent_tune.env_kwargs.tau2.user.turns=[Hi. I need to create a task for my project.]"]

pytestmark = pytest.mark.slow


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _train(work: Path, name: str, files: str, *overrides: str) -> tuple[Path, float]:
    out = work / name
    cmd = [sys.executable, "-m", "agent_tune.launch.train", "--config-name", "agent_tune_mixed_cpu",
           f"data.train_files={files}", f"data.val_files={files}", f"trainer.default_local_dir={out}",
           f"trainer.total_training_steps={STEPS}", *USER, *overrides]
    started = time.monotonic()
    with (work / f"{name}.log").open("w") as log:
        code = subprocess.run(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT_S).returncode
    text = (work / f"{name}.log").read_text(errors="replace")
    assert code == 0, f"the {name} run exited {code}; console tail:\n{text[-4000:]}"
    return out, time.monotonic() - started


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    """The rollout-only run and its replay (module-wide: two trainer start-ups for every test here)."""
    pytest.importorskip("verl")
    pytest.importorskip("vllm")
    from agent_tune.data_cli import main as data_main

    work = tmp_path_factory.mktemp("mixed_envs")
    files = []
    for env, (split, args) in DATA.items():
        assert data_main(["--env", env, "--out", str(work / "data" / env), *args]) == 0
        files.append(str(work / "data" / env / f"{split}.parquet"))
    listed = "[" + ",".join(files) + "]"
    first, first_s = _train(work, "rollout_only", listed, "+debug=rollout_only")
    second, second_s = _train(work, "replay", listed, "+debug=replay",
                              f"agent_tune.debug.replay_dir={first / 'rollout_dump'}")
    print(f"mixed envs: rollout-only {first_s:.0f} s, replay {second_s:.0f} s (start-ups included)")
    return {"rollout_only": first, "replay": second, "seconds": (first_s, second_s)}


def _verl_steps(out: Path) -> dict[int, dict]:
    return {row["step"]: row["data"] for row in _jsonl(out / "verl_metrics.jsonl") if "timing_s/step" in row["data"]}


def _verl_batch(out: Path, step: int) -> list[tuple[str, str, float]]:
    """The batch verl trained on at ``step``, as its own rollout dump has it (uids differ between runs)."""
    return sorted((r["input"], r["output"], float(r["score"])) for r in _jsonl(out / "rollouts" / f"{step}.jsonl"))


def test_rollout_only_plays_every_env_of_the_mixed_files_and_dumps_them(runs) -> None:
    from agent_tune.rollout.dump import dumped_steps, read_step_dump

    out = runs["rollout_only"]
    dump = out / "rollout_dump"
    assert dumped_steps(dump) == list(range(1, STEPS + 1))
    for step in range(1, STEPS + 1):
        records = read_step_dump(dump, step)
        assert len(records) == ROWS * N and {s for _, s in records} == set(range(N))
        assert {rec["env"] for rec in records.values()} == ENVS, step  # every env played each step
        assert len({row for row, _ in records}) == ROWS  # four rows with index 0, named apart
        for (row, _), rec in records.items():
            assert rec["index"] == 0 and row.startswith(f"0 ({rec['env']}:")
            assert len(rec["response_ids"]) == len(rec["response_mask"]) == len(rec["response_logprobs"]) > 0
            assert any(rec["response_mask"]) and rec["prompt_ids"]
            assert rec["sample_record"]["global_steps"] == step and rec["sample_record"]["reward"] == rec["reward"]
            assert rec["stop_reason"] != "server_error", rec["info"]  # the notes server and the user answered
    for step, verl in _verl_steps(out).items():
        assert not any(k.startswith(("actor/pg_loss", "actor/grad_norm")) for k in verl), step  # no update
    assert sorted(_verl_steps(out)) == list(range(1, STEPS + 1))
    assert not list(out.glob("global_step_*"))


def test_the_replay_trains_on_exactly_the_dumped_steps(runs) -> None:
    first, second = runs["rollout_only"], runs["replay"]
    ro, rp = _verl_steps(first), _verl_steps(second)
    assert sorted(rp) == list(range(1, STEPS + 1))
    for step in range(1, STEPS + 1):
        assert _verl_batch(second, step) == _verl_batch(first, step), step
        assert len(_verl_batch(second, step)) == ROWS * N
        assert rp[step]["response_length/mean"] == ro[step]["response_length/mean"]
        assert rp[step]["critic/score/mean"] == ro[step]["critic/score/mean"]
        assert rp[step]["actor/grad_norm"] > 0.0, (step, rp[step].get("actor/grad_norm"))
    # the step metrics saw the replayed episodes of every env (filed under this run's steps)
    metrics = {r["step"]: r for r in _jsonl(second / "metrics.jsonl")}
    assert sorted(metrics) == list(range(1, STEPS + 1)) and all(m["samples"] == ROWS * N for m in metrics.values())
