"""Task ids from a file (``agent-tune data --ids-file`` and ``agent-tune eval --ids-file``), so a run plays the
very tasks another tool's split names.

A file holds one task per line, either as a plain id (``multi_turn_base_12``) or as a JSON object (JSONL) whose
id sits in one of :data:`ID_FIELDS`, the first present winning:

* ``id``: a flat record;
* ``extra_info.id``: the rows ``agent-tune data`` writes (``DIR/<split>.jsonl``);
* ``metadata.bfcl_task.id``, then ``metadata.index``: the ``bfcl_*.jsonl`` rows T3RL's BFCL preprocessing writes
  (``bfcl_train.jsonl``, ``bfcl_train_base.jsonl``, ``bfcl_val.jsonl``, ``bfcl_test.jsonl``), whose id is the
  BFCL test id.

Blank lines and lines starting with ``#`` are skipped. Ids keep the file's order; a repeated id counts once.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from agent_tune.errors import DataError

# where a JSON row keeps its task id, in the order they are tried
ID_FIELDS: tuple[tuple[str, ...], ...] = (
    ("id",),
    ("extra_info", "id"),
    ("metadata", "bfcl_task", "id"),
    ("metadata", "index"),
)


class IdFileError(DataError, ValueError):
    """An ids file that gives no ids, or a line of it that gives none (the message names the file and line)."""


def _field(row: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = row
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


def row_id(row: Mapping[str, Any]) -> str | None:
    """The task id of one JSON row (:data:`ID_FIELDS`), or ``None`` when it has none."""
    for path in ID_FIELDS:
        value = _field(row, path)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value).strip():
            return str(value).strip()
    return None


def read_id_file(path: str | os.PathLike[str]) -> list[str]:
    """The task ids in ``path`` (see the module docstring), in order, each once.

    Raises:
        IdFileError: the file is missing or holds no id; a line that starts a JSON object but is not one, or a
            JSON row with none of :data:`ID_FIELDS` (the file and line are named).
    """
    file = Path(path)
    if not file.is_file():
        raise IdFileError(f"ids file {str(path)!r}: no such file")
    ids: list[str] = []
    with file.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            text = line.strip()
            if not text or text.startswith("#"):
                continue
            if not text.startswith("{"):
                ids.append(text)
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as exc:
                raise IdFileError(f"{file}:{number}: not a JSON object ({exc.msg})") from None
            found = row_id(row)
            if found is None:
                fields = ", ".join(".".join(p) for p in ID_FIELDS)
                raise IdFileError(f"{file}:{number}: a JSON row without a task id (looked for {fields})")
            ids.append(found)
    if not ids:
        raise IdFileError(f"ids file {str(path)!r} holds no ids")
    return list(dict.fromkeys(ids))


def task_ids(ids: Sequence[str] | None, ids_file: str | os.PathLike[str] | None) -> list[str] | None:
    """The ids a command was given: ``--ids`` or ``--ids-file`` (``ValueError`` for both), ``None`` for neither."""
    if ids and ids_file:
        raise ValueError("give the task ids with --ids or --ids-file, not both")
    if ids_file:
        return read_id_file(ids_file)
    return list(ids) if ids else None


__all__ = ["ID_FIELDS", "IdFileError", "read_id_file", "row_id", "task_ids"]
