"""The agent loop's episode record (verl_ext/sample_records.py): its fields are the file's keys (the episode
metrics exactly METRIC_KEYS), it round-trips through JSON, older records still read, and ``read_appended``
returns records, skipping (and counting) lines that are not JSON objects."""

from __future__ import annotations

import json
import logging
from dataclasses import fields
from pathlib import Path

from agent_tune.rollout.episode_metrics import METRIC_KEYS
from verl_ext.sample_records import SampleRecord, read_appended

# the record's keys that are not episode metrics, in the file's order (the on-disk format: readers of existing
# files depend on them)
ROW_KEYS = ("global_steps", "split", "data_source", "task", "reward", "prompt_length", "response_length")
COLLAPSE_KEYS = ("group", "valid_calls", "format_error_generations")

FULL = {"global_steps": 3, "split": "train", "data_source": "bfcl", "task": 'bfcl:{"test_id": "t"}', "reward": 0.5,
        "prompt_length": 120, "response_length": 40, "acc": 1.0, "progress": 0.5, "format_errors": 0.0,
        "num_calls": 2.0, "num_steps": 2.0, "num_generations": 3.0, "turns_completed": 1.0, "zero_call": 0.0,
        "truncated": 0.0, "tool_errors": 0.0,
        "stop_reason": "done", "group": "uid-1", "valid_calls": 2, "format_error_generations": 0}


def test_fields_are_the_row_keys_the_metric_keys_and_the_collapse_keys() -> None:
    """A key added to (or dropped from) METRIC_KEYS without the same field here fails this test."""
    names = [f.name for f in fields(SampleRecord)]
    assert names == [*ROW_KEYS, *METRIC_KEYS, "stop_reason", *COLLAPSE_KEYS, "extra"]
    assert set(SampleRecord.from_dict(FULL).episode_metrics()) == set(METRIC_KEYS)


def test_round_trip_keeps_keys_values_and_order() -> None:
    record = SampleRecord.from_dict(FULL)
    assert record.acc == 1.0 and record.group == "uid-1" and record.global_steps == 3 and record.extra == {}
    assert list(record.as_dict().items()) == list(FULL.items())  # the same keys, in the same order
    assert SampleRecord.from_dict(json.loads(record.to_json())) == record
    # unknown keys and known keys with a value of the wrong type are kept as read
    odd = {**FULL, "acc": "n/a", "future_key": [1, 2]}
    again = SampleRecord.from_dict(odd)
    assert again.acc is None and again.extra == {"acc": "n/a", "future_key": [1, 2]}
    assert "acc" not in again.episode_metrics()
    assert again.as_dict() == odd and list(again.as_dict()) == list(odd)


def test_older_records_still_read() -> None:
    """A record of an older agent loop (no split, no task, no collapse fields, integer metrics) reads: missing
    keys are None (split: train), numbers are typed."""
    old = SampleRecord.from_dict({"global_steps": 2.0, "acc": 1, "format_errors": 0})
    assert old.global_steps == 2 and isinstance(old.global_steps, int)
    assert old.acc == 1.0 and isinstance(old.acc, float)
    assert old.split == "train" and old.is_training and old.task is None and old.group is None
    assert old.episode_metrics() == {"acc": 1.0, "format_errors": 0.0}
    assert SampleRecord.from_dict({"acc": True}).acc is None  # a bool is no number


def test_is_training() -> None:
    assert SampleRecord.from_dict({**FULL, "split": "train"}).is_training
    assert not SampleRecord.from_dict({**FULL, "split": "val"}).is_training
    assert not SampleRecord.from_dict({**FULL, "split": "test"}).is_training


def test_read_appended_returns_records_and_counts_bad_lines(tmp_path: Path, caplog) -> None:
    path = tmp_path / "samples-5.jsonl"
    path.write_text(json.dumps(FULL) + "\n\nnot json\n[1, 2]\n" + json.dumps({"global_steps": 4, "acc": 0.0})
                    + '\n{"global_steps": 5, "ac')
    offsets: dict[str, int] = {}
    with caplog.at_level(logging.WARNING, logger="verl_ext.sample_records"):
        records = read_appended(tmp_path, offsets)
    assert records == [SampleRecord.from_dict(FULL), SampleRecord.from_dict({"global_steps": 4, "acc": 0.0})]
    assert "skipped 2 line(s)" in caplog.text  # the blank line is no error
    with path.open("a") as f:
        f.write('c": 1.0}\n')
    [last] = read_appended(tmp_path, offsets)  # the half-written line, once complete
    assert last.global_steps == 5 and last.acc == 1.0
    assert read_appended(tmp_path, offsets) == []
