"""Import tau2 quietly and look up its domains and tasks.

tau2's evaluator, orchestrator and user simulator import litellm at module level (agent-tune never calls
litellm: its users speak to their endpoints themselves, :mod:`agent_tune.users`). Two side effects are kept
in check here, before the first ``import tau2``:

* litellm fetches its model price list from the internet at import unless ``LITELLM_LOCAL_MODEL_COST_MAP``
  is set: it is set (``setdefault``: a value already in the environment wins), so the import stays offline
  and quick. This is a property of the import, not a switch of agent-tune's behaviour.
* tau2 logs DEBUG lines through loguru (every tool call, every registry load): its logger is disabled.
  ``loguru.logger.enable("tau2")`` brings them back.

tau2 also reads a ``.env`` file in the working folder at import (``tau2.utils.utils``), which agent-tune
cannot prevent; nothing of agent-tune reads it.
"""

from __future__ import annotations

import copy
import os
from functools import lru_cache
from typing import TYPE_CHECKING

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from loguru import logger  # noqa: E402  (tau2 logs through loguru; silence it before tau2 is imported)

logger.disable("tau2")

from tau2.registry import registry  # noqa: E402

if TYPE_CHECKING:
    from tau2.data_model.tasks import Task
    from tau2.environment.environment import Environment

DOMAINS: tuple[str, ...] = ("mock", "airline", "retail", "telecom")


def check_domain(domain: str) -> None:
    """Raise ``ValueError`` naming the known domains when ``domain`` is not one of tau2's."""
    known = registry.get_domains()
    if domain not in known:
        raise ValueError(f"unknown tau2 domain {domain!r}; known: {', '.join(known)}")


def new_environment(domain: str) -> Environment:
    """A fresh tau2 ``Environment`` of ``domain`` with its own database (one per episode)."""
    check_domain(domain)
    return registry.get_env_constructor(domain)()


@lru_cache(maxsize=None)
def _tasks(task_set: str) -> dict[str, Task]:
    """Every task of ``task_set`` by id (read once per process; read-only: callers get copies)."""
    if task_set not in registry.get_task_sets():
        raise ValueError(f"unknown tau2 task set {task_set!r}; known: {', '.join(registry.get_task_sets())}")
    return {task.id: task for task in registry.get_tasks_loader(task_set)()}


def task_ids(task_set: str) -> list[str]:
    """The ids of every task of ``task_set``, in tau2's order."""
    return list(_tasks(task_set))


def load_task(task_set: str, task_id: str | int) -> Task:
    """A private copy of task ``task_id`` of ``task_set`` (ids are strings; an int is accepted)."""
    tasks = _tasks(task_set)
    key = str(task_id)
    if key not in tasks:
        raise ValueError(f"tau2 task set {task_set!r} has no task {key!r} ({len(tasks)} tasks)")
    return copy.deepcopy(tasks[key])


def task_splits(task_set: str) -> dict[str, list[str]]:
    """tau2's named splits of ``task_set`` (``train``, ``test``, ``base``...; empty when it has none)."""
    loader = registry.get_task_splits_loader(task_set)
    return dict(loader()) if loader is not None else {}
