"""Fidelity: gold replays through the tau2 env give the trajectory and the reward tau2's own orchestrator and
evaluator give (every gold replay of airline, 43 of 43, and retail, 112 of 112, reaches 1.0); perturbed replays
fail."""

from __future__ import annotations

import pytest

from agent_tune.envs.tau2 import loader
from tests.envs.tau2_helpers import (
    comparable,
    every_gold_replay_scores_as_tau2,
    final_text,
    gold_actions,
    is_write,
    reference_run,
    replay_env,
    tasks_with_actions,
)

FAST = {"airline": ["7"], "retail": ["0", "20"]}


def _check_replay(domain: str, task_id: str, with_reference: bool) -> None:
    task = loader.load_task(domain, task_id)
    actions, closing = gold_actions(task), final_text(task)
    env, result = replay_env(domain, task_id, actions, closing)
    assert result.info["termination_reason"] == "user_stop" and result.info["format_errors"] == 0
    assert result.reward == result.info["accuracy"] == 1.0, (domain, task_id, result.info)
    if with_reference:
        ref = reference_run(domain, task_id, actions, closing)
        assert comparable(env.simulation.messages) == comparable(ref.messages)
        assert result.reward == ref.reward_info.reward


@pytest.mark.parametrize("domain,task_id", [(d, t) for d, ids in FAST.items() for t in ids])
def test_gold_replay_matches_tau2(domain: str, task_id: str) -> None:
    _check_replay(domain, task_id, with_reference=True)


@pytest.mark.slow
@pytest.mark.parametrize("domain,expected", [("airline", 43), ("retail", 112)])
def test_every_gold_replay_scores_like_tau2(domain: str, expected: int) -> None:
    """All tasks with gold actions (~2 min): our reward is 1.0 on each, and our trajectory is the one tau2's
    orchestrator produces for the same replay (same trajectory, same deterministic evaluator: same reward)."""
    ids = tasks_with_actions(domain)
    assert len(ids) == expected
    every_gold_replay_scores_as_tau2(replay_env, domain, ids)


def _first_write(actions):
    return next(i for i, (name, _) in enumerate(actions) if is_write(name))


@pytest.mark.parametrize("domain,task_id", [("airline", "2"), ("retail", "0")])
def test_dropped_write_action_fails_as_tau2_says(domain: str, task_id: str) -> None:
    task = loader.load_task(domain, task_id)
    actions, closing = gold_actions(task), final_text(task)
    i = _first_write(actions)
    dropped = actions[:i] + actions[i + 1:]
    env, result = replay_env(domain, task_id, dropped, closing)
    ref = reference_run(domain, task_id, dropped, closing)
    assert result.reward == ref.reward_info.reward == 0.0
    assert result.info["tau2_reward_db"] == 0.0


@pytest.mark.parametrize("domain,task_id", [("airline", "2"), ("retail", "0")])
def test_changed_argument_fails_as_tau2_says(domain: str, task_id: str) -> None:
    task = loader.load_task(domain, task_id)
    actions, closing = gold_actions(task), final_text(task)
    i = _first_write(actions)
    name, args = actions[i]
    key = next(k for k, v in args.items() if isinstance(v, str))
    changed = actions[:i] + [(name, {**args, key: args[key] + "X"})] + actions[i + 1:]
    env, result = replay_env(domain, task_id, changed, closing)
    ref = reference_run(domain, task_id, changed, closing)
    assert comparable(env.simulation.messages) == comparable(ref.messages)
    assert result.reward == ref.reward_info.reward == 0.0
