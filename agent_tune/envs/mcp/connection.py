"""One client connection to an MCP server (:class:`ServerSpec`: a stdio ``command`` or a streamable-HTTP ``url``),
through the ``mcp`` SDK, living on the process's background loop (:func:`agent_tune.sync.background_loop`) and usable
from synchronous code; every request is bounded by the call timeout, the start by the start timeout. A server that
does not start or goes away is the contract's :class:`~agent_tune.errors.BackendGoneError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import tempfile
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any, Mapping

from pydantic import Field, model_validator

from agent_tune.envs.remote_tools import function_tool
from agent_tune.envs.time_limits import (
    CALL_SLACK,
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_START_TIMEOUT,
    EnvTimeoutError,
    StartTimeoutError,
    backstop,
    timeout_text,
)
from agent_tune.errors import BackendGoneError, error_text
from agent_tune.sync import background_loop, submit, wait
from agent_tune.utils.typed_config import ConfigModel, OptionError

STDERR_TAIL_CHARS = 2000


class ServerSpec(ConfigModel):
    """Where an MCP server is (the env's ``server`` option): a stdio ``command`` with optional ``env`` and ``cwd``,
    or a ``url`` (streamable HTTP). Hashable: the session pool's key."""

    command: list[str] | str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None

    @model_validator(mode="after")
    def _one_server(self) -> ServerSpec:
        if (self.command is None) == (self.url is None):
            raise OptionError("", "needs exactly one of `command` (a stdio server) or `url` (HTTP)")
        if self.url is not None:
            if not self.url.startswith(("http://", "https://")):
                raise OptionError("url", f"must be an http(s) URL, got {self.url!r}")
            if self.env or self.cwd:
                raise OptionError("", "env and cwd apply to a stdio `command`, not a `url`")
        elif not self.argv:
            raise OptionError("command", "must be a non-empty list of strings")
        return self

    @property
    def argv(self) -> tuple[str, ...]:
        """The stdio server's command line (``()`` for a URL)."""
        words = (self.command,) if isinstance(self.command, str) else tuple(self.command or ())
        if words[:1] == ("python",):  # the interpreter running agent-tune (a Ray worker's PATH may lack the venv)
            return (sys.executable, *words[1:])
        return words

    def __hash__(self) -> int:
        return hash((self.argv, tuple(sorted(self.env.items())), self.cwd, self.url))

    def describe(self) -> str:
        return self.url or " ".join(self.argv)


@dataclass(frozen=True)
class CallResult:
    """A tool call's result as the policy reads it (``is_error``: the server reported the call failed)."""

    text: str
    is_error: bool
    structured: Any = None


def result_text(result: Any) -> CallResult:
    """The SDK's ``CallToolResult`` as a :class:`CallResult`."""
    parts = []
    for item in getattr(result, "content", None) or []:
        kind = getattr(item, "type", "")
        if kind == "text":
            parts.append(item.text)
        elif kind == "resource" and getattr(item.resource, "text", None) is not None:
            parts.append(item.resource.text)
        else:
            parts.append(f"[{kind or 'content'} omitted]")
    structured = getattr(result, "structured_content", None)
    text = "\n".join(parts)
    if not text and structured is not None:
        text = json.dumps(structured, ensure_ascii=False)
    return CallResult(text, bool(getattr(result, "is_error", False)), structured)


def tool_schema(tool: Any) -> dict[str, Any]:
    """An MCP tool (``list_tools``) as an OpenAI-style function tool."""
    schema = getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None)
    return function_tool(tool.name, tool.description, schema)


class MCPConnection:
    """One session with one MCP server. :meth:`open` starts it (a stdio server is a new process), :meth:`close`
    ends it; :meth:`call` / :meth:`acall` call a tool, :meth:`read_resource` reads a resource."""

    def __init__(self, spec: ServerSpec, start_timeout: float = DEFAULT_START_TIMEOUT,
                 call_timeout: float = DEFAULT_CALL_TIMEOUT) -> None:
        self.spec = spec
        self.start_timeout = float(start_timeout)
        self.call_timeout = float(call_timeout)
        self.tools: list[dict[str, Any]] = []
        self._session: Any = None
        self._closing: asyncio.Event | None = None
        self._task: Future[None] | None = None
        self._stderr = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") if spec.argv else None
        self.gone: str | None = None  # why the server went away, once it did
        self.timed_out = False  # it went away by not answering within call_timeout (the time-limit rule)

    def open(self) -> MCPConnection:
        """Start the server, ``initialize``, and list its tools; :class:`BackendGoneError` if that fails."""
        ready: Future[None] = Future()
        self._task = submit(self._hold(ready))
        try:
            ready.result(backstop(self.start_timeout))
        except BaseException as exc:
            why = "no answer to initialize in time" if _is_timeout(exc) else error_text(_innermost(exc))
            message = f"MCP server `{self.spec.describe()}` did not start: {why}{self._stderr_tail()}"
            self.close()
            if _is_timeout(exc):  # the time-limit rule: the runner counts a start that timed out
                raise StartTimeoutError(self.start_timeout, f"MCP server `{self.spec.describe()}` start") from None
            raise BackendGoneError(message) from None
        return self

    async def _hold(self, ready: Future[None]) -> None:
        """Enter the transport and the session, say ready, and keep them open until :meth:`close`."""
        from mcp import ClientSession

        self._closing = asyncio.Event()
        try:
            async with contextlib.AsyncExitStack() as stack:
                streams = await stack.enter_async_context(self._transport())
                session = await stack.enter_async_context(ClientSession(streams[0], streams[1]))
                await asyncio.wait_for(session.initialize(), self.start_timeout)
                listed = await asyncio.wait_for(session.list_tools(), self.start_timeout)
                self.tools = [tool_schema(t) for t in listed.tools]
                self._session = session
                ready.set_result(None)
                await self._closing.wait()
        except BaseException as exc:  # noqa: BLE001 - reported to open() or recorded as the server's end
            if not ready.done():
                ready.set_exception(exc)
            elif self.gone is None:
                self.gone = f"connection ended: {error_text(_innermost(exc))}"
        finally:
            self._session = None

    def _transport(self) -> Any:
        if self.spec.url:
            from mcp.client.streamable_http import streamable_http_client

            return streamable_http_client(self.spec.url)
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        command, *args = self.spec.argv
        params = StdioServerParameters(command=command, args=list(args), env={**os.environ, **self.spec.env},
                                       cwd=self.spec.cwd)
        return stdio_client(params, errlog=self._stderr or sys.stderr)

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        with contextlib.suppress(ValueError, OSError):
            self._stderr.flush()
            self._stderr.seek(0)
            text = self._stderr.read()[-STDERR_TAIL_CHARS:].strip()
            return f"\n--- its stderr (last {STDERR_TAIL_CHARS} chars) ---\n{text}" if text else " (stderr empty)"
        return ""

    def close(self) -> None:
        """End the session (a stdio server's process is terminated by the SDK). Safe to call twice."""
        task, self._task = self._task, None
        if task is not None:
            closing = self._closing
            if closing is not None:
                background_loop().call_soon_threadsafe(closing.set)
            with contextlib.suppress(BaseException):
                task.result(10.0)
            if not task.done():
                task.cancel()
        if self._stderr is not None:
            with contextlib.suppress(OSError):
                self._stderr.close()
            self._stderr = None

    async def acall(self, name: str, arguments: Mapping[str, Any]) -> CallResult:
        """Call tool ``name`` on the loop; :class:`BackendGoneError` when the server is gone or does not answer."""
        session = self._session
        if session is None or self.gone:
            raise BackendGoneError(self.gone or "the server is not connected", self.timed_out)
        try:
            result = await asyncio.wait_for(
                session.call_tool(name, dict(arguments), read_timeout_seconds=self.call_timeout),
                backstop(self.call_timeout))
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001 - the SDK raises MCPError, anyio and OS errors
            self._went(exc, name)
            raise BackendGoneError(self.gone or "", self.timed_out) from None
        return result_text(result)

    def _went(self, exc: BaseException, what: str) -> None:
        """Record why the server went away (the first reason stays): a timeout, by the time-limit rule's words."""
        if self.gone is None:
            first = error_text(_innermost(exc))
            self.timed_out = _is_timeout(exc) or "timed out" in first.lower()
            self.gone = timeout_text(self.call_timeout, f"mcp tool {what}") if self.timed_out else first

    def call(self, name: str, arguments: Mapping[str, Any]) -> CallResult:
        """:meth:`acall` from synchronous code."""
        try:
            return wait(self.acall(name, arguments), backstop(self.call_timeout) + CALL_SLACK)  # around acall's
        except EnvTimeoutError as exc:
            self._went(exc, name)
            raise BackendGoneError(self.gone or "", self.timed_out) from None

    def read_resource(self, uri: str) -> str:
        """The text of resource ``uri`` (its text parts joined)."""
        session = self._session
        if session is None or self.gone:
            raise BackendGoneError(self.gone or "the server is not connected", self.timed_out)

        async def read() -> str:
            result = await asyncio.wait_for(session.read_resource(uri), self.call_timeout)
            return "\n".join(getattr(c, "text", "") or "" for c in result.contents)

        try:
            return wait(read(), backstop(self.call_timeout))
        except (TimeoutError, asyncio.TimeoutError) as exc:
            raise BackendGoneError(timeout_text(self.call_timeout, f"mcp resource {uri}"), timed_out=True) from exc


def _innermost(exc: BaseException) -> BaseException:
    """The innermost first error of an exception group (anyio wraps the transport's errors)."""
    while getattr(exc, "exceptions", None):  # a (Base)ExceptionGroup
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    return exc


def _is_timeout(exc: BaseException) -> bool:
    return isinstance(_innermost(exc), (TimeoutError, asyncio.TimeoutError, FutureTimeout))
