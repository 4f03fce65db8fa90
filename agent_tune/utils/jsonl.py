"""One rule for reading a jsonl file: one JSON value per line, blank lines skipped, a bad line named."""

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
