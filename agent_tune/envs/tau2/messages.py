"""Conversions between the policy's chat and tau2's messages.

The policy writes text; the configured parser decodes its call blocks (:mod:`agent_tune.parsing`). Its
message becomes tau2's ``AssistantMessage``: the text outside the call blocks (reasoning stripped) as
``content`` (``None`` when empty and there are calls), each decoded call a ``ToolCall`` with an id of the
episode. What tau2 answers comes back to the policy as chat messages: tool results as ``tool`` messages
(named after the call), the user's text as a ``user`` message.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

from tau2.data_model.message import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage

from agent_tune.parsing import ParsedResponse


def assistant_message(parsed: ParsedResponse, new_id: Callable[[], str]) -> AssistantMessage:
    """tau2's message for one parsed policy response (decoded calls only; broken blocks are not calls)."""
    calls = [ToolCall(id=new_id(), name=c.name, arguments=dict(c.arguments), requestor="assistant")
             for c in parsed.calls]
    content = parsed.content if (parsed.content or not calls) else None
    return AssistantMessage(role="assistant", content=content, tool_calls=calls or None)


def call_problem(name: str, arguments: dict[str, Any], tools: dict[str, dict[str, Any]]) -> str | None:
    """Why a decoded call is malformed for the policy's tools (unknown tool, missing required or unknown
    parameters), else ``None``. Only counted: the call still goes to tau2, whose answer the policy reads."""
    tool = tools.get(name)
    if tool is None:
        return f"unknown tool {name!r}"
    params = tool["function"].get("parameters") or {}
    props = params.get("properties") or {}
    missing = [p for p in params.get("required") or () if p not in arguments]
    extra = [a for a in arguments if a not in props]
    if missing or extra:
        return f"{name}: missing {missing}, unexpected {extra}"
    return None


def tool_result_message(result: ToolMessage, name: str) -> dict[str, Any]:
    """A tool result as the policy reads it (the content exactly as tau2 recorded it)."""
    return {"role": "tool", "name": name, "content": result.content if result.content is not None else ""}


def undecodable_message(index: int, reason: str) -> dict[str, Any]:
    return {"role": "tool", "content": f"Error: tool call #{index + 1} could not be parsed: {reason}"}


def user_message(message: UserMessage) -> dict[str, Any]:
    return {"role": "user", "content": message.content or ""}


def history_messages(history: Iterable[Message]) -> list[dict[str, Any]]:
    """A task's message history (before the episode starts) as the agent's chat: its text, its calls and
    their results (tau2's agent sees every message but the user's tool traffic)."""
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for m in history:
        if isinstance(m, AssistantMessage):
            msg: dict[str, Any] = {"role": "assistant", "content": m.content or ""}
            if m.tool_calls:
                msg["tool_calls"] = [{"type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                                     for c in m.tool_calls]
                names.update({c.id: c.name for c in m.tool_calls})
            out.append(msg)
        elif isinstance(m, UserMessage) and not m.is_tool_call():
            out.append(user_message(m))
        elif isinstance(m, ToolMessage) and m.requestor == "assistant":
            out.append(tool_result_message(m, names.get(m.id, "")))
    return out


def tool_schemas(tools: Sequence[Any]) -> list[dict[str, Any]]:
    """tau2 tools as OpenAI-style schemas (tau2's own ``openai_schema``)."""
    return [t.openai_schema for t in tools]
