"""The results file: one JSON line per finished episode, appended as episodes finish.

The first line is a header ``{"_meta": {...}}`` with the settings that make results comparable (model,
mode, template, parsers, sampling). Every other line is a record keyed by ``(test_id, sample)``.

Resuming: opening an existing file reads the finished keys so the run skips them. A run killed mid-write
leaves a partial last line; it is cut off before anything is appended (the episode is simply run again).
Opening a file whose header disagrees with the current settings is refused: results of two different
configurations must not be mixed. Duplicate keys (two runs on one file at once) keep the first record.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator, Mapping

from agent_tune.errors import DataError

META_KEY = "_meta"
Key = tuple[str, int]


class ResultsFileError(DataError, ValueError):
    """The results file cannot be used (settings mismatch, corrupt line in the middle, not a results file)."""


def record_key(record: Mapping[str, Any]) -> Key:
    return (str(record["test_id"]), int(record.get("sample", 0)))


def read_results(path: str | os.PathLike[str]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Read a results file: ``(header meta or None, records)``, duplicates dropped, a partial last line ignored."""
    meta: dict[str, Any] | None = None
    records: list[dict[str, Any]] = []
    seen: set[Key] = set()
    for lineno, obj in _iter_lines(Path(path)):
        if META_KEY in obj:
            if meta is None:
                meta = obj[META_KEY]
            continue
        if "test_id" not in obj:
            raise ResultsFileError(f"{path}:{lineno}: not a result record (no test_id)")
        key = record_key(obj)
        if key not in seen:
            seen.add(key)
            records.append(obj)
    return meta, records


def _iter_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open("rb") as f:
        data = f.read()
    lines = data.split(b"\n")
    for i, raw in enumerate(lines):
        if not raw.strip():
            continue
        last = i == len(lines) - 1  # no newline after it: possibly cut by a kill
        try:
            obj = json.loads(raw)
        except ValueError:
            if last:
                return
            raise ResultsFileError(f"{path}:{i + 1}: corrupt line (not JSON) in the middle of the file") from None
        if not isinstance(obj, dict):
            raise ResultsFileError(f"{path}:{i + 1}: not a JSON object")
        yield i + 1, obj


# Settings that must match for a file to be resumed.
COMPAT_KEYS = (
    "env", "model", "mode", "template", "tool_parser", "reasoning_parser", "temperature", "top_p", "top_k",
    "max_tokens", "n", "env_kwargs",
)


class ResultStore:
    """Append-only results file with resume support. Not shared between processes."""

    def __init__(self, path: str | os.PathLike[str], meta: Mapping[str, Any]) -> None:
        self.path = Path(path)
        self.meta = dict(meta)
        self.records: list[dict[str, Any]] = []
        self.finished: set[Key] = set()
        self._file = None
        if self.path.exists() and self.path.stat().st_size > 0:
            old_meta, self.records = read_results(self.path)
            if old_meta is not None:
                diffs = {
                    k: (old_meta.get(k), self.meta.get(k))
                    for k in COMPAT_KEYS
                    if old_meta.get(k) != self.meta.get(k)
                }
                if diffs:
                    detail = "; ".join(f"{k}: file has {a!r}, this run {b!r}" for k, (a, b) in diffs.items())
                    raise ResultsFileError(
                        f"{self.path} holds results of other settings ({detail}); choose another --output"
                    )
            self.finished = {record_key(r) for r in self.records}
            self._cut_partial_tail()
            self._has_header = old_meta is not None
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._has_header = False

    def _cut_partial_tail(self) -> None:
        """Drop bytes after the last newline (a line a killed run left half-written)."""
        with self.path.open("rb+") as f:
            data = f.read()
            end = data.rfind(b"\n") + 1
            if end < len(data):
                f.truncate(end)

    def open(self) -> "ResultStore":
        self._file = self.path.open("a", encoding="utf-8")
        if not self._has_header:
            self._write({META_KEY: self.meta})
            self._has_header = True
        return self

    def __enter__(self) -> "ResultStore":
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def is_finished(self, test_id: str, sample: int = 0) -> bool:
        return (test_id, sample) in self.finished

    def append(self, record: Mapping[str, Any]) -> None:
        """Write one finished record (one line, flushed and fsynced) unless its key is already present."""
        key = record_key(record)
        if key in self.finished:
            return
        self._write(dict(record))
        self.finished.add(key)
        self.records.append(dict(record))

    def _write(self, obj: Mapping[str, Any]) -> None:
        if self._file is None:
            raise RuntimeError("ResultStore.open() first")
        self._file.write(json.dumps(obj, ensure_ascii=False, default=str) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())
