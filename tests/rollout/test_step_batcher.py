"""The step batcher: concurrent env steps of one env class go to ``batch_step`` together, off the loop."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Sequence

import pytest

from agent_tune.envs.base import BaseToolEnv, Observation, StepResult
from agent_tune.parsing import ParsedResponse
from agent_tune.rollout.step_batcher import StepBatcher, loop_batcher


class CountingEnv(BaseToolEnv):
    """Echoes its input; records the batches and the thread that stepped it."""

    batches: list[int] = []

    def __init__(self, fail_on: str | None = None) -> None:
        self.fail_on = fail_on
        self.thread: int | None = None

    def reset(self, **task: Any) -> Observation:
        return Observation(messages=[{"role": "user", "content": "hi"}])

    def step(self, raw_response: str) -> StepResult:
        if raw_response == self.fail_on:
            raise RuntimeError("backend down")
        self.thread = threading.get_ident()
        return StepResult(Observation(messages=[{"role": "tool", "content": raw_response}]), 0.0, False)

    def extract_tool_calls(self, raw_response: str) -> ParsedResponse:
        return ParsedResponse(content=raw_response)

    def format_tool_response(self, results: Sequence[Any]) -> Observation:
        return Observation()

    @classmethod
    def batch_step(cls, envs, raw_responses):
        cls.batches.append(len(envs))
        return super().batch_step(envs, raw_responses)


class OtherEnv(CountingEnv):
    batches: list[int] = []


async def test_concurrent_steps_batch_by_class_in_a_worker_thread() -> None:
    CountingEnv.batches, OtherEnv.batches = [], []
    batcher = StepBatcher()
    envs = [CountingEnv() for _ in range(3)] + [OtherEnv() for _ in range(2)]
    results = await asyncio.gather(*(batcher.step(e, f"r{i}") for i, e in enumerate(envs)))
    assert [r.observation.messages[0]["content"] for r in results] == [f"r{i}" for i in range(5)]
    assert CountingEnv.batches == [3] and OtherEnv.batches == [2]
    assert batcher.batches == 2 and batcher.steps == 5
    assert all(e.thread not in (None, threading.get_ident()) for e in envs)  # never on the event loop's thread
    # steps requested in different loop iterations are not held back for each other
    await batcher.step(envs[0], "a")
    await batcher.step(envs[1], "b")
    assert CountingEnv.batches == [3, 1, 1]


async def test_an_exception_reaches_every_episode_of_its_batch_only() -> None:
    batcher = StepBatcher()
    good, bad, other = CountingEnv(), CountingEnv(fail_on="boom"), OtherEnv()
    results = await asyncio.gather(batcher.step(good, "ok"), batcher.step(bad, "boom"), batcher.step(other, "fine"),
                                   return_exceptions=True)
    assert isinstance(results[0], RuntimeError) and isinstance(results[1], RuntimeError)
    assert isinstance(results[2], StepResult)


async def test_one_batcher_per_event_loop() -> None:
    assert loop_batcher() is loop_batcher()
    other = await asyncio.to_thread(lambda: asyncio.run(_batcher_of_new_loop()))
    assert other is not loop_batcher()


async def _batcher_of_new_loop() -> StepBatcher:
    return loop_batcher()


def test_batch_step_rejects_mismatched_lengths() -> None:
    with pytest.raises(ValueError):
        CountingEnv.batch_step([CountingEnv()], ["a", "b"])
