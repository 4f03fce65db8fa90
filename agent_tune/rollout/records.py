"""Episode record files: where training records every episode it trains on, how they are written and read back.

The record is :func:`agent_tune.rollout.dump.episode_record` (the trajectory's record of
:func:`~agent_tune.rollout.dump.trajectory_record`, plus the conversation with its prompt marked, how the episode
ended and its metrics): the one format that the training log, the eval output (``agent-tune eval --output``)
and the rollout dumps share. This module is its file layer and its one reader:

* **training** (:class:`EpisodeRecording`, the ``agent_tune.episodes`` block): each agent-loop worker process
  appends every episode to ``<run>/episodes/episodes-<pid>.jsonl.gz``, **one gzip member per episode**
  (:func:`append_gzip_record`). A gzip file of several members is one valid gzip stream, so ``zcat`` and
  :mod:`gzip` read it whole; a run killed mid-write leaves at most its last member cut short, which
  :func:`read_records` drops, keeping every episode before it.
* **reading** (:func:`read_records`, :func:`read_folder`): ``.jsonl`` and ``.jsonl.gz`` alike, blank lines
  skipped, a cut-off tail (an unfinished line, a truncated member) dropped, a line that is not a JSON object in
  the middle of a file named in a :class:`RecordFileError`.

Token lists (ids, loss mask, the sampler's log-probs and each response token's text) make a record ~10x larger,
so training writes them for a bounded share of the groups (``tokens_every``: the groups whose id hashes to 0
modulo N, every sample of such a group, so a group can be compared token by token).
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from pathlib import Path
from typing import Any, Iterator, Mapping

from pydantic import model_validator

from agent_tune.errors import DataError
from agent_tune.utils.typed_config import ConfigModel, OptionError

CONFIG_KEY = "agent_tune.episodes"
EPISODES_DIR = "episodes"  # under the run folder (trainer.default_local_dir)
FILE_PREFIX = "episodes"
# gzip level of each member (zlib's default): level 9 gave the same size and time on BFCL episode records
# (benchmarks/episode_recording.py), each member being one record of a few KiB
GZIP_LEVEL = 6


class RecordFileError(DataError, ValueError):
    """A record file that cannot be read: a line in its middle that is not a JSON object."""


class EpisodeRecording(ConfigModel):
    """``agent_tune.episodes``: training records every episode it trains on (:mod:`agent_tune.rollout.records`).

    ``enable``: write them; ``dir``: where (``None``: ``<trainer.default_local_dir>/episodes``, which the
    launcher fills in); ``tokens_every``: the token lists of the groups whose id hashes to 0 modulo N (1: every
    episode, 0: none)."""

    enable: bool = True
    dir: str | None = None
    tokens_every: int = 8

    @model_validator(mode="after")
    def _in_range(self) -> EpisodeRecording:
        if self.tokens_every < 0:
            raise OptionError("tokens_every", f"{self.tokens_every!r} must be >= 0 (0: no token lists)")
        return self

    def path(self, pid: int | None = None) -> Path | None:
        """The file this process appends to (``None``: recording off or no folder set)."""
        if not self.enable or not self.dir:
            return None
        return episodes_path(self.dir, os.getpid() if pid is None else pid)

    def with_tokens(self, group: str) -> bool:
        """Whether the episodes of ``group`` (a GRPO group id) get their token lists: a stable hash of the id,
        so every sample of a chosen group does."""
        if self.tokens_every <= 0:
            return False
        return self.tokens_every == 1 or zlib.crc32(group.encode("utf-8")) % self.tokens_every == 0


def episodes_path(folder: str | Path, pid: int) -> Path:
    """The record file of one writer process in ``folder``."""
    return Path(folder) / f"{FILE_PREFIX}-{pid}.jsonl.gz"


def encode_record(record: Mapping[str, Any]) -> bytes:
    """One record as one gzip member holding its JSON line (a value JSON cannot hold is written as its text)."""
    line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str) + "\n"
    return gzip.compress(line.encode("utf-8"), compresslevel=GZIP_LEVEL, mtime=0)


def append_gzip_record(path: str | Path, record: Mapping[str, Any]) -> int:
    """Append ``record`` to ``path`` as its own gzip member, in one ``write`` (the folder is created if
    missing); returns the bytes written. Each writer process has its own file, so members never interleave."""
    data = encode_record(record)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as f:
        f.write(data)
    return len(data)


_CHUNK = 1 << 13  # bytes handed to the decompressor at a time: what a member's end copies is at most this


def _gzip_text(data: bytes) -> str:
    """The text of a multi-member gzip file; a member cut short or corrupt (a killed writer) ends it, the members
    before it kept whole. Linear in the file's size: the input goes in chunks, so a member's end never copies the
    rest of the file (one member per episode: 10,000 of them)."""
    parts: list[bytes] = []
    view = memoryview(data)
    pos = 0
    while pos < len(data):
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        member: list[bytes] = []
        try:
            while not d.eof and pos < len(data):
                chunk = view[pos:pos + _CHUNK]
                member.append(d.decompress(chunk))
                pos += len(chunk) - len(d.unused_data)
        except zlib.error:
            break
        if not d.eof:  # a member cut short (no trailer to check it by): dropped
            break
        parts.extend(member)
    return b"".join(parts).decode("utf-8", errors="replace")


def read_text(path: str | Path) -> str:
    """The text of a ``.jsonl`` or ``.jsonl.gz`` record file (gzip told by its magic bytes, not its name)."""
    data = Path(path).read_bytes()
    if data[:2] == b"\x1f\x8b":
        return _gzip_text(data)
    return data.decode("utf-8", errors="replace")


def read_records(path: str | Path, offset: int = 0) -> Iterator[dict[str, Any]]:
    """The JSON objects of one record file, from its ``offset``-th line on (``.jsonl`` or ``.jsonl.gz``).

    A last line without its newline (a writer killed or still writing) is dropped; a line that is not a JSON
    object elsewhere raises :class:`RecordFileError` naming the file and line."""
    yield from read_new(path, offset)[0]


def read_new(path: str | Path, lines_read: int = 0) -> tuple[list[dict[str, Any]], int]:
    """The records of ``path`` after its first ``lines_read`` complete lines, and how many complete lines it now
    has: what a reader following a growing file (``agent-tune view --serve``) passes back next time."""
    complete = read_text(path).split("\n")[:-1]  # what follows the last newline is unfinished (or empty)
    out: list[dict[str, Any]] = []
    for number, line in enumerate(complete[lines_read:], lines_read + 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise RecordFileError(f"{path} line {number}: not JSON ({exc})") from None
        if not isinstance(value, dict):
            raise RecordFileError(f"{path} line {number}: not a JSON object")
        out.append(value)
    return out, max(lines_read, len(complete))


def record_files(folder: str | Path, prefix: str = FILE_PREFIX) -> list[Path]:
    """The record files of ``folder`` (``<prefix>-*.jsonl`` and ``.jsonl.gz``), in name order."""
    folder = Path(folder)
    found = [*folder.glob(f"{prefix}-*.jsonl"), *folder.glob(f"{prefix}-*.jsonl.gz")]
    return sorted(found)


def read_folder(folder: str | Path, prefix: str = FILE_PREFIX) -> list[dict[str, Any]]:
    """Every record in ``folder``'s record files (:func:`record_files`), file by file."""
    return [rec for path in record_files(folder, prefix) for rec in read_records(path)]
