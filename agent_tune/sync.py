"""Every bridge between the runner's event loop, threads and other loops, in one module (docs/design.md,
"Concurrency", names each mechanism and the measurement that keeps it: ``benchmarks/env_concurrency.py``).

* **Pools** the loop hands blocking work to, with :func:`in_thread`: the start thread (:func:`start_executor`: every
  episode's ``reset`` and first render, one at a time), the env thread pool (:func:`env_executor`: plain acting
  hooks and episode endings) and the loop's default executor (``reset`` s that wait on something slow).
* **The background loop** (:func:`background_loop`), where long-lived connections to remote environments live (MCP
  sessions, OpenEnv WebSockets, verifiers' state): a connection belongs to the loop that opened it, and an episode is
  opened in a thread (``reset``), stepped on the runner's loop and closed from anywhere, so its connection needs a
  loop that outlives each of them. Async code reaches it with :func:`on_background_loop` (no thread waits),
  synchronous code with :func:`wait`.
* **A thread per bounded call** (:func:`start_in_thread`): a blocking call that may never return is waited for until
  its deadline, then abandoned, holding no worker of a pool: :func:`call_in_thread` / :func:`acall_in_thread`, and
  :func:`wait_future` / :func:`await_future` for a result several episodes wait on (never cancelled).
* :func:`run_sync`: a coroutine run to completion from synchronous code (an ``async`` acting hook stepped by a plain
  ``env.step``); on a running loop, in a helper thread with a fresh loop.

Every wait has a deadline and raises :class:`EnvTimeoutError` naming what waited (the rule, its options and
bounds: :mod:`agent_tune.envs.time_limits`). Every wait is one of two shapes, for synchronous and for async
callers: :func:`wait_future` and :func:`await_future` (cancelling what they waited on when asked: the background
loop's coroutines).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from typing import Any, Awaitable, Callable, Coroutine, TypeVar

from agent_tune.errors import EnvError

T = TypeVar("T")


class EnvTimeoutError(EnvError, TimeoutError):
    """A bounded wait got no answer in time: ``what`` waited ``seconds``. The time-limit rule's error
    (:mod:`agent_tune.envs.time_limits` re-exports it; defined here, where the waits raise it, so that this module
    imports nothing of ``agent_tune.envs``). The message is what an episode records in its ``error`` extra:
    ``no answer in 5 s (skyrl env step)``."""

    def __init__(self, seconds: float, what: str = "") -> None:
        self.seconds, self.what = float(seconds), what
        super().__init__(self.text(seconds, what))

    @staticmethod
    def text(seconds: float, what: str = "") -> str:
        """How a timeout reads: ``no answer in N s`` and, when given, what waited."""
        return f"no answer in {float(seconds):g} s" + (f" ({what})" if what else "")


# ---------------------------------------------------------------------------------------------- the pools
ENV_THREADS = 32  # blocking env work of concurrent episodes (a SkyRL env's SQL, a sandboxed program) at once
_pools: dict[str, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _pool(name: str, workers: int) -> ThreadPoolExecutor:
    pool = _pools.get(name)
    if pool is None:
        with _pools_lock:
            pool = _pools.get(name)
            if pool is None:
                pool = _pools[name] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=name)
    return pool


def start_executor() -> ThreadPoolExecutor:
    """The process's start thread: every episode's ``reset`` and initial prompt render run there, one at a time, off
    the event loop (created on first use)."""
    return _pool("agent_tune_start", 1)


def env_executor() -> ThreadPoolExecutor:
    """The process's pool for blocking env work: plain acting hooks and episode endings run there, off the event loop
    (:data:`ENV_THREADS` threads, created on first use)."""
    return _pool("agent_tune_env", ENV_THREADS)


async def in_thread(fn: Callable[..., T], *args: Any, pool: Executor | None = None) -> T:
    """``fn(*args)`` in a thread of ``pool`` (``None``: the loop's default executor), in a copy of the caller's
    context (as ``asyncio.to_thread``), awaited from the event loop."""
    call = functools.partial(contextvars.copy_context().run, fn, *args)
    return await asyncio.get_running_loop().run_in_executor(pool, call)


# ---------------------------------------------------------------------------------------------- the waits
def wait_future(future: Future[T], timeout: float, what: str = "", error: type[EnvTimeoutError] = EnvTimeoutError,
                cancel: bool = False) -> T:
    """The result of ``future`` (raising what it raised), waited for at most ``timeout`` seconds from synchronous
    code; then ``error``, the future cancelled when ``cancel`` (else left as it is: whatever produces it may still
    finish it for others)."""
    # waited on first, so that a TimeoutError the function raised in time is passed on as its own
    if not futures_wait([future], timeout).done and (not cancel or future.cancel()):
        raise error(timeout, what)  # (a future that finished as it was being cancelled gives its result)
    return future.result()


async def await_future(future: Future[T], timeout: float, what: str = "",
                       error: type[EnvTimeoutError] = EnvTimeoutError, cancel: bool = False) -> T:
    """:func:`wait_future` awaited from an event loop (no thread waits); a caller cancelled meanwhile cancels the
    future too when ``cancel``. Without ``cancel`` the future is never cancelled: one not yet running (a batch still
    gathering) stays valid for whoever finishes it."""
    waiting = asyncio.wrap_future(future)
    try:
        done, _ = await asyncio.wait({waiting}, timeout=timeout)
    except asyncio.CancelledError:
        if cancel:
            future.cancel()
        raise
    if not done and (not cancel or future.cancel()):
        waiting.add_done_callback(_retrieved)  # an abandoned call failing later is not logged as never retrieved
        raise error(timeout, what)
    # the wrapper's result, not the future's: a wrapper whose exception is never retrieved is logged when collected
    return waiting.result()


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


async def bounded(awaitable: Awaitable[T], timeout: float, what: str = "",
                  error: type[EnvTimeoutError] = EnvTimeoutError) -> T:
    """Await ``awaitable`` at most ``timeout`` seconds on the caller's loop; then cancel it and raise ``error``."""
    try:
        return await asyncio.wait_for(awaitable, timeout)
    except asyncio.TimeoutError:
        raise error(timeout, what) from None


# ---------------------------------------------------------------------------------------------- a thread per call
def start_in_thread(fn: Callable[..., T], *args: Any, what: str = "") -> Future[T]:
    """``fn(*args)`` started in a daemon thread of its own (in a copy of the caller's context); its future, for
    :func:`wait_future` / :func:`await_future` (a result several episodes wait on, each with its own bound)."""
    future: Future[T] = Future()
    context = contextvars.copy_context()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            result = context.run(fn, *args)
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
            future.set_exception(exc)
        else:
            future.set_result(result)

    threading.Thread(target=run, name=f"agent_tune_bounded:{what or getattr(fn, '__name__', 'call')}"[:64],
                     daemon=True).start()
    return future


def call_in_thread(fn: Callable[..., T], *args: Any, timeout: float, what: str = "",
                   error: type[EnvTimeoutError] = EnvTimeoutError) -> T:
    """``fn(*args)`` in a thread of its own, waited for at most ``timeout`` seconds from synchronous code; then the
    thread is abandoned and ``error`` (:class:`EnvTimeoutError`, or ``StartTimeoutError`` for a start) is raised.
    What ``fn`` raises in time is raised here."""
    return wait_future(start_in_thread(fn, *args, what=what), timeout, what, error)


async def acall_in_thread(fn: Callable[..., T], *args: Any, timeout: float, what: str = "",
                          error: type[EnvTimeoutError] = EnvTimeoutError) -> T:
    """:func:`call_in_thread` awaited from an event loop: no thread of a pool waits, so a call that never returns
    holds nothing the other episodes need."""
    return await await_future(start_in_thread(fn, *args, what=what), timeout, what, error)


# ---------------------------------------------------------------------------------------------- other loops
def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``; from inside a running event loop (a sync env method the runner calls on the loop, a
    start-up check), run it on a fresh loop in a helper thread instead, blocking the caller until it is done."""
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
    """Await ``coro`` run on :func:`background_loop` from another event loop, at most ``timeout`` seconds (then cancel
    it and raise :class:`EnvTimeoutError`, a ``TimeoutError``, naming ``what``)."""
    return await await_future(submit(coro), timeout, what, cancel=True)


def wait(coro: Coroutine[Any, Any, T], timeout: float, what: str = "") -> T:
    """Run ``coro`` on :func:`background_loop` and wait for it at most ``timeout`` seconds (then cancel it and raise
    :class:`EnvTimeoutError`, a ``TimeoutError``, naming ``what``). Not to be called from the loop's own thread."""
    return wait_future(submit(coro), timeout, what, cancel=True)
