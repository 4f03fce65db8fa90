"""``agent-tune plot``: per-step metrics drawn and summarised, and verl's step log as a table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from agent_tune.view.plot import step_lines

REPO = Path(__file__).resolve().parents[2]


def test_plot_draws_stages_in_order_and_summarises_each(tmp_path):
    runs = []
    for stage, rewards in (("one", [0.0, 0.1, 0.2, 0.3]), ("two", [0.5, 0.5, 0.9, 1.0])):
        path = tmp_path / stage / "checkpoints" / "metrics.jsonl"
        path.parent.mkdir(parents=True)
        path.write_text("".join(json.dumps({"step": i + 1, "reward": r}) + "\n" for i, r in enumerate(rewards)))
        runs.append(str(path))
    out = tmp_path / "curve.png"
    result = subprocess.run(
        [sys.executable, "-m", "agent_tune.cli", "plot", *runs, "--keys", "reward", "--window", "2",
         "--out", str(out)], capture_output=True, text=True, timeout=120, cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    assert "[one] reward: first 2 steps mean 0.050 -> last 2 steps mean 0.250" in result.stdout
    assert "[two] reward: first 2 steps mean 0.500 -> last 2 steps mean 0.950" in result.stdout
    assert out.stat().st_size > 0
    bad = subprocess.run(
        [sys.executable, "-m", "agent_tune.cli", "plot", *runs, "--labels", "only-one", "--out",
         str(out)], capture_output=True, text=True, timeout=120, cwd=REPO,
    )
    assert bad.returncode != 0 and "--labels: 1 names for 2 metrics files" in bad.stderr


def test_table_prints_the_chosen_keys_a_line_a_step(tmp_path):
    rows = [{"step": 1, "data": {"critic/vf_loss": 0.5, "actor/pg_loss": -0.25, "other": 1}},
            {"step": 2, "data": {"critic/vf_loss": 0.125, "note": "text"}}]
    assert step_lines(rows, ["critic/vf_loss", "actor/pg_loss"]) == [
        "step 1: critic/vf_loss=0.5, actor/pg_loss=-0.25", "step 2: critic/vf_loss=0.125"]
    log = tmp_path / "verl_metrics.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = subprocess.run([sys.executable, "-m", "agent_tune.cli", "plot", "--table", str(log), "--keys",
                             "critic/vf_loss"], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["step 1: critic/vf_loss=0.5", "step 2: critic/vf_loss=0.125"]
