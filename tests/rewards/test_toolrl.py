"""ToolRL's reward: bounds, partial credit in the right order, optimal pairing (``matching=optimal``)."""

from __future__ import annotations

import pytest

from agent_tune.parsing import ToolCall
from agent_tune.rewards.toolrl import toolrl_score
from agent_tune.rewards.toolrl_config import ToolRLRewardConfig

GT = [ToolCall("add", {"a": 1, "b": 2}), ToolCall("mul", {"x": 3, "y": 4})]
OPTIMAL = ToolRLRewardConfig(matching="optimal")


@pytest.mark.parametrize("matching", ["toolrl", "optimal"])
def test_exact_match_scores_max(matching: str) -> None:
    # default granularity: the order of calls with distinct names does not matter under either matching
    s = toolrl_score(list(reversed(GT)), GT, format_ok=True, config=ToolRLRewardConfig(matching=matching))
    assert s.correctness == pytest.approx(3.0) and s.reward == pytest.approx(4.0) and s.exact


def test_partial_credit_is_ordered() -> None:
    wrong_value = [ToolCall("add", {"a": 1, "b": 5}), GT[1]]
    wrong_key = [ToolCall("add", {"a": 1, "c": 2}), GT[1]]
    missing = [GT[1]]
    wrong_tool = [ToolCall("sub", {"a": 1, "b": 2})]
    scores = [toolrl_score(p, GT, True).correctness for p in (GT, wrong_value, wrong_key, missing, wrong_tool, [])]
    assert scores[:5] == sorted(scores[:5], reverse=True) and len(set(scores[:5])) == 5
    assert scores[-2] == scores[-1] == pytest.approx(-3.0)  # a wrong tool earns no more than no call
    assert all(-3.0 <= s <= 3.0 for s in scores)
    # S = name(1) + keys(2) + values(4 - 1) out of S_max = 1 + 2 + 4 = 7
    assert toolrl_score(wrong_value, GT, True).correctness == pytest.approx(6 * 6 / 7 - 3)


def test_extra_calls_cost_through_name_overlap() -> None:
    extra = GT + [ToolCall("div", {"p": 1})]
    assert toolrl_score(extra, GT, True).correctness < toolrl_score(GT, GT, True).correctness
    assert not toolrl_score(extra, GT, True).exact


def test_no_call_expected() -> None:
    assert toolrl_score([], [], True).reward == pytest.approx(4.0)
    assert toolrl_score([ToolCall("add", {})], [], True).correctness == pytest.approx(-3.0)


def test_format_reward_is_separate() -> None:
    assert toolrl_score(GT, GT, False).reward == pytest.approx(3.0)


def test_pairing_is_optimal_not_greedy_by_order() -> None:
    gt = [ToolCall("f", {"a": 1, "b": 2}), ToolCall("f", {"a": 1, "b": 3})]
    pred = [ToolCall("f", {"a": 1, "b": 3}), ToolCall("f", {"a": 1, "b": 2})]
    s = toolrl_score(pred, gt, True, OPTIMAL)
    assert s.exact and s.correctness == pytest.approx(3.0)
    # greedy in ground-truth order would pair f(a=1, b=2) with f(a=1, b=5) (score 2 against 1.5), leaving
    # f(a=1) only f(b=2) (score 0); the optimal pairing crosses them: (1/2 + 1) + (1/2 + 1) = 3 against 2,
    # S = 1 + 3 = 4 of S_max = 1 + 2 + 3 = 6 -> -3 + 6 * 4/6 = 1
    gt = [ToolCall("f", {"a": 1, "b": 2}), ToolCall("f", {"a": 1})]
    pred = [ToolCall("f", {"a": 1, "b": 5}), ToolCall("f", {"b": 2})]
    assert toolrl_score(pred, gt, True, OPTIMAL).correctness == pytest.approx(1.0)
