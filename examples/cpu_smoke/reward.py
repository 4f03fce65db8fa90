"""Reward for the arithmetic smoke dataset (verl's ``reward.custom_reward_function`` signature).

1.0 when the first number in the response equals the ground truth, 0.1 when the response contains a number
that is wrong (shaping: the model answered with a number), else 0.0.
"""

from __future__ import annotations

import re

_NUMBER = re.compile(r"-?\d+")


def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict | None = None, **kwargs
) -> float:
    """Score one response against the expected number."""
    match = _NUMBER.search(solution_str or "")
    if match is None:
        return 0.0
    return 1.0 if match.group(0) == str(ground_truth).strip() else 0.1
