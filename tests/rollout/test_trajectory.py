"""Trajectory invariants and the policy types."""

from __future__ import annotations

import numpy as np
import pytest

from agent_tune.rollout import GenerationOutput, Trajectory, TrajectoryError, normalize_stop_reason


def test_appends_keep_alignment_and_masks():
    t = Trajectory([1, 2, 3])
    t.append_policy([10, 11], [-0.5, -0.25])
    t.append_env([20, 21, 22])
    t.append_policy(np.array([12], dtype=np.int64), None)  # numpy ids; no log-probs -> 0.0
    assert t.response_ids == [10, 11, 20, 21, 22, 12]
    assert t.response_mask == [1, 1, 0, 0, 0, 1]
    assert t.response_logprobs == [-0.5, -0.25, 0.0, 0.0, 0.0, 0.0]
    assert t.all_ids == [1, 2, 3, 10, 11, 20, 21, 22, 12]
    assert t.policy_spans() == [(0, 2), (5, 6)] and t.num_policy_tokens == 3
    assert all(type(x) is int for x in t.response_ids)


def test_misaligned_logprobs_are_refused_and_leave_the_trajectory_untouched():
    t = Trajectory([1])
    with pytest.raises(TrajectoryError, match="2 tokens but 1 log-probs"):
        t.append_policy([5, 6], [-1.0])
    assert t.response_ids == [] and t.response_mask == [] and t.response_logprobs == []


def test_invariant_is_checked_on_every_append():
    t = Trajectory([1])
    t.response_mask.append(1)  # someone broke it from outside
    with pytest.raises(TrajectoryError, match="misaligned"):
        t.append_env([3])


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True])
def test_bad_token_ids(bad):
    with pytest.raises(TrajectoryError, match="non-negative ints"):
        Trajectory([1]).append_env([bad])


def test_truncate_keeps_alignment():
    t = Trajectory([1])
    t.append_policy([10, 11, 12], [-1.0, -2.0, -3.0])
    t.append_env([20, 21])
    assert not t.truncate(5) and not t.truncated
    assert t.truncate(2) and t.truncated
    assert (t.response_ids, t.response_mask, t.response_logprobs) == ([10, 11], [1, 1], [-1.0, -2.0])
    with pytest.raises(TrajectoryError):
        t.truncate(-1)


def test_stop_reasons():
    assert normalize_stop_reason("completed") == "stop"  # verl folds stop and length
    assert normalize_stop_reason("aborted") == "abort"
    assert normalize_stop_reason("length") == "length"
    assert normalize_stop_reason(None) == "stop"
    with pytest.raises(ValueError, match="unknown stop reason 'weird'"):
        normalize_stop_reason("weird")
    out = GenerationOutput([1, 2], [-0.1, -0.2], "aborted")
    assert out.stop_reason == "abort"
    with pytest.raises(ValueError, match="2 tokens but 1 log-probs"):
        GenerationOutput([1, 2], [-0.1])


def test_rollout_imports_neither_verl_nor_vllm():
    import subprocess
    import sys

    code = ("import sys, agent_tune.rollout, agent_tune.rollout.runner; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('verl', 'vllm', 'ray')]; "
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)
