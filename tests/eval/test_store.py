"""The results file: resume keys, a half-written last line, settings mismatch, duplicates."""

from __future__ import annotations

import json

import pytest

from agent_tune.eval.store import ResultsFileError, ResultStore, read_results

META = {"model": "m", "mode": "tokens", "template": "qwen3", "tool_parser": "hermes", "reasoning_parser": "none",
        "temperature": 0.0, "top_p": 1.0, "max_tokens": 64, "n": 1, "env_kwargs": {}}


def test_append_and_resume(tmp_path):
    path = tmp_path / "r.jsonl"
    with ResultStore(path, META) as store:
        store.append({"test_id": "multi_turn_base_0", "sample": 0, "accuracy": 1.0})
        store.append({"test_id": "multi_turn_base_0", "sample": 0, "accuracy": 0.0})  # duplicate key: ignored
    again = ResultStore(path, META)
    assert again.is_finished("multi_turn_base_0") and not again.is_finished("multi_turn_base_1")
    meta, records = read_results(path)
    assert meta == META and [r["accuracy"] for r in records] == [1.0]


def test_partial_last_line_is_cut_before_appending(tmp_path):
    path = tmp_path / "r.jsonl"
    with ResultStore(path, META) as store:
        store.append({"test_id": "multi_turn_base_0", "sample": 0, "accuracy": 1.0})
    with path.open("a") as f:
        f.write('{"test_id": "multi_turn_base_1", "sample": 0, "accu')  # killed mid-write
    store = ResultStore(path, META)
    assert not store.is_finished("multi_turn_base_1")
    with store:
        store.append({"test_id": "multi_turn_base_1", "sample": 0, "accuracy": 0.0})
    lines = path.read_text().splitlines()
    assert [json.loads(line).get("test_id") for line in lines] == [None, "multi_turn_base_0", "multi_turn_base_1"]


def test_corrupt_middle_line_is_an_error(tmp_path):
    path = tmp_path / "r.jsonl"
    path.write_text('{"_meta": {}}\nnot json\n{"test_id": "multi_turn_base_0"}\n')
    with pytest.raises(ResultsFileError, match="corrupt line"):
        read_results(path)


def test_other_settings_are_refused(tmp_path):
    path = tmp_path / "r.jsonl"
    with ResultStore(path, META) as store:
        store.append({"test_id": "multi_turn_base_0", "sample": 0, "accuracy": 1.0})
    with pytest.raises(ResultsFileError, match="model: file has 'm', this run 'other'"):
        ResultStore(path, {**META, "model": "other"})
