"""Reading the agent loop's per-episode records while a run appends to them.

The agent loop (:mod:`verl_ext.agent_loop`) appends one JSON record per episode, with the trainer step that
trains it (``global_steps``), the split of its row (``split``: ``val`` / ``test`` for validation rows) and
its metrics, to ``<agent_tune.sample_metrics_dir>/samples-<pid>.jsonl`` (one file per rollout worker
process). Two readers follow those files as they grow: the task weighting's sampler, inside verl's trainer
(:mod:`verl_ext.task_weighting`), and the per-step metrics writer of the training child
(:mod:`agent_tune.launch.step_metrics`).

One type for all three: :class:`SampleRecord`. The writer builds one (``verl_ext.agent_loop.sample_record``)
and appends :meth:`SampleRecord.as_dict`; the readers get them back from :func:`read_appended`
(:meth:`SampleRecord.from_dict`) and read attributes.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping, get_args, get_type_hints

from agent_tune.rollout.episode_metrics import METRIC_KEYS

logger = logging.getLogger(__name__)

# the ``split`` of validation rows' records: not training episodes
EVAL_SPLITS = ("val", "test")


@dataclass(slots=True, kw_only=True)
class SampleRecord:
    """One episode's record in ``samples-<pid>.jsonl``: the fields are the file's keys, in its order.

    Every field but ``extra`` is one JSON key: the row's (``global_steps``, ``split``, ``data_source``,
    ``task``), the episode's (``reward``, token lengths), the episode metrics (exactly
    :data:`agent_tune.rollout.episode_metrics.METRIC_KEYS`) and the collapse-monitoring fields
    (``verl_ext.agent_loop.collapse_fields``). :meth:`as_dict` is what is written.

    Reading (:meth:`from_dict`) is lenient, so that the files of a resumed run, written by an older agent loop,
    still read: a missing key is ``None`` (``split``: ``"train"``, as the agent loop files a row without one),
    and readers leave ``None`` out (no mean, no count). A key this class does not know, and a known key whose
    value has the wrong type (the field is then ``None``), go to ``extra`` untouched; :meth:`as_dict` writes
    them back, so a record read and written again keeps every key and value.
    """

    # the row
    global_steps: int | None  # the trainer step that trains the episode (verl_ext.agent_loop.sample_step)
    split: str  # the row's extra_info.split; EVAL_SPLITS: a validation episode
    data_source: str | None
    task: str | None  # verl_ext.task_weighting.task_key of the row
    # the episode
    reward: float | None
    prompt_length: int | None
    response_length: int | None
    # the episode metrics: METRIC_KEYS (agent_tune.rollout.episode_metrics), one field each
    acc: float | None
    progress: float | None
    format_errors: float | None
    num_calls: float | None
    num_steps: float | None
    num_generations: float | None
    turns_completed: float | None
    zero_call: float | None
    truncated: float | None
    tool_errors: float | None
    stop_reason: str | None  # how the episode ended (agent_tune.envs.base.StopReason's value)
    # collapse monitoring (verl_ext.agent_loop.collapse_fields)
    group: str | None  # the GRPO group
    valid_calls: int | None
    format_error_generations: int | None
    # keys this class does not know, and known keys with a value of the wrong type, as read
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def is_training(self) -> bool:
        """A training episode: its split is not a validation one (:data:`EVAL_SPLITS`)."""
        return self.split not in EVAL_SPLITS

    def episode_metrics(self) -> dict[str, float]:
        """The :data:`METRIC_KEYS` the record has (``None``: absent, left out)."""
        out: dict[str, float] = {}
        for key in METRIC_KEYS:
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out

    def as_dict(self) -> dict[str, Any]:
        """The JSON object written to the file: every field by name (``None`` as null), then ``extra``."""
        out: dict[str, Any] = {name: getattr(self, name) for name in _KINDS}
        out.update(self.extra)
        return out

    def to_json(self) -> str:
        """One line of the file (without the newline)."""
        return json.dumps(self.as_dict(), ensure_ascii=False)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SampleRecord:
        """A record from a decoded JSON object (see the class docstring for what is lenient)."""
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in d.items():
            kind = _KINDS.get(key)
            if kind is None:
                extra[key] = value
                continue
            typed = _coerce(kind, value)
            if typed is _WRONG_TYPE:
                extra[key] = value
            else:
                values[key] = typed
        if values.get("split") is None:
            values["split"] = "train"
        for key in _KINDS:
            values.setdefault(key, None)
        return cls(**values, extra=extra)


_WRONG_TYPE = object()


def _coerce(kind: type, value: Any) -> Any:
    """``value`` as a field of type ``kind`` (``float``, ``int`` or ``str``; ``None`` stays), else
    :data:`_WRONG_TYPE`. A number is an ``int`` or ``float``, never a ``bool``; an ``int`` field takes a
    whole float (``3.0``)."""
    if value is None:
        return None
    if kind is str:
        return value if isinstance(value, str) else _WRONG_TYPE
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _WRONG_TYPE
    if kind is float:
        return float(value)
    if isinstance(value, int):
        return value
    return int(value) if value.is_integer() else _WRONG_TYPE


# each record key (a field of SampleRecord but ``extra``), in the file's order -> the type its value is read as
_HINTS = get_type_hints(SampleRecord)
_KINDS: dict[str, type] = {
    f.name: next(t for t in (get_args(_HINTS[f.name]) or (_HINTS[f.name],)) if t is not type(None))
    for f in fields(SampleRecord) if f.name != "extra"
}


def read_appended(samples_dir: Path, offsets: dict[str, int]) -> list[SampleRecord]:
    """The complete records appended to ``samples_dir/samples-*.jsonl`` since ``offsets`` (bytes read per
    file name, updated in place); a line still being written waits for the next call. A complete line that is
    not a JSON object is skipped (with a warning counting them: each line is read once)."""
    out: list[SampleRecord] = []
    for path in sorted(Path(samples_dir).glob("samples-*.jsonl")):
        start = offsets.get(path.name, 0)
        with path.open("rb") as f:
            f.seek(start)
            chunk = f.read()
        end = chunk.rfind(b"\n") + 1
        offsets[path.name] = start + end
        skipped = 0
        for line in chunk[:end].splitlines():
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                rec = None
            if isinstance(rec, dict):
                out.append(SampleRecord.from_dict(rec))
            else:
                skipped += 1
        if skipped:
            logger.warning("%s: skipped %d line(s) that are not JSON objects", path, skipped)
    return out
