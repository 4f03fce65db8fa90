"""Name -> parser registries for tool-call and reasoning parsers (chosen by name from config).

A name is bound to a parser class (``@register_tool_parser("hermes")``) or to a preset: a class and the
keyword arguments it is built with (``register_reasoning_preset("qwen3", TagReasoningParser, start="<think>",
...)``), so one class serves many model families. A registry may also take specs with arguments,
``KIND:ARGS`` (``tags:start=<think>,end=</think>`` for reasoning), whose ``ARGS`` a builder registered for
``KIND`` reads; such a parser's ``name`` is the spec as the builder writes it back (canonical).
"""

from __future__ import annotations

from typing import Any, Callable, Generic, TypeVar

from agent_tune.errors import ConfigError
from agent_tune.parsing.base import ReasoningParser, ToolCallParser

P = TypeVar("P")
C = TypeVar("C", bound=type)


class UnknownParserError(ConfigError, KeyError):
    """Raised when a parser name is not registered; the message lists the known names."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0])


class ParserSpecError(ConfigError):
    """Raised for a parser spec with arguments (``KIND:ARGS``) whose arguments are malformed; the message
    names the fault and the accepted form."""


def _ident(cls: type) -> tuple[str, str]:
    return cls.__module__, cls.__qualname__


class _Registry(Generic[P]):
    def __init__(self, kind: str, base: type[P]) -> None:
        self.kind, self.base = kind, base
        self.entries: dict[str, tuple[type[P], dict[str, Any]]] = {}
        self.spec_kinds: dict[str, tuple[Callable[[str], P], str]] = {}

    def add(self, name: str, cls: type, kwargs: dict[str, Any]) -> None:
        if not (isinstance(cls, type) and issubclass(cls, self.base)):
            raise TypeError(f"{self.kind} {name!r} must subclass {self.base.__name__}, got {cls!r}")
        if ":" in name:
            raise ValueError(f"{self.kind} name {name!r} must not hold ':' (it starts a spec's arguments)")
        existing = self.entries.get(name)
        if existing is not None and (_ident(existing[0]), existing[1]) != (_ident(cls), kwargs):
            # a re-import of one class (or of one preset) is fine
            raise ValueError(f"{self.kind} name {name!r} is already registered to {existing[0].__qualname__}")
        self.entries[name] = (cls, dict(kwargs))

    def register(self, name: str) -> Callable[[C], C]:
        def deco(cls: C) -> C:
            self.add(name, cls, {})
            cls.name = name  # type: ignore[attr-defined]
            return cls

        return deco

    def get(self, spec: str) -> P:
        entry = self.entries.get(spec) if isinstance(spec, str) else None
        if entry is not None:
            parser = entry[0](**entry[1])
            parser.name = spec  # type: ignore[attr-defined]  # a preset's instance carries its own name
            return parser
        kind, sep, args = spec.partition(":") if isinstance(spec, str) else ("", "", "")
        if sep and kind.strip() in self.spec_kinds:
            return self.spec_kinds[kind.strip()][0](args)
        known = ", ".join(sorted(self.entries)) or "(none)"
        forms = "".join(f"; or {usage}" for _, usage in sorted(self.spec_kinds.values(), key=lambda v: v[1]))
        raise UnknownParserError(f"unknown {self.kind} {spec!r}; known: {known}{forms}")

    def names(self) -> list[str]:
        return sorted(self.entries)


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


def register_reasoning_preset(name: str, cls: type[ReasoningParser], **kwargs: Any) -> None:
    """Register ``name`` as ``cls(**kwargs)`` (e.g. one tag-pair class, a preset per model family)."""
    _reasoning_parsers.add(name, cls, kwargs)


def register_reasoning_spec(kind: str, build: Callable[[str], ReasoningParser], usage: str) -> None:
    """Let ``get_reasoning_parser("KIND:ARGS")`` build a parser with ``build(ARGS)``; ``usage`` (the accepted
    form) is shown when a name is unknown. ``build`` raises :class:`ParserSpecError` for bad arguments."""
    _reasoning_parsers.spec_kinds[kind] = (build, usage)


def get_reasoning_parser(spec: str) -> ReasoningParser:
    """A new instance of the reasoning parser ``spec`` names: a registered name (``qwen3``) or a spec with
    arguments (``tags:start=<think>,end=</think>``). ``UnknownParserError`` for an unknown name,
    ``ParserSpecError`` for malformed arguments."""
    return _reasoning_parsers.get(spec)


def reasoning_parser_names() -> list[str]:
    """Sorted names of the registered reasoning parsers (the specs with arguments not included)."""
    return _reasoning_parsers.names()
