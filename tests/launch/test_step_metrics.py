"""Per-step metrics jsonl: joins verl's file logger and the agent loop's episode records, appends only new steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_tune.launch.step_metrics import StepMetricsWriter, follow, wait_stop


def _write(path: Path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_joins_sources_and_survives_resume(tmp_path: Path) -> None:
    log, samples, out = tmp_path / "verl.jsonl", tmp_path / "samples", tmp_path / "metrics.jsonl"
    _write(log, [{"step": 1, "data": {"critic/score/mean": 0.25, "timing_s/step": 30.0, "response_length/mean": 100}}])
    _write(samples / "samples-11.jsonl", [
        {"global_steps": 1, "split": "train", "acc": 0.0, "progress": 0.5, "format_errors": 2},
        {"global_steps": 1, "split": "val", "acc": 1.0, "progress": 1.0, "format_errors": 0},  # validation: left out
    ])
    _write(samples / "samples-12.jsonl", [{"global_steps": 1, "acc": 1.0, "progress": 1.0, "format_errors": 0}])
    w = StepMetricsWriter(log, samples, out)
    [row] = w.poll()
    assert row == {"step": 1, "samples": 2, "reward": 0.25, "response_length": 100, "step_time_s": 30.0,
                   "acc": 0.5, "progress": 0.75, "format_errors": 1.0}
    assert w.poll() == []  # nothing new
    # step 2 logged by verl but no episode records for it yet: wait for them
    _write(log, [{"step": 1, "data": {}}, {"step": 2, "data": {"critic/score/mean": 0.5}}])
    assert w.poll() == []
    _write(samples / "samples-13.jsonl", [{"global_steps": 2, "acc": 1.0}])
    assert [r["step"] for r in w.poll()] == [2]
    # a resumed run: verl's file logger starts over; our file keeps steps 1-2 and adds 3 once
    _write(log, [{"step": 3, "data": {"critic/score/mean": 1.0}}])
    _write(samples / "samples-14.jsonl", [{"global_steps": 3, "acc": 1.0}])
    w2 = StepMetricsWriter(log, samples, out)
    assert [r["step"] for r in w2.poll()] == [3]
    assert [json.loads(line)["step"] for line in out.read_text().splitlines()] == [1, 2, 3]


def test_follow_thread_does_a_last_poll(tmp_path: Path) -> None:
    log, samples, out = tmp_path / "verl.jsonl", tmp_path / "samples", tmp_path / "metrics.jsonl"
    thread, stop = follow(StepMetricsWriter(log, samples, out), interval_s=60)
    _write(log, [{"step": 1, "data": {"critic/score/mean": 0.0}}])
    _write(samples / "samples-1.jsonl", [{"global_steps": 1, "acc": 0.0}])
    wait_stop(thread, stop)
    assert not thread.is_alive()
    assert json.loads(out.read_text())["step"] == 1


def test_validation_rounds_with_bfcl_overall(tmp_path: Path) -> None:
    log, samples, out = tmp_path / "verl.jsonl", tmp_path / "samples", tmp_path / "metrics.jsonl"
    cats = {"multi_turn_base": 0.5, "multi_turn_miss_func": 0.25, "multi_turn_miss_param": 0.0,
            "multi_turn_long_context": 0.25}
    val = {f"val-core/bfcl/{c}/acc/mean@1": v for c, v in cats.items()}
    _write(log, [{"step": 0, "data": val}, {"step": 1, "data": {"critic/score/mean": 0.1}}])
    w = StepMetricsWriter(log, samples, out)
    w.poll()
    [row] = [json.loads(line) for line in (tmp_path / "val_metrics.jsonl").read_text().splitlines()]
    assert row["step"] == 0 and row["bfcl/multi_turn_base"] == 0.5
    assert row["bfcl/overall"] == 0.25  # the leaderboard's unweighted mean of the four categories
    w.poll()  # written once
    assert len((tmp_path / "val_metrics.jsonl").read_text().splitlines()) == 1


def test_episode_files_are_read_incrementally(tmp_path: Path) -> None:
    """Each episode record is read once; a half-written last line waits for the next poll."""
    log, samples, out = tmp_path / "verl.jsonl", tmp_path / "samples", tmp_path / "metrics.jsonl"
    path = samples / "samples-7.jsonl"
    _write(path, [{"global_steps": 1, "acc": 1.0}])
    with path.open("a") as f:
        f.write('{"global_steps": 1, "acc": 0')  # being written
    w = StepMetricsWriter(log, samples, out)
    assert w.poll() == []  # verl has not logged step 1 yet
    with path.open("a") as f:
        f.write('.0}\n')
    _write(log, [{"step": 1, "data": {"critic/score/mean": 0.5}}])
    [row] = w.poll()
    assert row["samples"] == 2 and row["acc"] == 0.5
    with path.open("a") as f:
        f.write(json.dumps({"global_steps": 2, "acc": 1.0}) + "\n")
    _write(log, [{"step": 1, "data": {}}, {"step": 2, "data": {"critic/score/mean": 1.0}}])
    [row] = w.poll()
    assert row["step"] == 2 and row["samples"] == 1  # step 1's records were not counted again
    assert w._pending == {}


def _episode(group: str, reward: float, calls: int, gens: int, err_gens: int = 0, valid: int = 0) -> dict:
    return {"global_steps": 1, "group": group, "reward": reward, "num_calls": calls, "valid_calls": valid,
            "num_generations": gens, "zero_call": float(calls == 0), "format_error_generations": err_gens}


def test_collapse_metrics_per_step(tmp_path: Path, caplog) -> None:
    log, samples, out = tmp_path / "verl.jsonl", tmp_path / "samples", tmp_path / "metrics.jsonl"
    # two groups of 2: "a" differs (0.25 vs 0), "b" does not (0 and 0)
    _write(samples / "samples-1.jsonl", [_episode("a", 0.25, 2, 4, 1, valid=1), _episode("a", 0.0, 0, 2),
                                         _episode("b", 0.0, 0, 1), _episode("b", 0.0, 1, 1, 1)])
    _write(log, [{"step": 1, "data": {"critic/score/mean": 0.0625, "actor/pg_loss": -0.01}}])
    [row] = StepMetricsWriter(log, samples, out).poll()
    assert row["groups"] == 2 and row["groups_with_signal"] == 0.5
    assert row["tool_calls_per_generation"] == 3 / 8  # 3 calls over 4 + 2 + 1 + 1 generations
    assert row["num_generations"] == 2.0  # generations per episode
    assert row["valid_call_rate"] == 1 / 3  # 1 of the 3 decoded calls ran
    assert row["zero_call"] == 0.5  # zero-call rate
    assert row["format_error_rate"] == 2 / 8
    assert row["pg_loss"] == -0.01
    assert "no GRPO group carries gradient" not in caplog.text


def test_tool_errors_are_a_step_metric(tmp_path: Path) -> None:
    """The env's tool errors (EpisodeInfo.tool_errors) reach metrics.jsonl as the step's mean per episode."""
    log, samples, out = tmp_path / "verl.jsonl", tmp_path / "samples", tmp_path / "metrics.jsonl"
    _write(samples / "samples-1.jsonl", [{**_episode("a", 0.0, 2, 2), "tool_errors": 3.0},
                                         {**_episode("a", 1.0, 1, 2), "tool_errors": 0.0}])
    _write(log, [{"step": 1, "data": {"critic/score/mean": 0.5}}])
    [row] = StepMetricsWriter(log, samples, out).poll()
    assert row["tool_errors"] == 1.5
    assert json.loads(out.read_text().splitlines()[0])["tool_errors"] == 1.5


def test_a_step_without_signal_is_logged_loudly(tmp_path: Path, caplog) -> None:
    log, samples, out = tmp_path / "verl.jsonl", tmp_path / "samples", tmp_path / "metrics.jsonl"
    _write(samples / "samples-1.jsonl", [_episode("a", 0.0, 0, 1), _episode("a", 0.0, 0, 1),
                                         _episode("b", 0.5, 1, 2), _episode("b", 0.5, 1, 2)])
    _write(log, [{"step": 1, "data": {"critic/score/mean": 0.25}}])
    with caplog.at_level("WARNING", logger="agent_tune.launch.step_metrics"):
        [row] = StepMetricsWriter(log, samples, out).poll()
    assert row["groups_with_signal"] == 0.0
    assert "step 1: no GRPO group carries gradient" in caplog.text


def test_groups_of_one_sample_have_no_signal_rate_and_no_warning(tmp_path: Path, caplog) -> None:
    """PPO samples once per prompt: a group of one has no spread to measure, so no rate and no GRPO warning."""
    log, samples, out = tmp_path / "verl.jsonl", tmp_path / "samples", tmp_path / "metrics.jsonl"
    _write(samples / "samples-1.jsonl", [_episode("a", 0.0, 0, 1), _episode("b", 1.0, 1, 2)])
    _write(log, [{"step": 1, "data": {"critic/score/mean": 0.5}}])
    with caplog.at_level("WARNING", logger="agent_tune.launch.step_metrics"):
        [row] = StepMetricsWriter(log, samples, out).poll()
    assert row["groups"] == 2 and "groups_with_signal" not in row
    assert "no GRPO group carries gradient" not in caplog.text


def test_reads_records_built_by_the_agent_loop(tmp_path: Path) -> None:
    """The writer averages what the agent loop's own record builder writes: training rows of the step only."""
    pytest.importorskip("verl")
    from agent_tune.rollout.dump import append_jsonl
    from tests.verl_ext.test_agent_loop import episode_result
    from verl_ext.agent_loop import sample_record

    def written(uid: str, acc: float, calls: int, split: str = "train") -> dict:
        extra = {"index": 0, "split": split, "env": {"name": "bfcl", "kwargs": {"test_id": "t"}}}
        kwargs = {"uid": uid, "global_steps": 1, "extra_info": extra}
        return sample_record(episode_result(acc, calls=calls, generations=4), kwargs, {}).as_dict()

    log, samples, out = tmp_path / "verl.jsonl", tmp_path / "samples", tmp_path / "metrics.jsonl"
    append_jsonl(samples / "samples-3.jsonl", [written("a", 1.0, 2), written("a", 0.0, 0), written("b", 0.5, 1),
                                               written("b", 0.5, 1), written("c", 1.0, 3, split="val")])
    _write(log, [{"step": 1, "data": {"critic/score/mean": 0.5}}])
    [row] = StepMetricsWriter(log, samples, out).poll()
    assert row["samples"] == 4 and row["acc"] == 0.5 and row["num_calls"] == 1.0 and row["zero_call"] == 0.25
    assert row["groups"] == 2 and row["groups_with_signal"] == 0.5
    assert row["tool_calls_per_generation"] == 4 / 16 and row["valid_call_rate"] == 1.0
    assert row["format_error_rate"] == 4 / 16  # each episode's last step had a format error


def test_a_run_restarted_in_the_same_folder_never_mixes_in_the_dead_runs_episodes(tmp_path: Path) -> None:
    """A run killed during step 1 (its episodes recorded, the step never logged) and started again: the new
    step 1 is the new run's episodes only, also when the new process reuses the dead one's pid."""
    log, samples, out = tmp_path / "verl.jsonl", tmp_path / "samples", tmp_path / "metrics.jsonl"
    _write(samples / "samples-7.jsonl", [{"global_steps": 1, "acc": 0.0, "group": "a"}] * 4)
    with (samples / "samples-8.jsonl").open("w") as f:
        f.write('{"global_steps": 1, "acc": 0.0}\n{"global_steps": 1, "ac')  # killed mid-line
    w = StepMetricsWriter(log, samples, out, new_records_only=True)
    with (samples / "samples-8.jsonl").open("a") as f:  # the new run's process got pid 8 again
        f.write(json.dumps({"global_steps": 1, "acc": 1.0}) + "\n")
    _write(samples / "samples-9.jsonl", [{"global_steps": 1, "acc": 1.0}])
    _write(log, [{"step": 1, "data": {"critic/score/mean": 1.0}}])
    [row] = w.poll()
    assert row["samples"] == 2 and row["acc"] == 1.0
    # without it (the default: a reader of a finished folder) every record counts
    [old] = StepMetricsWriter(log, samples, tmp_path / "all.jsonl").poll()
    assert old["samples"] == 6
