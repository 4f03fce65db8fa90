"""The one task-selection rule (`select_tasks`) over the built-in catalogues, strict resets, and eval/ naming no env."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from agent_tune.envs import make_env
from agent_tune.envs.registry import get_env_class
from agent_tune.envs.tasks import catalogue_rows, resolve_categories, row_env, row_task, select_tasks

ROOT = Path(__file__).resolve().parents[2]


def ids(tasks) -> list[str]:
    return [t.id for t in tasks]


def test_bfcl_default_is_the_four_scored_categories_in_full() -> None:
    tasks = select_tasks("bfcl")
    assert len(tasks) == 800 and {t.category for t in tasks} == {
        "multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context"}
    assert len(select_tasks("bfcl", "all")) == 1000  # composite too, when asked for a split
    assert ids(select_tasks("bfcl", categories=["composite"]))[:1] == ["multi_turn_composite_0"]


def test_categories_by_their_end_suite_ids_and_limit_per_category() -> None:
    test = select_tasks("bfcl", "test", categories=["base", "miss_func"])
    assert {t.category for t in test} == {"multi_turn_base", "multi_turn_miss_func"} and len(test) == 150
    assert ids(test)[:75] == [t.id for t in test if t.category == "multi_turn_base"]  # grouped in the order given
    assert select_tasks("bfcl", suite="multi_turn", limit=2) == select_tasks("bfcl", limit=2)
    assert len(select_tasks("bfcl", limit=2)) == 8
    picked = select_tasks("bfcl", ids=["multi_turn_base_12", "multi_turn_long_context_3", "multi_turn_base_12"])
    assert ids(picked) == ["multi_turn_base_12", "multi_turn_long_context_3"]
    assert select_tasks("toolcall", suite="live", limit=1)[0].category == "live_simple"


@pytest.mark.parametrize("kwargs, message", [
    ({"categories": ["bass"]}, "category 'bass' is not one"),
    ({"categories": ["simple"]}, "category 'simple' is not one"),  # no prefix shared by toolcall's categories
    ({"suite": "nope"}, "no suite 'nope'"),
    ({"ids": ["multi_turn_base_9999"]}, "no task 'multi_turn_base_9999'"),
    ({"categories": ["multiple"], "ids": ["multiple_0"]}, "choose one of"),
    ({"limit": 0}, "limit must be >= 1"),
])
def test_bad_selections_fail_naming_what(kwargs, message) -> None:
    env = "toolcall" if kwargs.get("categories") == ["simple"] else "bfcl"
    with pytest.raises(ValueError, match=message):
        select_tasks(env, **kwargs)


def test_resolve_categories_by_name_or_without_the_shared_prefix() -> None:
    assert resolve_categories("toolcall", ["multiple"], ["live_multiple", "multiple"]) == ["multiple"]
    assert resolve_categories("bfcl", ["base", "multi_turn_base"], ["multi_turn_base", "multi_turn_miss_func"]) == [
        "multi_turn_base"]
    with pytest.raises(ValueError, match="'simple' is not one"):
        resolve_categories("toolcall", ["simple"], ["simple_python", "live_simple"])


def test_ids_search_every_split_and_the_eval_kwargs_apply() -> None:
    [val] = select_tasks("bfcl", "val", limit=1, categories=["base"])
    assert val.env_kwargs == {"eval_mode": True}  # validation rows score as the leaderboard does
    [train] = select_tasks("bfcl", "train", {"shots": 1}, categories=["base"], limit=1)
    assert len(train.env_kwargs["shots"]) == 1 and train.id not in train.env_kwargs["shots"]
    assert get_env_class("bfcl").catalogue.eval_kwargs == {"eval_mode": True}
    [mock] = select_tasks("tau2", ids=["tau2/mock/create_task_1"])  # mock is only in tau2's `all` split
    assert mock.kwargs == {"domain": "mock", "task_id": "create_task_1"}


@pytest.mark.parametrize("env, split, options, extra", [
    ("bfcl", "val", {}, {}),
    ("toolcall", "test", {"categories": ["simple_python"]}, {}),
    ("toolcall", "train", {"source": "arith", "n": 4, "val_size": 1}, {}),
    ("tau2", "test", {}, {"user": {"kind": "scripted", "turns": ["Hi."]}}),
])
def test_every_built_in_catalogue_row_plays_and_resets_are_strict(env, split, options, extra) -> None:
    tasks = select_tasks(env, split, options, limit=1)[:1]
    [row] = catalogue_rows(env, split, options, extra, tasks)
    info = row["extra_info"]
    assert info["id"] == tasks[0].id and info["split"] == split and row["data_source"].startswith(f"{env}/")
    instance = make_env(env, **{**extra, **(row_env(info)[1] or {})})
    obs = instance.reset(**row_task(info))
    assert obs.messages[: len(row["prompt"])] == row["prompt"]  # tau2's first observation adds the user's turn
    with pytest.raises(TypeError, match="taskid"):
        make_env(env, **{**extra, **(row_env(info)[1] or {})}).reset(**row_task(info), taskid="x")


def test_eval_names_no_env() -> None:
    """eval/ reaches env specifics only through the env class's hooks: it imports no env module by name."""
    named = []
    for path in sorted((ROOT / "agent_tune" / "eval").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            modules = [node.module or ""] if isinstance(node, ast.ImportFrom) else (
                [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            named += [f"{path.name}: {m}" for m in modules
                      if m.startswith(("agent_tune.envs.bfcl", "agent_tune.envs.tau2", "agent_tune.envs.toolcall.env",
                                       "agent_tune.envs.retool.env", "bfcl_eval", "tau2"))]
    assert named == []
