"""The task weighting plugged into verl's task runner: the sampler (:mod:`verl_ext.task_weighting`) or the
advantage weights (:mod:`verl_ext.advantage_weighting`), as ``agent_tune.task_weighting.mode`` says."""

from __future__ import annotations

from typing import Any

from verl_ext.advantage_weighting import install as install_advantage
from verl_ext.task_weighting import ADVANTAGE, check_config, install_sampler


def install(config: Any) -> None:
    """Plug the task weighting of ``config`` into verl's trainers in this process, as its ``mode`` says: the
    sampler (``sample``) or the advantage weights (``advantage``, :mod:`verl_ext.advantage_weighting`)."""
    if check_config(config).mode == ADVANTAGE:
        install_advantage(config)
    else:
        install_sampler(config)


def task_runner_class(runner: Any) -> Any:
    """A Ray actor class running verl's task runner ``runner`` (an actor class) with the task weighting
    installed first (:func:`install`)."""
    import ray

    base = runner.__ray_actor_class__

    class TaskWeightingTaskRunner(base):  # type: ignore[misc, valid-type]
        def run(self, config: Any) -> Any:
            install(config)
            return super().run(config)

    TaskWeightingTaskRunner.__name__ = TaskWeightingTaskRunner.__qualname__ = f"TaskWeighting{base.__name__}"
    return ray.remote(TaskWeightingTaskRunner)
