"""From an env's task catalogue to verl rows and back: the one place a row's task is written and read.

An env class may declare a catalogue (:attr:`BaseToolEnv.splits` and :meth:`BaseToolEnv.tasks`). A row written
from it (:func:`catalogue_rows`, ``agent-tune data``) names its env and carries the task apart from the row's own
bookkeeping::

    extra_info = {"index": i, "split": "train", "id": task.id, "category": task.category,
                  "env": {"name": NAME, "kwargs": task.env_kwargs or None}, "task": task.kwargs}

so ``reset`` receives exactly ``task.kwargs`` (:func:`row_task`). Rows of the older ``data_preprocess`` scripts
keep the task's fields flat in ``extra_info`` next to the bookkeeping; :func:`row_task` hands those over whole.
"""

from __future__ import annotations

import inspect
from typing import Any, Mapping

from agent_tune.envs.base import BaseToolEnv, Task
from agent_tune.envs.registry import get_env_class

AGENT_NAME = "agent_tune"  # the verl agent loop that plays the rows (verl_ext.agent_loop)


def row_task(extra_info: Mapping[str, Any]) -> dict[str, Any]:
    """What ``reset`` receives for a row: its ``task`` (a catalogue row), else the whole ``extra_info``."""
    task = extra_info.get("task")
    return dict(task) if isinstance(task, Mapping) else dict(extra_info)


def catalogue_tasks(env: str, split: str, options: Mapping[str, Any] | None = None) -> list[Task]:
    """The tasks of ``split`` of env ``env`` (a registered name or ``module:Class`` path).

    Raises:
        ValueError: the env declares no catalogue, ``split`` is not one of its splits, an option it does not
            take (named), or two tasks with one id.
    """
    cls = get_env_class(env)
    if not cls.splits:
        raise ValueError(f"env {env!r} declares no task catalogue (BaseToolEnv.splits / tasks())")
    if split not in cls.splits:
        raise ValueError(f"env {env!r} has no split {split!r}; its splits: {', '.join(cls.splits)}")
    options = dict(options or {})
    try:
        inspect.signature(cls.tasks).bind(split, **options)
    except TypeError as exc:
        raise ValueError(f"env {env!r}: tasks() options: {exc}") from None
    tasks = cls.tasks(split, **options)
    seen: set[str] = set()
    for task in tasks:
        if task.id in seen:
            raise ValueError(f"env {env!r}: two tasks of split {split!r} have the id {task.id!r}")
        seen.add(task.id)
    return tasks


def catalogue_rows(env: str, split: str, options: Mapping[str, Any] | None = None,
                   env_kwargs: Mapping[str, Any] | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """verl rows for the tasks of ``split`` (the first ``limit``). Each row's ``prompt`` is the first observation's
    messages, from a reset of the env built with ``env_kwargs`` and the task's own (what verl's dataset measures
    for its prompt-length filter)."""
    rows = []
    for index, task in enumerate(catalogue_tasks(env, split, options)[:limit]):
        instance: BaseToolEnv = get_env_class(env)(**{**dict(env_kwargs or {}), **task.env_kwargs})
        try:
            prompt = instance.reset(**task.kwargs).messages
        finally:
            instance.close()
        category = task.category or env
        rows.append({
            "data_source": f"{env}/{category}" if category != env else env,
            "agent_name": AGENT_NAME,
            "prompt": prompt,
            "ability": "tool_use",
            "reward_model": {"style": "rule", "ground_truth": ""},
            "extra_info": {
                "index": index, "split": split, "id": task.id, "category": category,
                # null when the task needs no kwargs of its own (parquet cannot store an empty struct); read as {}
                "env": {"name": env, "kwargs": dict(task.env_kwargs) or None},
                "task": dict(task.kwargs),
            },
        })
    return rows
