"""Simulated users: config checks, the scripted user, the LLM user against a loopback OpenAI-compatible server."""

from __future__ import annotations

import asyncio

import pytest

from agent_tune.users import (
    LLMUser,
    ScriptedUser,
    UserConfig,
    UserError,
    UserReply,
    UserUnavailableError,
    make_user,
    run_sync,
)
from tests.test_openai_client import unclosed_warnings
from tests.users.fake_openai import FakeOpenAI, completion, free_port_url

MESSAGES = [{"role": "system", "content": "You are a user."}, {"role": "user", "content": "Hi! How can I help?"}]


def test_config_errors_name_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="user.kind"):
        UserConfig.parse({"kind": "robot"}, "user")
    with pytest.raises(ValueError, match="user.base_url"):
        UserConfig.parse({"kind": "llm", "model": "m"}, "user")
    with pytest.raises(ValueError, match="user.temperature"):
        UserConfig.parse({"base_url": "http://x/v1", "model": "m", "temperature": 5}, "user")
    with pytest.raises(ValueError, match="unknown keys"):
        UserConfig.parse({"base_url": "http://x/v1", "model": "m", "temprature": 0.5}, "user")
    monkeypatch.delenv("AT_TEST_USER_KEY", raising=False)
    with pytest.raises(ValueError, match="AT_TEST_USER_KEY"):
        UserConfig.parse({"base_url": "http://x/v1", "model": "m", "api_key_env": "AT_TEST_USER_KEY"}, "user")
    assert isinstance(make_user({"kind": "scripted", "turns": ["a"]}), ScriptedUser)


def test_scripted_user_replays_then_stops() -> None:
    user = ScriptedUser(["first", {"content": None, "tool_calls": [{"name": "toggle", "arguments": {"on": True}}]}])
    replies = [run_sync(user.reply(MESSAGES, None)) for _ in range(3)]
    assert replies[0] == UserReply("first")
    assert replies[1].content is None and replies[1].tool_calls[0].name == "toggle"
    assert replies[2].content == "###STOP###" and len(user.seen) == 3
    with pytest.raises(ValueError, match="turn 0"):
        ScriptedUser([{"content": None}])


def test_llm_user_sends_the_conversation_and_decodes_the_reply(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AT_TEST_USER_KEY", "sekret")
    with FakeOpenAI() as server:
        server.queue.append(completion(None, [{"name": "toggle_airplane_mode", "arguments": {}}]))
        user = LLMUser(server.user_config(temperature=0.3, max_tokens=64, api_key_env="AT_TEST_USER_KEY"))
        user.health_check()
        tools = [{"type": "function", "function": {"name": "toggle_airplane_mode", "parameters": {}}}]
        reply = run_sync(user.reply(MESSAGES, tools))
        assert reply.content is None and reply.tool_calls[0].name == "toggle_airplane_mode"
        body = server.requests[-1]
        assert body["model"] == "user-model" and body["temperature"] == 0.3 and body["max_tokens"] == 64
        assert body["messages"] == MESSAGES and body["tools"] == tools and body["tool_choice"] == "auto"
        assert [(m, p, h.get("authorization")) for m, p, h in server.seen] == [
            ("GET", "/v1/models", "Bearer sekret"), ("POST", "/v1/chat/completions", "Bearer sekret")]


def test_llm_user_retries_garbage_then_gives_a_clear_error() -> None:
    with FakeOpenAI() as server:
        server.queue.extend([500, "not json", {"choices": []}])  # three bad answers, then a good one
        user = LLMUser(server.user_config(max_retries=3))
        assert run_sync(user.reply(MESSAGES, None)).content == "Please help me."
        bad_call = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "1", "type": "function", "function": {"name": "x", "arguments": "{not json"}}]}}]}
        server.queue.extend([completion("   "), bad_call, 429, "garbage"])
        with pytest.raises(UserError, match=r"failed 4 times; last: answer is not JSON"):
            run_sync(user.reply(MESSAGES, None))


def test_health_check_names_the_url() -> None:
    url = free_port_url()
    with pytest.raises(UserUnavailableError, match=url.replace(".", r"\.")):
        LLMUser({"base_url": url, "model": "m"}).health_check()
    with FakeOpenAI() as server:
        with pytest.raises(UserUnavailableError, match="does not serve model 'other'"):
            LLMUser({"base_url": server.base_url, "model": "other"}).health_check()


def test_user_down_mid_run_is_a_user_error() -> None:
    user = LLMUser({"base_url": free_port_url(), "model": "m", "max_retries": 1, "backoff_s": 0.0})
    with pytest.raises(UserError, match="failed 2 times; last: ConnectError: Cannot connect to host"):
        run_sync(user.reply(MESSAGES, None))


def test_each_reply_closes_its_client() -> None:
    with FakeOpenAI() as server:
        user = LLMUser(server.user_config())
        server.queue.append(500)  # a retried failure, then the answer

        def replies() -> None:
            assert run_sync(user.reply(MESSAGES, None)).content == "Please help me."
            user.health_check()
            server.default = "garbage"
            with pytest.raises(UserError):
                run_sync(user.reply(MESSAGES, None))

        assert unclosed_warnings(replies) == []
        assert len(server.requests) == 5


async def test_run_sync_works_inside_a_running_loop() -> None:
    user = ScriptedUser(["inside"])
    assert run_sync(user.reply(MESSAGES, None)).content == "inside"
    assert (await asyncio.gather(ScriptedUser(["a"]).reply(MESSAGES, None)))[0].content == "a"
