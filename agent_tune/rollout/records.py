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
so training writes them for a bounded share of the groups, chosen among those that trained something
(:class:`TokenChoice`: rewards not all equal; at least one such group each step, at most one in ``tokens_every``
after that), every sample of a chosen group, so a group can be compared token by token. To choose by a group's
rewards, a worker process holds its records until the group's samples it plays have all ended
(:class:`GroupRecorder`): a run killed mid-step loses the records of the groups still playing, none that a step
trained on.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from pydantic import model_validator

from agent_tune.errors import DataError
from agent_tune.utils.typed_config import ConfigModel, OptionError

CONFIG_KEY = "agent_tune.episodes"
EPISODES_DIR = "episodes"  # under the run folder (trainer.default_local_dir)
FILE_PREFIX = "episodes"
# gzip level of each member (zlib's default): level 9 gave the same size and time on BFCL episode records
# (benchmarks/episode_recording.py), each member being one record of a few KiB
GZIP_LEVEL = 6
RecordBuilder = Callable[[bool], Mapping[str, Any]]  # an episode's record, with its token lists or not


class RecordFileError(DataError, ValueError):
    """A record file that cannot be read: a line in its middle that is not a JSON object."""


class EpisodeRecording(ConfigModel):
    """``agent_tune.episodes``: training records every episode it trains on (:mod:`agent_tune.rollout.records`).

    ``enable``: write them; ``dir``: where (``None``: ``<trainer.default_local_dir>/episodes``, which the
    launcher fills in); ``tokens_every``: token lists for groups that carried signal, the first of each step and
    then one in N (:class:`TokenChoice`; 1: every episode, 0: none)."""

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



class TokenChoice:
    """Which GRPO groups get their token lists, chosen by their rewards, per writer process and trainer step.

    ``every`` 1: every group; 0: none. Otherwise a group gets them when it carried signal (its rewards are not all
    equal: the groups whose advantages are not all 0, the ones an update learns from) and the groups chosen so far
    at its step are fewer than ``ceil(k / every)``, ``k`` counting the step's groups of two or more samples up to
    and including this one: the first group with signal of each step always, then at most one in ``every``. A
    group without signal, or of one sample (validation), never gets them (``every=1`` to see those)."""

    KEEP_STEPS = 4  # steps whose counts are kept: a late group of an older step is still counted right

    def __init__(self, every: int) -> None:
        self.every = every
        self._counts: dict[Any, list[int]] = {}  # step -> [groups seen, groups chosen]

    def choose(self, step: int | None, rewards: Sequence[float]) -> bool:
        """Whether the group of ``rewards`` (all its samples') at ``step`` gets its token lists."""
        if self.every <= 1:
            return self.every == 1
        if len(rewards) < 2:
            return False
        counts = self._counts.setdefault(step, [0, 0])
        if len(self._counts) > self.KEEP_STEPS:  # steps come in order: the oldest is done
            self._counts.pop(next(iter(self._counts)))
        counts[0] += 1
        if len(set(rewards)) < 2 or counts[1] >= -(-counts[0] // self.every):
            return False
        counts[1] += 1
        return True


class GroupRecorder:
    """One process's episode log, written a GRPO group at a time so that :class:`TokenChoice` sees the group's
    rewards: :meth:`begin` as a sample starts, :meth:`add` its record (built later, with or without token lists)
    when it ends, :meth:`release` when it is done either way; the group's records are appended when the last of
    its samples started here is released. The samples of a group start together (verl's agent-loop worker starts
    a batch's episodes at once), so the group is whole by then; a group split across worker processes is chosen
    by the part each holds (a part whose rewards differ belongs to a group with signal)."""

    def __init__(self, path: str | Path, tokens_every: int) -> None:
        self.path = Path(path)
        self.choice = TokenChoice(tokens_every)
        self._open: dict[str, int] = {}
        self._held: dict[str, list[tuple[Any, float, RecordBuilder]]] = {}

    def begin(self, group: str) -> None:
        """A sample of ``group`` starts."""
        self._open[group] = self._open.get(group, 0) + 1

    def add(self, group: str, step: int | None, reward: float, build: RecordBuilder) -> None:
        """A sample of ``group`` ended with ``reward``; ``build(tokens)`` makes its record."""
        self._held.setdefault(group, []).append((step, reward, build))

    def release(self, group: str) -> int:
        """A sample of ``group`` is done (recorded or failed); writes the group when it was the last one playing
        here. Returns the records written."""
        left = self._open.get(group, 1) - 1
        if left > 0:
            self._open[group] = left
            return 0
        self._open.pop(group, None)
        held = self._held.pop(group, [])
        if not held:
            return 0
        tokens = self.choice.choose(held[0][0], [reward for _, reward, _ in held])
        for _, _, build in held:
            append_gzip_record(self.path, build(tokens))
        return len(held)


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
