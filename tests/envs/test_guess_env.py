"""The stateful example env (``examples/envs/guess.py``): the acting-hook tier of the contract."""

from __future__ import annotations

import pytest

from agent_tune.envs import StopReason, check_env, make_env
from agent_tune.rollout import ChatRenderer, RolloutLimits, ScriptedPolicy, run_episode
from examples.envs.guess import GuessEnv, guess_tasks

PATH = "examples.envs.guess:GuessEnv"


def test_keeps_the_contract() -> None:
    check_env(lambda: make_env(PATH), {"secret": 42}, "50", "no idea")


def test_higher_lower_then_right() -> None:
    env = GuessEnv()
    env.reset(secret=42)
    assert env.step("I guess 50").observation.messages == [{"role": "user", "content": "Lower."}]
    assert env.step("30").observation.messages == [{"role": "user", "content": "Higher."}]
    end = env.step("Then 42.")
    assert end.done and end.reward == pytest.approx(0.8) and end.episode.accuracy == 1.0
    assert end.episode.stop_reason is StopReason.DONE and end.info["guesses"] == [50, 30, 42]


def test_a_text_without_a_number_is_a_counted_format_error() -> None:
    env = GuessEnv()
    env.reset(secret=7)
    bad = env.step("hmm")
    assert not bad.done and bad.info["format_errors"] == 1 and "integer" in bad.observation.messages[0]["content"]


def test_the_step_limit_ends_the_episode_unsolved() -> None:
    env = GuessEnv(max_steps=2)
    env.reset(secret=7)
    env.step("1")
    end = env.step("2")
    assert end.done and end.reward == 0.0 and end.episode.stop_reason is StopReason.STEP_LIMIT
    assert end.info["stop_reason"] == "step_limit" and end.info["guesses"] == [1, 2]
    assert end.observation.messages == [{"role": "user", "content": "Higher."}]


def test_the_last_allowed_guess_is_read() -> None:
    """The step limit is applied after the guess: a right last guess wins (the whole-text tier)."""
    env = GuessEnv(max_steps=3)
    env.reset(secret=42)
    assert not env.step("10").done and not env.step("20").done
    end = env.step("42")
    assert end.done and end.reward == pytest.approx(0.8) and end.episode.accuracy == 1.0
    assert end.episode.stop_reason is StopReason.DONE and end.info["guesses"] == [10, 20, 42]


def test_catalogue_is_reproducible() -> None:
    assert guess_tasks("train", size=4) == GuessEnv.catalogue.tasks("train", size=4)
    assert guess_tasks("train", size=4) != guess_tasks("test", size=4)


async def test_an_episode_through_the_runner(qwen_tok) -> None:
    renderer = ChatRenderer(qwen_tok, template="qwen3_instruct")
    result = await run_episode(GuessEnv(), ScriptedPolicy(renderer, ["50", "25", "37"]), renderer,
                               RolloutLimits(1024, 256), task={"secret": 37}, debug_drift=True)
    assert result.reward == pytest.approx(0.8) and result.stop_reason is StopReason.DONE and result.drift.ok
