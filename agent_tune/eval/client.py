"""The evaluator's client for its OpenAI-compatible inference server (vLLM, SGLang, ...).

It is :class:`agent_tune.openai_client.AsyncClient` (one aiohttp session, the client the simulated user and
tau2's judge's start-up check use too): check at start-up that the server answers and serves the requested model
(:meth:`OpenAIClient.check_model`), and POST JSON bodies exactly as the policies build them (token-id
prompts, vLLM's ``return_token_ids``, ...) with a timeout and retries with exponential backoff on transient
failures (5xx, 429, connection errors, timeouts). Client errors (4xx) are not retried: they mean the request
itself is wrong. This module only words the start-up errors for ``agent-tune eval`` (its flags, how to start
vLLM).
"""

from __future__ import annotations

from dataclasses import replace

from agent_tune.openai_client import (
    TRANSIENT_STATUSES,
    AsyncClient,
    ModelInfo,
    ModelNotFoundError,
    RequestError,
    RetryPolicy,
    ServerError,
    ServerUnavailableError,
    parse_models,
)

__all__ = [
    "TRANSIENT_STATUSES",
    "ModelInfo",
    "ModelNotFoundError",
    "OpenAIClient",
    "RequestError",
    "RetryPolicy",
    "ServerError",
    "ServerUnavailableError",
]

START_HINT = ("Start one, e.g. `python -m vllm.entrypoints.openai.api_server --model DIR --served-model-name NAME`, "
              "and check --base-url (it ends in /v1)")
MODEL_HINT = "pass one of these to --model, or start vLLM with --served-model-name"


class OpenAIClient(AsyncClient):
    """Async JSON client for the evaluated server's base URL (``http://host:port/v1``).

    Use as an async context manager, or call :meth:`close`. ``timeout`` bounds one request (seconds);
    ``connect_timeout`` bounds connecting, so a dead server is reported at once. ``max_connections``: the
    session's pool (the evaluator gives it twice its concurrency). Why aiohttp and not the ``openai`` SDK: the
    measurement in docs/results.md ("The eval's HTTP client").
    """

    async def list_models(self, retries: int = 0) -> list[ModelInfo]:
        """``GET /models`` (no retries by default: used to fail fast); the errors say how to fix the command."""
        try:
            data = await self.request("GET", "models", retry=replace(self.retry, max_retries=retries))
        except ServerUnavailableError as exc:
            raise ServerUnavailableError(
                f"no OpenAI-compatible server answers at {self.base_url} ({exc}). {START_HINT}", exc.url
            ) from None
        except RequestError as exc:
            raise ServerUnavailableError(
                f"{self.base_url}/models answered {exc}; is --base-url right (it ends in /v1)?"
            ) from None
        return parse_models(data, self.base_url, self.what)

    async def check_model(self, model: str, hint: str = MODEL_HINT) -> ModelInfo:
        """Fail fast unless the server is up and serves ``model``; return its info."""
        return await super().check_model(model, hint)
