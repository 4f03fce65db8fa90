"""The runner hands the trainer's global step to the env before ``reset`` (``env.status.global_step``)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from agent_tune.envs.base import Observation, SamplerHints
from agent_tune.rollout import ChatRenderer, RolloutLimits, run_episode
from tests.rollout.scripted import ScriptedEnv, ScriptedPolicy, step, user_msg


class StepRecordingEnv(ScriptedEnv):
    """Records the global step it saw at ``reset``."""

    def reset(self, **task: Any) -> Observation:
        self.step_at_reset = self.status.global_step
        return super().reset(**task)


@pytest.mark.parametrize("global_step", [None, 0, 7])
async def test_global_step_reaches_the_env_before_reset(qwen_tok, global_step) -> None:
    renderer = ChatRenderer(qwen_tok, "qwen3_instruct")
    env = StepRecordingEnv(Observation(messages=[user_msg("Hi")]), [step(reward=1.0, done=True)])
    env.status.global_step = 99  # a reused object: the runner overwrites what an earlier episode left
    res = await run_episode(env, ScriptedPolicy(renderer, ["Hello"]), renderer, RolloutLimits(512, 64),
                            global_step=global_step)
    assert env.step_at_reset == global_step and res.reward == 1.0


class ThreadRecordingEnv(ScriptedEnv):
    """Records the thread its ``reset`` ran in."""

    def reset(self, **task: Any) -> Observation:
        self.reset_thread = threading.current_thread()
        return super().reset(**task)


@pytest.mark.parametrize("blocking", [False, True])
async def test_reset_runs_off_the_event_loop(qwen_tok, blocking) -> None:
    """Every reset runs off the loop: in the start thread, or for a ``blocking_reset`` env (which may wait on
    a simulated user) in the default executor, so that it never holds the start thread."""
    renderer = ChatRenderer(qwen_tok, "qwen3_instruct")
    env = ThreadRecordingEnv(Observation(messages=[user_msg("Hi")]), [step(reward=1.0, done=True)])
    env.sampler_hints = SamplerHints(blocking_reset=blocking)
    res = await run_episode(env, ScriptedPolicy(renderer, ["Hello"]), renderer, RolloutLimits(512, 64))
    assert env.reset_thread is not threading.current_thread() and res.reward == 1.0
    assert env.reset_thread.name.startswith("agent_tune_start") != blocking


class GatedRenderer(ChatRenderer):
    """Renders the initial prompt only once the event loop has run a probe task (which sets ``gate``)."""

    def render_prompt(self, messages, tools=None):  # type: ignore[no-untyped-def]
        self.render_thread = threading.current_thread()
        self.loop_ran = self.gate.wait(timeout=10)  # on the loop this would wait out the timeout: nothing sets it
        return super().render_prompt(messages, tools)


async def test_prompt_render_leaves_the_loop_free(qwen_tok) -> None:
    """While an episode's prompt renders, the loop serves other tasks; the tokens are those of a render on
    the loop."""
    import asyncio

    renderer = GatedRenderer(qwen_tok, "qwen3_instruct")
    renderer.gate = threading.Event()
    env = ScriptedEnv(Observation(messages=[user_msg("Hi")]), [step(reward=1.0, done=True)])

    async def probe() -> None:
        await asyncio.sleep(0.01)
        renderer.gate.set()

    res, _ = await asyncio.gather(run_episode(env, ScriptedPolicy(renderer, ["Hello"]), renderer,
                                              RolloutLimits(512, 64)), probe())
    assert renderer.loop_ran and renderer.render_thread is not threading.current_thread()
    plain = ChatRenderer(qwen_tok, "qwen3_instruct")
    assert res.trajectory.prompt_ids == plain.render_prompt([user_msg("Hi")])
