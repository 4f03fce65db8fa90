"""One client for OpenAI-compatible servers (vLLM, SGLang, a hosted API), on aiohttp.

The evaluator's policy server (:mod:`agent_tune.eval.client`), the simulated user (:mod:`agent_tune.users.llm`)
and the start-up check of tau2's NL-assertion judge (:mod:`agent_tune.envs.tau2.judge`) all go through it:

* :class:`AsyncClient`: one base URL (``http://host:port/v1``), one ``aiohttp.ClientSession`` (opened at the
  first request, closed by :meth:`AsyncClient.close` / ``async with``; building a client costs nothing, so the
  simulated user builds one per reply). :meth:`AsyncClient.post` sends a JSON body *as given* and returns the
  JSON answer, so vLLM's own fields (a ``prompt`` of token ids, ``return_token_ids``, ``stop_token_ids``,
  ``skip_special_tokens``, ...) reach the server exactly; more can ride in ``extra_body`` (merged into the
  body). No SDK: the ``openai`` SDK's async client made fewer requests/s and spent more CPU per request at the
  eval's concurrency, and its typed ``completions.create`` walks every token id of a prompt through its
  parameter transform (measured: docs/results.md, "The eval's HTTP client").
* :class:`RetryPolicy`: one retry loop for every caller (one budget counts transport errors, retried HTTP
  statuses and, where the caller asks, unusable answers), exponential backoff with jitter.
* :meth:`AsyncClient.check_model` / :func:`check_model`: the start-up health check (async / sync): the
  server answers ``GET <base_url>/models`` and lists the model; the errors name the URL and what it serves.
* Errors (:class:`ServerError` and subclasses) with one-line reasons (``HTTP 503: overloaded``,
  ``ConnectError: Cannot connect to host ...``, ``ReadTimeout: no complete answer within 600 s``,
  ``answer is not JSON: ...``).

Without an API key no ``Authorization`` header is sent; nothing is read from the environment (no
``OPENAI_*`` key, no proxy variables), so a key meant for api.openai.com never goes to a local server.
"""

from __future__ import annotations

import asyncio
import json
import math
import random
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, TypeVar

import aiohttp

from agent_tune.errors import RolloutError
from agent_tune.sync import run_sync

T = TypeVar("T")

# HTTP statuses worth retrying: the server is overloaded or restarting, not the request wrong.
TRANSIENT_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
# What a try can fail with before an answer arrives: refused, reset, DNS, a broken body, timeouts.
TRANSPORT_ERRORS = (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, asyncio.TimeoutError)
_CONNECT_TIMEOUT = getattr(aiohttp, "ConnectionTimeoutError", ())  # aiohttp >= 3.10 tells it from a read timeout


class ServerError(RolloutError, RuntimeError):
    """Base class of the errors the client raises."""


class ServerUnavailableError(ServerError):
    """The server cannot be reached (refused, DNS, timeout), answers garbage, or keeps failing after all
    tries. ``url``: what was asked; ``attempts`` and ``last`` (the last try's reason) when tries ran out."""

    def __init__(self, message: str, url: str | None = None, attempts: int | None = None,
                 last: str | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.attempts = attempts
        self.last = last


class ModelNotFoundError(ServerError):
    """The server is up but does not serve the requested model name (``served``: the names it lists)."""

    def __init__(self, message: str, served: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.served = served


class RequestError(ServerError):
    """The server rejected a request with a status the policy does not retry (4xx other than 408/429)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


class UnusableAnswerError(ServerError):
    """Raised by a ``decode`` function given to :meth:`AsyncClient.post`: the answer (valid JSON) cannot be
    used; retried when the policy retries bad answers."""


@dataclass(frozen=True)
class RetryPolicy:
    """How a request is retried.

    ``max_retries`` tries after the first; before retry ``k`` (0-based) it waits
    ``min(max_delay, base_delay * 2**k)`` times a random factor in ``[1 - jitter, 1 + jitter]``.
    ``statuses``: the HTTP error statuses retried (``None``: every one); connection errors and timeouts are
    always retried. ``bad_answers``: also retry an answer that is not JSON or that ``decode`` rejects
    (otherwise it fails at once).
    """

    max_retries: int = 5
    base_delay: float = 0.5
    max_delay: float = 20.0
    jitter: float = 0.25
    statuses: frozenset[int] | None = TRANSIENT_STATUSES
    bad_answers: bool = False

    def delay(self, attempt: int) -> float:
        d = min(self.max_delay, self.base_delay * (2**attempt))
        return d * random.uniform(1.0 - self.jitter, 1.0 + self.jitter) if self.jitter else d

    def retries_status(self, status: int) -> bool:
        return self.statuses is None or status in self.statuses

    @classmethod
    def persistent(cls, max_retries: int, backoff_s: float) -> "RetryPolicy":
        """The policy of an endpoint config with ``max_retries`` and ``backoff_s`` (the simulated user's):
        every failure is retried (any HTTP error status, a bad answer), waiting ``backoff_s``, then twice as
        long each time (no jitter, no cap)."""
        return cls(max_retries=int(max_retries), base_delay=float(backoff_s), max_delay=math.inf, jitter=0.0,
                   statuses=None, bad_answers=True)


@dataclass(frozen=True)
class ModelInfo:
    """What ``/v1/models`` says about a served model (``max_model_len`` is vLLM's extension)."""

    id: str
    max_model_len: int | None = None
    root: str | None = None


# --------------------------------------------------------------------------- errors and answers
def error_message(text: str) -> str:
    """The ``message`` of an OpenAI-style error body (or its ``error`` when that is a string), or the body itself
    (shortened)."""
    try:
        body = json.loads(text)
    except ValueError:
        return text[:500]
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and "message" in err:
            return str(err["message"])[:500]
        if isinstance(err, str):  # SGLang's /generate refuses a malformed body with {"error": "<reason>"}
            return err[:500]
        if isinstance(body.get("message"), str):
            return body["message"][:500]
    return text[:500]


def describe(exc: BaseException, timeout: float | None = None) -> str:
    """One line for a failed try, named by what went wrong rather than by aiohttp's class:
    ``ConnectError: Cannot connect to host ...`` (refused, DNS, TLS), ``ConnectTimeout: ...``,
    ``ReadTimeout: no complete answer within 600 s`` (``timeout``), else ``<exception class>: <message>``
    (``ServerDisconnectedError: Server disconnected``)."""
    text = str(exc)
    if isinstance(exc, aiohttp.ClientConnectorError):
        name = "ConnectError"
    elif isinstance(exc, _CONNECT_TIMEOUT):
        name = "ConnectTimeout"
    elif isinstance(exc, asyncio.TimeoutError):  # aiohttp's SocketTimeoutError, or the whole request's timeout
        name = "ReadTimeout"
        if not text:
            text = f"no complete answer within {timeout:g} s" if timeout is not None else ""
    else:
        name = type(exc).__name__
    return f"{name}: {text}" if text else name


def parse_models(data: Any, base_url: str, what: str) -> list[ModelInfo]:
    """The models of a ``GET /models`` answer; :class:`ServerUnavailableError` unless it is an OpenAI list."""
    rows = data.get("data") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise ServerUnavailableError(f"{what} at {base_url} is not OpenAI-compatible: {base_url}/models did not "
                                     f"return an OpenAI model list: {str(data)[:200]}", f"{base_url}/models")
    return [
        ModelInfo(str(r.get("id")), r.get("max_model_len") if isinstance(r.get("max_model_len"), int) else None,
                  r.get("root"))
        for r in rows
        if isinstance(r, dict)
    ]


def find_model(models: list[ModelInfo], model: str, base_url: str, what: str, hint: str = "") -> ModelInfo:
    """``model``'s entry, else :class:`ModelNotFoundError` naming the URL and the served models."""
    for info in models:
        if info.id == model:
            return info
    served = tuple(m.id for m in models)
    raise ModelNotFoundError(
        f"{what} at {base_url} does not serve model {model!r}; it serves: "
        f"{', '.join(repr(m) for m in served) or 'none'}" + (f" ({hint})" if hint else ""), served)


def _unreachable(what: str, base_url: str, reason: str) -> ServerUnavailableError:
    url = f"{base_url}/models"
    return ServerUnavailableError(f"{what} at {base_url} is unreachable or not OpenAI-compatible (GET {url}: "
                                  f"{reason})", url, last=reason)


def _reason(exc: ServerError) -> str:
    """The cause of a failed request without the URL (the health check's message names it once)."""
    if isinstance(exc, ServerUnavailableError) and exc.last is not None:
        return exc.last
    return str(exc)


# --------------------------------------------------------------------------- the async client
class AsyncClient:
    """Async JSON client for one OpenAI-compatible base URL (``http://host:port/v1``), on one
    ``aiohttp.ClientSession``.

    Use as an async context manager, or call :meth:`close` (the session is opened at the first request, in
    the running event loop; after :meth:`close` a new request opens a new one). ``timeout`` bounds one try
    (seconds, connecting to reading the whole answer); ``connect_timeout`` bounds connecting, so a dead server
    is reported at once. ``max_connections``: the connection pool's size (kept alive between requests).
    ``what`` names the server in the health check's errors ("user simulator", ...). ``requests_sent`` and
    ``retries`` count tries.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        timeout: float = 600.0,
        connect_timeout: float | None = 10.0,
        retry: RetryPolicy = RetryPolicy(),
        max_connections: int = 256,
        what: str = "the server",
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base URL must start with http:// or https://, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.retry = retry
        self.max_connections = max_connections
        self.what = what
        self._session: aiohttp.ClientSession | None = None
        self.requests_sent = 0
        self.retries = 0

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout, sock_connect=self.connect_timeout),
                headers={"Authorization": f"Bearer {self.api_key}"} if self.api_key else None,
                connector=aiohttp.TCPConnector(limit=self.max_connections),
            )
        return self._session

    async def close(self) -> None:
        """Close the session and its connections (nothing to do when no request was sent)."""
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()

    async def request(
        self,
        method: str,
        path: str,
        body: Mapping[str, Any] | None = None,
        *,
        extra_body: Mapping[str, Any] | None = None,
        decode: Callable[[Any], Any] | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> Any:
        """``method`` (GET or POST) ``base_url/path`` with ``body`` (and ``extra_body`` merged into it), retried
        as ``retry`` (default: the client's) says; the JSON answer, passed through ``decode`` when given.
        ``timeout``: this request's bound on one try (seconds; default: the client's ``timeout``).

        Raises :class:`RequestError` for a status that is not retried, :class:`ServerUnavailableError` when
        the tries run out (``attempts``, ``last``) or for an answer that is not JSON (or that ``decode``
        rejects) when bad answers are not retried.
        """
        policy = retry or self.retry
        url = f"{self.base_url}/{path.lstrip('/')}"
        # aiohttp reads timeout=None as "no limit": pass one only to replace the session's
        limit = {} if timeout is None else {"timeout": aiohttp.ClientTimeout(total=timeout,
                                                                             sock_connect=self.connect_timeout)}
        bound = self.timeout if timeout is None else timeout
        if extra_body:
            body = {**(body or {}), **extra_body}
        last = ""
        for attempt in range(policy.max_retries + 1):
            if attempt:
                self.retries += 1
                await asyncio.sleep(policy.delay(attempt - 1))
            self.requests_sent += 1
            try:
                async with self._get_session().request(method, url, json=body, **limit) as resp:
                    status = resp.status
                    raw = await resp.read()
            except TRANSPORT_ERRORS as exc:
                last = describe(exc, bound)
                continue
            if status >= 400:
                message = error_message(raw.decode("utf-8", "replace"))
                if not policy.retries_status(status):
                    raise RequestError(status, message)
                last = f"HTTP {status}: {message}"
                continue
            try:
                data = json.loads(raw)
            except ValueError as exc:
                if not policy.bad_answers:
                    text = raw.decode("utf-8", "replace")
                    raise ServerUnavailableError(f"{url} answered HTTP {status} with non-JSON: {text[:200]!r}",
                                                 url) from None
                last = f"answer is not JSON: {exc}"
                continue
            if decode is None:
                return data
            try:
                return decode(data)
            except UnusableAnswerError as exc:
                if not policy.bad_answers:
                    raise ServerUnavailableError(f"{url} gave an unusable answer: {exc}", url) from None
                last = str(exc)
        attempts = policy.max_retries + 1
        raise ServerUnavailableError(f"{method} {url} failed after {attempts} attempts; last error: {last}", url,
                                     attempts, last)

    async def post(self, path: str, payload: Mapping[str, Any], *, extra_body: Mapping[str, Any] | None = None,
                   decode: Callable[[Any], Any] | None = None, retry: RetryPolicy | None = None) -> Any:
        """POST ``payload`` to ``base_url/path`` (:meth:`request`); the JSON answer (or ``decode``'s result)."""
        return await self.request("POST", path, payload, extra_body=extra_body, decode=decode, retry=retry)

    async def list_models(self, retries: int = 0) -> list[ModelInfo]:
        """``GET /models`` (no retries by default: used to fail fast); :class:`ServerUnavailableError` names
        the URL unless the server answers with an OpenAI model list."""
        try:
            data = await self.request("GET", "models", retry=replace(self.retry, max_retries=retries))
        except (ServerUnavailableError, RequestError) as exc:
            raise _unreachable(self.what, self.base_url, _reason(exc)) from None
        return parse_models(data, self.base_url, self.what)

    async def check_model(self, model: str, hint: str = "") -> ModelInfo:
        """Fail fast unless the server is up and serves ``model`` (:class:`ModelNotFoundError` lists what it
        serves, followed by ``hint``); return its info."""
        return find_model(await self.list_models(), model, self.base_url, self.what, hint)


# --------------------------------------------------------------------------- the sync health check
async def _list_models(base_url: str, api_key: str | None, timeout: float, what: str) -> list[ModelInfo]:
    async with AsyncClient(base_url, api_key, timeout, timeout, max_connections=1, what=what) as client:
        return await client.list_models()


def list_models(base_url: str, api_key: str | None = None, timeout: float = 10.0, what: str = "the server"
                ) -> list[ModelInfo]:
    """Synchronous ``GET <base_url>/models`` (one try, :meth:`AsyncClient.list_models` on its own event loop);
    :class:`ServerUnavailableError` naming ``what`` and the URL unless the server answers with an OpenAI model
    list."""
    return run_sync(_list_models(base_url, api_key, timeout, what))


def check_model(base_url: str, model: str, api_key: str | None = None, timeout: float = 10.0,
                what: str = "the server", hint: str = "") -> ModelInfo:
    """Synchronous start-up check: ``base_url`` answers ``GET /models`` and lists ``model``; its info.
    :class:`ServerUnavailableError` or :class:`ModelNotFoundError`, both naming ``what`` and the URL."""
    return find_model(list_models(base_url, api_key, timeout, what), model, base_url.rstrip("/"), what, hint)
