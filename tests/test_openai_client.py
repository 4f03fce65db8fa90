"""agent_tune.openai_client, the one client for OpenAI-compatible servers (the eval's, the simulated user's, the
judge's start-up check), against a loopback OpenAI-compatible server (tests/users/fake_openai.py)."""

from __future__ import annotations

import asyncio
import gc
import re
import time
import warnings

import pytest

from agent_tune.openai_client import (
    AsyncClient,
    ModelNotFoundError,
    RequestError,
    RetryPolicy,
    ServerUnavailableError,
    UnusableAnswerError,
    check_model,
)
from tests.users.fake_openai import FakeOpenAI, completion, free_port_url

NO_WAIT = RetryPolicy(max_retries=2, base_delay=0.0)
CHAT = {"model": "user-model", "messages": [{"role": "user", "content": "Hi"}]}


def test_health_check_names_the_url_and_what_is_served() -> None:
    url = free_port_url()
    with pytest.raises(ServerUnavailableError, match=rf"NL judge at {re.escape(url)} is unreachable .*"
                                                     rf"GET {re.escape(url)}/models: ConnectError"):
        check_model(url, "m", what="NL judge")
    with FakeOpenAI(model="served") as server:
        assert check_model(server.base_url + "/", "served").id == "served"
        with pytest.raises(ModelNotFoundError, match=rf"the server at {re.escape(server.base_url)} does not serve "
                                                     r"model 'other'; it serves: 'served' \(try --model\)") as info:
            check_model(server.base_url, "other", hint="try --model")
        assert info.value.served == ("served",)


async def test_async_health_check_names_the_url() -> None:
    url = free_port_url()
    async with AsyncClient(url, what="user simulator") as client:
        with pytest.raises(ServerUnavailableError, match=rf"user simulator at {re.escape(url)} is unreachable"):
            await client.check_model("m")
    with FakeOpenAI(model="served") as server:
        async with AsyncClient(server.base_url) as client:
            assert (await client.check_model("served")).id == "served"
            with pytest.raises(ModelNotFoundError, match="does not serve model 'x'; it serves: 'served'"):
                await client.check_model("x")
    assert [(m, p) for m, p, _ in server.seen] == [("GET", "/v1/models")] * 2


async def test_transient_errors_are_retried_then_fail_with_a_clear_error() -> None:
    overloaded = (503, {"error": {"message": "overloaded"}})
    with FakeOpenAI() as server:
        async with AsyncClient(server.base_url, retry=NO_WAIT) as client:
            server.queue.extend([overloaded, 429])  # two transient failures, then the answer
            assert (await client.post("chat/completions", CHAT))["choices"][0]["message"]["content"]
            assert len(server.requests) == 3 and client.retries == 2 and client.requests_sent == 3

            server.queue.extend([overloaded] * 3)  # one try and two retries, all failing
            with pytest.raises(ServerUnavailableError) as info:
                await client.post("chat/completions", CHAT)
            assert str(info.value) == (f"POST {server.base_url}/chat/completions failed after 3 attempts; "
                                       "last error: HTTP 503: overloaded")
            assert info.value.attempts == 3 and info.value.last == "HTTP 503: overloaded"

            server.queue.append((400, {"error": {"message": "prompt too long"}}))  # the request is wrong: no retry
            n = len(server.requests)
            with pytest.raises(RequestError, match="HTTP 400: prompt too long") as bad:
                await client.post("chat/completions", CHAT)
            assert bad.value.status == 400 and bad.value.message == "prompt too long"
            assert len(server.requests) == n + 1

    async with AsyncClient(free_port_url(), retry=RetryPolicy(max_retries=1, base_delay=0.0)) as client:  # refused
        with pytest.raises(ServerUnavailableError, match="failed after 2 attempts; last error: ConnectError: Cannot "
                                                         "connect to host"):
            await client.post("completions", {})


async def test_a_timeout_is_retried_and_named() -> None:
    def slow(body):
        time.sleep(1.0)
        return completion("late")

    with FakeOpenAI(default=slow) as server:
        async with AsyncClient(server.base_url, timeout=0.2, retry=RetryPolicy(max_retries=1, base_delay=0.0)) as c:
            with pytest.raises(ServerUnavailableError, match="failed after 2 attempts; last error: "
                                                             "ReadTimeout: no complete answer within 0.2 s"):
                await c.post("chat/completions", CHAT)


async def test_the_body_and_extra_body_reach_the_server_exactly() -> None:
    body = {"model": "m", "prompt": [151644, 872, 198], "max_tokens": None, "n": 1, "stream": False,
            "return_token_ids": True, "skip_special_tokens": False, "logprobs": 0, "stop_token_ids": [151645],
            "include_stop_str_in_output": True}
    with FakeOpenAI() as server:
        async with AsyncClient(server.base_url) as client:
            await client.post("/completions", body, extra_body={"top_k": 20, "min_p": 0.05, "return_token_ids": True})
    assert server.requests == [{**body, "top_k": 20, "min_p": 0.05}]
    assert server.seen[0][:2] == ("POST", "/v1/completions")


async def test_bad_answers_fail_at_once_unless_the_policy_retries_them() -> None:
    def decode(data):
        if not data.get("choices"):
            raise UnusableAnswerError("no choices")
        return data["choices"][0]["message"]["content"]

    with FakeOpenAI() as server:
        async with AsyncClient(server.base_url, retry=NO_WAIT) as client:
            server.queue.append("not json")
            with pytest.raises(ServerUnavailableError, match="answered HTTP 200 with non-JSON: 'not json'"):
                await client.post("chat/completions", CHAT)
            assert len(server.requests) == 1

            persistent = RetryPolicy.persistent(3, 0.0)
            server.queue.extend(["not json", {"choices": []}, 404])  # every failure retried, then the answer
            assert await client.post("chat/completions", CHAT, decode=decode, retry=persistent) == "Please help me."
            server.queue.extend(["oops", {"choices": []}, 500, "garbage"])
            with pytest.raises(ServerUnavailableError, match="failed after 4 attempts; last error: answer is not JSON"):
                await client.post("chat/completions", CHAT, decode=decode, retry=persistent)


async def test_no_key_sends_no_authorization_and_nothing_comes_from_the_environment(monkeypatch) -> None:
    for var, value in [("OPENAI_API_KEY", "sk-for-openai"), ("OPENAI_ADMIN_KEY", "admin"), ("OPENAI_ORG_ID", "org"),
                       ("OPENAI_PROJECT_ID", "proj")]:
        monkeypatch.setenv(var, value)
    with FakeOpenAI() as server:
        async with AsyncClient(server.base_url) as client:
            await client.post("chat/completions", CHAT)
            await client.check_model("user-model")
        check_model(server.base_url, "user-model")
        async with AsyncClient(server.base_url, api_key="sekret") as client:
            await client.post("chat/completions", CHAT)
        check_model(server.base_url, "user-model", api_key="sekret")
    sent = [headers for _, _, headers in server.seen]
    assert len(sent) == 5
    for headers in sent:
        assert "openai-organization" not in headers and "openai-project" not in headers
        assert "for-openai" not in str(headers) and "admin" not in str(headers)
    assert ["authorization" in h for h in sent] == [False, False, False, True, True]
    assert sent[-1]["authorization"] == "Bearer sekret"


def unclosed_warnings(run) -> list[str]:
    """The "Unclosed client session / connector" warnings aiohttp gives while ``run()`` runs and its garbage
    is collected."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run()
        gc.collect()
    return [str(w.message) for w in caught if "Unclosed" in str(w.message)]


def test_sessions_are_closed_and_a_closed_client_reopens() -> None:
    async def used_and_closed(url: str) -> None:
        client = AsyncClient(url)
        assert await client.check_model("user-model")
        await client.close()
        await client.post("chat/completions", CHAT)  # a new session, closed on exit
        await client.__aexit__(None, None, None)
        async with AsyncClient(url):  # never used: no session to close
            pass

    async def left_open(url: str) -> None:
        await AsyncClient(url).post("chat/completions", CHAT)

    with FakeOpenAI() as server:
        assert unclosed_warnings(lambda: asyncio.run(used_and_closed(server.base_url))) == []
        assert unclosed_warnings(lambda: check_model(server.base_url, "user-model")) == []
        leaked = unclosed_warnings(lambda: asyncio.run(left_open(server.base_url)))  # the check sees a leak
    assert any("Unclosed client session" in w for w in leaked)
    assert [m for m, _, _ in server.seen] == ["GET", "POST", "GET", "POST"]


def test_retry_policy_delays() -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=20.0)  # +-25 % jitter, capped
    for attempt in range(8):
        base = min(20.0, 0.5 * 2**attempt)
        assert 0.75 * base <= policy.delay(attempt) <= 1.25 * base
    assert policy.retries_status(503) and policy.retries_status(429) and not policy.retries_status(404)
    persistent = RetryPolicy.persistent(3, 1.0)  # a config's max_retries and backoff_s: every failure, no jitter
    assert [persistent.delay(k) for k in range(4)] == [1.0, 2.0, 4.0, 8.0]
    assert persistent.max_retries == 3 and persistent.retries_status(404) and persistent.bad_answers
    with pytest.raises(ValueError, match="http:// or https://"):
        AsyncClient("127.0.0.1:8000/v1")
