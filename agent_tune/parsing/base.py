"""Abstract interfaces of the two parser families: tool-call parsers and reasoning parsers."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from agent_tune.parsing.types import ParsedResponse, ToolCall


class ToolCallParser(ABC):
    """Turns one model response into tool calls, and tool calls back into model text.

    ``parse`` never raises on model output: a block that looks like a call but cannot be decoded
    becomes a ``ToolCallError`` in the result. ``format_calls`` writes calls exactly as the model
    family does, so that ``parse(format_calls(calls)).calls`` equals ``calls`` (ignoring ``raw``).
    """

    name: ClassVar[str]

    @abstractmethod
    def parse(self, text: str) -> ParsedResponse:
        """Split ``text`` into content, decoded calls and errors."""

    @abstractmethod
    def format_calls(self, calls: list[ToolCall], content: str = "") -> str:
        """Render ``content`` followed by ``calls`` as this model family writes them."""


class ReasoningParser(ABC):
    """Separates a response's reasoning (e.g. a ``<think>`` block) from its visible content.

    ``name`` is what the registry built it from: a registered name, or a spec with arguments
    (``tags:start=<S>,end=<E>``), so ``get_reasoning_parser(parser.name)`` builds the same parser again.
    """

    name: str

    @abstractmethod
    def parse(self, text: str) -> tuple[str | None, str]:
        """Return ``(reasoning, content)``; ``reasoning`` is None when the response has none."""
