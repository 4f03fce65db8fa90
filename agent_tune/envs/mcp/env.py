"""Any MCP server as a tool environment ("mcp", :class:`MCPToolEnv`): a session with the server per episode
(:mod:`.connection`), each decoded call sent with ``call_tool`` (the ``CallToolEnv`` tier), the reward from a verifier
on the server's final state. Spec: docs/envs.md, "Any MCP server".
"""

from __future__ import annotations

import atexit
import threading
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from agent_tune.envs.adapter_options import AdapterOptions
from agent_tune.envs.base import CallToolEnv, Observation, Outcome, SamplerHints, Step, StopReason, ToolResult
from agent_tune.envs.catalogue import Task, TaskCatalogue
from agent_tune.envs.mcp.connection import CallResult, MCPConnection, ServerSpec
from agent_tune.envs.registry import register_env
from agent_tune.envs.remote_tools import input_schemas
from agent_tune.envs.shots import draw_shots, example_messages
from agent_tune.envs.time_limits import DEFAULT_CALL_TIMEOUT, DEFAULT_START_TIMEOUT, EnvTimeoutError, StartTimeoutError
from agent_tune.errors import BackendGoneError, error_text
from agent_tune.parsing import ToolCall, get_tool_parser
from agent_tune.parsing.response import ResponseParser
from agent_tune.rewards.verdict import verdict
from agent_tune.sync import call_in_thread
from agent_tune.utils.imports import import_object
from agent_tune.utils.jsonl import read_jsonl

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant. Use the tools to do what the user asks, then answer briefly."


class VerifierSession:
    """What a verifier may do with the episode's server: call a tool, read a resource (synchronous)."""

    def __init__(self, connection: MCPConnection) -> None:
        self._connection = connection

    def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None) -> CallResult:
        return self._connection.call(name, dict(arguments or {}))

    def read_resource(self, uri: str) -> str:
        return self._connection.read_resource(uri)


def load_verifier(path: str) -> Callable[..., Any]:
    """The verifier function at ``module:function`` (:func:`agent_tune.imports.import_object`)."""
    try:
        fn = import_object(path)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ValueError(f"mcp env: verifier {path!r} cannot be imported ({type(exc).__name__}: {exc})") from None
    if not callable(fn):
        raise ValueError(f"mcp env: verifier {path!r} is not a function")
    return fn


class _Pool:
    """Idle sessions per server, for envs with a ``reset_tool`` (one process-wide pool)."""

    def __init__(self) -> None:
        self._idle: dict[ServerSpec, list[MCPConnection]] = {}
        self._lock = threading.Lock()

    def take(self, spec: ServerSpec) -> MCPConnection | None:
        with self._lock:
            idle = self._idle.get(spec) or []
            while idle:
                conn = idle.pop()
                if conn.gone is None:
                    return conn
                conn.close()
        return None

    def give(self, conn: MCPConnection, limit: int = 64) -> None:
        with self._lock:
            idle = self._idle.setdefault(conn.spec, [])
            if conn.gone is None and len(idle) < limit:
                idle.append(conn)
                return
        conn.close()

    def close_all(self) -> None:
        """Stop every idle session (at interpreter exit)."""
        with self._lock:
            idle = [c for conns in self._idle.values() for c in conns]
            self._idle.clear()
        for conn in idle:
            conn.close()


_POOL = _Pool()
atexit.register(_POOL.close_all)


def first_messages(question: str, shots: Sequence[Mapping[str, Any]] | None, system_prompt: str | None,
                   tool_parser: Any) -> list[dict[str, Any]]:
    """The system prompt, the worked examples (``{"question", "calls", "results"?, "answer"?}``) and the question."""
    messages = [{"role": "system", "content": system_prompt}] if system_prompt else []
    for i, shot in enumerate(shots or ()):
        try:
            calls = [ToolCall(str(c["name"]), dict(c.get("arguments") or {})) for c in shot["calls"]]
            messages += example_messages(str(shot["question"]), calls, tool_parser, shot.get("results"),
                                         shot.get("answer"))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"mcp env: shot {i} is not {{\"question\", \"calls\": [{{\"name\", \"arguments\"}}], "
                             f"\"results\"?, \"answer\"?}} ({type(exc).__name__}: {exc})") from None
    messages.append({"role": "user", "content": question})
    return messages


def mcp_tasks(split: str, path: str, shots: int = 0, seed: int = 0) -> list[Task]:
    """The tasks of a jsonl file (``path``): one ``{"question", ...}`` per line; with ``shots=K`` each is shown K
    other ``train`` tasks' ``solution`` s as worked examples (:func:`agent_tune.envs.shots.draw_shots`)."""
    records = []
    for number, record in read_jsonl(path):
        if not isinstance(record, dict) or not isinstance(record.get("question"), str):
            raise ValueError(f"{path} line {number}: a task needs a `question` string")
        solution = record.get("solution")
        if solution is not None and not (isinstance(solution, dict) and isinstance(solution.get("calls"), list)):
            raise ValueError(f"{path} line {number}: `solution` must be {{\"calls\": [...], \"results\": [...], "
                             f"\"answer\": ...}}")
        records.append({**record, "id": str(record.get("id", f"{Path(path).stem}:{number}")),
                        "split": record.get("split", "train")})
    examples = [(r["id"], {"question": r["question"], **r["solution"]}) for r in records
                if r["split"] == "train" and r.get("solution")]
    tasks = []
    for record in records:
        if record["split"] != split:
            continue
        task = {k: v for k, v in record.items() if k not in ("id", "split", "category")}
        if shots:
            task["shots"] = draw_shots(record["id"], shots, seed,
                                       lambda own=record["id"]: [ex for i, ex in examples if i != own])
        tasks.append(Task(record["id"], task, str(record.get("category") or "mcp")))
    return tasks


def mcp_row_prompt(env_cls: Any, task: Task, env_kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The system prompt, the worked examples and the question, as ``reset`` shows them (no server needed)."""
    return first_messages(task.kwargs["question"], task.kwargs.get("shots"),
                          env_kwargs.get("system_prompt", DEFAULT_SYSTEM_PROMPT),
                          get_tool_parser(env_kwargs.get("tool_parser", "hermes")))


@register_env("mcp")
class MCPToolEnv(CallToolEnv):
    """The tools of an MCP server; the reward is the task's verifier on the server's final state."""

    description = "any MCP server (stdio command or streamable-HTTP URL) as tools; the reward from a verifier"
    sampler_hints = SamplerHints(blocking_reset=True)  # reset starts a server (or resets a pooled one)
    catalogue = TaskCatalogue(splits=("train", "test"), tasks=mcp_tasks, row_prompt=mcp_row_prompt)

    @classmethod
    def check_kwargs(cls, kwargs: Mapping[str, Any]) -> None:
        """Build the env and start the server once, listing its tools (a server that does not start fails here)."""
        super().check_kwargs(kwargs)
        env = cls(**kwargs)
        try:
            conn = MCPConnection(env.spec, env.start_timeout, env.call_timeout).open()
        except Exception as exc:  # noqa: BLE001 - BackendGoneError and the SDK's own
            raise ValueError(str(exc)) from None
        tools = [t["function"]["name"] for t in conn.tools]
        conn.close()
        if env.reset_tool is not None and env.reset_tool not in tools:
            raise ValueError(f"mcp env: reset_tool {env.reset_tool!r} is not a tool of the server ({', '.join(tools)})")

    def __init__(
        self,
        server: ServerSpec | Mapping[str, Any],
        verifier: str | None = None,
        tool_parser: str = "hermes",
        reasoning_parser: str = "none",
        max_steps: int = 8,
        call_timeout: float = DEFAULT_CALL_TIMEOUT,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
        reset_tool: str | None = None,
    ) -> None:
        self.spec = ServerSpec.parse(server, "server")
        limits = AdapterOptions.of(dict(max_steps=max_steps, call_timeout=call_timeout, start_timeout=start_timeout))
        self.verifier = load_verifier(verifier) if verifier else None
        self.parser = ResponseParser(tool_parser, reasoning_parser)
        self.max_steps = limits.max_steps
        self.call_timeout, self.start_timeout = limits.call_timeout, limits.start_timeout
        self.system_prompt = system_prompt
        self.reset_tool = reset_tool
        self.connection: MCPConnection | None = None
        self.task: dict[str, Any] = {}
        self.solution: dict[str, Any] | None = None
        self.transcript: list[dict[str, Any]] = []

    def reset(self, question: str, shots: Sequence[Mapping[str, Any]] | None = None,
              solution: Mapping[str, Any] | None = None, **task: Any) -> Observation:
        """Start an episode on a fresh (or, with ``reset_tool``, a reset pooled) session of the server; ``solution``
        is kept as the reference only."""
        self.solution = dict(solution) if solution else None
        messages = first_messages(question, shots, self.system_prompt, self.parser.tool_parser)
        self.close()
        self.connection = self._connect()
        self.tools = self.connection.tools
        self.call_schemas = input_schemas(self.tools)
        for i, call in enumerate(task.get("setup") or []):
            try:
                result = self.connection.call(call["name"], call.get("arguments") or {})
            except BackendGoneError as exc:
                if exc.timed_out:  # part of the start: the time-limit rule counts it
                    raise StartTimeoutError(self.call_timeout, f"mcp setup call {i} ({call['name']})") from None
                raise
            if result.is_error:
                raise ValueError(f"mcp env: setup call {i} ({call['name']}) failed: {result.text}")
        self.task = {"question": question, **task}
        self.transcript = [dict(m) for m in messages]
        super().reset()
        return Observation(messages=messages, tools=self.tools)

    def reference_replies(self) -> list[str] | None:
        """The task's ``solution``: its calls in one generation, then its answer; ``None`` without one."""
        if not self.solution:
            return None
        calls = [ToolCall(str(c["name"]), dict(c.get("arguments") or {})) for c in self.solution.get("calls") or []]
        replies = [self.parser.tool_parser.format_calls(calls)] if calls else []
        if self.solution.get("answer") is not None:
            replies.append(str(self.solution["answer"]))
        return replies or None

    def _connect(self) -> MCPConnection:
        if self.reset_tool is not None:
            conn = _POOL.take(self.spec)
            if conn is not None:
                try:
                    if not conn.call(self.reset_tool, {}).is_error:
                        return conn
                except BackendGoneError:
                    pass
                conn.close()
        conn = MCPConnection(self.spec, self.start_timeout, self.call_timeout).open()
        if self.reset_tool is not None:
            conn.call(self.reset_tool, {})
        return conn

    async def call_tool(self, call: ToolCall) -> ToolResult:
        """One call on the server, within ``call_timeout``; :class:`BackendGoneError` when it is gone."""
        assert self.connection is not None
        result = await self.connection.acall(call.name, call.arguments)
        self.status.tool_errors += result.is_error
        return ToolResult(result.text, call.name)

    async def act(self, step: Step) -> None:
        """The tier's step, then the step in the transcript the verifier reads."""
        await super().act(step)
        self.transcript.append({"role": "assistant", "content": step.raw})
        self.transcript.extend({"role": "tool", "name": r.name, "content": r.content} for r in step.results)

    def outcome(self) -> Outcome:
        extras: dict[str, Any] = {}
        if self.verifier is None or self.connection is None:
            return Outcome(0.0, 0.0, None, extras)
        try:  # the verifier is a call too: bounded by call_timeout (its own calls to the server are, each)
            reward, accuracy = verdict(call_in_thread(
                self.verifier, dict(self.task), list(self.transcript), VerifierSession(self.connection),
                timeout=self.call_timeout, what="mcp verifier"))
        except EnvTimeoutError as exc:
            self.status.fail(StopReason.TIMEOUT, str(exc))
            return Outcome(0.0, 0.0, None, extras)
        except Exception as exc:  # noqa: BLE001 - a verifier's failure is recorded, the episode scores 0
            extras["verifier_error"] = error_text(exc)
            return Outcome(0.0, 0.0, None, extras)
        return Outcome(reward, accuracy, None, extras)

    @staticmethod
    def close_pool() -> None:
        """Stop the idle pooled sessions of this process (``reset_tool``); also done at interpreter exit."""
        _POOL.close_all()

    def close(self) -> None:
        conn, self.connection = self.connection, None
        if conn is None:
            return
        if self.reset_tool is not None:
            _POOL.give(conn)
        else:
            conn.close()


__all__ = ["MCPToolEnv", "VerifierSession", "load_verifier"]
