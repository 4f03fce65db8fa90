"""The eval's client (agent_tune.eval.client.OpenAIClient, the shared aiohttp client): its start-up errors
say how to fix the ``agent-tune eval`` command, and the token-mode body reaches the server field for field."""

from __future__ import annotations

import re

import pytest

from agent_tune.eval.client import ModelNotFoundError, OpenAIClient, RetryPolicy, ServerUnavailableError
from agent_tune.eval.policies import CompletionsPolicy, parse_completion
from tests.users.fake_openai import FakeOpenAI, free_port_url


async def test_start_up_errors_name_the_url_and_the_fix() -> None:
    url = free_port_url()
    async with OpenAIClient(url) as client:
        expected = (rf"no OpenAI-compatible server answers at {re.escape(url)} \(GET {re.escape(url)}/models failed "
                    r"after 1 attempts; last error: ConnectError: Cannot connect to host .*\)\. Start one")
        with pytest.raises(ServerUnavailableError, match=expected):
            await client.check_model("m")
    with FakeOpenAI(model="smol") as server:
        async with OpenAIClient(server.base_url) as client:
            with pytest.raises(ModelNotFoundError, match=r"does not serve model 'x'; it serves: 'smol' \(pass one of "
                                                         r"these to --model, or start vLLM with --served-model-name\)"):
                await client.check_model("x")


async def test_token_mode_body_reaches_the_server_and_token_ids_come_back() -> None:
    answer = {"choices": [{"index": 0, "text": "ok", "finish_reason": "stop", "token_ids": [5, 6],
                           "logprobs": {"token_logprobs": [-0.1, -0.2], "tokens": []}}],
              "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
    with FakeOpenAI(model="smol", default=answer) as server:
        server.queue.append(503)  # a transient failure: retried
        async with OpenAIClient(server.base_url, retry=RetryPolicy(base_delay=0.0)) as client:
            policy = CompletionsPolicy(client, "smol", max_model_len=100)
            body = policy.request_body([1, 2, 3], {"temperature": 0.5, "top_k": 20, "stop_token_ids": [6]})
            out = await policy.generate([1, 2, 3], {"temperature": 0.5, "top_k": 20, "stop_token_ids": [6]})
            assert client.retries == 1
    assert out.token_ids == [5, 6] and out.log_probs == [-0.1, -0.2]
    assert server.requests == [body, body] and body["return_token_ids"] is True and body["top_k"] == 20
    assert body["prompt"] == [1, 2, 3] and body["max_tokens"] == 97 and body["logprobs"] == 0
    assert parse_completion(answer).token_ids == [5, 6]
