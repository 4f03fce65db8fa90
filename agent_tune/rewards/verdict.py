"""How a user's scoring function's return value reads as (reward, accuracy): the MCP env's verifier and
``verl_tools``' reward function return the same shapes (docs/envs.md)."""

from __future__ import annotations

from typing import Any, Mapping


def verdict(value: Any) -> tuple[float, float]:
    """(reward, accuracy) from what a scoring function returned: the reward, ``(reward, accuracy)``, or a mapping
    with ``reward`` (or verl's ``score``) and ``accuracy`` (or verl's ``acc``); the accuracy defaults to
    reward >= 1."""
    if isinstance(value, Mapping):
        reward = float(value["score"] if "reward" not in value and "score" in value else value["reward"])
        return reward, float(value.get("accuracy", value.get("acc", reward >= 1.0)))
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return float(value[0]), float(value[1])
    reward = float(value)
    return reward, float(reward >= 1.0)


__all__ = ["verdict"]
