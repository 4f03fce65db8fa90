"""Task ids from a file (agent_tune/envs/id_files.py) for ``agent-tune data`` and ``agent-tune eval``: plain ids,
agent-tune's own rows, and the ``bfcl_*.jsonl`` rows T3RL's BFCL preprocessing writes (their id in
``metadata.bfcl_task.id``), so a run keeps T3RL's splits; unknown ids stop the command, named."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pandas as pd
import pytest

from agent_tune.data_cli import main as data_main
from agent_tune.envs.id_files import IdFileError, read_id_file, task_ids
from agent_tune.envs.tasks import catalogue_tasks, select_tasks
from agent_tune.eval.cli import main as eval_main


def t3rl_row(test_id: str, split: str = "train") -> dict:
    """A row in the shape T3RL's preprocessing writes (prompt, then metadata with the BFCL task)."""
    category = test_id.rsplit("_", 1)[0]
    return {"prompt": [{"role": "system", "content": "..."}, {"role": "user", "content": "..."}],
            "metadata": {"tools": [], "data_source": category, "ability": "multi_turn_function_calling",
                         "split": split, "index": test_id,
                         "bfcl_task": {"id": test_id, "initial_config": {}, "involved_classes": [],
                                       "ground_truth": [], "processed_question": [], "question": [],
                                       "split": split}}}


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_plain_ids_comments_and_blank_lines(tmp_path: Path) -> None:
    f = tmp_path / "ids.txt"
    f.write_text("# T3RL's test split\nmulti_turn_base_1\n\n  multi_turn_miss_func_1  \nmulti_turn_base_1\n")
    assert read_id_file(f) == ["multi_turn_base_1", "multi_turn_miss_func_1"]  # in order, once each


def test_jsonl_rows_of_t3rl_agent_tune_and_flat_records(tmp_path: Path) -> None:
    rows = [t3rl_row("multi_turn_base_3"), {"extra_info": {"id": "multi_turn_base_5", "index": 0}},
            {"id": "multi_turn_long_context_7"}, {"metadata": {"index": "multi_turn_miss_param_9"}}]
    f = write_jsonl(tmp_path / "bfcl_train.jsonl", rows)
    with f.open("a") as out:
        out.write("multi_turn_base_11\n")  # a plain id among the rows
    assert read_id_file(f) == ["multi_turn_base_3", "multi_turn_base_5", "multi_turn_long_context_7",
                               "multi_turn_miss_param_9", "multi_turn_base_11"]


@pytest.mark.parametrize("text,words", [
    ('{"prompt": []}\n', "ids.jsonl:1: a JSON row without a task id (looked for id, extra_info.id, "
                         "metadata.bfcl_task.id, metadata.index)"),
    ('multi_turn_base_1\n{"id": \n', "ids.jsonl:2: not a JSON object"),
    ("# nothing\n\n", "holds no ids"),
])
def test_a_file_without_ids_is_refused_naming_the_line(tmp_path: Path, text: str, words: str) -> None:
    f = tmp_path / "ids.jsonl"
    f.write_text(text)
    with pytest.raises(IdFileError, match=words.replace("(", r"\(").replace(")", r"\)")):
        read_id_file(f)


def test_ids_or_a_file_not_both(tmp_path: Path) -> None:
    with pytest.raises(IdFileError, match="no such file"):
        task_ids(None, tmp_path / "missing.txt")
    with pytest.raises(ValueError, match="--ids or --ids-file, not both"):
        task_ids(["a"], tmp_path / "ids.txt")
    assert task_ids(None, None) is None and task_ids(["b", "a"], None) == ["b", "a"]


def test_data_keeps_the_files_tasks_in_its_order_as_the_split_gives_them(tmp_path: Path, capsys) -> None:
    val = [t.id for t in catalogue_tasks("bfcl", "val")]
    chosen = [val[5], val[0], val[2]]
    f = write_jsonl(tmp_path / "bfcl_val.jsonl", [t3rl_row(i, "val") for i in chosen])
    assert data_main(["--env", "bfcl", "--split", "val", "--ids-file", str(f), "--out", str(tmp_path / "d")]) == 0
    assert "3 val rows" in capsys.readouterr().out
    frame = pd.read_parquet(tmp_path / "d" / "val.parquet")
    assert [e["id"] for e in frame["extra_info"]] == chosen
    assert all(json.loads(e["env"]["kwargs"]) == {"eval_mode": True} for e in frame["extra_info"])  # val's rule


def test_data_refuses_unknown_ids_naming_them_and_where_they_are(tmp_path: Path, capsys) -> None:
    test_id = next(t.id for t in catalogue_tasks("bfcl", "test"))
    f = tmp_path / "ids.txt"
    f.write_text(f"multi_turn_base_9999\n{test_id}\n")
    out = tmp_path / "d"
    assert data_main(["--env", "bfcl", "--split", "train", "--ids-file", str(f), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"no task 'multi_turn_base_9999', {test_id!r} in split 'train'" in err
    assert "1 of them in split 'test'" in err and not out.exists()
    assert data_main(["--env", "bfcl", "--split", "train", "val", "--ids", test_id, "--out", str(out)]) == 2
    assert "give one --split" in capsys.readouterr().err


def test_t3rl_split_files_select_the_same_entries_as_the_seed_42_splits(tmp_path: Path) -> None:
    """T3RL's preprocessing shuffles the scenario numbers 0-199 with Python's ``random`` seeded 42 and takes 100 /
    25 / 75 of them for train / val / test, every scored category of a scenario with it; the bfcl catalogue draws
    seed 42 alike, so T3RL's files name the entries of the same-named splits and each selects within it."""
    numbers = list(range(200))
    random.Random(42).shuffle(numbers)
    drawn = {"train": numbers[:100], "val": numbers[100:125], "test": numbers[125:]}
    for split, scenarios in drawn.items():
        assert {int(t.id.rsplit("_", 1)[1]) for t in catalogue_tasks("bfcl", split)} == set(scenarios)
    for split in ("train", "train_base", "val", "test"):
        ids = [t.id for t in catalogue_tasks("bfcl", split)][::-1]
        f = write_jsonl(tmp_path / f"bfcl_{split}.jsonl", [t3rl_row(i, split) for i in ids])
        assert [t.id for t in select_tasks("bfcl", split, ids=read_id_file(f))] == ids


def test_eval_plays_the_files_ids(tmp_path: Path, monkeypatch) -> None:
    import agent_tune.eval.evaluate as evaluate_module

    played = {}

    def fake_evaluate(settings, test_ids, output, tokenizer=None, task_rows=None):
        played["ids"] = list(test_ids)
        return evaluate_module.EvalOutcome(output=Path(output), records=[], ran=0, skipped=0, failed=[],
                                           wall_time_s=0.0)

    monkeypatch.setattr(evaluate_module, "evaluate", fake_evaluate)
    f = write_jsonl(tmp_path / "bfcl_test.jsonl", [t3rl_row("multi_turn_miss_param_1", "test"),
                                                    t3rl_row("multi_turn_base_1", "test")])
    argv = ["--base-url", "http://127.0.0.1:9/v1", "--model", "x", "--ids-file", str(f),
            "--output", str(tmp_path / "r.jsonl")]
    assert eval_main(argv) == 0
    assert played["ids"] == ["multi_turn_miss_param_1", "multi_turn_base_1"]


def test_eval_refuses_unknown_ids_before_any_request(tmp_path: Path, capsys) -> None:
    f = tmp_path / "ids.txt"
    f.write_text("multi_turn_base_1\nmulti_turn_base_777\nsimple_python_3\n")
    argv = ["--base-url", "http://127.0.0.1:9/v1", "--model", "x", "--ids-file", str(f),
            "--output", str(tmp_path / "r.jsonl")]
    assert eval_main(argv) != 0
    err = capsys.readouterr().err
    assert "no task 'multi_turn_base_777', 'simple_python_3' in any split" in err
    assert "no OpenAI-compatible server" not in err and not (tmp_path / "r.jsonl").exists()
    assert eval_main([*argv, "--ids", "multi_turn_base_1"]) != 0
    assert "not both" in capsys.readouterr().err
