"""Tools served by a remote server (an MCP server, an OpenEnv ``MCPEnvironment``, a NeMo Gym resource server), as
the policy sees them and as a call is checked before it is sent.

One rule for every adapter: a tool is an OpenAI-style function tool whose ``parameters`` are the server's input
schema; a decoded call of an unknown tool, or whose arguments that schema rejects, is refused before it reaches
the server (the policy reads why, and it counts as a format error); a schema the server got wrong itself is left
for the server to judge. :class:`~agent_tune.envs.base.CallToolEnv` applies :func:`refusal` to every call when the
env gives its ``call_schemas`` (:func:`input_schemas` of its tools). Their options are
:class:`~agent_tune.envs.adapter_options.AdapterOptions`.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from agent_tune.parsing.types import ToolCall


def function_tool(name: str, description: str | None, schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """An OpenAI-style function tool (what ``Observation.tools`` and the chat template take)."""
    return {"type": "function", "function": {"name": name, "description": description or "",
                                             "parameters": dict(schema or {"type": "object"})}}


def input_schemas(tools: Sequence[Mapping[str, Any]] | None) -> dict[str, Mapping[str, Any]]:
    """Tool name -> input schema of OpenAI-style function tools (what :func:`refusal` checks a call against)."""
    return {t["function"]["name"]: t["function"].get("parameters") or {} for t in tools or ()}


def refusal(call: ToolCall, schemas: Mapping[str, Mapping[str, Any]]) -> str | None:
    """Why ``call`` is refused before it is sent (``schemas``: tool name -> input schema), or None."""
    schema = schemas.get(call.name)
    if schema is None:
        return f"Error: unknown tool {call.name!r}; the tools are {', '.join(schemas)}"
    import jsonschema

    try:
        jsonschema.validate(call.arguments, schema)
    except jsonschema.ValidationError as exc:
        where = "/".join(map(str, exc.absolute_path)) or "arguments"
        return f"Error: {call.name} arguments rejected by its schema at {where}: {exc.message}"
    except jsonschema.SchemaError:
        return None  # the server's own schema is broken: let the server judge
    return None
