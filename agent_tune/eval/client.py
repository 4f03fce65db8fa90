"""A small async client for OpenAI-compatible inference servers (vLLM, SGLang, ...).

It does three things the evaluator needs and nothing else: check at start-up that the server answers and
serves the requested model (:meth:`OpenAIClient.check_model`), and POST JSON with a timeout and retries with
exponential backoff on transient failures (5xx, 429, connection errors, timeouts). Client errors (4xx) are
not retried: they mean the request itself is wrong.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any

import aiohttp

# HTTP statuses worth retrying: the server is overloaded or restarting, not the request wrong.
TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


class ServerError(RuntimeError):
    """Base class of the errors the client raises."""


class ServerUnavailableError(ServerError):
    """The server cannot be reached (refused, DNS, timeout) or keeps failing after all retries."""


class ModelNotFoundError(ServerError):
    """The server is up but does not serve the requested model name."""


class RequestError(ServerError):
    """The server rejected a request (4xx other than 408/429); retrying would not help."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff: ``base_delay * 2**attempt`` (capped at ``max_delay``) with +-25 % jitter."""

    max_retries: int = 5
    base_delay: float = 0.5
    max_delay: float = 20.0

    def delay(self, attempt: int) -> float:
        d = min(self.max_delay, self.base_delay * (2**attempt))
        return d * random.uniform(0.75, 1.25)


@dataclass(frozen=True)
class ModelInfo:
    """What ``/v1/models`` says about the served model (``max_model_len`` is vLLM's extension)."""

    id: str
    max_model_len: int | None = None
    root: str | None = None


class OpenAIClient:
    """Async JSON client for one OpenAI-compatible base URL (``http://host:port/v1``).

    Use as an async context manager, or call :meth:`close`. ``timeout`` bounds one request (seconds);
    ``connect_timeout`` bounds connecting, so a dead server is reported at once.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        retry: RetryPolicy = RetryPolicy(),
        max_connections: int = 256,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base URL must start with http:// or https://, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = aiohttp.ClientTimeout(total=timeout, sock_connect=connect_timeout)
        self.retry = retry
        self.max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self.requests_sent = 0
        self.retries = 0

    async def __aenter__(self) -> "OpenAIClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._session = aiohttp.ClientSession(
                timeout=self.timeout,
                headers=headers,
                connector=aiohttp.TCPConnector(limit=self.max_connections),
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    # ------------------------------------------------------------------ requests
    async def _request(self, method: str, path: str, payload: dict[str, Any] | None, retries: int) -> Any:
        url = f"{self.base_url}/{path.lstrip('/')}"
        last: str = ""
        for attempt in range(retries + 1):
            if attempt:
                self.retries += 1
                await asyncio.sleep(self.retry.delay(attempt - 1))
            try:
                self.requests_sent += 1
                async with self._get_session().request(method, url, json=payload) as resp:
                    text = await resp.text()
                    if resp.status < 400:
                        try:
                            return await resp.json(content_type=None)
                        except ValueError:
                            raise ServerUnavailableError(
                                f"{url} answered HTTP {resp.status} with non-JSON: {text[:200]!r}"
                            )
                    message = _error_message(text)
                    if resp.status not in TRANSIENT_STATUSES:
                        raise RequestError(resp.status, message)
                    last = f"HTTP {resp.status}: {message}"
            except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, asyncio.TimeoutError) as exc:
                last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise ServerUnavailableError(f"{method} {url} failed after {retries + 1} attempts; last error: {last}")

    async def post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        """POST ``payload`` to ``base_url/path``, retrying transient failures; return the JSON answer."""
        return await self._request("POST", path, payload, self.retry.max_retries)

    async def list_models(self, retries: int = 0) -> list[ModelInfo]:
        """``GET /models`` (no retries by default: used to fail fast)."""
        try:
            data = await self._request("GET", "models", None, retries)
        except ServerUnavailableError as exc:
            raise ServerUnavailableError(
                f"no OpenAI-compatible server answers at {self.base_url} ({exc}). Start one, e.g. "
                "`python -m vllm.entrypoints.openai.api_server --model DIR --served-model-name NAME`, "
                "and check --base-url (it ends in /v1)"
            ) from None
        except RequestError as exc:
            raise ServerUnavailableError(
                f"{self.base_url}/models answered {exc}; is --base-url right (it ends in /v1)?"
            ) from None
        rows = data.get("data") if isinstance(data, dict) else None
        if not isinstance(rows, list):
            raise ServerUnavailableError(
                f"{self.base_url}/models did not return an OpenAI model list: {str(data)[:200]}"
            )
        return [
            ModelInfo(
                str(r.get("id")),
                r.get("max_model_len") if isinstance(r.get("max_model_len"), int) else None,
                r.get("root"),
            )
            for r in rows
            if isinstance(r, dict)
        ]

    async def check_model(self, model: str) -> ModelInfo:
        """Fail fast unless the server is up and serves ``model``; return its info."""
        models = await self.list_models()
        for info in models:
            if info.id == model:
                return info
        served = ", ".join(repr(m.id) for m in models) or "none"
        raise ModelNotFoundError(
            f"the server at {self.base_url} does not serve model {model!r}; it serves: {served} "
            "(pass one of these to --model, or start vLLM with --served-model-name)"
        )


def _error_message(text: str) -> str:
    """The ``message`` of an OpenAI-style error body, or the body itself (shortened)."""
    import json

    try:
        body = json.loads(text)
    except ValueError:
        return text[:500]
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and "message" in err:
            return str(err["message"])[:500]
        if isinstance(body.get("message"), str):
            return body["message"][:500]
    return text[:500]
