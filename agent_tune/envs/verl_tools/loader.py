"""verl's tools loaded by verl's own ``load_all_tools``, once per process per (``tool_config``,
``function_tools``) and shared by the episodes, as verl's agent loop shares them; every failure an
:class:`~agent_tune.utils.typed_config.OptionError` naming its key (an MCP entry, which verl 0.9 no longer loads,
included).
"""

from __future__ import annotations

import contextlib
import io
import os
import threading
from dataclasses import dataclass
from typing import Any, Sequence

from agent_tune.utils.typed_config import OptionError


@dataclass(frozen=True)
class LoadedTools:
    """verl's tool objects by name (in verl's order) and the schema each shows the policy."""

    tools: dict[str, Any]
    schemas: dict[str, dict[str, Any]]

    def is_function_tool(self, name: str) -> bool:
        from verl.tools.function_tool import FunctionTool

        return isinstance(self.tools[name], FunctionTool)


_loaded: dict[tuple[str | None, tuple[str, ...]], LoadedTools] = {}
_lock = threading.Lock()


def _resolve(path: str, key: str) -> str:
    """``path`` as verl resolves a config path (absolute; else the working folder; else verl's own tree)."""
    from verl.utils.import_utils import resolve_config_path

    try:
        resolved = resolve_config_path(str(path))
    except FileNotFoundError:
        resolved = None
    if resolved is None or not os.path.isfile(resolved):  # verl returns an absolute path unchecked
        raise OptionError(key, f"no such file: {path}")
    return resolved


def _refuse_mcp(path: str) -> None:
    from omegaconf import OmegaConf

    try:
        config = OmegaConf.load(path)
    except Exception as exc:  # noqa: BLE001 - a file YAML cannot read
        raise OptionError("tool_config", f"{path} is not YAML ({type(exc).__name__}: {exc})") from None
    entries = config.get("tools") if hasattr(config, "get") else None
    if entries is None:
        raise OptionError("tool_config", f"{path} has no `tools:` list (verl's tool-config format)")
    for i, entry in enumerate(entries):
        kind = (entry.get("config") or {}).get("type") if hasattr(entry, "get") else None
        if kind == "mcp":
            raise OptionError("tool_config", f"{path} tools[{i}] ({entry.get('class_name')}) is an MCP tool: verl "
                              "0.9's load_all_tools loads native tools only (MCP tools were removed from it); serve "
                              "that MCP server with the `mcp` env instead (make_env(\"mcp\", server=...))")


def _load(tool_config: str | None, function_tools: Sequence[str]) -> LoadedTools:
    from verl.tools.tool_registry import load_all_tools

    tools: list[Any] = []
    # verl's loader, once for the tool config and once per function-tool file, so a failure names its key
    sources = [("tool_config", tool_config, {"tool_config_path": tool_config, "function_tool_path": None})] \
        if tool_config is not None else []
    sources += [("function_tools", path, {"tool_config_path": None, "function_tool_path": path})
                for path in function_tools]
    for key, path, args in sources:
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # verl's BaseTool prints its schema when built
                more = list(load_all_tools(**args))
        except Exception as exc:
            raise OptionError(key, f"verl's load_all_tools cannot load {path} ({type(exc).__name__}: {exc})") from None
        names = {t.name for t in tools}
        clash = sorted(t.name for t in more if t.name in names)
        if clash:  # verl's rule: one name, one tool, across the config and the files
            raise OptionError(key, f"tool name(s) {clash} of {path} are already loaded; each tool name must be "
                              "unique across tool_config and function_tools")
        tools.extend(more)
    if not tools:
        raise OptionError("tool_config", "no tool was loaded (the tool config and the function-tool files declare "
                          "none)")
    # what verl's ToolAgentLoop hands the chat template
    schemas = {t.name: t.tool_schema.model_dump(exclude_unset=True, exclude_none=True) for t in tools}
    return LoadedTools(tools={t.name: t for t in tools}, schemas=schemas)


def load_tools(tool_config: str | None, function_tools: str | Sequence[str] | None) -> LoadedTools:
    """The tools of ``tool_config`` (a verl tool-config YAML) and ``function_tools`` (one or more Python files of
    ``@function_tool`` functions), loaded by verl once per process; :class:`OptionError` naming the key."""
    paths = [function_tools] if isinstance(function_tools, str) else list(function_tools or [])
    if tool_config is None and not paths:
        raise OptionError("tool_config", "give a verl tool-config YAML (tool_config) and/or function-tool files "
                          "(function_tools)")
    config = _resolve(tool_config, "tool_config") if tool_config is not None else None
    files = tuple(_resolve(p, "function_tools") for p in paths)
    key = (config, files)
    with _lock:
        if key not in _loaded:
            if config is not None:
                _refuse_mcp(config)
            _loaded[key] = _load(config, files)
        return _loaded[key]


__all__ = ["LoadedTools", "load_tools"]
