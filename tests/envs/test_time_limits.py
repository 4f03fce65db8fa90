"""The time-limit rule's pieces: the typed options (agent_tune/envs/time_limits.py), and the bounded calls for sync
and async code (agent_tune/sync.py), whose blocked thread is abandoned (not joined) when its time is up."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from pathlib import Path

import pytest

from agent_tune.envs.time_limits import EnvTimeoutError, StartTimeoutError, TimeLimits
from agent_tune.sync import acall_in_thread, await_future, bounded, call_in_thread, start_in_thread, wait_future
from agent_tune.utils.typed_config import OptionError


def test_the_options_are_typed_and_name_the_key() -> None:
    assert TimeLimits() == TimeLimits(call_timeout=60.0, start_timeout=60.0)
    assert TimeLimits(call_timeout=5).call_timeout == 5.0
    for key, value in (("call_timeout", 0), ("start_timeout", -1.0)):
        with pytest.raises(OptionError, match=key):
            TimeLimits(**{key: value})
    with pytest.raises(OptionError, match="unknown key"):
        TimeLimits(connect_timeout=1.0)


def test_a_blocked_sync_call_is_abandoned_on_time() -> None:
    release = threading.Event()
    t0 = time.monotonic()
    try:
        with pytest.raises(EnvTimeoutError, match=r"^no answer in 0.3 s \(stuck\)$") as caught:
            call_in_thread(release.wait, 30, timeout=0.3, what="stuck")
        assert time.monotonic() - t0 < 2.0 and caught.value.seconds == 0.3
        with pytest.raises(StartTimeoutError):
            call_in_thread(release.wait, 30, timeout=0.1, error=StartTimeoutError)
    finally:
        release.set()
    assert call_in_thread(sum, [1, 2], timeout=5) == 3
    with pytest.raises(ZeroDivisionError):
        call_in_thread(lambda: 1 / 0, timeout=5)

    def own_timeout() -> None:
        raise TimeoutError("the function's own")

    with pytest.raises(TimeoutError, match="the function's own"):
        call_in_thread(own_timeout, timeout=5)


async def test_the_async_forms_leave_the_loop_free(caplog) -> None:
    release = threading.Event()
    ticks = 0

    async def ticking() -> None:
        nonlocal ticks
        while not release.is_set():
            ticks += 1
            await asyncio.sleep(0.01)

    ticker = asyncio.ensure_future(ticking())
    try:
        with pytest.raises(EnvTimeoutError, match="blocked step"):
            await acall_in_thread(release.wait, 30, timeout=0.3, what="blocked step")
        assert ticks > 5  # the event loop served others meanwhile: no thread of it waited
        with pytest.raises(EnvTimeoutError, match=r"no answer in 0.2 s \(sleeper\)"):
            await bounded(asyncio.sleep(30), 0.2, "sleeper")
        assert await acall_in_thread(max, 3, 4, timeout=5) == 4
        with pytest.raises(KeyError):
            await acall_in_thread({}.__getitem__, "k", timeout=5)
        # what a call raised in time was retrieved where asyncio looks: nothing is logged when its wrapper goes (a
        # traceback formatted by a collection inside another parse fails CPython 3.11's AST constructor)
        gc.collect()
        assert not [r for r in caplog.records if "never retrieved" in r.getMessage()]
    finally:
        release.set()
        await ticker


async def test_a_shared_future_is_waited_on_within_each_bound_and_never_cancelled() -> None:
    """A result several episodes wait on (a process's shared build, a batch still gathering): a waiter that runs out
    of time leaves the future as it is, so the others (and later ones) still get its result."""
    from concurrent.futures import Future

    release = threading.Event()
    shared = start_in_thread(lambda: release.wait(30) and "built", what="build")
    with pytest.raises(StartTimeoutError, match=r"no answer in 0.1 s \(build\)"):
        wait_future(shared, 0.1, "build", error=StartTimeoutError)
    with pytest.raises(EnvTimeoutError, match="build"):
        await await_future(shared, 0.1, "build")
    release.set()
    assert wait_future(shared, 5) == "built" and await await_future(shared, 5) == "built"

    gathering: Future[int] = Future()  # not running yet: cancelling it would succeed, and lose the batch's answer
    with pytest.raises(EnvTimeoutError):
        await await_future(gathering, 0.1, "batch")
    assert not gathering.cancelled()
    gathering.set_result(7)
    assert await await_future(gathering, 1) == 7


async def test_the_background_loops_waits_follow_the_rule() -> None:
    """:mod:`agent_tune.sync`'s bounded waits (where remote envs' connections live): the rule's error naming what
    waited, and a coroutine's own ``TimeoutError`` passed on as its own, not taken for the deadline."""
    from agent_tune.sync import on_background_loop, wait

    async def own_timeout() -> None:
        raise TimeoutError("the server's own")

    with pytest.raises(EnvTimeoutError, match=r"^no answer in 0.2 s \(slow server\)$"):
        await on_background_loop(asyncio.sleep(30), 0.2, "slow server")
    with pytest.raises(EnvTimeoutError, match=r"^no answer in 0.2 s \(slow server\)$"):
        await asyncio.to_thread(wait, asyncio.sleep(30), 0.2, "slow server")
    for waited in (on_background_loop(own_timeout(), 5), asyncio.to_thread(wait, own_timeout(), 5)):
        with pytest.raises(TimeoutError, match="the server's own") as caught:
            await waited
        assert not isinstance(caught.value, EnvTimeoutError)


async def test_a_background_coroutine_is_cancelled_at_its_deadline_and_with_its_caller() -> None:
    """The background loop's waits cancel what they waited on: at the deadline (sync and async callers), and when
    the awaiting episode itself is cancelled (a connection's call is not left running)."""
    from agent_tune.sync import on_background_loop, wait

    cancelled: list[str] = []

    async def slow(name: str) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(name)
            raise

    with pytest.raises(EnvTimeoutError):
        await on_background_loop(slow("deadline, async"), 0.1)
    with pytest.raises(EnvTimeoutError):
        await asyncio.to_thread(wait, slow("deadline, sync"), 0.1)
    caller = asyncio.ensure_future(on_background_loop(slow("caller"), 30))
    await asyncio.sleep(0.1)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    for _ in range(50):
        if len(cancelled) == 3:
            break
        await asyncio.sleep(0.02)
    assert sorted(cancelled) == ["caller", "deadline, async", "deadline, sync"]


def test_one_step_bound_for_every_remote_tools_env() -> None:
    """One formula bounds a step of mcp, openenv and nemo_gym: it grows with the calls and always leaves each call
    its own call_timeout and more. The CallToolEnv tier applies it (the remote adapters are CallToolEnvs); no
    adapter computes a step bound of its own (openenv's text mode, a whole-text env, applies the same formula)."""
    from agent_tune.envs.time_limits import backstop, step_time_limit

    assert step_time_limit(5, 0) == 18.0 and step_time_limit(5, 2) == 34.0
    assert backstop(5) == 8.0 and step_time_limit(5, 2) == backstop(5) * 3 + 10  # a call's backstop, per call
    for calls in range(4):
        assert step_time_limit(5, calls) > 5 * (calls + 1) + 1 * calls
    root = Path(__file__).resolve().parents[2]
    rule = "step_time_limit(self.call_timeout, len(step.parsed.calls))"
    assert rule in (root / "agent_tune/envs/base.py").read_text()
    for name in ("mcp", "nemo_gym", "verl_tools"):
        source = (root / "agent_tune" / "envs" / name / "env.py").read_text()
        assert "step_time_limit" not in source and "on_background_loop" not in source, name
    for path in ("mcp/connection.py", "nemo_gym/env.py", "openenv/env.py"):  # their waits' slack is the rule's
        source = (root / "agent_tune" / "envs" / path).read_text()
        assert "timeout + " not in source and "_SLACK =" not in source, path
    openenv = (root / "agent_tune/envs/openenv/env.py").read_text()
    assert openenv.count("step_time_limit(") == 1 and rule in openenv
