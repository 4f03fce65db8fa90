"""The task curriculum plugged into verl's task runner: the sampler (:mod:`verl_ext.task_curriculum`) or the
advantage weights (:mod:`verl_ext.advantage_curriculum`), as ``agent_tune.task_curriculum.mode`` says."""

from __future__ import annotations

from typing import Any

from verl_ext.advantage_curriculum import install as install_advantage
from verl_ext.task_curriculum import ADVANTAGE, check_config, install_sampler


def install(config: Any) -> None:
    """Plug the curriculum of ``config`` into verl's trainers in this process, as its ``mode`` says: the
    sampler (``sample``) or the advantage weights (``advantage``, :mod:`verl_ext.advantage_curriculum`)."""
    if check_config(config).mode == ADVANTAGE:
        install_advantage(config)
    else:
        install_sampler(config)


def task_runner_class(runner: Any) -> Any:
    """A Ray actor class running verl's task runner ``runner`` (an actor class) with the curriculum
    installed first (:func:`install`)."""
    import ray

    base = runner.__ray_actor_class__

    class CurriculumTaskRunner(base):  # type: ignore[misc, valid-type]
        def run(self, config: Any) -> Any:
            install(config)
            return super().run(config)

    CurriculumTaskRunner.__name__ = CurriculumTaskRunner.__qualname__ = f"Curriculum{base.__name__}"
    return ray.remote(CurriculumTaskRunner)
