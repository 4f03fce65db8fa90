"""``agent-tune curriculum``: run a curriculum of training stages, each starting from the model the stage
before it produced.

    agent-tune curriculum --curriculum bfcl_et_gpu --run-dir outputs/et [curriculum.data_dir=DIR] [overrides]

A curriculum is data (``config/curriculum/<name>.yaml``, or a path to a YAML file): top-level variables
such as ``data_dir`` and a list of ``stages``, each with

- ``name``: the stage's folder under the run folder (``<run_dir>/<name>/``);
- ``config_name``: the trainer config it composes (``config/<config_name>.yaml``);
- ``overrides``: Hydra overrides of that config (data files, env kwargs such as BFCL's ``reward`` and
  ``augment``). ``${data_dir}``, ``${run_dir}`` and the file's other top-level keys are interpolated by
  the runner; write ``\\${...}`` for an interpolation the trainer config should resolve;
- ``end``: ``max_steps`` (the stage's last training step; absent: verl's ``total_epochs``) and
  optionally ``plateau: {metric, window, min_delta, mode, min_steps}``: the stage also ends once the
  metric of ``metrics.jsonl`` stops improving (:func:`plateau_step`), at the first checkpoint at or
  after the step where it did.

Command line: ``--curriculum NAME``, ``--run-dir DIR``, ``--config-dir DIR`` (trainer configs; default
the checkout's ``config/``), ``--verbose`` (each stage's full log live), ``--dry-run`` (compose and check
every stage, start nothing), then overrides: ``curriculum.KEY=VALUE`` sets a key of the curriculum file
(``curriculum.data_dir=/data/bfcl``, ``curriculum.stages.0.end.max_steps=3``), anything else is a Hydra
override given to every stage after the stage's own (``actor_rollout_ref.model.path=...`` is the
model the first stage starts from).

Every stage is composed and checked (verl's validation, data files, checkpoints enabled) before the first
starts. Each stage then runs through the training launcher (``python -m agent_tune.launch.train``: the same quiet
console, ``train.log`` and ``metrics.jsonl`` in ``<run_dir>/<name>/checkpoints``) with
``trainer.default_local_dir=<run_dir>/<name>/checkpoints``, ``trainer.total_training_steps=<max_steps>``
and, after the first stage, ``actor_rollout_ref.model.path=<the previous stage's model>``. When a stage
ends its final checkpoint is exported to a Hugging Face folder, ``<run_dir>/<name>/model``, with verl's
model merger (what ``examples/export_hf.sh`` runs).

The runner locks ``<run_dir>`` (:mod:`agent_tune.utils.run_lock`: a second curriculum on the same folder is
refused) and each stage's launcher locks its own ``<run_dir>/<name>/checkpoints``, as any training run does;
the runner's death stops the running stage.

``<run_dir>/curriculum_state.json`` records each stage's progress (training, trained with its final
checkpoint, exported with its model: paths relative to ``<run_dir>``, so the folder can move) and a plateau once
seen. Killed at any point and run again, the runner skips finished stages, redoes an export that did not
complete, and restarts the running stage, which verl resumes from its latest checkpoint by itself
(``trainer.resume_mode=auto``).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Literal, Sequence

from omegaconf import DictConfig, OmegaConf
from pydantic import Field, field_validator, model_validator

from agent_tune.errors import AgentTuneError, ConfigError, RolloutError, exit_code
from agent_tune.launch.compose import check_override_syntax
from agent_tune.launch.lifeline import die_with_parent
from agent_tune.launch.quiet import held_library_output, write_held
from agent_tune.utils.cli_args import HelpFormatter, examples
from agent_tune.utils.run_lock import RunLock
from agent_tune.utils.run_paths import read_path, store_path
from agent_tune.utils.typed_config import ConfigModel, OptionError

logger = logging.getLogger("agent_tune.launch.curriculum")  # also when run as __main__

STATE_FILE = "curriculum_state.json"
CURRICULUM_COPY = "curriculum.yaml"
CHECKPOINTS = "checkpoints"
MODEL = "model"
EXPORT_LOG = "export.log"
LATEST = "latest_checkpointed_iteration.txt"
CURRICULUM_PREFIX = "curriculum."
STOP_GRACE_S = 300.0

# stage statuses in the state file, in order
TRAINING, TRAINED, EXPORTED = "training", "trained", "exported"


class CurriculumError(ConfigError):
    """A curriculum that cannot run, or a run folder that belongs to another curriculum."""


# --- the curriculum file ---------------------------------------------------------------------------

class Plateau(ConfigModel):
    """When a stage's metric stops improving: the mean of the last ``window`` steps improves on the mean
    of the ``window`` steps before by less than ``min_delta`` (``mode: max``; for ``min`` a decrease is
    the improvement), checked from ``min_steps`` steps on (default ``2 * window``)."""

    metric: str = "reward"
    window: int = 5
    min_delta: float = 0.01
    mode: Literal["max", "min"] = "max"
    min_steps: int | None = None

    @model_validator(mode="after")
    def _in_range(self) -> Plateau:
        if self.window < 1:
            raise OptionError("window", f"must be >= 1, got {self.window}")
        if self.min_steps is not None and self.min_steps < 2 * self.window:
            raise OptionError("min_steps", f"must be >= 2 * window ({2 * self.window}), got {self.min_steps}")
        return self


class StageEnd(ConfigModel):
    """A stage's ``end``: ``max_steps`` (its last training step; ``None``: verl's ``total_epochs``) and
    optionally a ``plateau`` (an empty one is none)."""

    unknown_key_problem = "unknown keys under end: {key} (known: {known})"

    max_steps: int | None = None
    plateau: Plateau | None = None

    @field_validator("plateau", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return None if value == {} else value

    @model_validator(mode="after")
    def _in_range(self) -> StageEnd:
        if self.max_steps is not None and self.max_steps < 1:
            raise OptionError("max_steps", f"must be a positive integer, got {self.max_steps!r}")
        return self


class Stage(ConfigModel):
    """One stage of the curriculum file: a trainer config, its overrides, and when it ends."""

    unknown_key_problem = "unknown keys: {key} (known: {known})"

    name: str
    config_name: str
    overrides: tuple[str, ...] = ()
    end: StageEnd = Field(default_factory=StageEnd)

    @field_validator("overrides", mode="before")
    @classmethod
    def _overrides_as_tuple(cls, value: Any) -> Any:
        """The file gives a list (or null); a stage keeps a tuple."""
        if value is None:
            return ()
        return tuple(value) if isinstance(value, list) else value

    @field_validator("end", mode="before")
    @classmethod
    def _null_end(cls, value: Any) -> Any:
        return {} if value is None else value

    @model_validator(mode="after")
    def _usable(self) -> Stage:
        for key in ("name", "config_name"):
            if not getattr(self, key):
                raise OptionError(key, "required (a non-empty string)")
        if "/" in self.name or self.name.startswith("."):
            raise OptionError("name", f"{self.name!r} must be a plain folder name")
        for override in self.overrides:
            if "=" not in override and not override.startswith("~"):
                raise OptionError("overrides", f"must be a list of Hydra overrides (key=value), got {override!r}")
        return self

    @property
    def max_steps(self) -> int | None:
        return self.end.max_steps

    @property
    def plateau(self) -> Plateau | None:
        return self.end.plateau


class Curriculum(ConfigModel):
    """A named, ordered list of stages (``source``: the resolved curriculum file)."""

    name: str
    stages: tuple[Stage, ...]
    source: dict[str, Any] = Field(default_factory=dict)

    @property
    def stage_names(self) -> list[str]:
        return [s.name for s in self.stages]


def curriculum_path(name: str, config_dir: str | Path | None = None) -> Path:
    """``<config_dir>/curriculum/<name>.yaml``, or ``name`` itself when it is a YAML file's path."""
    from agent_tune.launch.compose import default_config_dir

    as_path = Path(name).expanduser()
    if name.endswith((".yaml", ".yml")) and as_path.is_file():
        return as_path
    path = Path(config_dir or default_config_dir()) / "curriculum" / f"{name}.yaml"
    if not path.is_file():
        shipped = sorted(p.stem for p in path.parent.glob("*.yaml")) if path.parent.is_dir() else []
        raise CurriculumError(f"no curriculum {name!r} ({path} does not exist; "
                              f"shipped: {', '.join(shipped) or 'none'})")
    return path


def parse_curriculum(raw: DictConfig | dict[str, Any], name: str, run_dir: str | Path,
                     overrides: Sequence[str] = ()) -> Curriculum:
    """Build a :class:`Curriculum` from a curriculum file's content.

    ``overrides`` are ``KEY=VALUE`` dotlist items on the file (``data_dir=...``,
    ``stages.0.end.max_steps=3``); ``run_dir`` is available to interpolations as ``${run_dir}``.
    """
    config = OmegaConf.create(raw if isinstance(raw, dict) else OmegaConf.to_container(raw, resolve=False))
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CurriculumError(f"curriculum {name}: override {item!r} is not KEY=VALUE")
        try:  # values parse as in a dotlist (7 -> int, [a,b] -> list); list items by index: stages.0.end
            OmegaConf.update(config, key, OmegaConf.from_dotlist([f"v={value}"])["v"], merge=True)
        except Exception as exc:
            raise CurriculumError(f"curriculum {name}: override {item!r}: {exc}") from exc
    config.run_dir = str(run_dir)
    try:
        data = OmegaConf.to_container(config, resolve=True)
    except Exception as exc:  # an interpolation naming a key the file lacks
        raise CurriculumError(f"curriculum {name}: {exc}") from exc
    stages_raw = data.get("stages")
    if not isinstance(stages_raw, list) or not stages_raw:
        raise CurriculumError(f"curriculum {name}: 'stages' must be a non-empty list")
    stages = []
    for i, item in enumerate(stages_raw):
        try:
            stages.append(Stage.parse(item, f"stages.{i}"))
        except OptionError as exc:
            raise CurriculumError(f"curriculum {name}: {exc}") from exc
    names = [s.name for s in stages]
    if len(set(names)) != len(names):
        raise CurriculumError(f"curriculum {name}: stage names must be unique, got {names}")
    return Curriculum(name=name, stages=tuple(stages), source=data)


def load_curriculum(name: str, run_dir: str | Path, overrides: Sequence[str] = (),
                    config_dir: str | Path | None = None) -> Curriculum:
    """Read and parse a curriculum by name (``config/curriculum/``) or path."""
    path = curriculum_path(name, config_dir)
    return parse_curriculum(OmegaConf.load(path), Path(path).stem, run_dir, overrides)


# --- where a stage writes, and the overrides the runner adds -----------------------------------------

def stage_dir(run_dir: Path, stage: Stage) -> Path:
    return run_dir / stage.name


def checkpoint_dir(run_dir: Path, stage: Stage) -> Path:
    return stage_dir(run_dir, stage) / CHECKPOINTS


def model_dir(run_dir: Path, stage: Stage) -> Path:
    return stage_dir(run_dir, stage) / MODEL


def stage_overrides(curriculum: Curriculum, index: int, run_dir: Path, common: Sequence[str] = ()) -> list[str]:
    """Every override of stage ``index``: the stage's own, then ``common`` (the command line's), then the
    runner's (checkpoint folder, step count, the previous stage's model), which win."""
    stage = curriculum.stages[index]
    out = [*stage.overrides, *common, f"trainer.default_local_dir={checkpoint_dir(run_dir, stage)}"]
    if stage.max_steps is not None:
        out.append(f"trainer.total_training_steps={stage.max_steps}")
    if index > 0:
        out.append(f"actor_rollout_ref.model.path={model_dir(run_dir, curriculum.stages[index - 1])}")
    return out


def check_stages(curriculum: Curriculum, run_dir: Path, common: Sequence[str] = (),
                 config_dir: str | Path | None = None, check_data: bool = True) -> list[DictConfig]:
    """Compose every stage's config and run ``agent-tune train``'s start-up pipeline on it
    (:meth:`agent_tune.launch.launcher.Launcher.check_run`: the data files, then the train command's own
    checks; not the model, which an earlier stage produces), before anything starts. Returns the configs as
    each stage's training child would run them.

    Raises:
        CurriculumError: naming the stage, for a config that does not compose or validate, a missing data
            file, checkpoints switched off (``trainer.save_freq`` must be > 0: a stage hands over its last
            checkpoint) or ``trainer.resume_mode`` other than ``auto``.
    """
    from agent_tune.launch.compose import compose_config
    from agent_tune.launch.run_config import RunConfig
    from agent_tune.launch.train import TrainLauncher

    configs = []
    for index, stage in enumerate(curriculum.stages):
        where = f"stage {index + 1} ({stage.name}, config {stage.config_name})"
        try:
            config = compose_config(stage.config_name, stage_overrides(curriculum, index, run_dir, common), config_dir)
            config = TrainLauncher().check_run(RunConfig.parse(config), data=check_data, model=False).config
        except ConfigError as exc:
            raise CurriculumError(f"{where}: {exc}") from exc
        save_freq = OmegaConf.select(config, "trainer.save_freq", default=-1)
        if save_freq is None or int(save_freq) <= 0:
            raise CurriculumError(f"{where}: config key 'trainer.save_freq' is {save_freq}; a stage must save "
                                  "checkpoints (the next stage starts from its last one): set it > 0")
        if OmegaConf.select(config, "trainer.resume_mode", default=None) != "auto":
            raise CurriculumError(f"{where}: config key 'trainer.resume_mode' must be auto (a re-run resumes the "
                                  "stage from its latest checkpoint)")
        configs.append(config)
    return configs


# --- the state file --------------------------------------------------------------------------------

def new_state(curriculum: Curriculum) -> dict[str, Any]:
    return {"curriculum": curriculum.name, "stages": curriculum.stage_names, "current": 0, "records": {}}


def load_state(run_dir: Path, curriculum: Curriculum) -> dict[str, Any]:
    """The run folder's state, or a new one; refuses a folder another curriculum (other stages) wrote."""
    path = run_dir / STATE_FILE
    if not path.is_file():
        return new_state(curriculum)
    state = json.loads(path.read_text())
    if state.get("stages") != curriculum.stage_names:
        raise CurriculumError(
            f"{path} belongs to curriculum {state.get('curriculum')!r} with stages {state.get('stages')}; this one "
            f"({curriculum.name}) has {curriculum.stage_names}: use another --run-dir")
    return state


def save_state(run_dir: Path, state: dict[str, Any]) -> None:
    """Write the state atomically (a kill never leaves half a file)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    tmp = run_dir / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(state, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, run_dir / STATE_FILE)


PATH_KEYS = ("checkpoint", "model")  # a stage record's paths: saved relative to the run folder, so it can move


def record_path(record: dict[str, Any], key: str, run_dir: Path) -> Path:
    """A path of a stage record (:data:`PATH_KEYS`) where it is now (:func:`agent_tune.utils.run_paths.read_path`)."""
    return read_path(record[key], run_dir)


def latest_checkpoint(ckpt_dir: Path) -> int | None:
    """The step of verl's latest complete checkpoint (``latest_checkpointed_iteration.txt`` is written
    after the checkpoint), or None."""
    try:
        return int((ckpt_dir / LATEST).read_text().strip())
    except (OSError, ValueError):
        return None


def is_exported(folder: Path) -> bool:
    """A complete Hugging Face folder (the export renames its folder into place only when done)."""
    return (folder / "config.json").is_file()


SKIP, EXPORT, TRAIN = "skip", "export", "train"


def next_action(record: dict[str, Any] | None, stage: Stage, run_dir: Path) -> str:
    """What a (re-)run does with a stage: ``skip`` (exported), ``export`` (its training has ended), or
    ``train`` (start or resume it)."""
    record = record or {}
    status = record.get("status")
    if status == EXPORTED and record.get("model") and is_exported(record_path(record, "model", run_dir)):
        return SKIP
    checkpoint = record_path(record, "checkpoint", run_dir) if record.get("checkpoint") else None
    if status in (TRAINED, EXPORTED) and checkpoint is not None and checkpoint.is_dir():
        return EXPORT
    latest = latest_checkpoint(checkpoint_dir(run_dir, stage))
    target = record.get("plateau_step") or stage.max_steps
    if latest is not None and target is not None and latest >= target:
        return EXPORT  # the stage reached its end; the kill came before the state said so
    return TRAIN


# --- plateau ---------------------------------------------------------------------------------------

def read_metric(metrics_file: Path, metric: str) -> list[tuple[int, float]]:
    """``(step, value)`` of ``metric`` in a ``metrics.jsonl``, by step, one per step (rows lacking it and
    partial lines skipped)."""
    values: dict[int, float] = {}
    if not metrics_file.is_file():
        return []
    for line in metrics_file.read_text(errors="replace").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        value = row.get(metric) if isinstance(row, dict) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and "step" in row and math.isfinite(value):
            values[int(row["step"])] = float(value)
    return sorted(values.items())


def plateau_step(series: Sequence[tuple[int, float]], plateau: Plateau) -> int | None:
    """The first step at which ``series`` had plateaued (see :class:`Plateau`), or None."""
    w = plateau.window
    min_steps = plateau.min_steps or 2 * w
    sign = 1.0 if plateau.mode == "max" else -1.0
    values = [v for _, v in series]
    for end in range(max(min_steps, 2 * w), len(values) + 1):
        last = sum(values[end - w:end]) / w
        before = sum(values[end - 2 * w:end - w]) / w
        if sign * (last - before) < plateau.min_delta:
            return series[end - 1][0]
    return None


@dataclass
class StopWatch:
    """Decides when a running stage stops early: once its metric has plateaued (the step is recorded
    through ``on_plateau``) and a checkpoint at or after that step exists."""

    plateau: Plateau | None
    metrics_file: Path
    ckpt_dir: Path
    plateau_at: int | None = None
    on_plateau: Callable[[int], None] | None = None

    def should_stop(self) -> bool:
        if self.plateau_at is None and self.plateau is not None:
            self.plateau_at = plateau_step(read_metric(self.metrics_file, self.plateau.metric), self.plateau)
            if self.plateau_at is not None and self.on_plateau is not None:
                self.on_plateau(self.plateau_at)
        if self.plateau_at is None:
            return False
        latest = latest_checkpoint(self.ckpt_dir)
        return latest is not None and latest >= self.plateau_at


# --- running ---------------------------------------------------------------------------------------

class Interrupted(RolloutError):
    """The runner was asked to stop (SIGINT / SIGTERM)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _stop(proc: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> int:
    """Ask the launcher to stop (it stops its training child, which shuts Ray down and cleans /dev/shm);
    kill its process group if it has not exited after ``grace_s``."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            logger.warning("the launcher did not stop in %ds: killing its process group", int(grace_s))
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    return proc.returncode


LAUNCHER = (sys.executable, "-m", "agent_tune.launch.train")


def run_launcher(argv: Sequence[str], watch: StopWatch, poll_s: float = 5.0,
                 launcher: Sequence[str] = LAUNCHER) -> tuple[int, bool]:
    """Run the training launcher (``python -m agent_tune.launch.train ARGV``; its console lines go to ours) until it
    exits or ``watch`` says stop; returns (exit code, stopped early). The launcher gets its own process
    group, so a signal to this runner reaches it only through :func:`_stop`; this runner's death (any signal)
    sends it SIGTERM (:func:`agent_tune.launch.lifeline.die_with_parent`)."""
    cmd = [*launcher, *argv]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=die_with_parent())
    try:
        while proc.poll() is None:
            time.sleep(poll_s)
            if proc.poll() is None and watch.should_stop():
                logger.info("stopping the stage at checkpoint %s", latest_checkpoint(watch.ckpt_dir))
                _stop(proc)
                return proc.returncode, True
        return proc.returncode, False
    except Interrupted:
        logger.warning("interrupted: stopping the training (run the same command again to resume)")
        _stop(proc)
        raise


def export_model(step_dir: Path, out_dir: Path, log_path: Path) -> None:
    """Export verl checkpoint ``step_dir`` (``global_step_N``) to a Hugging Face folder ``out_dir`` with
    verl's model merger (``python -m verl.model_merger merge --backend fsdp``, the entry point
    ``examples/export_hf.sh`` runs), in a child interpreter so that the merged weights' memory is given back
    before the next stage starts. Written beside ``out_dir`` first and renamed into place when complete.

    Raises:
        RuntimeError: the merger failed (the message names its log).
    """
    partial = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    cmd = [sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp",
           "--local_dir", str(step_dir / "actor"), "--target_dir", str(partial)]
    with log_path.open("ab") as log:
        log.write(f"===== {' '.join(cmd)} =====\n".encode())
        log.flush()
        code = subprocess.call(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    if code != 0 or not is_exported(partial):
        raise RuntimeError(f"exporting {step_dir} failed (exit {code}); see {log_path}")
    os.replace(partial, out_dir)


@dataclass
class Runner:
    """Runs a curriculum's stages in order in ``run_dir``, keeping ``curriculum_state.json``."""

    curriculum: Curriculum
    run_dir: Path
    common: Sequence[str] = ()
    config_dir: str | Path | None = None
    verbose: bool = False
    poll_s: float = 5.0
    export: Callable[[Path, Path, Path], None] = export_model
    launcher: Callable[[Sequence[str], StopWatch, float], tuple[int, bool]] = run_launcher

    def __post_init__(self) -> None:
        self.run_dir = Path(self.run_dir).expanduser().resolve()
        self.state = load_state(self.run_dir, self.curriculum)

    def _record(self, stage: Stage, **values: Any) -> dict[str, Any]:
        record = self.state["records"].setdefault(stage.name, {})
        record.update({k: store_path(v, self.run_dir) if k in PATH_KEYS else v for k, v in values.items()})
        save_state(self.run_dir, self.state)
        return record

    def run(self) -> int:
        """Run (or resume) every stage; returns the exit code (0 when the whole curriculum is done)."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        (self.run_dir / CURRICULUM_COPY).write_text(OmegaConf.to_yaml(OmegaConf.create(self.curriculum.source)))
        total = len(self.curriculum.stages)
        for index, stage in enumerate(self.curriculum.stages):
            record = self.state["records"].get(stage.name)
            action = next_action(record, stage, self.run_dir)
            label = f"Stage {index + 1}/{total} {stage.name}"
            if action == SKIP:
                logger.info("%s: done before (model %s)", label, record_path(record, "model", self.run_dir))
                continue
            self.state["current"] = index
            if action == TRAIN:
                code = self._train(index, stage, label)
                if code != 0:
                    return code
            self._export(stage, label)
        self.state["current"] = total
        save_state(self.run_dir, self.state)
        last = record_path(self.state["records"][self.curriculum.stages[-1].name], "model", self.run_dir)
        logger.info("Curriculum %s done: final model %s", self.curriculum.name, last)
        return 0

    def _train(self, index: int, stage: Stage, label: str) -> int:
        ckpt = checkpoint_dir(self.run_dir, stage)
        record = self._record(stage, status=TRAINING)
        start = (f"from {model_dir(self.run_dir, self.curriculum.stages[index - 1])}" if index
                 else "from the config's model")
        resumed = latest_checkpoint(ckpt)
        end = (f"step {stage.max_steps}" if stage.max_steps else "the config's epochs end")
        if stage.plateau:
            end += f" or a plateau of {stage.plateau.metric}"
        logger.info("%s: config %s, %s, until %s%s", label, stage.config_name,
                    f"resuming at step {resumed}" if resumed else start, end,
                    f" (plateau seen at step {record['plateau_step']})" if record.get("plateau_step") else "")

        def on_plateau(step: int) -> None:
            logger.info("%s: %s plateaued at step %d; the stage ends at the next checkpoint",
                        label, stage.plateau.metric, step)
            self._record(stage, plateau_step=step)

        watch = StopWatch(stage.plateau, ckpt / "metrics.jsonl", ckpt, plateau_at=record.get("plateau_step"),
                          on_plateau=on_plateau)
        argv = ["--config-name", stage.config_name]
        if self.config_dir is not None:
            argv += ["--config-dir", str(self.config_dir)]
        if self.verbose:
            argv.append("--verbose")
        argv += stage_overrides(self.curriculum, index, self.run_dir, self.common)
        code, stopped = self.launcher(argv, watch, self.poll_s)
        latest = latest_checkpoint(ckpt)
        if not stopped and code != 0:
            logger.error("%s: training exited %s; run the same command again to resume", label, code)
            return code
        if latest is None:
            logger.error("%s: training ended without a checkpoint in %s", label, ckpt)
            return 1
        ended_by = "plateau" if stopped else ("max_steps" if stage.max_steps else "epochs")
        self._record(stage, status=TRAINED, checkpoint=str(ckpt / f"global_step_{latest}"), step=latest,
                     ended_by=ended_by)
        return 0

    def _export(self, stage: Stage, label: str) -> None:
        record = self.state["records"].get(stage.name) or {}
        if record.get("status") not in (TRAINED, EXPORTED):  # ended before the state recorded it
            latest = latest_checkpoint(checkpoint_dir(self.run_dir, stage))
            reached = "plateau" if record.get("plateau_step") else "max_steps"
            record = self._record(stage, status=TRAINED, step=latest, ended_by=reached,
                                  checkpoint=str(checkpoint_dir(self.run_dir, stage) / f"global_step_{latest}"))
        out = model_dir(self.run_dir, stage)
        checkpoint = record_path(record, "checkpoint", self.run_dir)
        logger.info("%s: exporting %s to %s", label, checkpoint, out)
        self.export(checkpoint, out, stage_dir(self.run_dir, stage) / EXPORT_LOG)
        self._record(stage, status=EXPORTED, model=str(out))
        logger.info("%s: done at step %s (%s); model %s", label, record["step"], record["ended_by"], out)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="agent-tune curriculum",
        description="Run a curriculum of GRPO stages (config/curriculum/NAME.yaml); run again to resume.",
        formatter_class=HelpFormatter,
        epilog=examples("agent-tune curriculum --curriculum cpu_tiny --run-dir outputs/cpu_tiny --dry-run",
                        "agent-tune curriculum --curriculum bfcl_cpu --run-dir outputs/bfcl_curriculum"))
    parser.add_argument("--curriculum", "-c", required=True, help="curriculum name (config/curriculum/) or YAML path")
    parser.add_argument("--run-dir", "-o", required=True,
                        help="folder of the run: state, each stage's checkpoints and model")
    parser.add_argument("--config-dir", "-cd", default=None, help="folder of trainer configs (default: repo config/)")
    parser.add_argument("--verbose", "-v", action="store_true", help="show each stage's full log live")
    parser.add_argument("--dry-run", action="store_true", help="compose and check every stage, then print the plan")
    parser.add_argument("overrides", nargs="*",
                        help="curriculum.KEY=VALUE sets a curriculum key; other Hydra overrides go to every stage")
    args = parser.parse_args(list(argv))
    check_override_syntax(parser, args.overrides)
    return args


def split_overrides(overrides: Iterable[str]) -> tuple[list[str], list[str]]:
    """(curriculum dotlist without its prefix, overrides for every stage)."""
    own, common = [], []
    for item in overrides:
        if item.startswith(CURRICULUM_PREFIX):
            own.append(item[len(CURRICULUM_PREFIX):])
        else:
            common.append(item)
    return own, common


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``agent-tune curriculum``; returns the process exit code."""
    from agent_tune.utils.logs import setup_logging

    args = parse_args(sys.argv[1:] if argv is None else argv)
    setup_logging()
    run_dir = Path(args.run_dir).expanduser().resolve()
    own, common = split_overrides(args.overrides)
    lock = None
    try:
        if not args.dry_run:  # a dry run writes nothing: it may check a folder a run is using
            lock = RunLock.folder(run_dir, elsewhere="choose another --run-dir")
            note = lock.acquire()
            if note:
                logger.info("note: %s", note)
        with held_library_output() as held:  # verl's import-time warnings: to the first stage's log, not here
            curriculum = load_curriculum(args.curriculum, run_dir, own, args.config_dir)
            configs = check_stages(curriculum, run_dir, common, args.config_dir)
        if not args.dry_run:
            from agent_tune.launch.train import TRAIN_LOG

            write_held(Path(str(configs[0].trainer.default_local_dir)) / TRAIN_LOG, held)
        logger.info("Curriculum %s: %d stages (%s), run folder %s", curriculum.name, len(curriculum.stages),
                    ", ".join(curriculum.stage_names), run_dir)
        if args.dry_run:
            for i, stage in enumerate(curriculum.stages):
                logger.info("stage %d %s: agent-tune train --config-name %s %s", i + 1, stage.name,
                            stage.config_name, " ".join(stage_overrides(curriculum, i, run_dir, common)))
            return 0
        runner = Runner(curriculum, run_dir, common, args.config_dir, args.verbose)
    except AgentTuneError as exc:  # a CurriculumError or a busy folder (ConfigErrors: exit 2)
        print(f"agent-tune curriculum: error: {exc}", file=sys.stderr)
        if lock is not None:
            lock.release()
        return exit_code(exc)

    def interrupt(signum: int, _frame: Any) -> None:
        raise Interrupted(signum)

    previous = {s: signal.signal(s, interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return runner.run()
    except Interrupted as exc:
        return 128 + exc.signum
    except RuntimeError as exc:  # an export failed
        logger.error("%s", exc)
        return 1
    finally:
        if lock is not None:
            lock.release()
        for s, handler in previous.items():
            signal.signal(s, handler)


if __name__ == "__main__":
    sys.exit(main())
