"""Dataset-row tasks (skyrl, agent_r1, verl_tools, verifiers, nemo_gym): a task carries the row's fields as its own
reset kwargs, and rows of differently shaped ``extra_info`` / ``reward_spec`` go through the files the trainer
reads (parquet, JSONL, verl's own dataset of several files) unchanged; the form before (``{"row": JSON text}``)
still resets the same episode, with a ``DeprecationWarning``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from agent_tune.data_cli import main as data_main
from agent_tune.envs import make_env
from agent_tune.envs.agent_r1.loading import forget_shared
from agent_tune.envs.tasks import dataset_row_kwargs, row_env, row_task, select_tasks, task_fields
from tests.envs.test_agent_r1_env import RETOOL

HERE = "tests.envs.test_row_tasks"
SEEN: list[dict[str, Any]] = []


def recording_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: Any = None) -> float:
    """A verl-style reward function that keeps what it was given."""
    SEEN.append({"data_source": data_source, "ground_truth": ground_truth, "extra_info": extra_info})
    return 1.0 if solution_str.strip() == f"\\boxed{{{ground_truth}}}" else 0.0


# Rows of three data sources in one file, each with its own shape of extra_info and ground truth (as verl-format
# preprocessing scripts of different recipes write them): a nested mapping, a list, none at all.
VERL_ROWS = [
    {"data_source": "toy/mult", "prompt": [{"role": "user", "content": "What is 6 * 7?"}], "ability": "math",
     "reward_model": {"style": "rule", "ground_truth": "42"},
     "extra_info": {"split": "train", "index": 0, "tools_kwargs": {"python": {"create_kwargs": {"n": 1}}}}},
    {"data_source": "toy/list", "prompt": "Sort 3 1 2.",
     "reward_model": {"ground_truth": [1, 2, 3]},
     "extra_info": {"split": "train", "need": ["sort", {"stable": True}], "weight": 0.5}},
    {"data_source": "toy/bare", "prompt": [{"role": "system", "content": "Be brief."},
                                           {"role": "user", "content": "Say 7."}],
     "reward_model": {"ground_truth": "7", "style": "rule"}},
]
SKYRL_ROWS = [
    {"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": "What is 6 * 7?"}], "env_class": "gsm8k",
     "reward_spec": {"method": "rule", "ground_truth": "42"}, "extra_info": {"split": "train", "index": 0}},
    {"data_source": "mine", "prompt": [{"role": "user", "content": "What is 2 + 3?"}], "env_class": "gsm8k",
     "reward_spec": {"ground_truth": "5"}, "extra_info": {"split": "train", "tags": ["a", "b"], "depth": {"x": [1]}},
     "level": 3},
]


@pytest.fixture()
def sources(tmp_path: Path) -> dict[str, Path]:
    """The source datasets as JSONL (one row per line, each with its own keys: nothing pads them)."""
    out = {}
    for name, rows in (("verl", VERL_ROWS), ("skyrl", SKYRL_ROWS)):
        out[name] = tmp_path / f"{name}.jsonl"
        out[name].write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return out


@pytest.fixture(autouse=True)
def fresh_builds():
    forget_shared()
    SEEN.clear()
    yield
    forget_shared()


def _data(env: str, source: Path, out: Path) -> list[dict[str, Any]]:
    """``agent-tune data`` for ``env``'s train split of ``source``; the rows of the parquet it writes."""
    assert data_main(["--env", env, "--split", "train", "--out", str(out / env),
                      "--options", json.dumps({"path": str(source)})]) == 0
    return pq.read_table(out / env / "train.parquet").to_pylist()


def test_a_task_carries_the_rows_fields_as_its_own_keys(sources) -> None:
    agent_r1 = select_tasks("agent_r1", "train", {"path": str(sources["verl"])})
    assert [t.kwargs for t in agent_r1] == [{k: r[k] for k in ("prompt", "reward_model", "data_source",
                                                               "extra_info") if k in r} for r in VERL_ROWS]
    verl_tools = select_tasks("verl_tools", "train", {"path": str(sources["verl"])})
    assert [t.kwargs for t in verl_tools] == [t.kwargs for t in agent_r1]  # the columns reset reads, not `ability`
    skyrl = select_tasks("skyrl", "train", {"path": str(sources["skyrl"])})
    assert [t.kwargs for t in skyrl] == [{k: v for k, v in r.items() if k != "env_class"} for r in SKYRL_ROWS]
    assert [t.env_kwargs for t in skyrl] == [{"env": "gsm8k"}] * 2


def test_differently_shaped_rows_round_trip_through_one_parquet_and_jsonl(sources, tmp_path) -> None:
    """The wrapping's reason (a parquet column cannot hold differently shaped mappings) does not apply to a task:
    ``extra_info.task`` is one JSON text per row, so each row's task comes back exactly, none padded with the
    others' keys."""
    for env, source in (("agent_r1", "verl"), ("verl_tools", "verl"), ("skyrl", "skyrl")):
        tasks = select_tasks(env, "train", {"path": str(sources[source])})
        read = _data(env, sources[source], tmp_path)
        lines = [json.loads(line) for line in (tmp_path / env / "train.jsonl").read_text().splitlines()]
        assert len(read) == len(lines) == len(tasks) >= 2
        for task, row, line in zip(tasks, read, lines):
            assert row_task(row["extra_info"]) == row_task(line["extra_info"]) == task.kwargs, env
        shapes = {json.dumps(sorted(t.kwargs.get("extra_info") or {})) for t in tasks}
        assert len(shapes) == len(tasks), env  # the rows really differ in shape


def test_verl_reads_the_row_tasks_of_several_files_as_one_dataset(sources, smol_tok, tmp_path) -> None:
    """The trainer's own reader: verl's ``RLHFDataset`` over the agent_r1, verl_tools and skyrl files together."""
    pytest.importorskip("verl")
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    expected = []
    for env, source in (("agent_r1", "verl"), ("verl_tools", "verl"), ("skyrl", "skyrl")):
        _data(env, sources[source], tmp_path)
        expected += [(env, t.kwargs) for t in select_tasks(env, "train", {"path": str(sources[source])})]
    files = [str(tmp_path / env / "train.parquet") for env in ("agent_r1", "verl_tools", "skyrl")]
    config = OmegaConf.create({"max_prompt_length": 4096, "filter_overlong_prompts": False,
                               "cache_dir": str(tmp_path / "cache")})
    dataset = RLHFDataset(files, smol_tok, config)
    assert len(dataset) == len(expected)
    for i, (env, kwargs) in enumerate(expected):
        extra = dataset[i]["extra_info"]
        assert row_env(extra)[0] == env and row_task(extra) == kwargs, i


def test_a_row_plays_as_its_task_and_the_old_wrapped_row_the_same(sources, tmp_path) -> None:
    """agent_r1: the reward function gets each row's own extra_info and ground truth, from the task, from the
    written row, and from the old ``{"row": JSON text}`` form (deprecated)."""
    tasks = select_tasks("agent_r1", "train", {"path": str(sources["verl"])})
    read = _data("agent_r1", sources["verl"], tmp_path)
    env = make_env("agent_r1", **{**RETOOL, "reward_fn": f"{HERE}:recording_score"})
    played = []
    for task, row in zip(tasks, read):
        old = {"row": json.dumps(task.kwargs)}
        for kwargs in (task.kwargs, row_task(row["extra_info"]), old):
            if "row" in kwargs:
                with pytest.warns(DeprecationWarning, match="reset\\(row=...\\) is deprecated"):
                    obs = env.reset(**kwargs)
            else:
                obs = env.reset(**kwargs)
            end = env.step(f"\\boxed{{{task.kwargs['reward_model']['ground_truth']}}}")
            played.append((obs.messages, end.reward))
        assert played[-1] == played[-2] == played[-3]
    assert [s["extra_info"] for s in SEEN] == [r.get("extra_info") for r in VERL_ROWS for _ in range(3)]
    assert [s["ground_truth"] for s in SEEN] == [r["reward_model"]["ground_truth"] for r in VERL_ROWS for _ in range(3)]
    assert {reward for _, reward in played} == {1.0}


def test_skyrl_rows_reset_from_their_fields(sources, tmp_path) -> None:
    pytest.importorskip("skyrl_gym")
    read = _data("skyrl", sources["skyrl"], tmp_path)
    for row, answer in zip(read, ("#### 42", "#### 5")):
        name, kwargs = row_env(row["extra_info"])
        env = make_env(name, **kwargs)
        task = row_task(row["extra_info"])
        assert env.reset(**task).messages == task["prompt"]
        assert env.step(answer).reward == 1.0
        env.close()


def test_the_shared_reader() -> None:
    assert task_fields("x env", None, {"a": 1}) == {"a": 1}
    with pytest.warns(DeprecationWarning):
        assert task_fields("x env", '{"a": 1, "b": 2}', {"b": 3}) == {"a": 1, "b": 3}  # the fields over the row's
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match="x env: row must be a mapping"):
        task_fields("x env", "[1, 2]", {})
    assert dataset_row_kwargs({"t": (1, 2), "n": None}, "x env", "f row 1") == {"t": [1, 2], "n": None}
    with pytest.raises(ValueError, match="x env: f row 3 is not JSON-serialisable"):
        dataset_row_kwargs({"b": b"\x00"}, "x env", "f row 3")
