"""An OpenEnv environment server as a tool environment ("openenv", :class:`OpenEnvEnv`), played over its WebSocket
session protocol with OpenEnv's own ``GenericEnvClient``: ``mode="text"`` (every generation one action, the whole-text
tier) or ``mode="tools"`` (an ``MCPEnvironment``'s tools, the ``CallToolEnv`` tier). Spec: docs/envs.md, "An OpenEnv
server".
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import re
from typing import Any, Literal, Mapping

from agent_tune.envs.adapter_options import AdapterOptions
from agent_tune.envs.base import (
    CallToolEnv,
    Observation,
    Outcome,
    SamplerHints,
    Step,
    StopReason,
    ToolResult,
    WholeTextEnv,
)
from agent_tune.envs.registry import register_env
from agent_tune.envs.remote_tools import function_tool, input_schemas
from agent_tune.envs.time_limits import (
    DEFAULT_CALL_TIMEOUT,
    DEFAULT_START_TIMEOUT,
    EnvTimeoutError,
    StartTimeoutError,
    backstop,
    step_time_limit,
    timeout_text,
)
from agent_tune.errors import BackendGoneError, EnvError, error_text
from agent_tune.parsing.response import ResponseParser
from agent_tune.parsing.types import ParsedResponse, ToolCall
from agent_tune.sync import on_background_loop, submit, wait

# Error codes of OpenEnv's WebSocket protocol (openenv.core.env_server.types.WSErrorCode) that refuse one action
# and leave the session running; every other code (SESSION_ERROR, CAPACITY_REACHED, FACTORY_ERROR) ends it.
REJECTED_CODES = frozenset({"VALIDATION_ERROR", "EXECUTION_ERROR", "INVALID_JSON", "UNKNOWN_TYPE"})
# MCP tool errors (openenv.core.env_server.mcp_types.ToolErrorType) that are the call's fault: format errors.
CALL_FAULTS = frozenset({"tool_not_found", "invalid_args"})
INSTALL_HINT = "pip install --no-deps openenv-core==0.3.0 && pip install 'agent-tune[openenv]'"


class _Refused(EnvError):
    """The server answered an action with an error message (``code``, ``text`` for the policy)."""

    def __init__(self, data: Mapping[str, Any]) -> None:
        self.code = str(data.get("code") or "UNKNOWN")
        message = str(data.get("message") or "error")
        details = []
        for err in data.get("errors") or []:
            if isinstance(err, Mapping):
                where = ".".join(str(p) for p in err.get("loc") or ()) or "action"
                details.append(f"{where}: {err.get('msg', err)}")
        self.text = f"Error: the environment rejected the action ({message}" + (
            f": {'; '.join(details)})" if details else ")")
        super().__init__(f"{message} (code: {self.code})")


@functools.cache
def client_class() -> Any:
    """OpenEnv's ``GenericEnvClient`` answering an error message with :class:`_Refused` (its code and validation
    errors kept): openenv-core 0.3.0's protected ``_send_and_receive`` is the one place that sees them."""
    try:
        from openenv.core.generic_client import GenericEnvClient
    except ImportError as exc:
        raise ImportError(f"openenv env needs openenv-core ({exc}); install it with: {INSTALL_HINT}") from None

    class Client(GenericEnvClient):
        async def _send_and_receive(self, message: dict[str, Any]) -> dict[str, Any]:
            try:
                await self._send(message)
            except Exception as exc:
                # the server may have said why and closed before this message went out (a refused
                # session): read what it sent, else the send's own error stands
                try:
                    response = await asyncio.wait_for(self._receive(), 1.0)
                except Exception:  # noqa: BLE001 - nothing was left to read
                    raise exc from None
                if response.get("type") == "error":
                    raise _Refused(response.get("data") or {}) from None
                raise
            response = await self._receive()
            if response.get("type") == "error":
                raise _Refused(response.get("data") or {})
            return response

    return Client


def http_url(url: str) -> str:
    """The server's HTTP address for a ``http(s)://`` or ``ws(s)://`` base URL (no trailing slash)."""
    return re.sub(r"^ws(s?)://", r"http\1://", url.rstrip("/"))


def value_text(value: Any) -> str:
    """A string as is, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def observation_text(observation: Any, field: str | None = None) -> str:
    """What the policy reads for an OpenEnv observation: ``field``'s value, its one set field, or it as JSON."""
    if not isinstance(observation, Mapping):
        return value_text(observation)
    if field is not None:
        return value_text(observation.get(field, ""))
    shown = {k: v for k, v in observation.items() if v is not None}
    if len(shown) == 1:
        return value_text(next(iter(shown.values())))
    return value_text(shown) if shown else ""


def tool_result_text(observation: Mapping[str, Any]) -> tuple[str, str | None]:
    """A ``CallToolObservation`` as ``(text, fault)``: ``"format"`` (a refused call), ``"tool"`` or ``None``."""
    error = observation.get("error")
    if isinstance(error, Mapping):
        kind = str(error.get("error_type") or "")
        return f"Error: {error.get('message', kind)}", "format" if kind in CALL_FAULTS else "tool"
    result = observation.get("result")
    if isinstance(result, Mapping) and isinstance(result.get("content"), list):  # an MCP CallToolResult
        parts = []
        for item in result["content"]:
            kind = item.get("type") if isinstance(item, Mapping) else None
            parts.append(item["text"] if kind == "text" and "text" in item else f"[{kind or 'content'} omitted]")
        text = "\n".join(parts)
        if not text:
            structured = result.get("structured_content", result.get("data"))
            text = "" if structured is None else value_text(structured)
        return text, "tool" if result.get("is_error") else None
    return ("" if result is None else value_text(result)), None


def tool_schema(tool: Mapping[str, Any]) -> dict[str, Any]:
    """An OpenEnv ``Tool`` (``list_tools``) as an OpenAI-style function tool."""
    return function_tool(tool.get("name", ""), tool.get("description"),
                         tool.get("input_schema") or tool.get("inputSchema"))


@register_env("openenv")
class OpenEnvEnv(CallToolEnv):
    """An environment served by OpenEnv (``openenv-core``), played over its WebSocket session protocol."""

    description = "OpenEnv server (openenv-core): text actions or its MCP tools, over its WebSocket session protocol"
    sampler_hints = SamplerHints(blocking_reset=True)  # reset opens a session with a remote server

    @classmethod
    def check_kwargs(cls, kwargs: Mapping[str, Any]) -> None:
        """Check the options, then ask the server's ``/health`` and ``/schema`` (``action_field`` in text mode)."""
        super().check_kwargs(kwargs)
        env = cls(**kwargs)
        import httpx

        url = http_url(env.base_url)
        try:
            health = httpx.get(f"{url}/health", timeout=env.start_timeout)
            health.raise_for_status()
            schema = httpx.get(f"{url}/schema", timeout=env.start_timeout).json()
        except (httpx.HTTPError, ValueError) as exc:
            raise ValueError(f"openenv env: no OpenEnv server answers at {url} ({error_text(exc)})") from None
        if env.mode == "text":
            fields = sorted((schema.get("action") or {}).get("properties") or {}) if isinstance(schema, dict) else []
            if fields and env.action_field not in fields:
                raise ValueError(f"openenv env: action_field {env.action_field!r} is not a field of the action of the "
                                 f"server at {url} (its fields: {', '.join(fields)})")

    def __init__(
        self,
        base_url: str,
        mode: Literal["text", "tools"] = "text",
        action_field: str = "message",
        observation_field: str | None = None,
        system_prompt: str | None = None,
        tool_parser: str = "hermes",
        reasoning_parser: str = "none",
        max_steps: int = 8,
        success_reward: float = 1.0,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        start_timeout: float = DEFAULT_START_TIMEOUT,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://", "ws://", "wss://")):
            raise ValueError(f"openenv env: base_url must be an http(s):// or ws(s):// URL, got {base_url!r}")
        if mode not in ("text", "tools"):
            raise ValueError(f"openenv env: mode must be 'text' or 'tools', got {mode!r}")
        if not action_field:
            raise ValueError("openenv env: action_field must name the action's text field")
        limits = AdapterOptions.of(dict(max_steps=max_steps, call_timeout=call_timeout, start_timeout=start_timeout))
        self.base_url = base_url.rstrip("/")
        self.mode = mode
        self.action_field, self.observation_field = action_field, observation_field
        self.system_prompt = system_prompt
        self.parser = ResponseParser(tool_parser, reasoning_parser)
        self.max_steps = limits.max_steps
        self.success_reward = float(success_reward)
        self.call_timeout, self.start_timeout = limits.call_timeout, limits.start_timeout
        self._client: Any = None
        self.rewards: list[float] = []
        self.server_done = False

    def reset(self, question: str | None = None, **task: Any) -> Observation:
        """Reset the server's environment (opening the session first) and show its first observation."""
        if self._client is None or self.status.error is not None:  # a session lost in the last episode
            self.close()
        try:
            first, tools = wait(self._start(task), self.start_timeout)
        except EnvTimeoutError:  # the time-limit rule: the runner counts the episode as not played
            self.close()
            raise StartTimeoutError(self.start_timeout, f"openenv server {self.base_url} start") from None
        except Exception as exc:  # noqa: BLE001 - the client raises OSError, websockets' and its own errors
            self.close()
            if isinstance(exc, _Refused) and exc.code == "CAPACITY_REACHED":
                raise BackendGoneError(
                    f"openenv env: the OpenEnv server at {self.base_url} refused another session ({exc}): each "
                    "episode holds one WebSocket session, and OpenEnv serves one at a time by default; serve the "
                    "env with create_app(..., max_concurrent_envs=N) (N >= the episodes played at once) and an "
                    "Environment whose SUPPORTS_CONCURRENT_SESSIONS is True") from None
            why = exc.text if isinstance(exc, _Refused) else error_text(exc)
            raise BackendGoneError(f"openenv env: the OpenEnv server at {self.base_url} did not start an episode: "
                                     f"{why}") from None
        self.tools = None
        if self.mode == "tools":
            self.tools = [tool_schema(t) for t in tools if isinstance(t, Mapping)]
            if not self.tools:
                self.close()
                raise BackendGoneError(f"openenv env: the OpenEnv server at {self.base_url} lists no tools "
                                         "(mode='tools' needs an MCPEnvironment; use mode='text')")
            self.call_schemas = input_schemas(self.tools)
        self.rewards, self.server_done = [], False
        text = "\n\n".join(t for t in (question, observation_text(first.observation, self.observation_field)) if t)
        messages = [*([{"role": "system", "content": self.system_prompt}] if self.system_prompt else []),
                    {"role": "user", "content": text}]
        super().reset()
        return Observation(messages=messages, tools=self.tools)

    async def _start(self, task: Mapping[str, Any]) -> tuple[Any, list[Any]]:
        if self._client is None:
            client = client_class()(base_url=self.base_url, connect_timeout_s=self.start_timeout,
                                    message_timeout_s=self.call_timeout, mode="simulation")
            self._client = client
            await client.connect()
        first = await self._client.reset(**task)
        tools: list[Any] = []
        if self.mode == "tools":  # the tool list, as a step the policy did not take (its reward is not counted)
            listed = (await self._client.step({"type": "list_tools"})).observation
            tools = list(listed.get("tools") or []) if isinstance(listed, Mapping) else []
        return first, tools

    async def _request(self, payload: dict[str, Any]) -> Any:
        """One OpenEnv step: its ``StepResult``; :class:`_Refused` for a refused action, else
        :class:`BackendGoneError` for a lost session."""
        client = self._client
        if client is None:
            raise BackendGoneError(self.status.error or "not connected")
        try:
            return await asyncio.wait_for(client.step(payload), backstop(self.call_timeout))
        except _Refused as exc:
            if exc.code in REJECTED_CODES:
                raise
            raise BackendGoneError(f"the server failed the session: {exc}") from None
        except (asyncio.TimeoutError, TimeoutError):  # (a cancellation, a BaseException, goes through)
            raise BackendGoneError(timeout_text(self.call_timeout, "openenv step"), timed_out=True) from None
        except Exception as exc:  # noqa: BLE001 - websockets' ConnectionClosed, OSError, a bad payload
            raise BackendGoneError(f"connection lost: {error_text(exc)}") from None

    async def _drop(self) -> None:
        """The session is lost: close the connection (bounded)."""
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(client.close(), 2.0)

    async def call_tool(self, call: ToolCall) -> ToolResult:
        """One ``call_tool`` step: a call the server refuses is a format error, a tool that fails a tool error."""
        try:
            result = await self._request({"type": "call_tool", "tool_name": call.name,
                                          "arguments": dict(call.arguments)})
        except _Refused as exc:
            return ToolResult(exc.text, call.name, error=True)
        self.rewards.append(float(result.reward or 0.0))
        self.server_done = bool(result.done)
        text, fault = tool_result_text(result.observation if isinstance(result.observation, Mapping) else {})
        self.status.tool_errors += fault == "tool"
        return ToolResult(text, call.name, error=fault == "format", done=self.server_done)

    async def act(self, step: Step) -> None:
        """The tier's step; the rewards its calls earned in ``info["openenv_reward"]``."""
        before = len(self.rewards)
        await super().act(step)
        if len(self.rewards) > before:
            step.info["openenv_reward"] = sum(self.rewards[before:])

    def outcome(self) -> Outcome:
        total = float(sum(self.rewards))
        extras: dict[str, Any] = {"openenv_done": self.server_done}
        solved = self.status.error is None and total >= self.success_reward
        return Outcome(total, float(solved), None, extras)

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(BaseException):
                wait(client.close(), 5.0)

    def __new__(cls, *args: Any, **kwargs: Any) -> OpenEnvEnv:
        # one registered env, two tiers: text mode acts on the whole generation (OpenEnvTextEnv)
        mode = kwargs.get("mode", args[1] if len(args) > 1 else "text")
        return super().__new__(OpenEnvTextEnv if cls is OpenEnvEnv and mode == "text" else cls)


class OpenEnvTextEnv(WholeTextEnv, OpenEnvEnv):
    """``mode="text"`` (what ``OpenEnvEnv(...)`` builds for it): every generation is one action."""

    def extract_tool_calls(self, raw_response: str) -> ParsedResponse:
        """The whole response, reasoning stripped and whitespace trimmed, is the action (no call blocks)."""
        _, content = self.parser.reasoning_parser.parse(raw_response)
        return ParsedResponse(content=content.strip())

    async def act(self, step: Step) -> None:
        """The action, sent on the background loop (where the session lives), within the step's time limit."""
        seconds = step_time_limit(self.call_timeout, len(step.parsed.calls))
        try:
            await on_background_loop(self._act_text(step), seconds, "openenv step")
        except Exception as exc:  # noqa: BLE001 - the backstop, or anything unforeseen: recorded, never a crash
            if not step.done:
                submit(self._drop())
                timed_out = isinstance(exc, TimeoutError)
                step.fail(StopReason.TIMEOUT if timed_out else StopReason.SERVER_ERROR,
                          str(exc) if timed_out else f"adapter error: {error_text(exc)}")

    async def _act_text(self, step: Step) -> None:
        self.status.num_calls += 1
        try:
            result = await self._request({self.action_field: step.parsed.content})
        except _Refused as exc:
            step.format_errors += 1
            step.info["rejected"] = exc.code
            step.messages.append({"role": "user", "content": exc.text})
            return
        except BackendGoneError as exc:
            await self._drop()
            step.fail(StopReason.of(exc), str(exc), f"Error: the environment server stopped ({exc})")
            return
        reward = float(result.reward or 0.0)
        self.rewards.append(reward)
        self.server_done = step.done = bool(result.done)
        step.info.update(openenv_reward=reward, calls=[self.action_field])
        step.messages.append({"role": "user", "content": observation_text(result.observation, self.observation_field)})
        self.status.turns_completed += 1


__all__ = ["OpenEnvEnv", "client_class", "observation_text", "tool_result_text"]
