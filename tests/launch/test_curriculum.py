"""The curriculum runner without training: the curriculum file, the state file and resume decisions,
plateau detection on canned metrics, stopping a (fake) launcher, the runner's hand-off with a fake
launcher and export, and every stage of every shipped curriculum composing and validating."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Sequence

import pytest
from omegaconf import OmegaConf

from agent_tune.launch import curriculum as cur
from agent_tune.launch.curriculum import (
    EXPORT,
    SKIP,
    TRAIN,
    Curriculum,
    CurriculumError,
    Plateau,
    Runner,
    Stage,
    StopWatch,
    latest_checkpoint,
    load_state,
    next_action,
    parse_curriculum,
    plateau_step,
    read_metric,
    save_state,
    stage_overrides,
)

REPO = Path(__file__).resolve().parents[2]
CURRICULA = sorted(p.stem for p in (REPO / "config" / "curriculum").glob("*.yaml"))


def _two_stages(**end) -> dict:
    return {
        "data_dir": "/data",
        "stages": [
            {"name": "a", "config_name": "cfg_a", "overrides": ["data.train_files=${data_dir}/x.parquet"],
             "end": {"max_steps": 2, **end}},
            {"name": "b", "config_name": "cfg_b", "overrides": ["out=${run_dir}/extra"], "end": {"max_steps": 3}},
        ],
    }


# --- the curriculum file ---------------------------------------------------------------------------

def test_parse_interpolates_variables_and_applies_curriculum_overrides(tmp_path):
    c = parse_curriculum(_two_stages(), "t", tmp_path, ["data_dir=/other", "stages.1.end.max_steps=7"])
    assert c.stage_names == ["a", "b"]
    assert c.stages[0].overrides == ("data.train_files=/other/x.parquet",)
    assert c.stages[1].overrides == (f"out={tmp_path}/extra",)
    assert c.stages[1].max_steps == 7 and c.stages[0].plateau is None


@pytest.mark.parametrize("change,message", [
    (lambda d: d.update(stages=[]), "non-empty list"),
    (lambda d: d["stages"][1].update(name="a"), "unique"),
    (lambda d: d["stages"][0].update(overrides=["no_equals_sign"]), "Hydra overrides"),
    (lambda d: d["stages"][0].update(typo=1), "unknown keys"),
    (lambda d: d["stages"][0]["end"].update(max_step=1), "unknown keys under end"),
    (lambda d: d["stages"][0]["end"].update(max_steps=0), "positive integer"),
    (lambda d: d["stages"][0]["end"].update(plateau={"metric": "reward", "window": 0}), "window"),
    (lambda d: d["stages"][0]["end"].update(plateau={"mode": "up"}), "mode"),
    (lambda d: d["stages"][0]["end"].update(plateau={"windw": 3}), "plateau"),
    (lambda d: d["stages"][0].update(name="../x"), "plain folder name"),
    (lambda d: d["stages"][0].pop("config_name"), "config_name"),
    (lambda d: d["stages"][0].update(overrides=["k=${nope}"]), "nope"),
])
def test_parse_rejects_bad_curricula(tmp_path, change, message):
    data = _two_stages()
    change(data)
    with pytest.raises(CurriculumError, match=message):
        parse_curriculum(data, "t", tmp_path)


def test_unknown_curriculum_names_the_shipped_ones():
    with pytest.raises(CurriculumError, match="bfcl_et_gpu"):
        cur.curriculum_path("no_such_curriculum")


def test_stage_overrides_order_and_hand_off(tmp_path):
    c = parse_curriculum(_two_stages(), "t", tmp_path)
    first = stage_overrides(c, 0, tmp_path, ["x=1"])
    assert first == ["data.train_files=/data/x.parquet", "x=1", f"trainer.default_local_dir={tmp_path}/a/checkpoints",
                     "trainer.total_training_steps=2"]
    second = stage_overrides(c, 1, tmp_path, ["actor_rollout_ref.model.path=/base"])
    # the runner's keys come last: Hydra applies overrides in order, the last wins
    assert second[-1] == f"actor_rollout_ref.model.path={tmp_path}/a/model"
    assert second.index("actor_rollout_ref.model.path=/base") < len(second) - 1


# --- plateau ---------------------------------------------------------------------------------------

def _series(values: Sequence[float]) -> list[tuple[int, float]]:
    return [(i + 1, v) for i, v in enumerate(values)]


def test_plateau_not_while_improving():
    rising = _series([0.1 * i for i in range(20)])
    assert plateau_step(rising, Plateau(window=3, min_delta=0.05)) is None


def test_plateau_found_at_the_first_flat_window():
    values = [0.0, 0.2, 0.4, 0.6, 0.8, 0.8, 0.8, 0.8, 0.8, 0.8]
    # windows of 2, improvement of the last window's mean on the one before: step 6 +0.3, step 7 +0.1,
    # step 8 0.0 (< 0.05): the plateau
    assert plateau_step(_series(values), Plateau(window=2, min_delta=0.05)) == 8
    assert plateau_step(_series(values), Plateau(window=2, min_delta=0.05, min_steps=9)) == 9
    assert plateau_step(_series(values[:7]), Plateau(window=2, min_delta=0.05)) is None


def test_plateau_min_mode_and_decline_counts_as_plateau():
    falling = _series([5, 4, 3, 2, 1, 1, 1, 1])
    # min mode: improvements (decreases) 2, 2, 1.5, 0.5 (not < 0.5), then 0 at step 8
    assert plateau_step(falling, Plateau(window=2, min_delta=0.5, mode="min")) == 8
    assert plateau_step(falling, Plateau(window=2, min_delta=0.5, mode="max")) == 4  # a falling reward: no progress


def test_read_metric_skips_partial_rows_and_missing_values(tmp_path):
    path = tmp_path / "metrics.jsonl"
    rows = [{"step": 1, "reward": 0.1}, {"step": 2}, {"step": 3, "reward": "x"}, {"step": 4, "reward": 0.4},
            {"step": 4, "reward": 0.5}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + '\n{"step": 5, "rew')
    assert read_metric(path, "reward") == [(1, 0.1), (4, 0.5)]
    assert read_metric(tmp_path / "none.jsonl", "reward") == []


def _write_metrics(path: Path, values: Sequence[float]) -> None:
    path.write_text("".join(json.dumps({"step": i + 1, "reward": v}) + "\n" for i, v in enumerate(values)))


def test_stopwatch_waits_for_the_checkpoint_after_the_plateau(tmp_path):
    seen = []
    watch = StopWatch(Plateau(window=2, min_delta=0.01), tmp_path / "metrics.jsonl", tmp_path, on_plateau=seen.append)
    _write_metrics(tmp_path / "metrics.jsonl", [0.1, 0.5, 0.5, 0.5])
    assert not watch.should_stop() and seen == []  # still improving: 0.5 against 0.3
    _write_metrics(tmp_path / "metrics.jsonl", [0.1, 0.5, 0.5, 0.5, 0.5])
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("4")
    assert not watch.should_stop() and seen == [5]  # plateau at step 5, checkpoint only at 4
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("6")
    assert watch.should_stop() and seen == [5]  # reported once


def test_stopwatch_without_plateau_never_stops(tmp_path):
    _write_metrics(tmp_path / "metrics.jsonl", [0.5] * 20)
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("20")
    assert not StopWatch(None, tmp_path / "metrics.jsonl", tmp_path).should_stop()


def test_stopwatch_with_a_recorded_plateau(tmp_path):
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("10")
    assert StopWatch(Plateau(), tmp_path / "m.jsonl", tmp_path, plateau_at=10).should_stop()
    assert not StopWatch(Plateau(), tmp_path / "m.jsonl", tmp_path, plateau_at=11).should_stop()


FAKE_LAUNCHER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for step in range(1, 100):
        with (out / "metrics.jsonl").open("a") as f:
            f.write(json.dumps({"step": step, "reward": 0.5}) + "\\n")
        if step % 3 == 0:
            (out / "latest_checkpointed_iteration.txt").write_text(str(step))
        time.sleep(0.05)
    """)


def test_run_launcher_stops_a_running_launcher_at_the_checkpoint_after_a_plateau(tmp_path):
    script = tmp_path / "fake_launcher.py"
    script.write_text(FAKE_LAUNCHER)
    ckpt = tmp_path / "ckpt"
    watch = StopWatch(Plateau(window=2, min_delta=0.01), ckpt / "metrics.jsonl", ckpt)
    code, stopped = cur.run_launcher([str(ckpt)], watch, poll_s=0.05, launcher=[sys.executable, str(script)])
    assert stopped and code == -signal.SIGTERM
    assert watch.plateau_at == 4  # constant reward: the first full pair of windows
    assert 6 <= latest_checkpoint(ckpt) < 99  # stopped soon after the first checkpoint past step 4


def test_stop_kills_a_launcher_that_ignores_sigterm(tmp_path):
    code = ("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "print('ready', flush=True)\ntime.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, start_new_session=True)
    assert proc.stdout.readline().strip() == b"ready"
    started = time.monotonic()
    assert cur._stop(proc, grace_s=0.5) == -signal.SIGKILL
    assert time.monotonic() - started < 10


# --- state and resume decisions --------------------------------------------------------------------

def _curriculum(tmp_path, **end) -> Curriculum:
    return parse_curriculum(_two_stages(**end), "t", tmp_path)


def test_state_round_trip_and_other_curriculum_refused(tmp_path):
    c = _curriculum(tmp_path)
    state = load_state(tmp_path, c)
    assert state == {"curriculum": "t", "stages": ["a", "b"], "current": 0, "records": {}}
    state["records"]["a"] = {"status": "training"}
    save_state(tmp_path, state)
    assert load_state(tmp_path, c) == state
    assert not (tmp_path / "curriculum_state.json.tmp").exists()
    other = Curriculum(name="u", stages=(Stage(name="x", config_name="cfg"),))
    with pytest.raises(CurriculumError, match="another --run-dir"):
        load_state(tmp_path, other)


def _checkpoint(run_dir: Path, stage: str, step: int) -> Path:
    ckpt = run_dir / stage / "checkpoints"
    (ckpt / f"global_step_{step}" / "actor").mkdir(parents=True, exist_ok=True)
    (ckpt / "latest_checkpointed_iteration.txt").write_text(str(step))
    return ckpt / f"global_step_{step}"


def test_next_action(tmp_path):
    c = _curriculum(tmp_path)
    a = c.stages[0]
    assert next_action(None, a, tmp_path) == TRAIN
    step1 = _checkpoint(tmp_path, "a", 1)
    assert next_action({"status": "training"}, a, tmp_path) == TRAIN  # 1 < max_steps 2: verl resumes it
    assert next_action({"status": "training", "plateau_step": 1}, a, tmp_path) == EXPORT  # plateau passed
    _checkpoint(tmp_path, "a", 2)
    assert next_action({"status": "training"}, a, tmp_path) == EXPORT  # killed before the state said so
    trained = {"status": "trained", "checkpoint": str(step1)}
    assert next_action(trained, a, tmp_path) == EXPORT
    model = tmp_path / "a" / "model"
    exported = {**trained, "status": "exported", "model": str(model)}
    assert next_action(exported, a, tmp_path) == EXPORT  # the model folder is gone: export again
    model.mkdir()
    (model / "config.json").write_text("{}")
    assert next_action(exported, a, tmp_path) == SKIP


# --- the runner, with a fake launcher and export -----------------------------------------------------

class FakeTrainer:
    """Stands in for the launcher: writes checkpoints up to the stage's total_training_steps, or fails."""

    def __init__(self, fail_in: str | None = None, stop_in: str | None = None) -> None:
        self.calls: list[list[str]] = []
        self.fail_in, self.stop_in = fail_in, stop_in

    def __call__(self, argv: Sequence[str], watch: StopWatch, poll_s: float) -> tuple[int, bool]:
        self.calls.append(list(argv))
        kv = dict(a.split("=", 1) for a in argv if "=" in a)
        ckpt = Path(kv["trainer.default_local_dir"])
        steps = int(kv["trainer.total_training_steps"])
        stage = ckpt.parent.name
        if stage == self.fail_in:
            return 1, False
        last = 1 if stage == self.stop_in else steps
        ckpt.mkdir(parents=True, exist_ok=True)
        for step in range(1, last + 1):
            _checkpoint(ckpt.parent.parent, stage, step)
        return (-signal.SIGTERM, True) if stage == self.stop_in else (0, False)


def fake_export(step_dir: Path, out_dir: Path, log: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.json").write_text(json.dumps({"from": str(step_dir)}))


def test_runner_hands_each_stage_the_previous_model_and_records_it(tmp_path):
    c = _curriculum(tmp_path)
    trainer = FakeTrainer()
    assert Runner(c, tmp_path, ["x=1"], launcher=trainer, export=fake_export).run() == 0
    assert [a[a.index("--config-name") + 1] for a in trainer.calls] == ["cfg_a", "cfg_b"]
    assert f"actor_rollout_ref.model.path={tmp_path}/a/model" in trainer.calls[1]
    assert not any(a.startswith("actor_rollout_ref.model.path") for a in trainer.calls[0])
    state = json.loads((tmp_path / "curriculum_state.json").read_text())
    assert state["current"] == 2
    # paths into the run folder saved relative to it (the folder can move)
    assert state["records"]["a"] == {"status": "exported", "checkpoint": "a/checkpoints/global_step_2",
                                     "step": 2, "ended_by": "max_steps", "model": "a/model"}
    assert state["records"]["b"]["step"] == 3
    assert json.loads((tmp_path / "b/model/config.json").read_text())["from"].endswith("b/checkpoints/global_step_3")
    assert OmegaConf.load(tmp_path / "curriculum.yaml").stages[0].name == "a"
    # run again: nothing left to do
    again = FakeTrainer()
    assert Runner(c, tmp_path, launcher=again, export=fake_export).run() == 0 and again.calls == []


def test_a_copied_curriculum_folder_finds_its_stages_done(tmp_path):
    c = _curriculum(tmp_path / "first")
    assert Runner(c, tmp_path / "first", launcher=FakeTrainer(), export=fake_export).run() == 0
    shutil.copytree(tmp_path / "first", tmp_path / "moved")
    shutil.rmtree(tmp_path / "first")
    again = FakeTrainer()
    assert Runner(c, tmp_path / "moved", launcher=again, export=fake_export).run() == 0 and again.calls == []
    state = json.loads((tmp_path / "moved" / "curriculum_state.json").read_text())
    assert next_action(state["records"]["a"], c.stages[0], tmp_path / "moved") == SKIP


def test_runner_resumes_in_the_failed_stage(tmp_path):
    c = _curriculum(tmp_path)
    assert Runner(c, tmp_path, launcher=FakeTrainer(fail_in="b"), export=fake_export).run() == 1
    state = json.loads((tmp_path / "curriculum_state.json").read_text())
    assert state["current"] == 1 and state["records"]["a"]["status"] == "exported"
    assert state["records"]["b"] == {"status": "training"}
    trainer = FakeTrainer()
    assert Runner(c, tmp_path, launcher=trainer, export=fake_export).run() == 0
    assert len(trainer.calls) == 1 and "--config-name" in trainer.calls[0] and "cfg_b" in trainer.calls[0]


def test_runner_redoes_an_unfinished_export(tmp_path):
    c = _curriculum(tmp_path)

    def broken_export(step_dir: Path, out_dir: Path, log: Path) -> None:
        raise RuntimeError("merger died")

    with pytest.raises(RuntimeError):
        Runner(c, tmp_path, launcher=FakeTrainer(), export=broken_export).run()
    assert json.loads((tmp_path / "curriculum_state.json").read_text())["records"]["a"]["status"] == "trained"
    trainer, exported = FakeTrainer(), []

    def export(step_dir: Path, out_dir: Path, log: Path) -> None:
        exported.append(step_dir.name)
        fake_export(step_dir, out_dir, log)

    assert Runner(c, tmp_path, launcher=trainer, export=export).run() == 0
    assert exported == ["global_step_2", "global_step_3"]  # stage a exported without training again
    assert [a for a in trainer.calls[0] if a.startswith("trainer.default_local_dir")] == [
        f"trainer.default_local_dir={tmp_path}/b/checkpoints"]


class KilledThenResumedTrainer:
    """Stands in for verl with ``trainer.resume_mode=auto``: in ``kill_in`` it saves ``global_step_1`` and dies
    (SIGKILL, before the state knows); later it resumes from the latest checkpoint it finds in its
    ``trainer.default_local_dir`` and saves the steps after it, up to ``total_training_steps``."""

    def __init__(self, kill_in: str | None = None) -> None:
        self.calls: list[dict] = []
        self.kill_in = kill_in

    def __call__(self, argv: Sequence[str], watch: StopWatch, poll_s: float) -> tuple[int, bool]:
        kv = dict(a.split("=", 1) for a in argv if "=" in a)
        ckpt = Path(kv["trainer.default_local_dir"])
        stage, steps = ckpt.parent.name, int(kv["trainer.total_training_steps"])
        found = latest_checkpoint(ckpt)
        self.calls.append({"stage": stage, "argv": list(argv), "resumed_from": found, "plateau_at": watch.plateau_at,
                           "kept": sorted(p.name for p in ckpt.glob("global_step_*"))})
        if stage == self.kill_in:
            _checkpoint(ckpt.parent.parent, stage, 1)
            return -signal.SIGKILL, False
        for step in range((found or 0) + 1, steps + 1):
            _checkpoint(ckpt.parent.parent, stage, step)
        return 0, False


def test_runner_resumes_a_stage_from_its_checkpoint_inside_the_stage(tmp_path, caplog):
    """Killed in stage b after its checkpoint at step 1 (of 3): the re-run skips stage a (no training, no
    export), restarts stage b's training with the same checkpoint folder, step count and start model (stage
    a's export, never b's own checkpoint), leaving ``global_step_1`` in place for verl to resume from, and
    exports b from its last step."""
    c = _curriculum(tmp_path)
    first, exported = KilledThenResumedTrainer(kill_in="b"), []

    def export(step_dir: Path, out_dir: Path, log: Path) -> None:
        exported.append(str(step_dir.relative_to(tmp_path)))
        fake_export(step_dir, out_dir, log)

    assert Runner(c, tmp_path, launcher=first, export=export).run() == -signal.SIGKILL
    state = json.loads((tmp_path / "curriculum_state.json").read_text())
    assert state["current"] == 1 and state["records"]["b"] == {"status": "training"}
    assert latest_checkpoint(tmp_path / "b" / "checkpoints") == 1 and exported == ["a/checkpoints/global_step_2"]
    assert next_action(state["records"]["b"], c.stages[1], tmp_path) == TRAIN  # 1 < max_steps 3

    second = KilledThenResumedTrainer()
    with caplog.at_level("INFO", logger="agent_tune.launch.curriculum"):
        assert Runner(c, tmp_path, launcher=second, export=export).run() == 0
    assert [call["stage"] for call in second.calls] == ["b"]  # stage a neither trained nor exported again
    resumed = second.calls[0]
    assert resumed["resumed_from"] == 1 and resumed["kept"] == ["global_step_1"]  # the checkpoint is still there
    assert resumed["argv"] == first.calls[1]["argv"]  # the same stage, folder, step count and start model
    assert f"trainer.default_local_dir={tmp_path}/b/checkpoints" in resumed["argv"]
    assert "trainer.total_training_steps=3" in resumed["argv"]
    assert resumed["argv"][-1] == f"actor_rollout_ref.model.path={tmp_path}/a/model"
    assert "Stage 2/2 b: config cfg_b, resuming at step 1, until step 3" in caplog.text
    assert exported == ["a/checkpoints/global_step_2", "b/checkpoints/global_step_3"]
    record = json.loads((tmp_path / "curriculum_state.json").read_text())["records"]["b"]
    assert record == {"status": "exported", "checkpoint": "b/checkpoints/global_step_3", "step": 3,
                      "ended_by": "max_steps", "model": "b/model"}


def test_runner_resumes_a_stage_whose_plateau_was_seen_before_its_checkpoint(tmp_path):
    """Killed after stage a's metric plateaued at step 2 but before a checkpoint at or after it (latest 1):
    the re-run trains a again with the recorded plateau, so it stops at the next checkpoint."""
    c = _curriculum(tmp_path, plateau={"metric": "reward", "window": 1})
    save_state(tmp_path, {"curriculum": "t", "stages": ["a", "b"], "current": 0,
                          "records": {"a": {"status": "training", "plateau_step": 2}}})
    _checkpoint(tmp_path, "a", 1)
    assert next_action({"status": "training", "plateau_step": 2}, c.stages[0], tmp_path) == TRAIN
    trainer = KilledThenResumedTrainer()
    assert Runner(c, tmp_path, launcher=trainer, export=fake_export).run() == 0
    assert trainer.calls[0]["stage"] == "a" and trainer.calls[0]["resumed_from"] == 1
    assert trainer.calls[0]["plateau_at"] == 2  # the StopWatch starts from the plateau the state recorded
    assert trainer.calls[0]["kept"] == ["global_step_1"]


def test_runner_records_a_plateau_stop(tmp_path):
    c = _curriculum(tmp_path, plateau={"metric": "reward", "window": 1})
    assert Runner(c, tmp_path, launcher=FakeTrainer(stop_in="a"), export=fake_export).run() == 0
    record = json.loads((tmp_path / "curriculum_state.json").read_text())["records"]["a"]
    assert record["ended_by"] == "plateau" and record["step"] == 1


def test_runner_export_uses_verls_merger_and_renames_when_complete(tmp_path, monkeypatch):
    calls = []

    def fake_call(cmd, **kwargs):
        calls.append(cmd)
        target = Path(cmd[cmd.index("--target_dir") + 1])
        target.mkdir(parents=True)
        (target / "config.json").write_text("{}")
        return 0

    monkeypatch.setattr(cur.subprocess, "call", fake_call)
    out = tmp_path / "model"
    out.mkdir()
    (out / "stale").write_text("")
    cur.export_model(tmp_path / "global_step_3", out, tmp_path / "export.log")
    assert calls[0][1:5] == ["-m", "verl.model_merger", "merge", "--backend"]
    assert calls[0][calls[0].index("--local_dir") + 1] == str(tmp_path / "global_step_3" / "actor")
    assert (out / "config.json").is_file() and not (out / "stale").exists()
    assert not (tmp_path / "model.partial").exists()
    monkeypatch.setattr(cur.subprocess, "call", lambda cmd, **kw: 1)
    with pytest.raises(RuntimeError, match="export.log"):
        cur.export_model(tmp_path / "global_step_3", out, tmp_path / "export.log")


def test_split_overrides():
    assert cur.split_overrides(["curriculum.data_dir=/d", "a.b=1", "+c=2"]) == (["data_dir=/d"], ["a.b=1", "+c=2"])


# --- the shipped curricula compose and validate -------------------------------------------------------

pytest.importorskip("hydra")


@pytest.fixture
def with_flash_attn(monkeypatch):
    """The GPU configs use flash-attention 2: pretend ``flash_attn`` imports so their checks run on CPU."""
    pytest.importorskip("verl")
    from agent_tune.launch import attention

    monkeypatch.setattr(attention, "flash_attn_importable", lambda: True)


def test_the_shipped_curricula():
    assert {"bfcl_et_gpu", "bfcl_t3rl_gpu", "bfcl_cpu", "cpu_tiny"} <= set(CURRICULA)


@pytest.mark.parametrize("name", CURRICULA)
def test_every_stage_of_a_shipped_curriculum_composes_and_validates(name, tmp_path, with_flash_attn):
    c = cur.load_curriculum(name, tmp_path / "run")
    configs = cur.check_stages(c, tmp_path / "run", check_data=False)
    assert len(configs) == len(c.stages) >= 2
    for index, (stage, config) in enumerate(zip(c.stages, configs)):
        assert config.trainer.default_local_dir == str(tmp_path / "run" / stage.name / "checkpoints")
        if stage.max_steps is not None:
            assert config.trainer.total_training_steps == stage.max_steps
        if index:
            assert config.actor_rollout_ref.model.path == str(tmp_path / "run" / c.stages[index - 1].name / "model")


def test_environment_tuning_stages_follow_the_paper(tmp_path, with_flash_attn):
    c = cur.load_curriculum("bfcl_et_gpu", tmp_path, ["data_dir=/d"])
    configs = cur.check_stages(c, tmp_path, check_data=False)
    got = [(Path(cfg.data.train_files).name, cfg.agent_tune.env_kwargs.bfcl.reward,
            cfg.agent_tune.env_kwargs.bfcl.augment) for cfg in configs]
    assert got == [("train_base.parquet", "syntax", False), ("train_base.parquet", "progress", True),
                   ("train_hard.parquet", "progress", True), ("train.parquet", "progress", False)]
    assert configs[0].actor_rollout_ref.model.path == "Qwen/Qwen3-4B-Instruct-2507"
    for cfg in configs:
        assert cfg.trainer.n_gpus_per_node == 8 and cfg.actor_rollout_ref.rollout.n == 16
        assert cfg.trainer.save_freq == 5 and cfg.data.val_files == "/d/val.parquet"
    assert configs[3].data.max_response_length > configs[1].data.max_response_length  # long_context stages


def test_a_stage_without_checkpoints_is_refused(tmp_path):
    pytest.importorskip("verl")
    data = {"stages": [{"name": "a", "config_name": "agent_tune_toolcall_cpu", "overrides": ["trainer.save_freq=-1"]},
                       {"name": "b", "config_name": "agent_tune_toolcall_cpu"}]}
    with pytest.raises(CurriculumError, match="stage 1 .*save_freq"):
        cur.check_stages(parse_curriculum(data, "t", tmp_path), tmp_path, check_data=False)


def test_a_missing_data_file_fails_before_anything_starts(tmp_path):
    pytest.importorskip("verl")
    c = cur.load_curriculum("cpu_tiny", tmp_path / "run", [f"data_dir={tmp_path}/nothing"])
    with pytest.raises(CurriculumError, match="stage 1 .*does not exist"):
        cur.check_stages(c, tmp_path / "run")


# --- the launch script ---------------------------------------------------------------------------------

def test_launch_script_passes_paths_and_only_exported_variables(tmp_path):
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    fake, log = tmp_path / "fake_python", tmp_path / "calls.txt"
    fake.write_text(f'#!/usr/bin/env bash\n{{ echo CALL; printf "%s\\n" "$@"; }} >> "{log}"\n')
    fake.chmod(0o755)
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "train_base", "train_hard", "val"):
        (data / f"{split}.parquet").write_bytes(b"")
    clear = ("MODEL_PATH", "NNODES", "GPUS_PER_NODE", "CURRICULUM", "RUN_DIR")
    env = {k: v for k, v in os.environ.items() if k not in clear}
    env.update(PYTHON=str(fake), DATA_DIR=str(data))

    def run(**extra: str) -> list[str]:
        log.unlink(missing_ok=True)
        subprocess.run(["bash", str(REPO / "examples" / "run_grpo_bfcl_curriculum.sh"), "trainer.logger=[console]"],
                       env={**env, **extra}, check=True, timeout=60, cwd=tmp_path)
        calls = log.read_text().split("CALL\n")[1:]
        assert len(calls) == 1  # the data existed: no rebuild
        return calls[0].splitlines()

    argv = run(RUN_DIR=str(tmp_path / "run"))
    assert argv[:6] == ["-m", "agent_tune.launch.curriculum", "--curriculum", "bfcl_et_gpu", "--run-dir",
                        str(tmp_path / "run")]
    assert argv[6:] == [f"curriculum.data_dir={data}", "trainer.logger=[console]"]
    argv = run(MODEL_PATH="/m", CURRICULUM="bfcl_t3rl_gpu", GPUS_PER_NODE="4")
    assert "bfcl_t3rl_gpu" in argv and "actor_rollout_ref.model.path=/m" in argv
    assert "trainer.n_gpus_per_node=4" in argv and not any(a.startswith("trainer.nnodes") for a in argv)


def test_a_busy_run_folder_is_refused_before_the_stages_are_composed(tmp_path, capsys):
    from agent_tune.utils.run_lock import RunLock

    run_dir = tmp_path / "run"
    with RunLock.folder(run_dir):  # another curriculum runs there
        assert cur.main(["--curriculum", "cpu_tiny", "--run-dir", str(run_dir)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"agent-tune curriculum: error: {run_dir} is in use by another run: pid {os.getpid()} ")
    assert err.rstrip().endswith("or choose another --run-dir") and not (run_dir / "curriculum_state.json").exists()
    # free again: a dry run of the same folder is not refused while a run holds it (it writes nothing)
    with RunLock.folder(run_dir):
        assert cur.main(["--curriculum", "cpu_tiny", "--run-dir", str(run_dir), "--dry-run",
                         f"curriculum.data_dir={tmp_path}/nothing"]) == 2  # refused for its data, not the lock
    assert "is in use" not in capsys.readouterr().err
