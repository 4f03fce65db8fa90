"""Task weighting, advantage mode: each sample's GRPO advantage multiplied by its task's weight.

``agent_tune.task_weighting.mode: advantage`` (:class:`agent_tune.options.TaskWeightingConfig`). This is how
Tau2-RL-Pipeline applies its task weights (its ``reward.py``, ``TAU2_APPLY_CURRICULUM_WEIGHTS``): rows are drawn
as verl draws them (uniformly: verl's own sampler), and after the group-normalised advantages are computed
each sample's advantage is scaled by its task's weight. The weight rule is the one the sampling mode already
uses (:meth:`verl_ext.task_weighting.TaskStats.weight`, identical to the pipeline's: 1 until
``min_attempts``, ``solved_weight`` above ``solved_threshold``, ``hard_weight`` below ``hard_threshold``,
else 1), and so is the order of counting: the pipeline walks the batch sample by sample, counts the sample's
own result (success: tau2's reward >= 1, here ``acc >= success_threshold``) and then reads its task's weight,
so a sample's weight includes itself and the samples before it in the batch (:meth:`AdvantageWeighting.weigh`;
the v1 hook walks the rows group by group, in session order, whatever order verl's balancing left them in).

Where it plugs into verl 0.9.1 (in the task runner's process, as the sampler does; :func:`install`):

* v1 trainers (``trainer.use_v1``, verl's default; sync and colocated async): ``PPOTrainer._compute_advantage``
  is wrapped. After verl's code has written the advantages to TransferQueue, the wrapper reads back each row's
  ``advantages``, ``response_mask``, ``extra_info`` (its task, :func:`verl_ext.task_weighting.task_key`) and
  ``extra_fields`` (the agent loop's ``reward_extra_info.acc``), scales the advantages and writes them back
  (verl's synthetic padding rows, tagged ``is_padding``, are left out of the counts);
  ``task_weighting/adv_weight_mean|min|max`` go into the step's metrics. ``_save_checkpoint`` /
  ``_load_checkpoint`` are wrapped to keep the counts in ``global_step_N/advantage_weighting.json``;
* the legacy trainer (``trainer.use_v1=false``): ``verl.trainer.ppo.ray_trainer.compute_advantage`` is
  wrapped (its batch carries ``extra_info`` and ``acc``), and the weights' metrics are added to what its
  ``compute_data_metrics`` returns for the step. Its checkpoints do not carry the counts (they restart at 0).

Only response tokens (``response_mask`` 1) are scaled; a weight of 1 leaves an advantage as verl computed it.
``<trainer.default_local_dir>/task_weighting.json`` shows the counts and weights, as in sample mode.
"""

from __future__ import annotations

import functools
import json
import logging
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from agent_tune.options import TaskWeightingConfig, options_of
from verl_ext.task_weighting import STATE_FILE, TaskStats, task_key

logger = logging.getLogger(__name__)

CHECKPOINT_FILE = "advantage_weighting.json"  # inside global_step_N/
OLD_CHECKPOINT_FILE = "advantage_curriculum.json"  # its name before the rename: still read on resume
METRIC_PREFIX = "task_weighting/adv_weight"


class AdvantageWeighting:
    """The running per-task counts and the weight each sample's advantage gets.

    ``state_path`` (optional) gets the counts and weights as JSON after every batch."""

    def __init__(self, config: TaskWeightingConfig, state_path: str | Path | None = None) -> None:
        self.config = config
        self.stats = TaskStats(config)
        self.state_path = Path(state_path) if state_path else None

    def weigh(self, tasks: Sequence[str], accs: Sequence[float | None]) -> list[float]:
        """Each sample's weight, in batch order: its result counted first (``None``: not counted), then its
        task's weight read (the pipeline's order)."""
        weights = []
        for key, acc in zip(tasks, accs, strict=True):
            if acc is not None:
                self.stats.update(key, float(acc))
            weights.append(self.stats.weight(key))
        if self.state_path is not None:
            self._write_state()
        return weights

    def apply(self, data: Any) -> dict[str, float]:
        """Scale ``data.batch["advantages"]`` (a verl ``DataProto`` whose ``non_tensor_batch`` holds
        ``extra_info`` and ``acc`` or ``extra_fields``) in place; returns the step's weight metrics."""
        tasks, accs = batch_results(data.non_tensor_batch)
        weights = self.weigh(tasks, accs)
        data.batch["advantages"] = scale_advantages(data.batch["advantages"], data.batch["response_mask"], weights)
        return weight_metrics(weights)

    def state_dict(self) -> dict[str, Any]:
        return {"attempts": dict(self.stats.attempts), "successes": dict(self.stats.successes)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.stats.attempts = {str(k): int(v) for k, v in (state.get("attempts") or {}).items()}
        self.stats.successes = {str(k): int(v) for k, v in (state.get("successes") or {}).items()}

    def _write_state(self) -> None:
        assert self.state_path is not None
        tmp = self.state_path.with_suffix(".tmp")
        try:
            self.state_path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps({"mode": "advantage", "tasks": self.stats.summary()}, indent=1))
            os.replace(tmp, self.state_path)
        except OSError as exc:  # a report, never a reason to stop training
            logger.warning("task weighting: cannot write %s: %s", self.state_path, exc)


def scale_advantages(advantages: torch.Tensor, response_mask: torch.Tensor, weights: Sequence[float]) -> torch.Tensor:
    """``advantages`` (batch x response tokens) with row ``i``'s response tokens (``response_mask`` 1)
    multiplied by ``weights[i]``; the other positions as they were."""
    if len(weights) != advantages.shape[0]:
        raise ValueError(f"{len(weights)} weights for {advantages.shape[0]} rows")
    w = torch.as_tensor(list(weights), dtype=advantages.dtype, device=advantages.device).unsqueeze(-1)
    return advantages * torch.where(response_mask.bool(), w, torch.ones_like(w))


def scale_nested(advantages: torch.Tensor, response_mask: torch.Tensor, weights: Sequence[float]) -> torch.Tensor:
    """:func:`scale_advantages` for verl's jagged (one row per response) tensors, as TransferQueue keeps them
    (dense ones, equal-length rows stacked, are scaled as they are)."""
    if not advantages.is_nested and not response_mask.is_nested:
        return scale_advantages(advantages, response_mask, weights)
    if len(weights) != advantages.size(0):
        raise ValueError(f"{len(weights)} weights for {advantages.size(0)} rows")
    rows = [scale_advantages(a.unsqueeze(0), m.unsqueeze(0), [w])[0]
            for a, m, w in zip(advantages.unbind(), response_mask.unbind(), weights, strict=True)]
    return torch.nested.as_nested_tensor(rows, layout=torch.jagged)


def weight_metrics(weights: Sequence[float]) -> dict[str, float]:
    """``task_weighting/adv_weight_{mean,min,max}`` of the weights applied in a step."""
    if not weights:
        return {}
    return {f"{METRIC_PREFIX}_mean": float(np.mean(weights)), f"{METRIC_PREFIX}_min": float(min(weights)),
            f"{METRIC_PREFIX}_max": float(max(weights))}


def _as_list(column: Any) -> list[Any]:
    """A batch column (numpy array, tensordict non-tensor stack, list) as a Python list."""
    if hasattr(column, "tolist"):
        return list(column.tolist())
    return list(column)


def _acc(value: Any) -> float | None:
    return None if value is None or isinstance(value, bool) else float(value)


def batch_results(columns: Mapping[str, Any]) -> tuple[list[str], list[float | None]]:
    """Each row's task key (from ``extra_info``) and ``acc``: the ``acc`` column (verl's legacy batch, where
    ``reward_extra_info`` keys become columns), else ``extra_fields[i]["reward_extra_info"]["acc"]`` (v1)."""
    if "extra_info" not in columns:
        raise KeyError("task weighting (advantage mode): the batch has no extra_info column to find tasks in")
    tasks = [task_key(e if isinstance(e, Mapping) else None) for e in _as_list(columns["extra_info"])]
    if "acc" in columns:
        accs = [_acc(a) for a in _as_list(columns["acc"])]
    elif "extra_fields" in columns:
        accs = []
        for fields in _as_list(columns["extra_fields"]):
            info = (fields or {}).get("reward_extra_info") if isinstance(fields, Mapping) else None
            accs.append(_acc((info or {}).get("acc")))
    else:
        accs = [None] * len(tasks)
    if len(accs) != len(tasks):
        raise ValueError(f"{len(tasks)} tasks but {len(accs)} results in the batch")
    return tasks, accs


# --- plugging into verl -------------------------------------------------------------------------------

def from_config(config: Any) -> AdvantageWeighting:
    """The task weighting of a whole trainer ``config`` (OmegaConf), its state file in ``trainer.default_local_dir``."""
    from omegaconf import OmegaConf

    cfg = options_of(config).task_weighting
    out = OmegaConf.select(config, "trainer.default_local_dir", default=None)
    return AdvantageWeighting(cfg, Path(str(out)).expanduser() / STATE_FILE if out else None)


def _key_order(key: str) -> tuple[str, int, int]:
    """A TransferQueue row key ``{uid}_{session_id}_{index}`` (verl's agent loop) as a sort key: by group,
    then session, then output."""
    parts = str(key).rsplit("_", 2)
    try:
        return parts[0], int(parts[1]), int(parts[2])
    except (IndexError, ValueError):
        return str(key), 0, 0


def _v1_apply(weighting: AdvantageWeighting, batch: Any) -> dict[str, float]:
    """Scale the advantages TransferQueue holds for ``batch`` (a ``KVBatchMeta``); the weight metrics."""
    import transfer_queue as tq
    from tensordict import TensorDict

    fields = ["advantages", "response_mask", "extra_info", "extra_fields"]
    data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=fields)
    tasks, accs = batch_results({key: data.get(key) for key in ("extra_info", "extra_fields")})
    # verl's synthetic padding rows (tag is_padding: a copy of the first row's fields, nothing to learn)
    # are neither counted nor weighted
    real = [not (tag or {}).get("is_padding", False) for tag in (batch.tags or [{}] * len(tasks))]
    # counted group by group, a group's samples in session order (the pipeline's order; verl's balancing
    # reorders the rows)
    order = [i for i in sorted(range(len(tasks)), key=lambda i: _key_order(batch.keys[i])) if real[i]]
    weights = [1.0] * len(tasks)
    for i, w in zip(order, weighting.weigh([tasks[i] for i in order], [accs[i] for i in order]), strict=True):
        weights[i] = w
    scaled = scale_nested(data["advantages"], data["response_mask"], weights)
    tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id,
                    fields=TensorDict({"advantages": scaled}, batch_size=len(batch)))
    return weight_metrics([w for w, r in zip(weights, real) if r])


def _step_folder(trainer: Any, resumed: bool = False) -> str:
    """The ``global_step_N`` folder of the trainer's current step (where verl saves), or, ``resumed``, the
    checkpoint verl loaded (``trainer.resume_from_path`` under ``resume_mode: resume_path``)."""
    cfg = trainer.config.trainer
    if resumed and cfg.get("resume_mode") == "resume_path" and cfg.get("resume_from_path"):
        return os.path.abspath(str(cfg.resume_from_path))
    return os.path.join(str(cfg.default_local_dir), f"global_step_{trainer.global_steps}")


# verl's own functions, kept at the first install so that installing again never wraps a wrapper
_ORIGINALS: dict[str, Any] = {}


def _original(name: str, current: Any) -> Any:
    return _ORIGINALS.setdefault(name, current)


def install_v1(weighting: AdvantageWeighting) -> None:
    """Wrap verl's v1 ``PPOTrainer`` (every v1 trainer mode) in this process: advantages, checkpoints."""
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    compute = _original("v1.compute_advantage", PPOTrainer._compute_advantage)
    save = _original("v1.save_checkpoint", PPOTrainer._save_checkpoint)
    load = _original("v1.load_checkpoint", PPOTrainer._load_checkpoint)

    @functools.wraps(compute)
    def compute_advantage(self: Any, batch: Any, metrics: dict) -> Any:
        batch = compute(self, batch, metrics)
        metrics.update(_v1_apply(weighting, batch))
        return batch

    @functools.wraps(save)
    def save_checkpoint(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = save(self, *args, **kwargs)
        path = Path(_step_folder(self)) / CHECKPOINT_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(weighting.state_dict()))
        return result

    @functools.wraps(load)
    def load_checkpoint(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = load(self, *args, **kwargs)
        folder = Path(_step_folder(self, resumed=True))
        path = folder / CHECKPOINT_FILE
        if not path.is_file() and (folder / OLD_CHECKPOINT_FILE).is_file():
            path = folder / OLD_CHECKPOINT_FILE
        if self.global_steps and path.is_file():
            weighting.load_state_dict(json.loads(path.read_text()))
            logger.info("task weighting: counts of %d tasks restored from %s", len(weighting.stats.attempts), path)
        return result

    PPOTrainer._compute_advantage = compute_advantage
    PPOTrainer._save_checkpoint = save_checkpoint
    PPOTrainer._load_checkpoint = load_checkpoint


def install_legacy(weighting: AdvantageWeighting) -> None:
    """Wrap the legacy trainer's module-level ``compute_advantage`` and ``compute_data_metrics`` (which its
    ``fit`` looks up at each step) in this process."""
    from verl.trainer.ppo import ray_trainer

    compute = _original("legacy.compute_advantage", ray_trainer.compute_advantage)
    data_metrics = _original("legacy.compute_data_metrics", ray_trainer.compute_data_metrics)
    pending: dict[str, float] = {}

    @functools.wraps(compute)
    def compute_advantage(data: Any, *args: Any, **kwargs: Any) -> Any:
        data = compute(data, *args, **kwargs)
        pending.update(weighting.apply(data))
        return data

    @functools.wraps(data_metrics)
    def compute_data_metrics(*args: Any, **kwargs: Any) -> dict[str, Any]:
        metrics = data_metrics(*args, **kwargs)
        metrics.update(pending)
        pending.clear()
        return metrics

    ray_trainer.compute_advantage = compute_advantage
    ray_trainer.compute_data_metrics = compute_data_metrics


def install(config: Any) -> AdvantageWeighting:
    """Scale advantages by the task weighting's weights in every verl trainer of this process."""
    weighting = from_config(config)
    install_v1(weighting)
    install_legacy(weighting)
    logger.info("task weighting (advantage mode): advantages scaled by task weights; state %s",
                weighting.state_path)
    return weighting
