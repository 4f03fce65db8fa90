"""toolcall rows: synthetic arithmetic tasks drive the env to the full reward from their own ground truth."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from data_preprocess.toolcall import main  # noqa: E402

from agent_tune.envs import make_env  # noqa: E402


def test_synthetic_rows_round_trip(tmp_path: Path) -> None:
    assert main(["--synthetic", "arith", "--n", "20", "--val-size", "4", "--out", str(tmp_path)]) == 0
    train = pd.read_parquet(tmp_path / "train.parquet")
    assert len(train) == 20 and len(pd.read_parquet(tmp_path / "val.parquet")) == 4
    row = train.iloc[0]
    extra = dict(row["extra_info"])
    env = make_env(extra["env"]["name"])
    obs = env.reset(**extra)
    assert [t["function"]["name"] for t in obs.tools] == ["add", "subtract", "multiply"]
    [gt] = json.loads(extra["ground_truth"])
    r = env.step(f"<tool_call>\n{json.dumps(gt)}\n</tool_call>")
    assert r.info["accuracy"] == 1.0 and r.reward == 4.0
