"""What the ``agent_r1`` adapter is pointed at: an Agent-R1 tool env class and its tools, resolved by path when the
adapter is built and built once per process per (``env``, ``tools``, ``env_kwargs``), shared by the episodes as
Agent-R1 shares one env for a run.
"""

from __future__ import annotations

import json
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from agent_tune.envs.agent_r1.batching import BatchWindow
from agent_tune.envs.remote_tools import function_tool
from agent_tune.utils.imports import import_callable, import_object
from agent_tune.utils.typed_config import OptionError

# What Agent-R1's BaseToolEnv declares (agent_r1/tool/base.py) and the adapter calls.
ENV_METHODS = ("step", "stop", "extract_tool_calls", "format_tool_response")
TOOL_ENTRY_KEYS = ("path", "kwargs")


def resolve_env_class(path: Any) -> type:
    """The Agent-R1 env class at ``path`` (``package.module:Class``); :class:`OptionError` keyed ``env``."""
    if not isinstance(path, str) or ":" not in path:
        raise OptionError("env", f"must be an Agent-R1 env class as 'package.module:Class', got {path!r}")
    cls = import_callable(path, "env")
    if not isinstance(cls, type):
        raise OptionError("env", f"{path!r} is a {type(cls).__name__}, not a class")
    missing = [m for m in ENV_METHODS if not callable(getattr(cls, m, None))]
    if missing:
        raise OptionError("env", f"{path!r} is not an Agent-R1 tool env: it has no {', '.join(missing)} (an Agent-R1 "
                                 "BaseToolEnv has step, stop, extract_tool_calls and format_tool_response)")
    return cls


@dataclass(frozen=True)
class ToolSpec:
    """One entry of ``tools``: an object used as it is, or a factory (a class) called with ``kwargs``."""

    key: str
    obj: Any = None
    factory: Callable[..., Any] | None = None
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def build(self) -> Any:
        tool = self.obj if self.factory is None else self.factory(**dict(self.kwargs))
        check_tool(tool, self.key)
        return tool


def check_tool(tool: Any, key: str) -> None:
    """An Agent-R1 tool: a ``name`` and a callable ``execute`` (``BaseTool``); :class:`OptionError` keyed ``key``."""
    if not callable(getattr(tool, "execute", None)):
        raise OptionError(key, f"{tool!r:.120} is not an Agent-R1 tool (it has no execute(args))")
    name = getattr(tool, "name", None)
    if not isinstance(name, str) or not name:
        raise OptionError(key, f"{tool!r:.120} has no name (an Agent-R1 BaseTool sets `name`)")


def resolve_tools(entries: Sequence[Any]) -> list[ToolSpec]:
    """The ``tools`` option: each entry a path (``package.module:Class``, built without arguments, or an object
    at that path), ``{"path": ..., "kwargs": {...}}``, or a tool object; :class:`OptionError` keyed ``tools[i]``."""
    if isinstance(entries, (str, bytes)) or not isinstance(entries, Sequence):
        raise OptionError("tools", f"must be a list of tools, got {type(entries).__name__}")
    specs = []
    for i, entry in enumerate(entries):
        key = f"tools[{i}]"
        if isinstance(entry, str):
            path, kwargs = entry, {}
        elif isinstance(entry, Mapping):
            unknown = sorted(set(entry) - set(TOOL_ENTRY_KEYS))
            if unknown or not isinstance(entry.get("path"), str):
                raise OptionError(key, "a tool entry is 'package.module:Class' or {path, kwargs}, "
                                       f"got {dict(entry)!r}")
            path, kwargs = entry["path"], entry.get("kwargs") or {}
            if not isinstance(kwargs, Mapping):
                raise OptionError(f"{key}.kwargs", f"must be a mapping, got {type(kwargs).__name__}")
        else:
            check_tool(entry, key)
            specs.append(ToolSpec(key, obj=entry))
            continue
        try:
            found = import_object(path)
        except (ImportError, AttributeError, ValueError) as exc:
            raise OptionError(key, f"{path!r} cannot be imported ({type(exc).__name__}: {exc})") from None
        if isinstance(found, type):
            if not callable(getattr(found, "execute", None)):
                raise OptionError(key, f"{path!r} is not an Agent-R1 tool class (it has no execute(args))")
            specs.append(ToolSpec(key, factory=found, kwargs=dict(kwargs)))
        else:
            if kwargs:
                raise OptionError(f"{key}.kwargs", f"{path!r} is an object, not a class: it takes no kwargs")
            check_tool(found, key)
            specs.append(ToolSpec(key, obj=found))
    return specs


def tool_schema(tool: Any) -> dict[str, Any]:
    """The OpenAI-style schema Agent-R1 renders the prompt with: the tool's ``tool_description``, else one built from
    its ``name``, ``description`` and ``parameters`` (what ``BaseTool.tool_description`` returns)."""
    described = getattr(tool, "tool_description", None)
    if isinstance(described, Mapping) and isinstance(described.get("function"), Mapping):
        return json.loads(json.dumps(described, default=str))
    return function_tool(tool.name, getattr(tool, "description", ""), getattr(tool, "parameters", None))


@dataclass
class Built:
    """An Agent-R1 env as built for a process: the env object, the tools it was given, and its step batchers
    (one per batching window, shared by the episodes that batch)."""

    env: Any
    tools: list[Any]
    schemas: list[dict[str, Any]] = field(default_factory=list)  # the tools' schemas, the prompt renders them
    system_prompt: str = ""  # the env's system_prompt (Agent-R1's use_custom_system_prompt shows it)
    _batchers: dict[float, BatchWindow] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def batcher(self, window: float) -> BatchWindow:
        with self._lock:
            if window not in self._batchers:
                self._batchers[window] = BatchWindow(self.env, window)
            return self._batchers[window]


def build(env_class: type, tools: Sequence[ToolSpec], env_kwargs: Mapping[str, Any]) -> Built:
    """``env_class(tools=[...], **env_kwargs)``, as Agent-R1 builds its env from its configured tools, with what the
    prompt shows of them (read here, so that every call into the user's code at an episode's start is bounded)."""
    built_tools = [spec.build() for spec in tools]
    env = env_class(tools=built_tools, **dict(env_kwargs))
    system_prompt = getattr(env, "system_prompt", "") or ""
    if not isinstance(system_prompt, str):
        raise TypeError(f"the env's system_prompt is a {type(system_prompt).__name__}, not a str")
    return Built(env, built_tools, [tool_schema(t) for t in built_tools], system_prompt)


_shared: dict[str, Future[Built]] = {}
_shared_lock = threading.Lock()


def _key_part(value: Any) -> Any:
    if isinstance(value, Mapping):  # config nodes (OmegaConf) as their plain values
        return dict(value)
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return list(value)
    return f"<{type(value).__qualname__} at {id(value):#x}>"  # a tool object: by identity


def shared_key(env: str, tools: Sequence[Any], env_kwargs: Mapping[str, Any]) -> str:
    """What identifies one shared build: the paths and values as JSON, objects by identity."""
    return json.dumps([env, list(tools), dict(env_kwargs)], sort_keys=True, default=_key_part)


def shared_build(key: str, start: Callable[[], Future[Built]]) -> Future[Built]:
    """The process's build for ``key``: the one under way or done, else a new one from ``start()``. A build that
    failed is forgotten, so the next episode tries again."""
    with _shared_lock:
        future = _shared.get(key)
        if future is None or (future.done() and future.exception() is not None):
            future = _shared[key] = start()
        return future


def forget_shared() -> None:
    """Drop the process's shared builds (tests; a new build happens on the next episode's start)."""
    with _shared_lock:
        _shared.clear()
