"""Dynamic sampling with DAPO's bound: verl's synchronous replay buffer that regenerates at most
``algorithm.filter_groups.max_num_gen_batches - 1`` batches of zero-variance groups a step.

Dynamic sampling (``algorithm.filter_groups``) drops a group whose rewards are all equal (its GRPO advantage is
zero: no gradient) and generates a fresh prompt's group in its place. verl 0.9.1's built-in V1 replay buffer
ignores ``max_num_gen_batches`` and refills until it has a batch of groups with signal; a policy that solves (or
fails) nearly every task then regenerates without end, and on CPU one regeneration costs a step's generation.
:class:`BoundedReplayBuffer` honours the key as DAPO defined it: a step drops and regenerates at most
``(max_num_gen_batches - 1) * data.train_batch_size`` groups; past that, the groups without signal it still holds
fill the batch (they add nothing to the policy gradient, as with filtering off). ``max_num_gen_batches <= 0``
keeps verl's unbounded refill.

It is verl's own extension point (``trainer.v1.sampler.custom_sampler``), set in config/base/agent_tune.yaml, which
passes ``algorithm.filter_groups`` and the batch sizes through ``trainer.v1.sampler.sampler_kwargs`` (verl hands a
custom sampler no filtering settings of its own). With filtering off it samples exactly as verl's buffer.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any, Mapping

from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

logger = logging.getLogger(__name__)

BUDGET_METRIC = "filter_groups/budget_reached"


def filter_settings(sampler_kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The filtering keyword arguments of verl's ``ReplayBuffer`` from the sampler's ``sampler_kwargs``
    (``filter_groups``: the ``algorithm.filter_groups`` block; ``train_batch_size``; ``gen_batch_size``).

    Raises:
        ValueError: filtering on without a metric, or a batch size missing (the message names the key).
    """
    groups = sampler_kwargs.get("filter_groups") or {}
    train_batch_size = sampler_kwargs.get("train_batch_size")
    if not isinstance(train_batch_size, int) or train_batch_size < 1:
        raise ValueError("trainer.v1.sampler.sampler_kwargs.train_batch_size must be data.train_batch_size "
                         f"(a positive integer), got {train_batch_size!r}")
    if not groups.get("enable", False):
        return {"filter_groups_metric": None, "train_batch_size": train_batch_size,
                "gen_batch_size": sampler_kwargs.get("gen_batch_size") or train_batch_size,
                "max_inflight_gen_batches": 1}
    metric = groups.get("metric")
    if not metric:
        raise ValueError("config key 'algorithm.filter_groups.metric' must be set when group filtering is enabled")
    return {"filter_groups_metric": str(metric), "train_batch_size": train_batch_size, "gen_batch_size": 1,
            "max_inflight_gen_batches": int(groups.get("max_inflight_gen_batches", 1))}


def regeneration_budget(sampler_kwargs: Mapping[str, Any]) -> int | None:
    """How many zero-variance groups a step may drop and regenerate; None: no bound."""
    groups = sampler_kwargs.get("filter_groups") or {}
    batches = int(groups.get("max_num_gen_batches", 0) or 0)
    if batches <= 0:
        return None
    return (batches - 1) * int(sampler_kwargs["train_batch_size"])


class BoundedReplayBuffer(ReplayBuffer):
    """verl's synchronous ``ReplayBuffer`` whose dynamic sampling stops dropping groups once a step has dropped
    its budget (see the module docstring)."""

    def __init__(self, *, trainer_mode: str, sampler_kwargs: Mapping[str, Any], **kwargs: Any) -> None:
        if trainer_mode != "sync":
            raise ValueError(f"trainer.v1.sampler.custom_sampler: {type(self).__name__} samples synchronously; "
                             f"trainer mode {trainer_mode!r} needs verl's own buffer: add "
                             "trainer.v1.sampler.custom_sampler.path=null (dynamic sampling is then unbounded)")
        kwargs.update(filter_settings(sampler_kwargs))
        super().__init__(trainer_mode=trainer_mode, sampler_kwargs=sampler_kwargs, **kwargs)
        self.budget = regeneration_budget(sampler_kwargs) if self.filter_groups_metric is not None else None
        self._dropped = 0
        self._budget_reached = False

    def _dapo_filtered_keys(self, partition_id: str) -> tuple[set[str], Counter]:
        uids, counts = super()._dapo_filtered_keys(partition_id)
        if self.budget is None or not uids:
            return uids, counts
        room = max(0, self.budget - self._dropped)
        if len(uids) > room:
            self._budget_reached = True
            # the classification is cached, so a group kept now stays kept: the same ones are dropped each poll
            uids = set(sorted(uids)[:room])
        return uids, counts

    def _evict_terminal_groups(self, global_steps, partition_id, eviction_reasons):
        evicted = super()._evict_terminal_groups(global_steps, partition_id, eviction_reasons)
        self._dropped += evicted[2]  # the DAPO-filtered count
        return evicted

    def sample(self, global_steps: int, partition_id: str, batch_size: int):
        if partition_id == "val":
            return super().sample(global_steps, partition_id, batch_size)
        self._dropped, self._budget_reached = 0, False
        batch, metrics = super().sample(global_steps, partition_id, batch_size)
        if self.budget is not None:
            metrics[f"{self._metrics_prefix(partition_id)}/{BUDGET_METRIC}"] = float(self._budget_reached)
            if self._budget_reached:
                logger.info("step %d: dynamic sampling dropped its budget of %d groups; the rest of the batch "
                            "has no signal", global_steps, self.budget)
        return batch, metrics
