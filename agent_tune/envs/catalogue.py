"""What an env declares about its tasks: :class:`Task` (one task) and :class:`TaskCatalogue` (where they come
from), kept apart from the env class (``BaseToolEnv.catalogue``).

With a catalogue, ``agent-tune data --env NAME`` writes the env's training rows and ``agent-tune eval --env NAME``
plays its test tasks (:mod:`agent_tune.envs.tasks` is the one rule that selects tasks and writes rows)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping


@dataclass(frozen=True)
class Task:
    """One task of an env's catalogue.

    ``id`` names it uniquely within the env (results files, resume, pass@k); ``kwargs`` is what ``reset``
    receives; ``category`` groups results in reports (``""``: the env's name); ``env_kwargs`` are constructor
    kwargs the task needs (over the run's own); ``reference`` is the task's expected answer as text, for a
    reader of the rows (``reward_model.ground_truth``; the env scores from its own data).
    """

    id: str
    kwargs: dict[str, Any]
    category: str = ""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    reference: str = ""


# (the env class, a task, the env's kwargs) -> the row's prompt messages; the env class is a BaseToolEnv subclass
# (not imported here: the env contract imports this module)
RowPrompt = Callable[[type, Task, Mapping[str, Any]], "list[dict[str, Any]]"]


def reset_prompt(env_cls: type, task: Task, env_kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The default row prompt: the first observation of an env built with ``env_kwargs`` and reset with the task."""
    env = env_cls(**env_kwargs)
    try:
        return list(env.reset(**task.kwargs).messages)
    finally:
        env.close()


@dataclass(frozen=True)
class TaskCatalogue:
    """An env's tasks.

    ``splits`` names its splits; ``tasks(split, **options)`` lists a split's :class:`Task` s (``options`` are the
    catalogue's own: a seed, a source file, ..., given on the command line as ``--options JSON``);
    ``eval_default`` is what ``agent-tune eval --env NAME`` plays when no split, category, suite or id is chosen
    (a split and the categories kept from it; empty: all); ``suites`` are named sets of categories (``--suite``);
    ``eval_kwargs`` are constructor kwargs an evaluation always sets, over a task's and the run's (BFCL: the
    leaderboard's rules); ``row_prompt(env_cls, task, env_kwargs)`` is the prompt a training row carries (what
    verl's dataset measures for its prompt-length filter): by default the env's first observation
    (:func:`reset_prompt`); an env whose reset is costly (tau2 asks its simulated user) shows what it can
    without it.

    Example::

        catalogue = TaskCatalogue(splits=("train", "test"), tasks=calculator_tasks)
    """

    splits: tuple[str, ...]
    tasks: Callable[..., list[Task]]
    eval_default: tuple[str, tuple[str, ...]] = ("test", ())
    suites: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    eval_kwargs: Mapping[str, Any] = field(default_factory=dict)
    row_prompt: RowPrompt = reset_prompt


__all__ = ["RowPrompt", "Task", "TaskCatalogue", "reset_prompt"]
