"""A verl tool recipe's dataset as the ``verl_tools`` env's catalogue.

verl's multi-turn recipes write rows of ``prompt`` (chat messages), ``data_source``, ``reward_model.ground_truth`` and
``extra_info`` (with the row's ``tools_kwargs`` and, optionally, ``tool_selection``). :func:`verl_rows_tasks` reads such
a file (``.parquet``, or ``.jsonl``: one row per line) into tasks whose reset kwargs are ``{"row": JSON text}`` (rows
of different recipes have differently shaped ``extra_info``; a parquet column cannot hold them), so
``agent-tune data --env verl_tools`` rewrites a recipe's rows for agent-tune's loop with nothing lost.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from agent_tune.envs.catalogue import Task
from agent_tune.utils.rows import read_rows as read_dataset


def verl_rows_tasks(split: str, path: str | Mapping[str, str]) -> list[Task]:
    """The rows of ``path[split]`` (one verl dataset file per split), or of ``path`` for any split, as tasks: id
    ``<file stem>:<row number>``, category the row's ``data_source``, reference its ``reward_model.ground_truth``."""
    if isinstance(path, Mapping):
        if split not in path:
            raise ValueError(f"verl_tools env: no file for split {split!r} in path (its splits: {', '.join(path)})")
        path = path[split]
    file = Path(path)
    tasks = []
    for number, row in enumerate(read_dataset(file, "verl_tools env"), 1):
        truth = (row.get("reward_model") or {}).get("ground_truth")
        tasks.append(Task(id=f"{file.stem}:{number}", kwargs={"row": json.dumps(row, ensure_ascii=False)},
                          category=str(row.get("data_source") or "verl_tools"),
                          reference="" if truth is None else truth if isinstance(truth, str) else json.dumps(truth)))
    return tasks


def verl_row_prompt(env_cls: Any, task: Task, env_kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The row's own prompt (what ``reset`` shows; no tool instance is created for it)."""
    row = json.loads(task.kwargs["row"])
    prompt = row["prompt"]
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]


__all__ = ["verl_row_prompt", "verl_rows_tasks"]
