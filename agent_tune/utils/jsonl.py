"""One rule for reading a jsonl file (one JSON value per line, blank lines skipped, a bad line named), and one for
making a value fit a JSON record (:func:`json_safe`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def jsonl_lines(text: str, name: str, error: type[Exception] = ValueError) -> list[tuple[int, Any]]:
    """``(line number, value)`` for each non-blank line of ``text`` (counted from 1); a line that is not JSON raises
    ``error("<name> line <n>: not JSON (...)")``."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append((number, json.loads(line)))
        except ValueError as exc:
            raise error(f"{name} line {number}: not JSON ({exc})") from None
    return out


def read_jsonl(path: str | Path, error: type[Exception] = ValueError) -> list[tuple[int, Any]]:
    """:func:`jsonl_lines` of the file at ``path`` (UTF-8), errors naming the path."""
    return jsonl_lines(Path(path).read_text(encoding="utf-8"), str(path), error)


def json_safe(value: Any) -> Any:
    """A JSON-serialisable copy of ``value`` for a record: what JSON cannot hold is written as its ``repr`` (the
    whole value's repr when a key is neither a string nor a number)."""
    try:
        return json.loads(json.dumps(value, default=repr))
    except (TypeError, ValueError):
        return repr(value)
