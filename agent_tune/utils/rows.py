"""Writing verl dataset rows: one split as ``<name>.parquet`` (what verl reads) and ``<name>.jsonl`` (to read).

verl reads every file of ``data.train_files`` (and of ``data.val_files``) into one table: ``datasets`` concatenates
the files, which needs each column to have one Arrow type in all of them. A row's ``prompt`` is a list of messages;
Arrow types a list of mappings as a list of structs over every key any message of the file has, so a file whose
prompts have a ``name`` on tool messages (worked examples: BFCL's, the mcp env's) and one without could not be
read together. Every row is therefore written with one prompt type, whatever its env (:func:`prompt_type`): each
message has exactly the keys :data:`ROW_MESSAGE_KEYS`, ``name`` null where the message has none
(:func:`prompt_messages` reads a prompt back as the env wrote it). The ``.jsonl`` holds the rows as given.

A null ``name`` renders as a missing one, with the tokenizer's chat template (what verl's length filter applies) and
agent-tune's (tests/envs/test_mixed_rows.py), so a prompt renders to the same tokens as the env wrote it. A message
field beyond these (``tool_calls``, ``reasoning_content``, a list of content parts) would be padded onto every
message of every row of the run, and its shape differs between rows: it is refused, naming the row, the message and
the field. The row's prompt is what verl's length filter measures and what a reader sees; the episode's real prompt
comes from the env's ``reset`` (:mod:`verl_ext.agent_loop`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

# The keys of every message in a row's prompt, in this order.
ROW_MESSAGE_KEYS = ("role", "content", "name")


def prompt_type() -> Any:
    """The Arrow type of the ``prompt`` column of every row file (lists of ``{role, content, name}`` strings)."""
    import pyarrow as pa

    return pa.list_(pa.struct([(key, pa.string()) for key in ROW_MESSAGE_KEYS]))


def row_messages(messages: Sequence[Mapping[str, Any]], row: Any = None) -> list[dict[str, Any]]:
    """``messages`` as a row's prompt holds them: each with exactly :data:`ROW_MESSAGE_KEYS` (``name`` ``None`` when
    absent). ``ValueError`` naming the row (``row``: its id or index), the message and the field for a message that
    is not a mapping, has no string role, content that is not text (or ``None``), a non-string name, or any
    other field with a value."""
    where = f"row {row!r}: " if row is not None else ""
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ValueError(f"{where}prompt message {i} is a {type(message).__name__}, not a mapping")
        role, content, name = message.get("role"), message.get("content"), message.get("name")
        if not isinstance(role, str):
            raise ValueError(f"{where}prompt message {i}: field 'role' must be a string, got {role!r}")
        for field, value in (("content", content), ("name", name)):
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{where}prompt message {i} (role {role!r}): field {field!r} must be text, got a "
                                 f"{type(value).__name__} (a row's prompt is one Arrow type for every env of a run)")
        extra = [k for k, v in message.items() if k not in ROW_MESSAGE_KEYS and v not in (None, "", [], {})]
        if extra:
            raise ValueError(f"{where}prompt message {i} (role {role!r}): field {extra[0]!r} cannot be written: a "
                             f"row's prompt messages hold {', '.join(ROW_MESSAGE_KEYS)} only (verl reads the rows "
                             "of every env of a run as one table); write such a turn into the content")
        out.append({"role": role, "content": content, "name": name})
    return out


def prompt_messages(prompt: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A row's prompt as read back (from parquet, or from verl's dataset) as the messages the env wrote: each
    message without its null ``name`` (:func:`row_messages` adds it to messages that have none)."""
    return [{k: v for k, v in dict(m).items() if not (k == "name" and v is None)} for m in prompt]


def schema_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` with each ``prompt`` as :func:`row_messages` writes it (a row without a ``prompt`` unchanged)."""
    out = []
    for i, row in enumerate(rows):
        row = dict(row)
        if row.get("prompt") is not None:
            extra = row.get("extra_info")
            label = extra.get("id", extra.get("index", i)) if isinstance(extra, Mapping) else i
            row["prompt"] = row_messages(row["prompt"], label)
        out.append(row)
    return out


def rows_table(rows: Sequence[Mapping[str, Any]]) -> Any:
    """The Arrow table of ``rows`` (:func:`schema_rows`): ``prompt`` typed :func:`prompt_type`, the other columns
    as pandas and Arrow infer them."""
    import pandas as pd
    import pyarrow as pa

    rows = schema_rows(rows)
    table = pa.Table.from_pandas(pd.DataFrame(rows), preserve_index=False)
    if "prompt" in table.column_names:
        prompts = pa.array([row.get("prompt") for row in rows], type=prompt_type())
        table = table.set_column(table.column_names.index("prompt"), pa.field("prompt", prompt_type()), prompts)
    return table


def write_rows(out_dir: str | Path, name: str, rows: Sequence[dict[str, Any]]) -> None:
    """Write ``rows`` to ``out_dir/name.parquet`` (each prompt as :func:`row_messages` writes it) and
    ``out_dir/name.jsonl`` (the rows as given, to read); the folder is created. ``ValueError`` (naming the row,
    message and field) for a prompt :func:`row_messages` refuses, before anything is written."""
    import pyarrow.parquet as pq

    out_dir = Path(out_dir)
    table = rows_table(rows)  # checked before anything is written
    out_dir.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, out_dir / f"{name}.parquet")
    with open(out_dir / f"{name}.jsonl", "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def read_rows(path: str | Path, who: str, prompt_key: str = "prompt") -> list[dict[str, Any]]:
    """The rows of a dataset file as verl's recipes write them (SkyRL's, Agent-R1's, verl's own): ``.parquet``,
    ``.jsonl`` or ``.json`` (a list of rows, or one per line); a ``ValueError`` starting ``who`` (``"skyrl env"``)
    for another suffix or a row without a non-empty ``prompt_key`` (named by its number)."""
    from agent_tune.utils.jsonl import jsonl_lines

    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        rows = pq.read_table(path).to_pylist()
    elif suffix in (".jsonl", ".json"):
        text = path.read_text(encoding="utf-8")
        whole = None
        if suffix == ".json":
            try:
                whole = json.loads(text)
            except ValueError:
                whole = None
        rows = whole if isinstance(whole, list) else [row for _, row in jsonl_lines(text, str(path))]
    else:
        raise ValueError(f"{who}: {path}: a dataset file is .parquet, .jsonl or .json")
    for number, row in enumerate(rows, 1):
        if not isinstance(row, dict) or not row.get(prompt_key):
            raise ValueError(f"{who}: {path} row {number}: a row needs a {prompt_key!r} (chat messages)")
    return rows


def row_split(row: Mapping[str, Any]) -> str:
    """The split a row names in ``extra_info.split`` (verl's and SkyRL's preprocessing scripts write it), else
    ``train``."""
    info = row.get("extra_info")
    return str((info.get("split") if isinstance(info, Mapping) else None) or "train")


def split_rows(split: str, path: str | Mapping[str, str], who: str, prompt_key: str = "prompt",
               by_row_split: bool = True) -> tuple[Path, list[tuple[int, dict[str, Any]]]]:
    """The file of ``split`` and its rows (numbered from 1) in a catalogue's ``path`` option: one file per split
    (``{"train": ..., "test": ...}``: every row of the split's file), or one file whose rows name their split in
    ``extra_info.split`` (:func:`row_split`; with ``by_row_split=False`` every row, whatever the split). A
    ``ValueError`` starting ``who`` for a split without a file, or a file none of whose rows is of ``split``."""
    if isinstance(path, Mapping):
        if split not in path:
            raise ValueError(f"{who}: no file for split {split!r} in path (its splits: {', '.join(path)})")
        file = Path(path[split])
        return file, list(enumerate(read_rows(file, who, prompt_key), 1))
    file = Path(path)
    rows = read_rows(file, who, prompt_key)
    if not by_row_split:
        return file, list(enumerate(rows, 1))
    chosen = [(n, r) for n, r in enumerate(rows, 1) if row_split(r) == split]
    if rows and not chosen:
        raise ValueError(f"{who}: no row of {file} has extra_info.split == {split!r}; give one file per "
                         'split: {"path": {"train": ..., "test": ...}}')
    return file, chosen


def truth_text(truth: Any) -> str:
    """A row's ground truth as a task's reference text: a string as it is, anything else as JSON, none as ``""``."""
    return "" if truth is None else truth if isinstance(truth, str) else json.dumps(truth)


def says_correct(value: Any) -> bool:
    """Whether a metric or a score's field says the answer is correct: ``True``, or a number >= 1."""
    if isinstance(value, bool):
        return value
    return isinstance(value, (int, float)) and value >= 1


def row_messages_of(prompt: str | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A dataset row's ``prompt`` as chat messages: a string is one user message."""
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else [dict(m) for m in prompt]

