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


def _plot(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agent_tune.cli", "plot", *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO)


def _one_line_error(result: subprocess.CompletedProcess) -> str:
    assert result.returncode in (2, 3) and result.stdout == "", (result.returncode, result.stdout)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agent-tune plot: error: "), result.stderr  # no traceback
    return lines[0]


def test_plot_errors_are_one_line_naming_the_file_or_key(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    metrics = run / "metrics.jsonl"
    metrics.write_text("".join(json.dumps({"step": i, "reward": 0.1 * i, "acc": 0.0}) + "\n" for i in (1, 2)))
    out = str(tmp_path / "curve.png")
    missing = _one_line_error(_plot(str(tmp_path / "nope.jsonl"), "--out", out))
    assert "nope.jsonl: no such file" in missing
    assert f"did you mean {metrics}?" in _one_line_error(_plot(str(run), "--out", out))
    typo = _one_line_error(_plot(str(metrics), "--keys", "rewrd", "--out", out))
    assert "--keys rewrd: no step of" in typo and "did you mean reward?" in typo
    assert "its keys: acc reward step" in _one_line_error(_plot(str(metrics), "--keys", "zzz", "--out", out))
    (tmp_path / "empty.jsonl").write_text("")
    assert "no steps" in _one_line_error(_plot(str(tmp_path / "empty.jsonl"), "--out", out))
    (tmp_path / "text.jsonl").write_text("not json\n")
    assert "line 1: not JSON" in _one_line_error(_plot(str(tmp_path / "text.jsonl"), "--out", out))
    assert not Path(out).exists()
    # --table: the same rules on verl's step log
    log = tmp_path / "verl_metrics.jsonl"
    log.write_text(json.dumps({"step": 1, "data": {"actor/pg_loss": 0.5}}) + "\n")
    typo = _one_line_error(_plot("--table", str(log), "--keys", "actor/pg_los"))
    assert "did you mean actor/pg_loss?" in typo
    assert "no such file" in _one_line_error(_plot("--table", str(tmp_path / "none.jsonl"), "--keys", "x"))


def test_plot_default_keys_a_file_lacks_are_left_out(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("".join(json.dumps({"step": i, "reward": 0.5}) + "\n" for i in (1, 2)))
    result = _plot(str(metrics), "--out", str(tmp_path / "c.png"))
    assert result.returncode == 0, result.stderr
    assert "reward: first 1 steps mean 0.500" in result.stdout and "acc" not in result.stdout
