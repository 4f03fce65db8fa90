"""Reward functions: plain functions from episode outcomes to scores."""

from agent_tune.rewards.math_answer import extract_boxed, math_equivalent

__all__ = ["extract_boxed", "math_equivalent"]
