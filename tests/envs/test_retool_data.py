"""ReTool's task catalogue (``agent_tune/envs/retool/tasks.py``) and ``data_preprocess/retool.py`` over it: rows
from a local fixture, in every input format, usable by the env."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from agent_tune.envs import make_env
from agent_tune.envs.retool.tasks import load_records, problems, retool_tasks, split_problems
from agent_tune.envs.tasks import row_env, row_task
from agent_tune.tools import ExecutionLimits, LocalSandbox
from data_preprocess import retool as prep

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "retool" / "math_small.jsonl"


def test_cli_writes_parquet_and_jsonl(tmp_path):
    rc = prep.main([
        "--input", str(FIXTURE), "--out", str(tmp_path), "--val-size", "2", "--answer-marker", "####",
        "--max-tool-calls", "4",
    ])
    assert rc == 0
    train = pd.read_parquet(tmp_path / "train.parquet")
    val = pd.read_parquet(tmp_path / "val.parquet")
    assert len(train) == 7 and len(val) == 2  # 10 records, 1 with an empty question skipped
    jsonl = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    assert len(jsonl) == 7
    row = jsonl[0]
    assert set(row) == {"data_source", "agent_name", "prompt", "ability", "reward_model", "extra_info"}
    assert row["agent_name"] == "agent_tune" and row["data_source"] == "retool/math_small"
    info = row["extra_info"]
    assert row_env(info) == ("retool", {"max_tool_calls": 4})
    assert set(row_task(info)) == {"question", "ground_truth"} and info["split"] == "train"
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert row["prompt"][1]["content"] == row_task(info)["question"]
    assert sorted(r["extra_info"]["index"] for r in jsonl) == list(range(7))
    answers = set(train.extra_info.map(lambda e: row_task(e)["ground_truth"])) | set(
        val.extra_info.map(lambda e: row_task(e)["ground_truth"]))
    assert "21" in answers  # the GSM8K-style "#### 21" answer was cleaned
    questions = set(train.extra_info.map(lambda e: row_task(e)["question"]))
    assert not questions & set(val.extra_info.map(lambda e: row_task(e)["question"]))  # no leak between splits


def test_rows_without_overrides_write_to_parquet(tmp_path):
    assert prep.main(["--input", str(FIXTURE), "--out", str(tmp_path)]) == 0
    row = pd.read_parquet(tmp_path / "train.parquet").iloc[0]
    assert row.extra_info["env"] == {"name": "retool", "kwargs": None}


def test_same_tasks_from_json_and_parquet(tmp_path):
    records = load_records(FIXTURE)
    (tmp_path / "data.json").write_text(json.dumps({"data": records}))
    pd.DataFrame(records).to_parquet(tmp_path / "data.parquet")
    tasks = [retool_tasks("train", input=str(tmp_path / f), category="s") for f in ("data.json", "data.parquet")]
    assert tasks[0] == tasks[1] == retool_tasks("train", input=str(FIXTURE), category="s")


def test_fields_and_boxed_extraction(tmp_path):
    recs = [{"q": "What is 1+1?", "solution": "We add: $1+1=\\boxed{2}$."}]
    usable, skipped = problems(recs, question_field="q", answer_field="solution", extract_boxed_answer=True)
    assert skipped == 0 and usable == [("What is 1+1?", "2")]
    with pytest.raises(KeyError, match="no field 'problem'"):
        problems(recs)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"problem": "x", "answer": "1"}\nnot json\n')
    with pytest.raises(ValueError, match="bad.jsonl line 2: not JSON"):
        load_records(bad)
    (tmp_path / "data.csv").write_text("problem,answer\n")
    with pytest.raises(ValueError, match="unsupported"):
        load_records(tmp_path / "data.csv")
    with pytest.raises(ValueError, match="val_size"):
        split_problems(1, 1, 0)
    with pytest.raises(ValueError, match="exactly one source"):
        retool_tasks("train")


def test_row_drives_an_episode(tmp_path):
    assert prep.main(["--input", str(FIXTURE), "--out", str(tmp_path)]) == 0
    rows = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    row = next(r for r in rows if row_task(r["extra_info"])["ground_truth"] == "\\frac{1}{2}")
    env_spec = row["extra_info"]["env"]
    box = LocalSandbox(limits=ExecutionLimits(wall_seconds=5))
    try:
        assert env_spec == {"name": "retool", "kwargs": None}  # nothing overridden per row
        env = make_env(env_spec["name"], sandbox=box, **(env_spec["kwargs"] or {}))
        obs = env.reset(**row_task(row["extra_info"]))
        assert obs.messages == row["prompt"]
        r = env.step("<code>print(3/4 - 1/4)</code>")
        assert "0.5" in r.observation.text
        r = env.step("So it is \\boxed{0.5}.")
        assert r.done and r.reward == 1.0
    finally:
        box.close()
