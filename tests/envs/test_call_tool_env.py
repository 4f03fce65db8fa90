"""The call-by-call tier (``CallToolEnv``) written once for every env that answers call by call: a plain or an
``async`` ``call_tool``, the schema refusal (a format error the policy reads), a backend gone ending the episode
through ``step.fail``, a call that ends the episode, and the step's time limit for async calls."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from agent_tune.envs import CallToolEnv, Observation, Outcome, StopReason, ToolResult
from agent_tune.envs.remote_tools import input_schemas
from agent_tune.errors import BackendGoneError
from agent_tune.parsing import ToolCall
from agent_tune.parsing.response import ResponseParser

TOOLS = [{"type": "function", "function": {"name": name, "description": "", "parameters": {
    "type": "object", "required": ["x"], "properties": {"x": {"type": "integer"}}}}}
    for name in ("echo", "gone", "late", "submit")]


def call(name: str, **arguments: Any) -> str:
    import json

    return f'<tool_call>\n{json.dumps({"name": name, "arguments": arguments})}\n</tool_call>'


class SyncTools(CallToolEnv):
    """``echo`` answers its x, ``gone`` loses the backend (``late``: no answer in time), ``submit`` ends the episode;
    ``schemas=False`` gives no call_schemas, so every call reaches call_tool."""

    def __init__(self, schemas: bool = True) -> None:
        self.parser, self.max_steps, self.tools = ResponseParser("hermes"), 4, TOOLS
        self.schemas = schemas
        self.ran: list[str] = []
        self.threads: set[str] = set()

    def reset(self) -> Observation:
        self.call_schemas = input_schemas(self.tools) if self.schemas else None
        self.ran = []
        super().reset()
        return Observation(messages=[{"role": "user", "content": "go"}], tools=self.tools)

    def answer(self, call: ToolCall) -> ToolResult:
        self.ran.append(call.name)
        self.threads.add(threading.current_thread().name)
        if call.name == "gone":
            raise BackendGoneError("connection lost")
        if call.name == "late":
            raise BackendGoneError("no answer in 1 s (late)", timed_out=True)
        return ToolResult(f"x={call.arguments.get('x')}", call.name, done=call.name == "submit")

    def call_tool(self, call: ToolCall) -> ToolResult:
        return self.answer(call)

    def outcome(self) -> Outcome:
        return Outcome(1.0, 1.0)


class AsyncTools(SyncTools):
    async def call_tool(self, call: ToolCall) -> ToolResult:
        await asyncio.sleep(0)
        return self.answer(call)


class Hanging(AsyncTools):
    """``hang`` never answers (its own bound failed): only the step's time limit ends it."""

    async def call_tool(self, call: ToolCall) -> ToolResult:
        if call.name == "echo" and call.arguments.get("x") == 0:
            await asyncio.sleep(60)
        return self.answer(call)


class Recording(AsyncTools):
    """An env that keeps its own record of each step around the tier's act."""

    async def act(self, step: Any) -> None:
        await super().act(step)
        self.record = [r.content for r in step.results]


@pytest.fixture(params=[SyncTools, AsyncTools], ids=["sync", "async"])
def env_class(request: pytest.FixtureRequest) -> type[SyncTools]:
    return request.param


def test_a_plain_call_tool_runs_in_a_worker_and_an_async_one_on_the_background_loop(env_class) -> None:
    env = env_class()
    assert env._async_act is (env_class is AsyncTools)  # a plain call_tool keeps act plain: the whole step threaded
    env.reset()
    step = env.step(call("echo", x=1) + call("echo", x=2))
    assert [m["content"] for m in step.observation.messages] == ["x=1", "x=2"] and not step.done
    assert step.info["calls"] == ["echo", "echo"] and step.info["format_errors"] == 0
    end = asyncio.run(env.astep("done"))
    assert end.done and end.episode.stop_reason is StopReason.DONE and end.episode.num_calls == 2
    assert env.threads == ({"agent-tune-background"} if env_class is AsyncTools else {"MainThread"})


def test_the_schema_refusal_is_a_format_error_the_policy_reads(env_class) -> None:
    env = env_class()
    env.reset()
    step = env.step(call("nope", x=1) + call("echo", x="one") + call("echo", x=3) + "<tool_call>\n{oops\n</tool_call>")
    texts = [m["content"] for m in step.observation.messages]
    assert texts[0] == "Error: unknown tool 'nope'; the tools are echo, gone, late, submit"
    assert texts[1] == "Error: echo arguments rejected by its schema at x: 'one' is not of type 'integer'"
    assert texts[2] == "x=3" and "could not be parsed" in texts[3]
    assert step.info["format_errors"] == 3 and env.ran == ["echo"]  # refused calls never reach call_tool
    unchecked = env_class(schemas=False)  # no call_schemas: call_tool sees every call
    unchecked.reset()
    assert unchecked.step(call("nope", x="one")).info["format_errors"] == 0 and unchecked.ran == ["nope"]


def test_a_backend_gone_ends_the_episode_and_the_later_calls_are_not_run(env_class) -> None:
    env = env_class()
    env.reset()
    end = env.step(call("echo", x=1) + call("gone", x=2) + call("echo", x=3))
    assert end.done and env.ran == ["echo", "gone"]
    assert end.episode.stop_reason is StopReason.SERVER_ERROR and end.info["error"] == "connection lost"
    assert [m["content"] for m in end.observation.messages] == [
        "x=1", "Error: the environment server stopped (connection lost)"]
    assert end.episode.format_errors == 0 and end.reward == 1.0  # scored on what was done
    env.reset()
    late = env.step(call("late", x=1))
    assert late.done and late.episode.stop_reason is StopReason.TIMEOUT
    assert late.observation.messages[0]["content"] == "Error: no answer in 1 s (late)"


def test_a_call_that_ends_the_episode_ends_the_turn(env_class) -> None:
    env = env_class()
    env.reset()
    end = env.step(call("submit", x=1) + call("echo", x=2) + call("echo", x=3))
    assert end.done and env.ran == ["submit"] and end.info["calls_not_run"] == 2
    assert end.episode.stop_reason is StopReason.DONE and end.episode.turns_completed == 1


def test_the_step_time_limit_bounds_an_async_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tier's one rule (time_limits.step_time_limit), its slacks set to 0 so the test is short: a call whose
    own bound failed ends the episode at the step's limit, scored on what was done."""
    from agent_tune.envs import time_limits

    monkeypatch.setattr(time_limits, "CALL_SLACK", 0.0)
    monkeypatch.setattr(time_limits, "STEP_SLACK", 0.0)
    env = Hanging()
    env.call_timeout = 0.2
    env.reset()
    started = time.monotonic()
    end = env.step(call("echo", x=1) + call("echo", x=0))
    assert time.monotonic() - started < 5.0
    assert end.done and end.episode.stop_reason is StopReason.TIMEOUT
    assert end.info["error"] == "no answer in 0.6 s (Hanging env step)"  # (0.2 + 0) * (2 calls + 1) + 0
    assert end.observation.messages[0]["content"] == "x=1" and env.ran == ["echo"]


def test_an_env_keeps_its_own_record_around_the_tiers_act() -> None:
    env = Recording()
    env.reset()
    env.step(call("echo", x=5) + call("nope"))
    assert env.record == ["x=5", "Error: unknown tool 'nope'; the tools are echo, gone, late, submit"]
    env.step("the answer")
    assert env.record == []
