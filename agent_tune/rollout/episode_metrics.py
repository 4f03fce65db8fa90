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
- ``tool_errors``: well-formed calls whose tool failed on its own (``EpisodeInfo.tool_errors``; not format errors)

How the episode ended is its :class:`~agent_tune.envs.base.StopReason` (``EpisodeResult.stop_reason``), a word
rather than a number: the training sample record and the eval record carry it as ``stop_reason``, and the step
metrics count it per step (``stop/<reason>``, :func:`stop_shares`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

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
    "tool_errors",
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
        "tool_errors": float(result.episode.tool_errors if result.episode is not None
                             else info.get("tool_errors", 0) or 0),
    }


def stop_shares(reasons: Sequence[str | None]) -> dict[str, float]:
    """The metric family ``stop/<reason>``: the share of ``reasons`` (episodes' ``stop_reason`` values; ``None``:
    unknown, left out) per :class:`~agent_tune.envs.base.StopReason`, every reason present (0.0 when none ended
    so), so a plot's curve never has holes. Nothing when no reason is known."""
    known = [r for r in reasons if r is not None]
    if not known:
        return {}
    return {f"stop/{reason.value}": sum(r == reason.value for r in known) / len(known) for reason in StopReason}
