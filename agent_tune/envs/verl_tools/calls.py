"""Every call into verl's tools, as verl's ``ToolAgentLoop`` makes it (on the process's background loop, where
verl's shared tool objects live); a tool's own exception is a :class:`Failed` value (:func:`guarded`), so a timeout
is never mistaken for a tool raising ``TimeoutError``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Mapping, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Failed:
    """What a tool raised, as text (``"ValueError: ..."``)."""

    error: str


async def guarded(awaitable: Awaitable[T]) -> T | Failed:
    """The awaitable's value, or what it raised as a :class:`Failed`."""
    try:
        return await awaitable
    except Exception as exc:  # noqa: BLE001 - a tool's failure is a value here, counted by the env
        return Failed(f"{type(exc).__name__}: {exc}")


@dataclass
class CallResult:
    """One call's outcome as verl's ``_call_tool`` returns it (``media``: images / videos, which are not shown)."""

    text: str
    reward: float = 0.0
    metrics: dict[str, Any] = field(default_factory=dict)
    failed: bool = False
    media: int = 0


def truncate(text: str, limit: int, side: str) -> str:
    """verl's truncation of a tool response longer than ``max_tool_response_length`` characters."""
    if not text or len(text) <= limit:
        return text
    if side == "left":
        return "(truncated)..." + text[-limit:]
    if side == "right":
        return text[:limit] + "...(truncated)"
    half = limit // 2
    return text[:half] + "...(truncated)..." + text[-half:]


async def call_tool(tool: Any, arguments: dict[str, Any], *, instance_id: str | None,
                    create_kwargs: Mapping[str, Any], agent_data: Any, limit: int, side: str) -> CallResult:
    """One decoded call, as verl's ``ToolAgentLoop._call_tool`` (a ``BaseTool`` without ``instance_id`` gets an
    instance of its own for the call: verl 0.9's per-call lifecycle). Never raises on the tool's failure."""
    from verl.tools.function_tool import FunctionTool, normalize_function_tool_return
    from verl.tools.schemas import ToolResponse

    name = tool.name
    own: list[str] = []  # the instance made for this call, released at the end
    try:
        try:
            if isinstance(tool, FunctionTool):
                response, reward, metrics = normalize_function_tool_return(await tool.call(arguments))
            else:
                if instance_id is None:
                    made, _ = await tool.create(create_kwargs=dict(create_kwargs))
                    own.append(made)
                response, reward, metrics = await tool.execute(instance_id or own[0], arguments,
                                                               agent_data=agent_data)
            if not isinstance(response, ToolResponse):
                raise TypeError(f"execute returned a {type(response).__name__}, not a ToolResponse")
        except Exception as exc:  # noqa: BLE001 - verl answers a failing tool with its error, the episode goes on
            result = CallResult(f"Error executing tool '{name}': {exc}", failed=True)
        else:
            media = len(response.image or []) + len(response.video or [])
            result = CallResult(truncate(response.text or "", limit, side), float(reward or 0.0),
                                dict(metrics or {}), media=media)
    finally:  # also when the call is cancelled at its time limit, as verl's finally releases
        if own:
            released = await guarded(tool.release(own[0]))
    if own and isinstance(released, Failed):  # verl lets this escape the rollout; here the call counts as failed
        result = CallResult(f"Error executing tool '{name}': release failed ({released.error})", failed=True)
    return result


__all__ = ["CallResult", "Failed", "call_tool", "guarded", "truncate"]
