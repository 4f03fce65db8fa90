"""The per-episode metrics every consumer logs: one list of keys, one function.

The verl agent loop reports them per sample (``reward_extra_info``, and the episode records the
step-metrics writer averages per step); the standalone eval stores them in every result record. Values
come from the env's final :class:`~agent_tune.envs.base.EpisodeInfo` and the runner's own counts:

- ``acc``: ``EpisodeInfo.accuracy`` (verl's validation reads this name; falls back to the reward)
- ``progress``: ``EpisodeInfo.progress`` (falls back to the reward)
- ``format_errors``, ``num_calls``, ``num_steps``, ``turns_completed``: as the env counted them
- ``num_generations``: policy generations in the episode (the runner's count)
- ``zero_call``: 1.0 if the episode decoded no tool call at all (collapse watch: a policy that stops calling)
- ``truncated``: 1.0 if the episode ended before the env said done (token budget, generation cap, ...)
- ``stop/<reason>``: 1.0 for the episode's :class:`~agent_tune.envs.base.StopReason` (one key per reason, so
  their step means are the shares of the step's episodes that ended each way)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_tune.envs.base import StopReason

if TYPE_CHECKING:
    from agent_tune.rollout.runner import EpisodeResult

METRIC_KEYS: tuple[str, ...] = (
    "acc",
    "progress",
    "format_errors",
    "num_calls",
    "num_steps",
    "num_generations",
    "turns_completed",
    "zero_call",
    "truncated",
    *(f"stop/{reason.value}" for reason in StopReason),
)


def episode_metrics(result: EpisodeResult) -> dict[str, float]:
    """The :data:`METRIC_KEYS` of a finished episode."""
    info, reward = result.info, result.reward
    num_calls = int(info.get("num_calls", 0) or 0)
    return {
        "acc": float(info.get("accuracy", reward)),
        "progress": float(info.get("progress", reward)),
        "format_errors": float(info.get("format_errors", 0) or 0),
        "num_calls": float(num_calls),
        "num_steps": float(info.get("num_steps", result.num_generations) or 0),
        "num_generations": float(result.num_generations),
        "turns_completed": float(info.get("turns_completed", 0) or 0),
        "zero_call": float(num_calls == 0),
        "truncated": float(result.stop_reason.by_runner),
        **{f"stop/{reason.value}": float(reason is result.stop_reason) for reason in StopReason},
    }
