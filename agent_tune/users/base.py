"""The user contract: a conversation from the user's side in, one reply out."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence, runtime_checkable

from agent_tune.errors import EnvError


@dataclass(frozen=True)
class UserToolCall:
    """A tool call the user makes (tau2's telecom: the user toggles airplane mode on their phone)."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class UserReply:
    """What the user says next: ``content`` (may be ``None`` when it only calls tools) and its tool calls."""

    content: str | None
    tool_calls: tuple[UserToolCall, ...] = ()


class UserError(EnvError, RuntimeError):
    """The user could not answer (the endpoint failed, or answered garbage, on every retry)."""


@runtime_checkable
class User(Protocol):
    """Anything that answers a conversation as the user.

    ``messages`` are OpenAI chat messages from the user's side: the user's system prompt first, the agent's
    messages as ``user`` turns, the user's own earlier replies as ``assistant`` turns and its tool results as
    ``tool`` messages. ``tools`` are the user's own tool schemas (OpenAI form), ``None`` when it has none.
    Raises :class:`UserError` when no reply can be had.
    """

    async def reply(self, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None) -> UserReply:
        ...
