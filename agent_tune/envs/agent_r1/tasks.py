"""The ``agent_r1`` catalogue: the rows an Agent-R1 preprocessing script writes (verl's RL format), as they are."""

from __future__ import annotations

from typing import Any, Mapping

from agent_tune.envs.catalogue import Task
from agent_tune.envs.tasks import dataset_row_kwargs
from agent_tune.utils.rows import row_messages_of, split_rows, truth_text

# What a row carries to reset (agent_tune.envs.agent_r1.env reads these; the others are verl's bookkeeping).
ROW_FIELDS = ("prompt", "reward_model", "data_source", "extra_info")


def agent_r1_tasks(split: str, path: str | Mapping[str, str]) -> list[Task]:
    """The rows of ``split`` (:func:`~agent_tune.utils.rows.split_rows`) as tasks, reset kwargs their
    :data:`ROW_FIELDS`."""
    file, chosen = split_rows(split, path, "agent_r1 env")
    tasks = []
    for number, row in chosen:
        fields = dataset_row_kwargs({k: row[k] for k in ROW_FIELDS if row.get(k) is not None}, "agent_r1 env",
                                    f"{file} row {number}")
        reward_model = row.get("reward_model") if isinstance(row.get("reward_model"), Mapping) else {}
        reference = truth_text(reward_model.get("ground_truth"))
        tasks.append(Task(id=f"{file.stem}:{number}", kwargs=fields,
                          category=str(row.get("data_source") or "agent_r1"), reference=reference))
    return tasks


def row_prompt(env_cls: type, task: Task, env_kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A training row's prompt: the dataset row's own messages (no env or tool is built to write the rows)."""
    return row_messages_of(task.kwargs["prompt"])
