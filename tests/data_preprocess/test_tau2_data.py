"""data_preprocess/tau2.py: tau2's own splits as verl rows whose env kwargs build a playable episode."""

from __future__ import annotations

import json

import pandas as pd

from agent_tune.envs import make_env
from agent_tune.envs.tasks import row_env, row_task
from data_preprocess import tau2 as tau2_data


def test_rows_follow_tau2_splits_and_build_the_env(tmp_path) -> None:
    counts = tau2_data.write_splits(tmp_path, ["airline", "retail"], ["train", "test"])
    assert counts == {"train": {"airline": 30, "retail": 74}, "test": {"airline": 20, "retail": 40}}
    train = pd.read_parquet(tmp_path / "train.parquet")
    test = pd.read_parquet(tmp_path / "test.parquet")
    pair = lambda e: (row_task(e)["domain"], row_task(e)["task_id"])  # noqa: E731
    assert len(set(train["extra_info"].map(pair))) == 104 and len(set(test["extra_info"].map(pair))) == 60
    assert not set(train["extra_info"].map(pair)) & set(test["extra_info"].map(pair))
    assert not set(train["extra_info"].map(lambda e: e["id"])) & set(test["extra_info"].map(lambda e: e["id"]))
    assert set(train["extra_info"].map(lambda e: e["split"])) == {"train"}
    row = json.loads((tmp_path / "test.jsonl").read_text().splitlines()[0])
    assert row["data_source"] == "tau2/airline" and row["extra_info"]["env"]["name"] == "tau2"
    assert row["prompt"][0]["role"] == "system" and "<policy>" in row["prompt"][0]["content"]
    task = row_task(row["extra_info"])
    assert set(task) == {"domain", "task_id"} and task["domain"] == "airline"
    assert row["extra_info"]["id"] == f"tau2/airline/{task['task_id']}" and row["extra_info"]["category"] == "airline"
    env = make_env("tau2", user={"kind": "scripted", "turns": ["Hello."]},
                   **(row_env(row["extra_info"])[1] or {}))
    obs = env.reset(**row_task(row["extra_info"]))
    assert obs.messages[:2] == row["prompt"] and obs.messages[2] == {"role": "user", "content": "Hello."}


def test_the_script_runs_as_a_file(tmp_path) -> None:
    """`python data_preprocess/tau2.py` (what the launch scripts run): its folder, first on sys.path, holds a
    tau2.py that must not shadow tau2's own package."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(repo)}
    proc = subprocess.run([sys.executable, str(repo / "data_preprocess" / "tau2.py"), "--out", str(tmp_path),
                           "--domains", "airline", "--splits", "test"], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout) == {"test": {"airline": 20}} and (tmp_path / "test.parquet").is_file()


def test_pipeline_rows_hold_the_pipeline_prompt(tmp_path) -> None:
    """``--protocol pipeline``: a row's prompt is what an episode in the pipeline protocol starts with."""
    tau2_data.write_splits(tmp_path, ["airline"], ["test"], protocol="pipeline")
    row = json.loads((tmp_path / "test.jsonl").read_text().splitlines()[0])
    assert [m["role"] for m in row["prompt"]] == ["system"]
    assert row["prompt"][0]["content"].startswith("You are the ")
    env = make_env("tau2", user={"kind": "scripted", "turns": ["Hello."]}, protocol="pipeline",
                   **(row_env(row["extra_info"])[1] or {}))
    obs = env.reset(**row_task(row["extra_info"]))
    assert obs.messages[:1] == row["prompt"] and obs.messages[1] == {"role": "user", "content": "Hello."}
