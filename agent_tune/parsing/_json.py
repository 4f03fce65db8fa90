"""JSON helpers shared by the JSON-based tool-call parsers: decoding with readable reasons."""

from __future__ import annotations

import json
from typing import Any

from agent_tune.errors import RolloutError
from agent_tune.parsing.types import ToolCall

DECODER = json.JSONDecoder()


class DecodeFailure(RolloutError):
    """Internal: a JSON span could not be decoded; ``reason`` is shown to the model."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


JSON_WS = " \t\n\r"


def loads(text: str) -> Any:
    """``json.loads`` raising ``DecodeFailure`` with a readable reason (JSON whitespace only around it)."""
    text = text.strip(JSON_WS)
    obj, end = raw_decode(text, 0)
    if end != len(text):
        raise DecodeFailure(f"invalid JSON at char {end}: extra data after the JSON value")
    return obj


def raw_decode(text: str, pos: int) -> tuple[Any, int]:
    """Decode one JSON value starting at ``pos``; return it and the end index."""
    try:
        return DECODER.raw_decode(text, pos)
    except json.JSONDecodeError as exc:
        raise DecodeFailure(f"invalid JSON at char {exc.pos - pos}: {exc.msg}") from None
    except RecursionError:
        raise DecodeFailure("invalid JSON: nested too deeply") from None


def skip_ws(text: str, pos: int) -> int:
    """Index of the first non-whitespace character at or after ``pos``."""
    while pos < len(text) and text[pos].isspace():
        pos += 1
    return pos


def _call_name(obj: Any) -> str:
    """The ``name`` of a decoded call object; ``DecodeFailure`` if ``obj`` is no object or has no name."""
    if not isinstance(obj, dict):
        raise DecodeFailure(f"a tool call must be a JSON object, got {kind(obj)}")
    name = obj.get("name")
    if not isinstance(name, str) or not name.strip():
        got = "missing" if "name" not in obj else f"got {kind(name)}"
        raise DecodeFailure(f'"name" must be a non-empty string ({got})')
    return name


def call_from_object(obj: Any, raw: str, arg_keys: tuple[str, ...] = ("arguments",)) -> ToolCall:
    """Build a ToolCall from a decoded ``{"name": ..., <arg_key>: {...}}`` object.

    ``arguments`` may also be a JSON string holding an object; a missing or null one means ``{}``.
    Raises ``DecodeFailure`` naming what is wrong.
    """
    name = _call_name(obj)
    key = next((k for k in arg_keys if k in obj), arg_keys[0])
    args = obj.get(key)
    if args is None:
        args = {}
    elif isinstance(args, str):
        try:
            args = loads(args)
        except DecodeFailure as exc:
            raise DecodeFailure(f'"{key}" is a string that is not valid JSON ({exc.reason})') from None
    if not isinstance(args, dict):
        raise DecodeFailure(f'"{key}" must be a JSON object, got {kind(args)}')
    return ToolCall(name=name, arguments=args, raw=raw)


def strict_call(obj: Any, raw: str, arg_key: str = "arguments") -> ToolCall:
    """Build a ToolCall from ``{"name": "<non-empty string>", <arg_key>: {...}}`` and nothing looser.

    Unlike ``call_from_object``, ``arg_key`` must be present and hold a JSON object: a missing or null
    value, or a JSON string holding an object, is a ``DecodeFailure`` that names the accepted form.
    Other keys are ignored (as the scorers ignore them).
    """
    name = _call_name(obj)
    if arg_key not in obj:
        other = next((k for k in ("arguments", "parameters", "args") if k != arg_key and k in obj), None)
        found = f'; found "{other}", but this format names it "{arg_key}"' if other else ""
        raise DecodeFailure(f'missing "{arg_key}"{found}; write "{arg_key}": {{}} for a call without arguments')
    args = obj[arg_key]
    if isinstance(args, str):
        raise DecodeFailure(f'"{arg_key}" must be a JSON object, not a string holding JSON; write "{arg_key}": {{...}}')
    if not isinstance(args, dict):
        raise DecodeFailure(f'"{arg_key}" must be a JSON object, got {kind(args)}')
    return ToolCall(name=name, arguments=args, raw=raw)


def dumps(obj: Any) -> str:
    """JSON as chat templates write it (``tojson``): non-ASCII kept, default separators."""
    return json.dumps(obj, ensure_ascii=False)


def kind(value: Any) -> str:
    """What ``value`` is, in JSON words, for a reason (``"an object"``, ``"a string"``, ``"null"``, ...)."""
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__
    )
