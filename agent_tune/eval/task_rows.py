"""Evaluation entries from training rows: ``agent-tune eval --rows FILE`` plays any env's data rows.

A training row (``data_preprocess/*.py``, what verl reads) names its environment in
``extra_info.env = {name, kwargs}``; the agent loop builds that env and resets it with the row's
``extra_info`` as the task (:mod:`verl_ext.agent_loop`). :func:`load_task_rows` reads such rows
(``.parquet`` or ``.jsonl``) so the eval plays them the same way, for any registered env (BFCL, ReTool,
toolcall, ...; a row's task as :func:`agent_tune.envs.tasks.row_task` reads it): the entry id is the row's
``extra_info.test_id`` or ``extra_info.id`` when it has one, else
``<file stem>:<extra_info.index or row number>``; the category is ``extra_info.category`` or the row's
``data_source`` or the env name. This is how rejection sampling runs on training data
(``examples/run_rft.sh``).
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from agent_tune.envs.catalogue import Task
from agent_tune.envs.registry import get_env_class
from agent_tune.envs.tasks import eval_kwargs, row_env, row_task


@dataclass(frozen=True)
class TaskRow:
    """One playable row: the env, its kwargs, the reset task and the row's category."""

    env: str
    kwargs: dict[str, Any]
    task: dict[str, Any]
    category: str


def load_task_rows(path: str | Path) -> dict[str, TaskRow]:
    """Entry id -> :class:`TaskRow` for every row of ``path`` (row order kept).

    Raises:
        ValueError: a row without ``extra_info.env.name``, an env not registered, two rows with one id, an
            unreadable file.
    """
    path = Path(path)
    if path.suffix == ".parquet":
        import pandas as pd

        records = json.loads(pd.read_parquet(path).to_json(orient="records"))
    elif path.suffix in (".jsonl", ".json"):
        with open(path, encoding="utf-8") as f:
            records = [json.loads(line) for line in f if line.strip()]
    else:
        raise ValueError(f"--rows {path}: expected a .parquet or .jsonl file of training rows")
    out: dict[str, TaskRow] = {}
    for i, record in enumerate(records):
        extra = record.get("extra_info") or {}
        try:
            name, kwargs = row_env(extra)
        except ValueError:
            raise ValueError(f"--rows {path}: row {i} has no extra_info.env.name (not an agent-tune training row)") \
                from None
        get_env_class(name)  # an unknown env fails here, naming the registered ones
        rid = extra.get("test_id") or extra.get("id")
        rid = str(rid) if rid is not None else f"{path.stem}:{extra.get('index', i)}"
        if rid in out:
            raise ValueError(f"--rows {path}: two rows have the id {rid!r}")
        category = extra.get("category") or record.get("data_source") or name
        out[rid] = TaskRow(name, kwargs, row_task(extra), str(category))
    if not out:
        raise ValueError(f"--rows {path}: no rows")
    return out


def catalogue_task_rows(env: str, tasks: Sequence[Task]) -> dict[str, TaskRow]:
    """Entry id -> :class:`TaskRow` for an env's catalogue ``tasks`` (``agent-tune eval --env NAME``,
    :func:`agent_tune.envs.tasks.select_tasks`): each task's constructor kwargs under the env's
    catalogue's ``eval_kwargs`` (BFCL's leaderboard rules)."""
    fixed = eval_kwargs(env)
    return {t.id: TaskRow(env, {**t.env_kwargs, **fixed}, dict(t.kwargs), t.category or env) for t in tasks}


def row_env_kwargs(row: TaskRow, tool_parser: str, reasoning_parser: str,
                   defaults: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The env's constructor kwargs as the agent loop builds them: parser names when the env takes them,
    then ``defaults`` (``--env-kwargs``), then the row's own kwargs."""
    params = inspect.signature(get_env_class(row.env).__init__).parameters
    kwargs: dict[str, Any] = {}
    for key, value in (("tool_parser", tool_parser), ("reasoning_parser", reasoning_parser)):
        if key in params:
            kwargs[key] = value
    kwargs.update(defaults or {})
    kwargs.update(row.kwargs)
    return kwargs
