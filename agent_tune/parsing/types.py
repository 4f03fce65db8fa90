"""Data types shared by every tool-call and reasoning parser."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ToolCall:
    """One tool call decoded from model text: a function name and its keyword arguments."""

    name: str
    arguments: dict[str, Any]
    raw: str = ""  # the exact text span the call was decoded from

    def __init__(self, name: str, arguments: dict[str, Any], raw: str = "") -> None:
        # What the generated frozen __init__ does (dataclass keeps a class's own __init__), about 2x faster
        # than its object.__setattr__ per field: one is built per decoded call.
        fields = self.__dict__
        fields["name"] = name
        fields["arguments"] = arguments
        fields["raw"] = raw


@dataclass(frozen=True)
class ToolCallError:
    """A block that looked like a tool call but could not be decoded.

    ``index`` is the position of the block among all call blocks in the response (0-based),
    ``raw`` its text and ``reason`` a short human-readable explanation the env can show the model.
    """

    index: int
    raw: str
    reason: str


@dataclass(slots=True)  # no __dict__: one is built per response
class ParsedResponse:
    """The result of parsing one model response.

    ``content`` is the text outside tool-call blocks (stripped), ``calls`` the decoded calls in
    order, ``errors`` the blocks that failed. Parsing never raises on model output.
    """

    content: str
    calls: list[ToolCall] = field(default_factory=list)
    errors: list[ToolCallError] = field(default_factory=list)

    @property
    def has_tool_call_attempt(self) -> bool:
        """True if the response contained at least one tool-call block, valid or not."""
        return bool(self.calls or self.errors)
