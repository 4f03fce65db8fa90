"""Bad input to the tau2 env: unknown tools, malformed arguments, broken call blocks, empty messages, a user
server that answers garbage or is down. Nothing raises; failures are observations, format errors, or an
episode ended with the reason in its info."""

from __future__ import annotations

import threading
import time

import pytest

from agent_tune.envs import get_env_class, make_env
from tests.envs.tau2_helpers import hermes
from tests.users.fake_openai import FakeOpenAI, completion, free_port_url

MOCK = {"domain": "mock", "task_id": "create_task_1"}
USER = {"kind": "scripted", "turns": ["Create a task please."]}


def _env(**kwargs):
    env = make_env("tau2", **{**MOCK, "user": USER, **kwargs})
    env.reset()
    return env


def test_unknown_tool_is_tau2s_error_and_a_format_error() -> None:
    env = _env()
    r = env.step(hermes("launch_rocket", {"when": "now"}))
    assert not r.done and r.info["format_errors"] == 1
    assert r.observation.messages[0]["content"].startswith("Error:") and "launch_rocket" in r.info["call_problems"][0]
    assert env.episode.num_errors == 1  # counted towards tau2's max_errors
    r = env.step("Sorry. ###STOP###")
    assert r.done and r.episode.format_errors == 1 and r.info["tau2_errors"] == 1
    assert r.info["format_errors"] == 0  # this step's own: the answer was well-formed


def test_malformed_arguments_run_on_tau2_and_count() -> None:
    env = _env()
    r = env.step(hermes("create_task", {"title": "no user"}))  # user_id missing
    assert not r.done and r.info["format_errors"] == 1 and "missing ['user_id']" in r.info["call_problems"][0]
    assert r.observation.messages[0]["content"].startswith("Error:")
    r = env.step(hermes("create_task", {"user_id": "user_1", "title": "T", "colour": "red"}))
    assert r.info["format_errors"] == 1 and "unexpected ['colour']" in r.info["call_problems"][0]


def test_undecodable_block_is_answered_not_recorded() -> None:
    env = _env()
    r = env.step('<tool_call>\n{"name": "create_task", "arguments": \n</tool_call>')
    assert not r.done and r.info["format_errors"] == 1
    assert r.observation.messages[0]["content"].startswith("Error: tool call #1 could not be parsed")
    assert [m.role for m in env.episode.trajectory] == ["assistant", "user"]  # nothing recorded for tau2
    assert env.episode.num_errors == 1
    r = env.step('Let me do that. <tool_call>\n{"name": "create_task"\n</tool_call>')  # text + a broken block
    assert not r.done and r.info["format_errors"] == 1 and len(env.user.seen) == 1  # the user heard nothing
    assert [m["role"] for m in r.observation.messages] == ["tool"] and env.episode.num_errors == 2


def test_empty_message_ends_as_agent_error() -> None:
    env = _env()
    r = env.step("   ")
    assert r.done and r.reward == 0.0 and r.info["termination_reason"] == "agent_error"
    assert r.info["error"] == "empty agent message"


def test_user_server_garbage_mid_run_ends_the_episode_with_the_reason() -> None:
    with FakeOpenAI() as server:
        env = make_env("tau2", **MOCK, user=server.user_config(max_retries=1))
        obs = env.reset()
        assert obs.messages[-1] == {"role": "user", "content": "Please help me."}
        server.default = "<<garbage>>"
        r = env.step("What is your user id?")
        assert r.done and r.reward == 0.0 and r.info["termination_reason"] == "user_error"
        assert "failed 2 times" in r.info["error"] and server.base_url in r.info["error"]


def test_user_server_gone_mid_run_ends_the_episode_with_the_reason() -> None:
    with FakeOpenAI() as server:
        env = make_env("tau2", **MOCK, user=server.user_config(max_retries=1, timeout_s=2.0))
        env.reset()
    r = env.step("What is your user id?")  # the server has stopped: connection refused on every try
    assert r.done and r.reward == 0.0 and r.info["termination_reason"] == "user_error"
    assert "failed 2 times" in r.info["error"] and "ConnectError" in r.info["error"]


def test_user_failing_on_the_first_message_ends_at_the_first_step() -> None:
    with FakeOpenAI(default=500) as server:
        env = make_env("tau2", **MOCK, user=server.user_config(max_retries=0))
        obs = env.reset()  # no exception: the episode is already over
        assert [m["role"] for m in obs.messages] == ["system", "assistant"]
        r = env.step("Hello?")
        assert r.done and r.info["termination_reason"] == "user_error" and "HTTP 500" in r.info["error"]


def test_user_tool_calls_from_the_server_reach_the_environment() -> None:
    with FakeOpenAI() as server:
        server.queue.extend([completion("Hi"), completion(None, [{"name": "no_such_user_tool"}]), completion("ok")])
        env = make_env("tau2", **MOCK, user=server.user_config())
        env.reset()
        r = env.step("Please check.")
        assert r.observation.messages == [{"role": "user", "content": "ok"}]
        tool = [m for m in env.episode.trajectory if m.role == "tool"][0]
        assert tool.requestor == "user" and tool.error  # mock gives the user no tools: tau2's error, counted
        assert server.requests[-1]["messages"][-1]["role"] == "tool"


def test_user_server_down_at_start_up_fails_naming_the_url() -> None:
    url = free_port_url()
    with pytest.raises(ValueError, match=f"user simulator at {url} is unreachable"):
        get_env_class("tau2").check_kwargs({**MOCK, "user": {"base_url": url, "model": "m"}})
    with FakeOpenAI() as server:
        get_env_class("tau2").check_kwargs({**MOCK, "user": server.user_config()})


class StallingUser:
    """A user class by path whose reply blocks (not awaits: a synchronous call inside) on its ``stall_at``-th reply
    (counted from 1) until the test releases it."""

    release = threading.Event()

    def __init__(self, stall_at: int = 2) -> None:
        self.stall_at, self.replies = stall_at, 0

    async def reply(self, messages, tools):
        from agent_tune.users import UserReply

        self.replies += 1
        if self.replies == self.stall_at:
            self.release.wait(60)
        return UserReply("Create a task please.")


def test_a_user_that_does_not_answer_in_time_follows_the_time_limit_rule() -> None:
    """call_timeout bounds each user reply (a user that blocks too): the episode ends, stop reason timeout; a first
    message with no answer in start_timeout makes reset raise StartTimeoutError (the runner counts it)."""
    from agent_tune.envs.time_limits import StartTimeoutError

    user = {"kind": f"{__name__}:StallingUser", "kwargs": {"stall_at": 2}}
    try:
        env = make_env("tau2", **MOCK, user=user, call_timeout=1.0)
        env.reset()
        t0 = time.monotonic()
        r = env.step("What is your user id?")
        assert time.monotonic() - t0 < 5.0
        assert r.done and r.info["stop_reason"] == "timeout" and r.info["termination_reason"] == "user_error"
        assert r.info["error"] == "no answer in 1 s (tau2 user reply)" and r.reward == 0.0
        first = make_env("tau2", **MOCK, user={**user, "kwargs": {"stall_at": 1}}, start_timeout=1.0)
        with pytest.raises(StartTimeoutError, match=r"no answer in 1 s \(tau2 user's first message\)"):
            first.reset()
    finally:
        StallingUser.release.set()
    llm = make_env("tau2", **MOCK, user={"kind": "llm", "base_url": "http://127.0.0.1:9/v1", "model": "m",
                                          "timeout_s": 10.0, "max_retries": 2, "backoff_s": 1.0})
    assert llm.call_timeout == llm.start_timeout == 10.0 * 3 + 1.0 * 3 + 5.0  # every try the user's options allow
    with pytest.raises(ValueError, match="call_timeout"):
        make_env("tau2", **MOCK, user=USER, call_timeout=0)
