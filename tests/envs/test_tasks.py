"""Task catalogues: from an env's tasks to verl rows (``agent-tune data``) and back to the env's reset kwargs."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from agent_tune.data_cli import main as data_main
from agent_tune.envs import make_env
from agent_tune.envs.base import BaseToolEnv, Observation
from agent_tune.envs.tasks import ROW_KEYS, catalogue_rows, catalogue_tasks, row_task
from agent_tune.eval.task_rows import catalogue_task_rows, load_task_rows
from examples.envs.calculator import CalculatorEnv, safe_eval

ENV = "examples.envs.calculator:CalculatorEnv"


class NoCatalogueEnv(BaseToolEnv):
    """An env that declares no task catalogue (every built-in env now has one)."""

    description = "an env without tasks"

    def reset(self, **task) -> Observation:
        raise NotImplementedError

    def act(self, step) -> None:
        raise NotImplementedError


NO_CATALOGUE = f"{__name__}:NoCatalogueEnv"  # a module:Class path, as a plug-in env is named


def test_calculator_catalogue_is_reproducible_and_test_is_held_out() -> None:
    tasks = CalculatorEnv.catalogue.tasks
    train, test = tasks("train", size=50), tasks("test", size=50)
    assert train == tasks("train", size=50) and train != tasks("train", size=50, seed=1)
    assert not {t.kwargs["question"] for t in train} & {t.kwargs["question"] for t in test}
    for t in test:
        assert t.kwargs["answer"] == safe_eval(t.kwargs["question"][len("What is "):-1])


@pytest.mark.parametrize("env, split, options, message", [
    (NO_CATALOGUE, "train", {}, "declares no task catalogue"),
    (ENV, "val", {}, "has no split 'val'; its splits: train, test"),
    (ENV, "test", {"sise": 3}, "sise"),
])
def test_bad_catalogue_requests_fail_naming_what(env, split, options, message) -> None:
    with pytest.raises(ValueError, match=message):
        catalogue_tasks(env, split, options)


def test_rows_carry_the_task_apart_and_reset_gets_exactly_it() -> None:
    rows = catalogue_rows(ENV, "test", {"size": 3})
    task = CalculatorEnv.catalogue.tasks("test", size=3)[2]
    extra = rows[2]["extra_info"]
    assert extra == {"index": 2, "split": "test", "id": task.id, "category": "arithmetic",
                     "env": {"name": ENV, "kwargs": None}, "task": json.dumps(task.kwargs)}
    assert row_task(extra) == task.kwargs
    env = make_env(ENV)
    assert rows[2]["prompt"] == env.reset(**row_task(extra)).messages
    assert rows[2]["agent_name"] == "agent_tune" and rows[2]["data_source"] == f"{ENV}/arithmetic"
    # an older flat row hands its extra_info over without the row's own bookkeeping
    flat = {"index": 0, "split": "train", "id": "multi_turn_base_0", "category": "multi_turn_base",
            "env": {"name": "bfcl", "kwargs": {}}, "test_id": "multi_turn_base_0", "eval_mode": False}
    assert set(ROW_KEYS) - {"task"} <= set(flat)
    assert row_task(flat) == {"test_id": "multi_turn_base_0", "eval_mode": False}


def test_data_command_writes_rows_the_eval_and_the_env_read(tmp_path, capsys) -> None:
    assert data_main(["--env", ENV, "--split", "train", "test", "--out", str(tmp_path), "--options",
                      '{"size": 5}']) == 0
    assert "5 train rows, 5 test rows" in capsys.readouterr().out
    frame = pd.read_parquet(tmp_path / "train.parquet")
    assert len(frame) == 5 and set(frame.columns) >= {"prompt", "data_source", "agent_name", "extra_info"}
    rows = load_task_rows(tmp_path / "test.parquet")
    assert rows == catalogue_task_rows(ENV, catalogue_tasks(ENV, "test", {"size": 5}))
    assert list(rows) == [t.id for t in CalculatorEnv.catalogue.tasks("test", size=5)]
    for row in rows.values():  # reset takes the task as written (a stray key would raise TypeError)
        make_env(row.env, **row.kwargs).reset(**row.task)
    lines = (tmp_path / "test.jsonl").read_text().splitlines()
    assert [json.loads(line)["extra_info"]["id"] for line in lines] == list(rows)


def test_data_command_fails_clearly(tmp_path, capsys) -> None:
    assert data_main(["--env", NO_CATALOGUE, "--split", "train", "--out", str(tmp_path)]) == 2
    assert "declares no task catalogue" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_rows_of_different_envs_read_as_one_table_keep_their_tasks_exact(tmp_path) -> None:
    """verl reads every training file as one table: mapping columns of different shapes would be merged, each row
    getting every key padded with null (a calculator task with the notes tasks' `kind`, a BFCL row's env kwargs
    with another's `shots`). Tasks and env kwargs are JSON text, so each row reads back exactly."""
    datasets = pytest.importorskip("datasets")
    from agent_tune.envs.tasks import row_env, select_tasks
    from agent_tune.utils.rows import write_rows

    notes = {"path": str(Path(__file__).resolve().parents[2] / "examples" / "mcp" / "tasks.jsonl")}
    parts = {"calc": catalogue_rows(ENV, "train", {"size": 2}),
             "notes": catalogue_rows("mcp", "train", notes, {"server": {"url": "http://127.0.0.1:1/mcp"}},
                                     select_tasks("mcp", "train", notes, limit=1)),
             "single": catalogue_rows("toolcall", "train", tasks=select_tasks(
                 "toolcall", "train", {"categories": ["simple_python"], "shots": 1}, limit=1)),
             "arith": catalogue_rows("toolcall", "train", {"source": "arith", "n": 1, "val_size": 1})}
    for name, rows in parts.items():
        write_rows(tmp_path / name, "train", rows)
    # as verl's RLHFDataset reads data.train_files: each file, then one concatenated table (which needs the files'
    # prompts to have one shape): the calculator's rows with the notes', BFCL single-turn rows (with shots: env kwargs)
    # with synthetic ones (none)
    for group in (("calc", "notes"), ("single", "arith")):
        table = datasets.concatenate_datasets([
            datasets.load_dataset("parquet", data_files=str(tmp_path / n / "train.parquet"))["train"] for n in group])
        written = [r for n in group for r in parts[n]]
        assert len(table) == len(written)
        for row, original in zip(table, written):
            assert row_task(row["extra_info"]) == row_task(original["extra_info"])
            assert row_env(row["extra_info"]) == row_env(original["extra_info"])
    assert [sorted(row_env(r["extra_info"])[1]) for r in table] == [["shots"], []]
