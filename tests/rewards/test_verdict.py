"""The one reading of a scoring function's return value (the MCP verifier's, verl_tools' reward function's)."""

from __future__ import annotations

import pytest

from agent_tune.rewards.verdict import verdict


@pytest.mark.parametrize("value, expected", [
    (1.0, (1.0, 1.0)),
    (0.5, (0.5, 0.0)),
    ((0.5, 1), (0.5, 1.0)),
    ({"reward": 0.2, "accuracy": 1}, (0.2, 1.0)),
    ({"reward": 1}, (1.0, 1.0)),
    ({"score": 0.0, "acc": True}, (0.0, 1.0)),
    ({"reward": 0.0, "score": 1.0}, (0.0, 0.0)),  # reward first
])
def test_every_shape_reads_as_reward_and_accuracy(value, expected) -> None:
    assert verdict(value) == expected


def test_a_mapping_without_a_reward_names_the_documented_key() -> None:
    with pytest.raises(KeyError, match="reward"):
        verdict({"accuracy": 1.0})
