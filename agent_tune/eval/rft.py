"""Rejection-sampling fine-tuning rows: the eval's successful episodes, with the exact tokens the policy produced.

``agent-tune eval ... --sft-out rft.jsonl`` keeps every episode that passes the filter (:class:`RFTFilter`:
accuracy at least ``--sft-min-accuracy``, default 1, and/or reward at least ``--sft-min-reward``) as one
SFT row (:func:`rft_row`):

- ``input_ids``: the trajectory's ``prompt_ids + response_ids``, the tokens the server was sent and
  returned, never re-rendered;
- ``loss_mask``: ``[0] * len(prompt_ids) + response_mask`` (1 on the policy's sampled tokens, 0 on the
  prompt, tool results, user turns and template separators);
- ``messages`` and ``tools``: the conversation as the policy saw it, for reading (the SFT dataset trains on
  the ids when a row has them);
- ``id`` (``<test_id>#<sample>``), ``test_id``, ``sample``, ``accuracy``, ``reward``, ``env``, ``model``.

The file is written like the results file: one line per kept episode, flushed and fsynced as it finishes;
a rerun skips ids it already holds and cuts a half-written last line. The row is written before the
episode's result record, so an episode is never counted as finished without its row. ``verl_ext.sft_dataset``
reads these rows as they are (``docs/sft.md``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from agent_tune.rollout.runner import EpisodeResult


@dataclass(frozen=True)
class RFTFilter:
    """Which episodes become SFT rows: all thresholds given must be met (``None``: not checked)."""

    min_accuracy: float | None = 1.0
    min_reward: float | None = None

    def __post_init__(self) -> None:
        if self.min_accuracy is None and self.min_reward is None:
            raise ValueError("--sft-out needs --sft-min-accuracy and/or --sft-min-reward")

    def keep(self, accuracy: float, reward: float) -> bool:
        """Whether an episode with this accuracy and reward is kept."""
        if self.min_accuracy is not None and accuracy < self.min_accuracy:
            return False
        return self.min_reward is None or reward >= self.min_reward


def row_id(test_id: str, sample: int) -> str:
    """The SFT row id of sample ``sample`` of ``test_id``."""
    return f"{test_id}#{sample}"


def rft_row(test_id: str, sample: int, result: EpisodeResult, accuracy: float,
            extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One SFT row holding the episode's exact tokens (see the module docstring)."""
    traj = result.trajectory
    row: dict[str, Any] = {
        "id": row_id(test_id, sample),
        "test_id": test_id,
        "sample": sample,
        "accuracy": float(accuracy),
        "reward": float(result.reward),
        "stop_reason": result.stop_reason.value,
        "input_ids": list(traj.prompt_ids) + list(traj.response_ids),
        "loss_mask": [0] * len(traj.prompt_ids) + list(traj.response_mask),
        "messages": [dict(m) for m in result.messages],
        "tools": list(result.tools) if result.tools else None,
    }
    row.update(extra or {})
    return row


class RFTWriter:
    """Append-only SFT rows file with resume (ids already in the file are not written again)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.ids: set[str] = set()
        self.written = 0
        self._file = None
        if self.path.exists() and self.path.stat().st_size > 0:
            with self.path.open("rb+") as f:
                data = f.read()
                end = data.rfind(b"\n") + 1
                if end < len(data):  # a line a killed run left half-written
                    f.truncate(end)
            for lineno, raw in enumerate(data[:end].split(b"\n"), 1):
                if raw.strip():
                    try:
                        self.ids.add(str(json.loads(raw)["id"]))
                    except (ValueError, KeyError, TypeError):
                        raise ValueError(f"{self.path}:{lineno}: not an SFT row (choose another --sft-out)") from None
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def __enter__(self) -> "RFTWriter":
        self._file = self.path.open("a", encoding="utf-8")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def append(self, row: Mapping[str, Any]) -> bool:
        """Write ``row`` (one line, flushed and fsynced) unless its id is already there; True if written."""
        if self._file is None:
            raise RuntimeError("use RFTWriter as a context manager")
        rid = str(row["id"])
        if rid in self.ids:
            return False
        self._file.write(json.dumps(dict(row), ensure_ascii=False, default=str) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())
        self.ids.add(rid)
        self.written += 1
        return True
