"""The toolcall env's ToolRL options: the reward variant (``reward``), ToolRL's answer format, the trainer step."""

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
TOOLRL = {"answer_format": "toolrl", "tool_parser": "toolrl"}


def _hermes(name: str, **args) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': args})}\n</tool_call>"


def _toolrl(think: str, *calls: dict, response: str | None = None) -> str:
    parts = [f"<think> {think} </think>"]
    if calls:
        parts.append("<tool_call>\n" + "\n".join(json.dumps(c) for c in calls) + "\n</tool_call>")
    if response is not None:
        parts.append(f"<response> {response} </response>")
    return "\n".join(parts)


RIGHT = {"name": "add", "parameters": {"a": 2, "b": 3}}
WRONG = {"name": "add", "parameters": {"a": 2, "b": 4}}


def _play(text: str, step: int | None = None, task: dict | None = None, **kwargs):
    env = make_env("toolcall", **kwargs)
    env.status.global_step = step
    env.reset(**(task or TASK))
    return env.step(text)


def test_reward_option_switches_the_reward() -> None:
    partial = _hermes("add", a=2, b=4)
    # default: S = names 1 + keys 1 + values 1 = 3 of 4 -> 1 + (-3 + 6 * 3/4) = 2.5
    assert _play(partial).reward == pytest.approx(2.5)
    # coarse: not exact -> 1 - 3 = -2
    assert _play(partial, reward={"granularity": "coarse"}).reward == pytest.approx(-2.0)
    # max1: 1 + (-1 + 2 * 3/4) = 1.5
    assert _play(partial, reward={"scale": "max1"}).reward == pytest.approx(1.5)
    r = _play(partial, reward={"scale": "max1"}, reward_scale="unit")  # range [-1, 2]: (1.5 + 1) / 3
    assert r.reward == pytest.approx(2.5 / 3) and r.info["correctness_reward"] == pytest.approx(0.5)


def test_schedules_read_the_global_step() -> None:
    exact, cfg = _hermes("add", a=2, b=3), {"scale": "two_stage"}
    assert _play(exact, step=5, reward=cfg).reward == pytest.approx(2.0)  # 1 + 1
    assert _play(exact, step=40, reward=cfg).reward == pytest.approx(3.5)  # 0.5 + 3
    assert _play(exact, step=None, reward=cfg).reward == pytest.approx(2.0)  # outside training: step 0
    smooth = {"scale": "smooth", "smooth_schedule_steps": None, "total_training_steps": 10}
    assert _play(exact, step=0, reward=smooth).reward == pytest.approx(4.0)  # 2 + 2
    assert _play(exact, step=5, reward=smooth).reward == pytest.approx(1.5 + 2.5)


def test_matching_option_reaches_the_reward() -> None:
    # two parallel calls answered in the other order, coarse: ToolRL's code compares ordered lists -> 1 - 3;
    # matching=optimal takes them in any order -> 1 + 3; accuracy (order-free) is 1 either way
    task = dict(TASK, ground_truth=[{"name": "add", "arguments": {"a": 2, "b": 3}},
                                    {"name": "add", "arguments": {"a": 1, "b": 1}}])
    text = _hermes("add", a=1, b=1) + "\n" + _hermes("add", a=2, b=3)
    toolrl = _play(text, task=task, reward={"granularity": "coarse"})
    assert toolrl.reward == pytest.approx(-2.0) and toolrl.info["accuracy"] == 1.0
    optimal = _play(text, task=task, reward={"granularity": "coarse", "matching": "optimal"})
    assert optimal.reward == pytest.approx(4.0) and optimal.info["accuracy"] == 1.0
    with pytest.raises(ValueError, match="toolcall env: reward.matching='best' is not one of toolrl, optimal"):
        make_env("toolcall", reward={"matching": "best"})


def test_unfinished_response_scores_the_variant_minimum() -> None:
    env = make_env("toolcall", reward={"scale": "smooth"})
    env.status.global_step = 0
    env.reset(**TASK)
    assert env.finalize(StopReason.TOKEN_BUDGET).reward == pytest.approx(-4.0)  # format -2 + correctness -2


def test_bad_reward_option_fails_at_construction() -> None:
    with pytest.raises(ValueError, match=r"toolcall env: reward.scale='big' is not one of default, max1"):
        make_env("toolcall", reward={"scale": "big"})
    with pytest.raises(ValueError, match="answer_format='xml' is not one of native, toolrl"):
        make_env("toolcall", answer_format="xml")
    with pytest.raises(ValueError, match="answer_format=toolrl reads calls with tool_parser=toolrl"):
        make_env("toolcall", answer_format="toolrl")


def test_toolrl_answer_format() -> None:
    r = _play(_toolrl("2 + 3", RIGHT), **TOOLRL)
    assert r.reward == pytest.approx(4.0) and r.info["format_ok"] == 1.0 and r.info["accuracy"] == 1.0
    # a response the ground truth does not have: no format reward, the calls still score
    r = _play(_toolrl("2 + 3", RIGHT, response="5"), **TOOLRL)
    assert r.info["format_ok"] == 0.0 and r.reward == pytest.approx(3.0)
    # the model's native hermes call is not ToolRL's layout, and "arguments" does not decode: the minimum
    r = _play(_hermes("add", a=2, b=3), **TOOLRL)
    assert r.info["format_ok"] == 0.0 and r.info["format_errors"] == 1 and r.reward == pytest.approx(-3.0)
    # a line that does not decode next to a right call: correctness is the minimum, as in ToolRL
    text = "<think> t </think>\n<tool_call>\n" + json.dumps(RIGHT) + "\n{oops\n</tool_call>"
    assert _play(text, **TOOLRL).info["correctness_reward"] == pytest.approx(-3.0)
    # a wrong value: format 1 + (-3 + 6 * 3/4)
    assert _play(_toolrl("t", WRONG), **TOOLRL).reward == pytest.approx(2.5)


def test_toolrl_format_follows_the_ground_truth_parts() -> None:
    chat = {"question": "Hi!", "tools": TOOLS, "ground_truth": []}  # a response is expected by default
    r = _play(_toolrl("greet", response="Hello"), task=chat, **TOOLRL)
    assert r.info["format_ok"] == 1.0 and r.reward == pytest.approx(4.0)
    ignored = _play(_toolrl("greet", response="Hello"), task=chat, reward={"no_call_tasks": "ignored"}, **TOOLRL)
    assert ignored.reward == pytest.approx(1.0)  # ToolRL's code: format only
    both = {**TASK, "expects_response": True}
    assert _play(_toolrl("t", RIGHT, response="5"), task=both, **TOOLRL).info["format_ok"] == 1.0
    assert _play(_toolrl("t", RIGHT), task=both, **TOOLRL).info["format_ok"] == 0.0


def test_length_reward_counts_the_think_block() -> None:
    words = " ".join(["w"] * 256)
    r = _play(_toolrl(words, RIGHT), reward={"length": "fixed"}, **TOOLRL)
    assert r.info["length_reward"] == pytest.approx(0.5) and r.reward == pytest.approx(4.5)  # 256 / 512
    # native format: the reasoning parser's block
    r = _play(f"<think>{words}</think>" + _hermes("add", a=2, b=3), reasoning_parser="qwen3",
              reward={"length": "fixed"})
    assert r.info["length_reward"] == pytest.approx(0.5)


def test_toolrl_prompt_lists_the_tools_in_the_system_message() -> None:
    env = make_env("toolcall", **TOOLRL)
    obs = env.reset(**TASK)
    assert obs.tools is None  # not rendered by the chat template: the system prompt lists them
    system = obs.messages[0]
    assert system["role"] == "system" and "1. Name: add" in system["content"] and "<tool_call>" in system["content"]
    own = [{"role": "system", "content": "ToolRL's prompt"}, {"role": "user", "content": "2 + 3?"}]
    assert env.reset(**{**TASK, "messages": own}).messages == own  # the task's own prompt (ToolRL's rows)
    assert make_env("toolcall").reset(**TASK).tools[0]["function"]["name"] == "add"  # native: unchanged
