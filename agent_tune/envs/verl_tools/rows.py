"""A verl tool recipe's dataset (``.parquet`` / ``.jsonl`` rows) as the ``verl_tools`` env's catalogue."""

from __future__ import annotations

from typing import Any, Mapping

from agent_tune.envs.catalogue import Task
from agent_tune.envs.tasks import dataset_row_kwargs
from agent_tune.utils.rows import row_messages_of, split_rows, truth_text

# The columns of a verl row that reset reads (the others, such as ``ability``, are verl's bookkeeping).
ROW_FIELDS = ("prompt", "data_source", "reward_model", "extra_info")


def verl_rows_tasks(split: str, path: str | Mapping[str, str]) -> list[Task]:
    """The rows of ``path[split]`` (one verl dataset file per split), or of ``path`` for any split, as tasks: id
    ``<file stem>:<row number>``, category the row's ``data_source``, reference its ``reward_model.ground_truth``."""
    file, rows = split_rows(split, path, "verl_tools env", by_row_split=False)
    tasks = []
    for number, row in rows:
        fields = dataset_row_kwargs({k: row[k] for k in ROW_FIELDS if row.get(k) is not None}, "verl_tools env",
                                    f"{file} row {number}")
        tasks.append(Task(id=f"{file.stem}:{number}", kwargs=fields,
                          category=str(row.get("data_source") or "verl_tools"),
                          reference=truth_text((row.get("reward_model") or {}).get("ground_truth"))))
    return tasks


def verl_row_prompt(env_cls: Any, task: Task, env_kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The row's own prompt (what ``reset`` shows; no tool instance is created for it)."""
    return row_messages_of(task.kwargs["prompt"])


__all__ = ["ROW_FIELDS", "verl_row_prompt", "verl_rows_tasks"]
