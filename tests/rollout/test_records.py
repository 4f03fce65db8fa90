"""Episode record files: one gzip member per episode, read back whole, a killed writer's cut tail dropped."""

from __future__ import annotations

import gzip
import json

import pytest

from agent_tune.options import parse_options
from agent_tune.rollout.records import (
    GroupRecorder,
    RecordFileError,
    TokenChoice,
    append_gzip_record,
    episodes_path,
    read_folder,
    read_records,
)
from agent_tune.utils.typed_config import OptionError


def test_members_append_and_read_back_in_order(tmp_path):
    path = episodes_path(tmp_path / "episodes", 123)
    records = [{"i": i, "text": "line\nbreak \u2028 and \u00e9"} for i in range(5)]
    sizes = [append_gzip_record(path, r) for r in records]
    assert path.name == "episodes-123.jsonl.gz" and path.stat().st_size == sum(sizes)
    assert list(read_records(path)) == records
    with gzip.open(path, "rt", encoding="utf-8") as f:  # one gzip stream of several members: any reader reads it
        assert [json.loads(line) for line in f] == records
    assert list(read_records(path, offset=3)) == records[3:]


@pytest.mark.parametrize("cut", [1, 7, 20])
def test_a_cut_last_member_keeps_every_episode_before_it(tmp_path, cut):
    path = tmp_path / "episodes-1.jsonl.gz"
    for i in range(3):
        append_gzip_record(path, {"i": i, "pad": "x" * 200})
    data = path.read_bytes()
    path.write_bytes(data[:-cut])  # a writer killed inside its last write
    assert [r["i"] for r in read_records(path)] == [0, 1]


def test_plain_jsonl_with_an_unfinished_last_line_and_a_bad_middle_line(tmp_path):
    good = tmp_path / "episodes-2.jsonl"
    good.write_text('{"i": 0}\n\n{"i": 1}\n{"i": 2, "cut')
    assert [r["i"] for r in read_records(good)] == [0, 1]
    bad = tmp_path / "other" / "episodes-3.jsonl"
    bad.parent.mkdir()
    bad.write_text('{"i": 0}\n[1, 2]\n{"i": 2}\n')
    with pytest.raises(RecordFileError, match=r"episodes-3.jsonl line 2: not a JSON object"):
        list(read_records(bad))


def test_read_folder_reads_every_writer_file(tmp_path):
    append_gzip_record(episodes_path(tmp_path, 2), {"w": 2})
    append_gzip_record(episodes_path(tmp_path, 1), {"w": 1})
    (tmp_path / "episodes-9.jsonl").write_text('{"w": 9}\n')
    (tmp_path / "samples-1.jsonl").write_text('{"not": "an episode"}\n')
    assert sorted(r["w"] for r in read_folder(tmp_path)) == [1, 2, 9]


def test_token_lists_go_to_groups_with_signal_at_least_one_a_step_within_one_in_n():
    choice = TokenChoice(4)
    flat, mixed = [0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.5]
    # step 1: three groups without signal, then the first with signal is chosen; the fifth group raises the
    # quota to 2 (ceil(5 / 4)), the sixth finds it used
    chosen = [choice.choose(1, g) for g in (flat, flat, flat, mixed, mixed, mixed)]
    assert chosen == [False, False, False, True, True, False]
    assert [choice.choose(2, mixed) for _ in range(9)] == [True, False, False, False, True, False, False, False, True]
    assert not choice.choose(3, [1.0]) and not choice.choose(3, flat)  # one sample, no signal: never
    assert choice.choose(3, mixed)  # groups of one were not counted: step 3's first group with signal
    # bounded: over many steps of 32 groups, half with signal, at most ceil(32 / 4) a step and never one without
    many = TokenChoice(4)
    for step in range(10, 20):
        picks = [many.choose(step, mixed if g % 2 else flat) for g in range(32)]
        assert 1 <= sum(picks) <= 8 and not any(p for g, p in enumerate(picks) if g % 2 == 0)
    assert len(many._counts) <= TokenChoice.KEEP_STEPS  # old steps forgotten
    assert all(TokenChoice(1).choose(1, flat) for _ in range(5))  # 1: every group
    assert not any(TokenChoice(0).choose(1, mixed) for _ in range(5))  # 0: none


def test_a_group_is_written_whole_when_its_last_sample_is_done(tmp_path):
    recorder = GroupRecorder(episodes_path(tmp_path, 1), tokens_every=8)
    built = []

    def build(sample):
        def record(tokens):
            built.append((sample, tokens))
            return {"sample": sample, "tokens": tokens}
        return record

    for sample in range(3):
        recorder.begin("g")
    recorder.begin("other")
    recorder.add("g", 1, 1.0, build(0))
    assert recorder.release("g") == 0 and not episodes_path(tmp_path, 1).exists()  # two samples still play
    recorder.add("g", 1, 0.0, build(1))
    assert recorder.release("g") == 0
    assert recorder.release("g") == 2  # the third failed (nothing added): the group is written without it
    assert built == [(0, True), (1, True)]  # rewards differ: token lists
    assert read_folder(tmp_path) == [{"sample": 0, "tokens": True}, {"sample": 1, "tokens": True}]
    assert recorder.release("other") == 0  # a sample that recorded nothing writes nothing


def test_the_option_block_is_typed_and_on_by_default(tmp_path):
    options = parse_options({})
    assert options.episodes.enable and options.episodes.dir is None and options.episodes.path() is None
    on = parse_options({"episodes": {"dir": str(tmp_path), "tokens_every": 2}})
    assert on.episodes.path(7) == tmp_path / "episodes-7.jsonl.gz"
    assert parse_options({"episodes": {"enable": False, "dir": str(tmp_path)}}).episodes.path() is None
    with pytest.raises(OptionError, match=r"agent_tune.episodes.tokens_every.*must be >= 0"):
        parse_options({"episodes": {"tokens_every": -1}})
    with pytest.raises(OptionError, match=r"agent_tune.episodes.tokens"):
        parse_options({"episodes": {"tokens": True}})


def test_members_larger_than_a_read_chunk(tmp_path):
    """A member spans several of the reader's chunks (token lists make records of tens of KiB, compressed)."""
    import random

    rng = random.Random(0)
    path = tmp_path / "episodes-5.jsonl.gz"
    records = [{"i": i, "noise": "".join(rng.choice("abcdefghij0123456789") for _ in range(60_000))} for i in range(3)]
    for r in records:
        assert append_gzip_record(path, r) > 3 * 8192
    assert list(read_records(path)) == records
    path.write_bytes(path.read_bytes()[:-9000])  # the last member cut in its middle
    assert [r["i"] for r in read_records(path)] == [0, 1]
