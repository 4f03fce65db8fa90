"""A verl tool recipe's dataset as the ``verl_tools`` env's catalogue.

verl's multi-turn recipes write rows of ``prompt`` (chat messages), ``data_source``, ``reward_model.ground_truth`` and
``extra_info`` (with the row's ``tools_kwargs`` and, optionally, ``tool_selection``). :func:`verl_rows_tasks` reads such
a file (``.parquet``, or ``.jsonl``: one row per line) into tasks whose reset kwargs are ``{"row": JSON text}`` (rows
of different recipes have differently shaped ``extra_info``; a parquet column cannot hold them), so
``agent-tune data --env verl_tools`` rewrites a recipe's rows for agent-tune's loop with nothing lost.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from agent_tune.envs.catalogue import Task
from agent_tune.utils.rows import row_messages_of, split_rows, truth_text


def verl_rows_tasks(split: str, path: str | Mapping[str, str]) -> list[Task]:
    """The rows of ``path[split]`` (one verl dataset file per split), or of ``path`` for any split, as tasks: id
    ``<file stem>:<row number>``, category the row's ``data_source``, reference its ``reward_model.ground_truth``."""
    file, rows = split_rows(split, path, "verl_tools env", by_row_split=False)
    tasks = []
    for number, row in rows:
        tasks.append(Task(id=f"{file.stem}:{number}", kwargs={"row": json.dumps(row, ensure_ascii=False)},
                          category=str(row.get("data_source") or "verl_tools"),
                          reference=truth_text((row.get("reward_model") or {}).get("ground_truth"))))
    return tasks


def verl_row_prompt(env_cls: Any, task: Task, env_kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The row's own prompt (what ``reset`` shows; no tool instance is created for it)."""
    return row_messages_of(json.loads(task.kwargs["row"])["prompt"])


__all__ = ["verl_row_prompt", "verl_rows_tasks"]
