"""The bounded dynamic sampling of verl_ext/bounded_sampler.py: its settings from the config and the bound on
dropped groups (verl's transfer-queue reads replaced by the groups a poll classifies)."""

from __future__ import annotations

from collections import Counter

import pytest
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

from verl_ext.bounded_sampler import BoundedReplayBuffer, filter_settings, regeneration_budget

ON = {"enable": True, "metric": "reward", "max_num_gen_batches": 3, "max_inflight_gen_batches": 2}


def test_settings_follow_the_filter_block():
    off = filter_settings({"filter_groups": {"enable": False}, "train_batch_size": 8, "gen_batch_size": None})
    assert off == {"filter_groups_metric": None, "train_batch_size": 8, "gen_batch_size": 8,
                   "max_inflight_gen_batches": 1}
    on = filter_settings({"filter_groups": ON, "train_batch_size": 8})
    assert on["filter_groups_metric"] == "reward" and on["gen_batch_size"] == 1
    assert on["max_inflight_gen_batches"] == 2


def test_bad_settings_name_the_key():
    with pytest.raises(ValueError, match="algorithm.filter_groups.metric"):
        filter_settings({"filter_groups": {"enable": True, "metric": None}, "train_batch_size": 8})
    with pytest.raises(ValueError, match="train_batch_size"):
        filter_settings({"filter_groups": ON})


def test_budget_is_dapos_generation_batches_less_the_first():
    assert regeneration_budget({"filter_groups": ON, "train_batch_size": 8}) == 16
    assert regeneration_budget({"filter_groups": {**ON, "max_num_gen_batches": 0}, "train_batch_size": 8}) is None


def _buffer(max_batches: int, monkeypatch, polls: list[set[str]]) -> BoundedReplayBuffer:
    def classified(self, partition_id):
        uids = polls.pop(0) if polls else set()
        return set(uids), Counter({0.0: len(uids)})

    def evict(self, global_steps, partition_id, reasons):
        return reasons[1], 0, len(reasons[1]), {}

    monkeypatch.setattr(ReplayBuffer, "_dapo_filtered_keys", classified)
    monkeypatch.setattr(ReplayBuffer, "_evict_terminal_groups", evict)
    return BoundedReplayBuffer(trainer_mode="sync", trainer_config={}, max_off_policy_threshold=None,
                               max_off_policy_strategy="drop", refill_fn=lambda n: n,
                               sampler_kwargs={"filter_groups": {**ON, "max_num_gen_batches": max_batches},
                                               "train_batch_size": 2})


def test_a_step_drops_at_most_its_budget(monkeypatch):
    # budget (3 - 1) * 2 = 4 groups: the first poll drops 3, the second 1 of its 3, the third none
    buf = _buffer(3, monkeypatch, [{"a", "b", "c"}, {"d", "e", "f"}, {"g"}])
    dropped = []
    for _ in range(3):
        uids, _ = buf._dapo_filtered_keys("train")
        dropped.append(len(buf._evict_terminal_groups(1, "train", (set(), uids, set(), Counter()))[0]))
    assert dropped == [3, 1, 0]
    assert buf._budget_reached


def test_no_bound_drops_every_group_without_signal(monkeypatch):
    buf = _buffer(0, monkeypatch, [{"a", "b", "c"}, {"d", "e", "f"}])
    assert buf.budget is None
    assert [len(buf._dapo_filtered_keys("train")[0]) for _ in range(2)] == [3, 3]


def test_async_mode_is_refused():
    with pytest.raises(ValueError, match="custom_sampler"):
        BoundedReplayBuffer(trainer_mode="async", trainer_config={}, max_off_policy_threshold=None,
                            max_off_policy_strategy="drop", sampler_kwargs={"train_batch_size": 2})
