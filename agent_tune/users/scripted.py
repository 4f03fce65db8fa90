"""A user that replays fixed turns, then says ``###STOP###`` (tests, replays of gold trajectories)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from agent_tune.users.base import UserReply, UserToolCall

STOP = "###STOP###"  # tau2's user stop signal (tau2.user.base.STOP)


def _turn(item: str | Mapping[str, Any], index: int) -> UserReply:
    if isinstance(item, str):
        return UserReply(item)
    if not isinstance(item, Mapping):
        raise ValueError(f"scripted user: turn {index} must be a string or a mapping, got {type(item).__name__}")
    unknown = set(item) - {"content", "tool_calls"}
    if unknown:
        raise ValueError(f"scripted user: turn {index} has unknown keys {sorted(unknown)} (content, tool_calls)")
    calls = []
    for k, call in enumerate(item.get("tool_calls") or ()):
        if not isinstance(call, Mapping) or not isinstance(call.get("name"), str):
            raise ValueError(f"scripted user: turn {index} tool call {k} needs a 'name'")
        calls.append(UserToolCall(f"user_call_{index}_{k}", call["name"], dict(call.get("arguments") or {})))
    content = item.get("content")
    if content is None and not calls:
        raise ValueError(f"scripted user: turn {index} has neither content nor tool calls")
    return UserReply(content, tuple(calls))


class ScriptedUser:
    """Answers with ``turns`` in order (a string is a message; ``{"content", "tool_calls": [{"name",
    "arguments"}]}`` a message with tool calls), then ``stop_message`` for ever.

    One instance per episode: it remembers how far it got. ``seen`` keeps every conversation it was shown.
    """

    def __init__(self, turns: Sequence[str | Mapping[str, Any]] = (), stop_message: str = STOP) -> None:
        if isinstance(turns, (str, bytes)):
            raise ValueError("scripted user: turns must be a list of turns, not one string")
        self.turns = [_turn(item, i) for i, item in enumerate(turns)]
        self.stop_message = stop_message
        self.seen: list[list[dict[str, Any]]] = []
        self._next = 0

    async def reply(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None) -> UserReply:
        """The next scripted turn (``stop_message`` once they are used up)."""
        self.seen.append([dict(m) for m in messages])
        if self._next >= len(self.turns):
            return UserReply(self.stop_message)
        self._next += 1
        return self.turns[self._next - 1]
