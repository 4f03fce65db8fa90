"""Env steps of concurrent episodes, batched through ``BaseToolEnv.batch_step`` off the event loop.

Episodes run as coroutines on one event loop (verl's agent-loop workers, the standalone eval). When
several of them ask for an env step in the same loop iteration, :class:`StepBatcher` hands the steps of
each env class to that class's ``batch_step`` in one call, in a worker thread: a step that blocks
(ReTool runs a program; a BFCL backend call is quick but synchronous) never stalls the generations of
other episodes, and an env with a parallel backend runs the batch's tools in parallel (ReTool's sandbox
pool). Steps that arrive in different iterations go in different batches: batching is opportunistic,
never a wait.

Environments never raise on model output; if ``batch_step`` raises anyway (a bug, a dead backend),
every episode of that batch gets the exception: a batch is never re-stepped, since some of its envs may
already have moved on.
"""

from __future__ import annotations

import asyncio
import weakref
from collections import defaultdict
from typing import TYPE_CHECKING

from agent_tune.envs.base import BaseToolEnv, StepResult

if TYPE_CHECKING:
    from collections.abc import Sequence

_Pending = tuple[BaseToolEnv, str, "asyncio.Future[StepResult]"]  # env, text, its result


class StepBatcher:
    """Collects the steps requested in one event-loop iteration and runs them by env class."""

    def __init__(self) -> None:
        self._pending: list[_Pending] = []
        self._scheduled = False
        self._tasks: set[asyncio.Task[None]] = set()  # running batches (the loop keeps only weak references)
        self.batches = 0  # batch_step calls made (for tests and benchmarks)
        self.steps = 0  # env steps run

    async def step(self, env: BaseToolEnv, raw_response: str) -> StepResult:
        """Step ``env`` with ``raw_response``; returns its :class:`StepResult` (the env's exceptions propagate)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[StepResult] = loop.create_future()
        self._pending.append((env, raw_response, future))
        if not self._scheduled:
            self._scheduled = True
            loop.call_soon(self._flush)
        return await future

    def _flush(self) -> None:
        pending, self._pending, self._scheduled = self._pending, [], False
        groups: dict[type[BaseToolEnv], list[_Pending]] = defaultdict(list)
        for item in pending:
            groups[type(item[0])].append(item)
        for cls, items in groups.items():
            task = asyncio.ensure_future(self._run(cls, items))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, cls: type[BaseToolEnv], items: Sequence[_Pending]) -> None:
        envs = [env for env, _, _ in items]
        texts = [text for _, text, _ in items]
        self.batches += 1
        self.steps += len(items)
        try:
            results = await asyncio.to_thread(cls.batch_step, envs, texts)
            if len(results) != len(items):
                raise RuntimeError(f"{cls.__name__}.batch_step returned {len(results)} results for {len(items)} steps")
        except Exception as exc:
            for _, _, future in items:
                if not future.done():
                    future.set_exception(exc)
            return
        for (_, _, future), result in zip(items, results):
            if not future.done():
                future.set_result(result)


_batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, StepBatcher] = weakref.WeakKeyDictionary()


def loop_batcher() -> StepBatcher:
    """The :class:`StepBatcher` of the running event loop (one per loop, created on first use)."""
    loop = asyncio.get_running_loop()
    batcher = _batchers.get(loop)
    if batcher is None:
        batcher = _batchers[loop] = StepBatcher()
    return batcher
