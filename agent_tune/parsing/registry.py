"""Name -> parser class registries for tool-call and reasoning parsers (chosen by name from config)."""

from __future__ import annotations

from typing import Callable, Generic, TypeVar

from agent_tune.parsing.base import ReasoningParser, ToolCallParser

P = TypeVar("P")
C = TypeVar("C", bound=type)


class UnknownParserError(KeyError):
    """Raised when a parser name is not registered; the message lists the known names."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0])


def _ident(cls: type) -> tuple[str, str]:
    return cls.__module__, cls.__qualname__


class _Registry(Generic[P]):
    def __init__(self, kind: str, base: type[P]) -> None:
        self.kind, self.base = kind, base
        self.classes: dict[str, type[P]] = {}

    def register(self, name: str) -> Callable[[C], C]:
        def deco(cls: C) -> C:
            if not (isinstance(cls, type) and issubclass(cls, self.base)):
                raise TypeError(f"{self.kind} {name!r} must subclass {self.base.__name__}, got {cls!r}")
            existing = self.classes.get(name)
            if existing is not None and _ident(existing) != _ident(cls):  # re-import of one class is fine
                raise ValueError(f"{self.kind} name {name!r} is already registered to {existing.__qualname__}")
            cls.name = name  # type: ignore[attr-defined]
            self.classes[name] = cls
            return cls

        return deco

    def get(self, name: str) -> P:
        try:
            cls = self.classes[name]
        except (KeyError, TypeError):
            known = ", ".join(sorted(self.classes)) or "(none)"
            raise UnknownParserError(f"unknown {self.kind} {name!r}; known: {known}") from None
        return cls()

    def names(self) -> list[str]:
        return sorted(self.classes)


_tool_parsers: _Registry[ToolCallParser] = _Registry("tool-call parser", ToolCallParser)
_reasoning_parsers: _Registry[ReasoningParser] = _Registry("reasoning parser", ReasoningParser)


def register_tool_parser(name: str) -> Callable[[C], C]:
    """Class decorator registering a ``ToolCallParser`` subclass under ``name``."""
    return _tool_parsers.register(name)


def get_tool_parser(name: str) -> ToolCallParser:
    """A new instance of the tool-call parser registered as ``name`` (``UnknownParserError`` if none)."""
    return _tool_parsers.get(name)


def tool_parser_names() -> list[str]:
    """Sorted names of the registered tool-call parsers."""
    return _tool_parsers.names()


def register_reasoning_parser(name: str) -> Callable[[C], C]:
    """Class decorator registering a ``ReasoningParser`` subclass under ``name``."""
    return _reasoning_parsers.register(name)


def get_reasoning_parser(name: str) -> ReasoningParser:
    """A new instance of the reasoning parser registered as ``name`` (``UnknownParserError`` if none)."""
    return _reasoning_parsers.get(name)


def reasoning_parser_names() -> list[str]:
    """Sorted names of the registered reasoning parsers."""
    return _reasoning_parsers.names()
