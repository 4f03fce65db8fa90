"""Task weighting: training rows drawn with per-task weights from their running success rates.

Tau2-RL-Pipeline's per-task weights (its "curriculum": ``TAU2_USE_CURRICULUM`` in its ``reward.py``), as configuration
(``agent_tune.task_weighting``, :class:`TaskWeightingConfig`): each task's attempts and successes are
counted (a success: the episode's ``acc`` >= ``success_threshold``; tau2's own reward for tau2, never the
shaped one); once a task has ``min_attempts`` attempts its weight is ``solved_weight`` (0.1) when its
success rate is above ``solved_threshold`` (0.75), ``hard_weight`` (0.5) when below ``hard_threshold``
(0.25), else 1. ``mode`` says what the weight acts on. ``sample`` (this module; issue 11): the weight is the
task's probability of being drawn (relative to the others): tasks the policy always or never solves come up
less often, the ones in between (where GRPO groups carry signal) more. ``advantage`` (what the pipeline does;
:mod:`verl_ext.advantage_weighting`): rows are drawn by verl's own sampler and each sample's GRPO advantage
is multiplied by its task's weight.

How it reaches verl 0.9.1. verl has no sampler hook any more (no ``data.sampler.class_path`` /
``AbstractCurriculumSampler``; its trainers build the train sampler with ``create_rl_sampler(config.data,
dataset)`` and never tell it about results). So:

* results: the agent loop appends every episode's record, with its task key (:func:`task_key`: the row's
  ``extra_info.env`` spec) to ``<agent_tune.sample_metrics_dir>/samples-<pid>.jsonl`` (the records the
  per-step metrics are built from); the sampler reads what was appended since its last draw (validation
  rows are left out);
* the sampler: :class:`TaskWeightingSampler`, drawn with replacement, one index at a time as the data
  loader asks (``len(dataset)`` per epoch): a batch drawn while the previous step's episodes are still
  being played sees the results up to then (a lag of at most the loader's prefetch). Its state (random
  generator, counts, how far the record files were read) is saved and restored with verl's data-loader
  checkpoint;
* plugging in: with ``enable: true`` the launcher runs verl's own task runner subclassed
  (:func:`verl_ext.task_weighting_runner.task_runner_class`), whose ``run`` first (its ``install``, in that Ray
  actor's process only) points the trainer modules' ``create_rl_sampler`` at :func:`make_sampler`
  (``sample``) or wraps the trainers' advantage step (``advantage``), then runs verl's code unchanged.

``<trainer.default_local_dir>/task_weighting.json`` shows the counts and weights, rewritten when they
change.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence, get_args

import torch
from torch.utils.data import Sampler

from agent_tune.envs.tasks import row_env, row_task
from agent_tune.options import TaskWeightingConfig, TaskWeightingMode, options_of
from verl_ext.sample_records import read_appended

logger = logging.getLogger(__name__)

PREFIX = "agent_tune.task_weighting"
STATE_FILE = "task_weighting.json"
# agent_tune.task_weighting.mode: what the weights act on (the choices are TaskWeightingMode's)
MODES = get_args(TaskWeightingMode)
SAMPLE, ADVANTAGE = MODES


def task_key(extra_info: Mapping[str, Any] | None) -> str:
    """What identifies a row's task for the weighting: its environment spec (``extra_info.env``: name and
    kwargs, e.g. tau2's domain and task id) and, for a catalogue row, its ``task`` (the reset kwargs), else its
    ``index`` (:func:`agent_tune.envs.tasks.row_env` / ``row_task`` read them)."""
    extra = extra_info or {}
    try:
        name, kwargs = row_env(extra)
    except ValueError:
        return f"index:{extra.get('index')}"
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    key = f"{name}:{json.dumps(kwargs, sort_keys=True, default=str)}"
    if extra.get("task") is None:
        return key
    return f"{key}:{json.dumps(row_task(extra), sort_keys=True, default=str)}"


class TaskStats:
    """Running attempts and successes per task key, and the weight each gets."""

    def __init__(self, config: TaskWeightingConfig) -> None:
        self.config = config
        self.attempts: dict[str, int] = {}
        self.successes: dict[str, int] = {}

    def update(self, key: str, acc: float) -> None:
        self.attempts[key] = self.attempts.get(key, 0) + 1
        if acc >= self.config.success_threshold:
            self.successes[key] = self.successes.get(key, 0) + 1

    def rate(self, key: str) -> float | None:
        attempts = self.attempts.get(key, 0)
        return self.successes.get(key, 0) / attempts if attempts else None

    def weight(self, key: str) -> float:
        """1 until ``min_attempts``; then ``solved_weight`` above ``solved_threshold``, ``hard_weight`` below
        ``hard_threshold``, 1 in between (the pipeline's rule)."""
        if self.attempts.get(key, 0) < self.config.min_attempts:
            return 1.0
        rate = self.rate(key) or 0.0
        if rate > self.config.solved_threshold:
            return self.config.solved_weight
        if rate < self.config.hard_threshold:
            return self.config.hard_weight
        return 1.0

    def summary(self) -> dict[str, dict[str, float]]:
        return {k: {"attempts": self.attempts[k], "successes": self.successes.get(k, 0),
                    "weight": self.weight(k)} for k in sorted(self.attempts)}


class TaskWeightingSampler(Sampler[int]):
    """Dataset indices drawn with replacement, each with its task's current weight.

    ``task_keys[i]`` is the task of dataset row ``i``; ``records_dir`` holds the agent loop's episode
    records (``samples-*.jsonl``, read incrementally before every draw); ``state_path`` (optional) gets the
    per-task counts and weights as JSON when they change.
    """

    def __init__(self, task_keys: Sequence[str], config: TaskWeightingConfig, records_dir: str | Path | None,
                 seed: int = 1, state_path: str | Path | None = None) -> None:
        if not task_keys:
            raise ValueError("task weighting: the training set is empty")
        self.task_keys = list(task_keys)
        self.config = config
        self.records_dir = Path(records_dir) if records_dir else None
        self.state_path = Path(state_path) if state_path else None
        self.stats = TaskStats(config)
        self.generator = torch.Generator().manual_seed(int(seed))
        self.offsets: dict[str, int] = {}
        self.yielded = 0  # indices drawn in the current epoch
        self._known = set(self.task_keys)

    def __len__(self) -> int:
        return len(self.task_keys)

    def refresh(self) -> bool:
        """Count the training episodes recorded since the last call; True when anything changed."""
        if self.records_dir is None or not self.records_dir.is_dir():
            return False
        changed = False
        for rec in read_appended(self.records_dir, self.offsets):
            if not rec.is_training or rec.task not in self._known or rec.acc is None:
                continue
            self.stats.update(rec.task, rec.acc)
            changed = True
        if changed and self.state_path is not None:
            self._write_state()
        return changed

    def weights(self) -> torch.Tensor:
        """Each row's current weight (its task's)."""
        per_task = {k: self.stats.weight(k) for k in self._known}
        return torch.tensor([per_task[k] for k in self.task_keys], dtype=torch.float64)

    def draw(self) -> int:
        self.refresh()
        return int(torch.multinomial(self.weights(), 1, generator=self.generator).item())

    def __iter__(self) -> Iterator[int]:
        while self.yielded < len(self.task_keys):
            index = self.draw()
            self.yielded += 1
            yield index
        self.yielded = 0  # the next epoch starts afresh

    # --- checkpointing (torchdata's StatefulDataLoader saves a sampler that has these) ---
    def state_dict(self) -> dict[str, Any]:
        return {"generator": self.generator.get_state(), "offsets": dict(self.offsets), "yielded": self.yielded,
                "attempts": dict(self.stats.attempts), "successes": dict(self.stats.successes),
                "config": self.config.model_dump()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.generator.set_state(state["generator"])
        self.offsets = dict(state.get("offsets") or {})
        self.yielded = int(state.get("yielded", 0))
        self.stats.attempts = dict(state.get("attempts") or {})
        self.stats.successes = dict(state.get("successes") or {})

    def _write_state(self) -> None:
        assert self.state_path is not None
        summary = self.stats.summary()
        tmp = self.state_path.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps({"tasks": summary, "rows": len(self.task_keys)}, indent=1))
            os.replace(tmp, self.state_path)
        except OSError as exc:  # a report, never a reason to stop training
            logger.warning("task weighting: cannot write %s: %s", self.state_path, exc)


def dataset_task_keys(dataset: Any) -> list[str]:
    """The task key of every row of verl's ``RLHFDataset`` (its ``dataframe``'s ``extra_info`` column)."""
    frame = getattr(dataset, "dataframe", None)
    if frame is not None and "extra_info" in getattr(frame, "column_names", ()):
        return [task_key(e) for e in frame["extra_info"]]
    return [task_key(dataset[i].get("extra_info")) for i in range(len(dataset))]


def make_sampler(config: Any, dataset: Any) -> TaskWeightingSampler:
    """The sampler for verl's training set, from the whole trainer ``config`` (OmegaConf or mapping)."""
    from omegaconf import OmegaConf

    def select(key: str) -> Any:
        value = OmegaConf.select(config, key, default=None)
        return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value

    options = options_of(config)
    cfg = options.task_weighting
    seed = cfg.seed if cfg.seed is not None else (select("data.seed") or 1)
    out = select("trainer.default_local_dir")
    state_path = Path(str(out)).expanduser() / STATE_FILE if out else None
    sampler = TaskWeightingSampler(dataset_task_keys(dataset), cfg, options.sample_metrics_dir,
                                    seed=int(seed), state_path=state_path)
    tasks = len(set(sampler.task_keys))
    logger.info("task weighting: %d rows, %d tasks; weights from %s", len(sampler), tasks, sampler.records_dir)
    return sampler


def install_sampler(config: Any) -> None:
    """Point verl's trainers (v1 and legacy) at :func:`make_sampler` for the training set, in this process."""
    import importlib

    def create(data_config: Any, dataset: Any) -> TaskWeightingSampler:
        return make_sampler(config, dataset)

    for name in ("verl.trainer.ppo.v1.trainer_base", "verl.trainer.main_ppo_v0"):
        module = importlib.import_module(name)
        if not hasattr(module, "create_rl_sampler"):
            raise RuntimeError(f"task weighting: {name} has no create_rl_sampler (a verl other than 0.9.1?)")
        module.create_rl_sampler = create


def check_config(config: Any) -> TaskWeightingConfig:
    """The weighting's config from the trainer config (``ValueError`` names the key)."""
    return options_of(config).task_weighting
