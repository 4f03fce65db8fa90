"""NeMo Gym's data in agent-tune's terms: a dataset row's Responses-API prompt (``responses_create_params``) as chat
messages and tool schemas, and the episode as the Responses-API ``response`` object ``/verify`` reads.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any, Mapping, Sequence

from agent_tune.envs.remote_tools import function_tool
from agent_tune.parsing.types import ToolCall

PARAMS = "responses_create_params"
_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}
_TEXT_PARTS = ("input_text", "output_text", "text")


def row_fields(row: str | Mapping[str, Any]) -> dict[str, Any]:
    """A row as a dict (from a mapping or its JSON text); ``ValueError`` if it has no ``responses_create_params``."""
    fields = json.loads(row) if isinstance(row, str) else dict(row)
    if not isinstance(fields, dict) or not isinstance(fields.get(PARAMS), Mapping):
        raise ValueError(f"a NeMo Gym row needs a {PARAMS!r} object (its Responses-API prompt), got "
                         f"{sorted(fields) if isinstance(fields, dict) else type(fields).__name__}")
    return fields


def _text(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        texts = []
        for part in content:
            if not (isinstance(part, Mapping) and part.get("type") in _TEXT_PARTS
                    and isinstance(part.get("text"), str)):
                raise ValueError(f"{where}: only text content parts are supported, got {part!r:.200}")
            texts.append(part["text"])
        return "".join(texts)
    raise ValueError(f"{where}: content must be a string or a list of text parts, got {type(content).__name__}")


def prompt_messages(params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The chat messages of ``responses_create_params`` (``instructions``, then ``input``); ``ValueError`` naming an
    input item that is not a text message."""
    messages: list[dict[str, Any]] = []
    if params.get("instructions"):
        messages.append({"role": "system", "content": str(params["instructions"])})
    given = params.get("input")
    if isinstance(given, str):
        return [*messages, {"role": "user", "content": given}]
    if not isinstance(given, Sequence):
        raise ValueError(f"{PARAMS}.input must be a string or a list of messages, got {type(given).__name__}")
    for i, item in enumerate(given):
        where = f"{PARAMS}.input[{i}]"
        if not isinstance(item, Mapping) or item.get("type", "message") != "message" or item.get("role") not in _ROLES:
            raise ValueError(f"{where}: only messages of role system, developer, user or assistant are supported, "
                             f"got {item!r:.200}")
        messages.append({"role": _ROLES[item["role"]], "content": _text(item.get("content"), where)})
    return messages


def tool_schemas(params: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The row's Responses-API function tools as OpenAI chat tools (``None``: none); ``ValueError`` for another."""
    tools = []
    for i, tool in enumerate(params.get("tools") or []):
        if not (isinstance(tool, Mapping) and tool.get("type") == "function" and isinstance(tool.get("name"), str)):
            raise ValueError(f"{PARAMS}.tools[{i}]: only function tools are supported, got {tool!r:.200}")
        tools.append(function_tool(tool["name"], tool.get("description"), tool.get("parameters")))
    return tools or None


class ResponseLog:
    """The episode as Responses-API output items, as NeMo Gym's own agents build them."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def message(self, text: str) -> None:
        if text:
            self.items.append({"type": "message", "id": f"msg_{uuid.uuid4().hex}", "role": "assistant",
                               "status": "completed",
                               "content": [{"type": "output_text", "text": text, "annotations": []}]})

    def call(self, call: ToolCall, output: str) -> None:
        call_id = f"call_{uuid.uuid4().hex}"
        self.items.append({"type": "function_call", "id": f"fc_{uuid.uuid4().hex}", "call_id": call_id,
                           "name": call.name, "arguments": json.dumps(call.arguments), "status": "completed"})
        self.items.append({"type": "function_call_output", "call_id": call_id, "output": output})

    def response(self, params: Mapping[str, Any], model: str) -> dict[str, Any]:
        """The ``response`` object of a ``/verify`` request."""
        return {"id": f"resp_{uuid.uuid4().hex}", "object": "response", "created_at": time.time(), "model": model,
                "output": list(self.items), "parallel_tool_calls": bool(params.get("parallel_tool_calls", True)),
                "tool_choice": params.get("tool_choice", "auto"), "tools": list(params.get("tools") or [])}


__all__ = ["PARAMS", "ResponseLog", "prompt_messages", "row_fields", "tool_schemas"]
