"""toolcall rows: synthetic arithmetic tasks drive the env to the full reward from their own ground truth."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from agent_tune.envs import make_env  # noqa: E402
from agent_tune.envs.tasks import row_env, row_task  # noqa: E402
from agent_tune.utils.rows import prompt_messages  # noqa: E402
from data_preprocess.toolcall import main  # noqa: E402


def test_synthetic_rows_round_trip(tmp_path: Path) -> None:
    assert main(["--synthetic", "arith", "--n", "20", "--val-size", "4", "--out", str(tmp_path)]) == 0
    train = pd.read_parquet(tmp_path / "train.parquet")
    val = pd.read_parquet(tmp_path / "val.parquet")
    assert len(train) == 20 and len(val) == 4
    ids = {s: [e["id"] for e in f["extra_info"]] for s, f in (("train", train), ("val", val))}
    assert all(i.startswith("arith:") and i[len("arith:"):].isdigit() for i in ids["train"] + ids["val"])
    assert len(set(ids["train"]) | set(ids["val"])) == 24  # one id per task, none in both splits
    row = train.iloc[0]
    extra = dict(row["extra_info"])
    assert extra["split"] == "train" and extra["category"] == "arith" and extra["env"]["name"] == "toolcall"
    assert row["data_source"] == "toolcall/arith"
    env = make_env(extra["env"]["name"], **(row_env(extra)[1] or {}))
    obs = env.reset(**row_task(extra))
    assert [t["function"]["name"] for t in obs.tools] == ["add", "subtract", "multiply"]
    [gt] = json.loads(row_task(extra)["ground_truth"])
    r = env.step(f"<tool_call>\n{json.dumps(gt)}\n</tool_call>")
    assert r.info["accuracy"] == 1.0 and r.reward == 4.0


def test_worked_examples_precede_the_question(tmp_path: Path) -> None:
    """--shots K: the env sees K demonstration turns, then the row's question; the demos never hold a
    task's answer, and --shots 0 puts the format hint into the question instead."""
    assert main(["--synthetic", "arith", "--n", "8", "--val-size", "2", "--shots", "2", "--out", str(tmp_path)]) == 0
    rows = pd.read_parquet(tmp_path / "train.parquet")
    for _, row in rows.iterrows():
        task = row_task(row["extra_info"])
        obs = make_env("toolcall").reset(**task)
        roles = [m["role"] for m in obs.messages]
        assert roles == ["user", "assistant", "user", "assistant", "user"]
        assert obs.messages[-1]["content"] == task["question"] and "<tool_call>" not in task["question"]
        assert prompt_messages(row["prompt"]) == obs.messages
        [gt] = json.loads(task["ground_truth"])
        assert json.dumps(gt["arguments"]) not in "".join(m["content"] for m in obs.messages[:-1])
    assert main(
        ["--synthetic", "arith", "--n", "4", "--val-size", "1", "--shots", "0", "--out", str(tmp_path / "z")]
    ) == 0
    task = row_task(pd.read_parquet(tmp_path / "z" / "train.parquet").iloc[0]["extra_info"])
    assert "messages" not in task or task["messages"] is None
    assert "<tool_call>" in task["question"]
    assert len(make_env("toolcall").reset(**task).messages) == 1
