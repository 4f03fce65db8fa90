"""Coroutines across event loops and threads.

:func:`run_sync` runs a coroutine to completion from synchronous code (an ``async`` acting hook stepped by a
plain ``env.step`` call). The process's background event loop (:func:`background_loop`) is where long-lived
connections to remote environments live (MCP sessions, OpenEnv WebSockets, verifiers' state): a connection
belongs to the loop that opened it, and an episode is opened in a thread (``reset``), stepped on the runner's
loop and closed from anywhere, so its connection needs a loop that outlives each of them. Async code reaches
it with :func:`on_background_loop` (awaited: no thread waits), synchronous code with :func:`wait`; every wait
has a deadline (the rule: :mod:`agent_tune.envs.time_limits`)."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Coroutine, TypeVar

from agent_tune.errors import EnvError

T = TypeVar("T")


class EnvTimeoutError(EnvError, TimeoutError):
    """A bounded wait got no answer in time: ``what`` waited ``seconds``. The time-limit rule's error
    (:mod:`agent_tune.envs.time_limits` re-exports it; defined here, where the background loop's waits raise it
    too, so that this module imports nothing of ``agent_tune.envs``). The message is what an episode records in
    its ``error`` extra: ``no answer in 5 s (skyrl env step)``."""

    def __init__(self, seconds: float, what: str = "") -> None:
        self.seconds, self.what = float(seconds), what
        super().__init__(self.text(seconds, what))

    @staticmethod
    def text(seconds: float, what: str = "") -> str:
        """How a timeout reads: ``no answer in N s`` and, when given, what waited."""
        return f"no answer in {float(seconds):g} s" + (f" ({what})" if what else "")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``; from inside a running event loop (a sync env method the runner calls on the
    loop, a start-up check), run it on a fresh loop in a helper thread instead, blocking the caller until it is
    done."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="agent-tune-sync") as pool:
        return pool.submit(asyncio.run, coro).result()


_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def background_loop() -> asyncio.AbstractEventLoop:
    """The process's background event loop, running in a daemon thread (started on first use)."""
    global _loop
    with _loop_lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="agent-tune-background", daemon=True).start()
            _loop = loop
        return _loop


def submit(coro: Coroutine[Any, Any, T]) -> Future[T]:
    """Schedule ``coro`` on :func:`background_loop`."""
    return asyncio.run_coroutine_threadsafe(coro, background_loop())


async def on_background_loop(coro: Coroutine[Any, Any, T], timeout: float, what: str = "") -> T:
    """Await ``coro`` run on :func:`background_loop` from another event loop, at most ``timeout`` seconds (then
    cancel it and raise :class:`EnvTimeoutError`, a ``TimeoutError``, naming
    ``what``)."""
    future = submit(coro)
    try:
        return await asyncio.wait_for(asyncio.wrap_future(future), timeout)
    except asyncio.TimeoutError:
        if future.done() and not future.cancelled():  # the coroutine's own TimeoutError, in time: raised as it is
            return future.result()
        future.cancel()
        raise EnvTimeoutError(timeout, what) from None


def wait(coro: Coroutine[Any, Any, T], timeout: float, what: str = "") -> T:
    """Run ``coro`` on :func:`background_loop` and wait for it at most ``timeout`` seconds (then cancel it and
    raise :class:`EnvTimeoutError`, a ``TimeoutError``, naming ``what``). Not to be
    called from the loop's own thread."""
    future = submit(coro)
    try:
        return future.result(timeout)
    except FutureTimeout:
        if future.done() and not future.cancelled():  # the coroutine's own TimeoutError, in time: raised as it is
            return future.result()
        future.cancel()
        raise EnvTimeoutError(timeout, what) from None
