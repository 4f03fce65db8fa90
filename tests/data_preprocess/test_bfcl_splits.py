"""BFCL splits: sizes, no scenario across splits, reproducible, rows build their env."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from agent_tune.envs import make_env  # noqa: E402
from agent_tune.envs.tasks import row_env, row_task  # noqa: E402
from agent_tune.utils.rows import prompt_messages  # noqa: E402
from data_preprocess.bfcl import build_splits, write_splits  # noqa: E402


def _scenario(test_id: str) -> int:
    return int(test_id.rsplit("_", 1)[1])


def test_sizes_and_disjoint_scenarios(tmp_path: Path) -> None:
    counts = write_splits(tmp_path, seed=42)
    assert counts == {"train": 400, "val": 100, "test": 300, "train_base": 100, "train_hard": 300}
    frames = {s: pd.read_parquet(tmp_path / f"{s}.parquet") for s in counts}
    scen = {s: {_scenario(x["id"]) for x in f["extra_info"]} for s, f in frames.items()}
    assert not (scen["train"] & scen["val"]) and not (scen["train"] & scen["test"]) and not (scen["val"] & scen["test"])
    assert scen["train_base"] == scen["train"]
    cats = pd.Series([x["category"] for x in frames["train"]["extra_info"]]).value_counts().to_dict()
    assert cats == {
        "multi_turn_base": 100, "multi_turn_miss_func": 100,
        "multi_turn_miss_param": 100, "multi_turn_long_context": 100,
    }
    assert {x["category"] for x in frames["train_base"]["extra_info"]} == {"multi_turn_base"}
    # train_hard is train minus train_base: the three harder categories of the same scenarios
    assert scen["train_hard"] == scen["train"]
    ids = {s: {x["id"] for x in frames[s]["extra_info"]} for s in ("train", "train_base", "train_hard")}
    assert ids["train_hard"] == ids["train"] - ids["train_base"]
    assert {x["category"] for x in frames["train_hard"]["extra_info"]} == {
        "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context"}
    jsonl = [json.loads(line) for line in (tmp_path / "val.jsonl").read_text().splitlines()]
    assert len(jsonl) == 100 and jsonl[0]["agent_name"] == "agent_tune"
    assert all(row_env(r["extra_info"])[1]["eval_mode"] for r in jsonl)  # validation = leaderboard rules
    # a train row's task plays by the training rules (its env kwargs are null: nothing of its own)
    train_kwargs = row_env(frames["train"]["extra_info"].iloc[0])[1] or {}
    assert not train_kwargs.get("eval_mode")
    # the test id lives in the row's task, not in the env kwargs
    assert all(row_task(x) == {"test_id": x["id"]} for x in frames["train"]["extra_info"])


def test_reproducible_and_seed_dependent() -> None:
    ids = lambda splits: [r["extra_info"]["id"] for r in splits["test"]]  # noqa: E731
    assert ids(build_splits(42)) == ids(build_splits(42))
    assert ids(build_splits(42)) != ids(build_splits(7))


def test_row_builds_its_environment(tmp_path: Path) -> None:
    write_splits(tmp_path, seed=1)
    row = pd.read_parquet(tmp_path / "val.parquet").iloc[0]
    name, kwargs = row_env(row["extra_info"])
    env = make_env(name, **kwargs)
    obs = env.reset(**row_task(row["extra_info"]))
    assert [dict(m) for m in obs.messages] == prompt_messages(row["prompt"])
    assert obs.tools
