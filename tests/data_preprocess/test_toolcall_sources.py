"""toolcall rows from BFCL single-turn entries (seeded splits by id) and from ToolRL's rlla files."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from agent_tune.envs import make_env  # noqa: E402
from agent_tune.envs.bfcl.single_turn.entries import SINGLE_TURN_CATEGORIES, single_turn_ids  # noqa: E402
from agent_tune.envs.bfcl.single_turn.splits import category_split, single_turn_split_ids  # noqa: E402
from agent_tune.envs.tasks import row_task  # noqa: E402
from agent_tune.envs.toolcall.rlla import RllaFormatError, load_rlla  # noqa: E402
from agent_tune.utils.rows import prompt_messages  # noqa: E402
from data_preprocess.toolcall import main  # noqa: E402

CATS = ["simple_python", "live_parallel", "irrelevance"]


def test_single_turn_splits_are_disjoint_complete_and_seeded():
    for cat in SINGLE_TURN_CATEGORIES:
        parts = category_split(cat, seed=42)
        ids = [t for split in parts.values() for t in split]
        assert sorted(ids) == sorted(single_turn_ids(cat)) and len(set(ids)) == len(ids), cat
        assert all(parts[s] for s in ("train", "val", "test")), cat  # every split holds every category
        assert category_split(cat, seed=42) == parts  # same seed, same splits
    assert category_split("simple_python", seed=1) != category_split("simple_python", seed=42)
    # a category's split does not depend on which other categories are asked for
    alone = single_turn_split_ids("test", ["live_parallel"], 7)
    assert [t for t in single_turn_split_ids("test", CATS, 7) if t.startswith("live_parallel_")] == alone


def test_bfcl_rows_name_their_entry_and_prompt_what_the_env_shows(tmp_path):
    assert main(["--source", "bfcl", "--categories", *CATS, "--out", str(tmp_path / "a")]) == 0
    assert main(["--source", "bfcl", "--categories", *CATS, "--out", str(tmp_path / "b")]) == 0
    seen: dict[str, str] = {}
    for split in ("train", "val", "test"):
        rows = pd.read_parquet(tmp_path / "a" / f"{split}.parquet")
        again = pd.read_parquet(tmp_path / "b" / f"{split}.parquet")
        ids = [dict(r)["id"] for r in rows["extra_info"]]
        assert ids == [dict(r)["id"] for r in again["extra_info"]]  # deterministic
        assert {i.rsplit("_", 1)[0] for i in ids} == set(CATS)
        for test_id in ids:
            assert test_id not in seen, f"{test_id} in {seen.get(test_id)} and {split}"
            seen[test_id] = split
        for _, row in rows.iloc[:: max(1, len(rows) // 5)].iterrows():
            extra = dict(row["extra_info"])
            env_spec = dict(extra["env"])
            # the entry is the row's task; the env needs no kwargs of its own (no shots)
            assert env_spec["name"] == "toolcall" and env_spec["kwargs"] is None
            assert dict(row_task(extra)) == {"test_id": extra["id"]}
            assert row["data_source"] == f"toolcall/{extra['category']}" and extra["split"] == split
            assert extra["id"].startswith(f"{extra['category']}_")
            env = make_env("toolcall", **dict(env_spec["kwargs"] or {}))
            obs = env.reset(**row_task(extra))  # as the agent loop resets it
            assert prompt_messages(row["prompt"]) == obs.messages
    assert sorted(seen) == sorted(t for c in CATS for t in single_turn_ids(c))


def rlla_record(i: int, calls: list[dict] | None = None) -> dict:
    tools = (
        "**Available Tools**\nIn your response, you can use the following tools:\n"
        f"1. Name: Get Weather {i}\nDescription: Weather of a city.\n"
        'Parameters: {"city": {"description": "City name", "type": "string", "default": ""}, '
        '"days": {"description": "How many days", "type": "int", "default": "1"}}\n'
        "2. Name: noop\nDescription: Does nothing.\nParameters: {}\n\n"
        "**Steps for Each Turn**\n1. **Think:** ...\n\n**Output Format**\n<tool_call> ... </tool_call>"
    )
    body = "\n".join(json.dumps({"name": c["name"], "parameters": c["arguments"]}) for c in calls or [])
    output = "<think> I could write <tool_call> here in passing. </think>\n"
    output += f"<tool_call>\n{body}\n</tool_call>" if calls else "<response> Which city? </response>"
    return {"instruction": "You are a helpful assistant.\n\n" + tools,
            "input": f"**Dialogue Records History**\n<user> Weather {i}? </user>", "output": output}


RECORDS = [rlla_record(0, [{"name": "Get Weather 0", "arguments": {"city": "Paris", "days": 2}}]),
           rlla_record(1, [{"name": "Get Weather 1", "arguments": {"city": "Rome"}},
                           {"name": "noop", "arguments": {}}]),
           rlla_record(2)]


def as_parquet(records: list[dict], path: Path) -> Path:
    """The processed form, as ToolRL's dataset/rlla_4k_raw/rlla.py writes it."""
    rows = [{"data_source": "rlla",
             "prompt": [{"role": "system", "content": r["instruction"]}, {"role": "user", "content": r["input"]}],
             "ability": "math", "reward_model": {"style": "rule", "ground_truth": r["output"]},
             "extra_info": {"split": "train", "index": i, **r}} for i, r in enumerate(records)]
    pd.DataFrame(rows).to_parquet(path)
    return path


def test_rlla_raw_json_jsonl_and_parquet_read_alike(tmp_path):
    raw = tmp_path / "rlla_rl.json"
    raw.write_text(json.dumps(RECORDS))
    jsonl = tmp_path / "rlla.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in RECORDS))
    forms = [load_rlla(raw), load_rlla(jsonl), load_rlla(as_parquet(RECORDS, tmp_path / "train.parquet"))]
    for tasks in forms:
        assert [t["ground_truth"] for t in tasks] == [
            [{"name": "Get Weather 0", "arguments": {"city": "Paris", "days": 2}}],
            [{"name": "Get Weather 1", "arguments": {"city": "Rome"}}, {"name": "noop", "arguments": {}}],
            [],
        ]
        assert [t["question"] for t in tasks] == [r["input"] for r in RECORDS]
        fn = tasks[0]["tools"][0]["function"]
        assert fn["name"] == "Get Weather 0" and fn["description"] == "Weather of a city."
        assert fn["parameters"]["properties"] == {
            "city": {"type": "string", "description": "City name"},
            "days": {"type": "integer", "description": "How many days", "default": "1"}}
        assert [t["function"]["name"] for t in tasks[2]["tools"]] == ["Get Weather 2", "noop"]
    assert [{k: v for k, v in t.items() if k != "id"} for t in forms[0]] == \
        [{k: v for k, v in t.items() if k != "id"} for t in forms[2]]


def test_rlla_rows_play_in_the_env(tmp_path):
    raw = tmp_path / "rlla_rl.json"
    raw.write_text(json.dumps(RECORDS))
    assert main(["--source", "rlla", str(raw), "--val-size", "1", "--out", str(tmp_path / "o")]) == 0
    rows = pd.concat([pd.read_parquet(tmp_path / "o" / f"{s}.parquet") for s in ("train", "val")])
    assert len(rows) == 3
    assert sorted(dict(e)["id"] for e in rows["extra_info"]) == [f"rlla_rl.json record {i}" for i in range(3)]
    assert set(rows["data_source"]) == {"toolcall/rlla"}
    for _, row in rows.iterrows():
        extra = dict(row["extra_info"])
        task = row_task(extra)
        env = make_env(dict(extra["env"])["name"])
        obs = env.reset(**task)
        assert obs.messages == prompt_messages(row["prompt"]) == [{"role": "user", "content": task["question"]}]
        gt = json.loads(task["ground_truth"])
        answer = "\n".join(f"<tool_call>\n{json.dumps(c)}\n</tool_call>" for c in gt) or "Which city?"
        assert env.step(answer).info["accuracy"] == 1.0
    keep = ["--source", "rlla", str(raw), "--val-size", "1", "--keep-instruction", "--out", str(tmp_path / "k")]
    assert main(keep) == 0
    extra = dict(pd.read_parquet(tmp_path / "k" / "train.parquet").iloc[0]["extra_info"])
    roles = [m["role"] for m in make_env("toolcall").reset(**row_task(extra)).messages]
    assert roles == ["system", "user"]


@pytest.mark.parametrize("drop, message", [
    ("output", "rlla_rl.json record 1: missing field 'output'"),
    ("instruction", "rlla_rl.json record 1: missing field 'instruction'"),
])
def test_rlla_json_missing_field_names_record_and_field(tmp_path, drop, message):
    records = [dict(r) for r in RECORDS]
    del records[1][drop]
    path = tmp_path / "rlla_rl.json"
    path.write_text(json.dumps(records))
    with pytest.raises(RllaFormatError, match=message):
        load_rlla(path)
    with pytest.raises(SystemExit, match=message):
        main(["--source", "rlla", str(path), "--val-size", "1", "--out", str(tmp_path / "o")])
    assert not (tmp_path / "o").exists()  # nothing written


def test_rlla_parquet_missing_column_or_value_names_it(tmp_path):
    path = as_parquet(RECORDS, tmp_path / "train.parquet")
    df = pd.read_parquet(path)
    df.drop(columns=["reward_model"]).to_parquet(tmp_path / "nocol.parquet")
    with pytest.raises(RllaFormatError, match="nocol.parquet: missing column 'reward_model'"):
        load_rlla(tmp_path / "nocol.parquet")
    rows = df.to_dict("records")
    rows[2]["reward_model"] = {"style": "rule", "ground_truth": None}
    pd.DataFrame(rows).to_parquet(tmp_path / "nogt.parquet")
    with pytest.raises(RllaFormatError, match=r"nogt.parquet row 2: missing column 'reward_model.ground_truth'"):
        load_rlla(tmp_path / "nogt.parquet")


def test_jsonl_task_missing_field_names_line_and_field(tmp_path):
    path = tmp_path / "tasks.jsonl"
    good = {"question": "q", "tools": [], "ground_truth": []}
    path.write_text(json.dumps(good) + "\n" + json.dumps({"question": "q", "tools": []}) + "\n")
    with pytest.raises(SystemExit, match="tasks.jsonl line 2: missing field 'ground_truth'"):
        main(["--input", str(path), "--val-size", "0", "--out", str(tmp_path / "o")])
