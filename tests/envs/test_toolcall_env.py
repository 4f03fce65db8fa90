"""The single-turn function-calling env with ToolRL's reward."""

from __future__ import annotations

import json

import pytest

from agent_tune.envs import make_env
from agent_tune.envs.base import StopReason

TOOLS = [{"name": "add", "description": "Add two integers.",
          "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                         "required": ["a", "b"]}}]
TASK = {"question": "What is 2 plus 3?", "tools": TOOLS,
        "ground_truth": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}


def _call(name: str, **args) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"


def _play(text: str, **kwargs):
    env = make_env("toolcall", **kwargs)
    obs = env.reset(**TASK)
    assert obs.tools[0]["function"]["name"] == "add" and obs.messages[-1]["content"] == TASK["question"]
    return env.step(text)


def test_exact_call_gets_full_reward() -> None:
    r = _play(_call("add", a=2, b=3))
    assert r.done and r.reward == pytest.approx(4.0) and r.info["accuracy"] == 1.0 and r.info["format_ok"] == 1.0


def test_wrong_value_partial_and_malformed_loses_format() -> None:
    partial = _play(_call("add", a=2, b=4))
    assert 0.0 < partial.reward < 4.0 and partial.info["accuracy"] == 0.0
    broken = _play("<tool_call>\n{oops\n</tool_call>")
    assert (broken.info["format_ok"] == 0.0 and broken.info["format_errors"] == 1
            and broken.reward == pytest.approx(-3.0))
    # ToolRL's format is structural: a well-formed call of a function not offered keeps it, loses the
    # correctness (no name matches), and is counted as a format error
    unknown = _play(_call("launch", a=1))
    assert unknown.info["format_ok"] == 1.0 and unknown.info["format_errors"] == 1
    assert unknown.reward == pytest.approx(-2.0) and unknown.info["accuracy"] == 0.0
    # every decoded call is reported; ``calls`` (what training counts as valid) only the offered ones
    assert unknown.info["decoded_calls"] == [{"name": "launch", "arguments": {"a": 1}}] and unknown.info["calls"] == []
    both = _play(_call("add", a=2, b=3) + "\n" + _call("launch", a=1))
    assert both.info["calls"] == [{"name": "add", "arguments": {"a": 2, "b": 3}}]
    assert [c["name"] for c in both.info["decoded_calls"]] == ["add", "launch"]


def test_unit_scale_and_reasoning_requirement() -> None:
    r = _play(_call("add", a=2, b=3), reward_scale="unit")
    assert r.reward == pytest.approx(1.0)
    r = _play(_call("add", a=2, b=3), reasoning_parser="qwen3", require_reasoning=True)
    assert r.info["format_ok"] == 0.0
    r = _play("<think>2+3</think>" + _call("add", a=2, b=3), reasoning_parser="qwen3", require_reasoning=True)
    assert r.info["format_ok"] == 1.0 and r.reward == pytest.approx(4.0)
    with pytest.raises(ValueError, match="reward_scale"):
        make_env("toolcall", reward_scale="big")


def test_unfinished_response_scores_below_any_answer() -> None:
    env = make_env("toolcall")
    env.reset(**TASK)
    unfinished = env.finalize(StopReason.TOKEN_BUDGET).reward
    env.reset(**TASK)
    plain = env.step("I do not know.").reward
    env.reset(**TASK)
    wrong_call = env.step(_call("add", a=7, b=8)).reward
    assert unfinished == pytest.approx(-3.0) and unfinished <= plain < wrong_call


def test_format_follows_the_expected_shape() -> None:
    """ToolRL's format check: a task that needs a call is not answered in the right format by plain text,
    and a task that needs no call is not answered in the right format by a call."""
    plain = _play("5")
    assert plain.info["format_ok"] == 0.0 and plain.reward == pytest.approx(-3.0)
    env = make_env("toolcall")
    env.reset(question="Say hi.", tools=TOOLS, ground_truth=[])
    assert env.step("hi").reward == pytest.approx(4.0)
    env.reset(question="Say hi.", tools=TOOLS, ground_truth=[])
    needless = env.step(_call("add", a=1, b=1))
    assert needless.info["format_ok"] == 0.0 and needless.reward < 4.0
