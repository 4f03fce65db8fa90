"""The adapter's one place for waiting on the user's code: every call into an Agent-R1 env or its tools goes through
:func:`call_within` (from a thread) or :func:`acall_within` (from an event loop), bounded in seconds.

The user's call runs in a daemon thread of its own, not in a shared pool: a call that never returns (a dead
service, an endless loop) keeps only its own thread, never a worker other episodes need. After the deadline the
caller gets :class:`CallTimeout` and goes on; the abandoned thread ends whenever the user's code does.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from typing import Any, Callable, TypeVar

_T = TypeVar("_T")


class CallTimeout(TimeoutError):
    """A call into the user's env or tools gave no answer within its deadline; the message names the call."""


def _start(fn: Callable[..., _T], args: tuple[Any, ...]) -> Future[_T]:
    """``fn(*args)`` started in a daemon thread; its result (or exception) lands in the returned future."""
    future: Future[_T] = Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller, who decides
            future.set_exception(exc)

    threading.Thread(target=run, name="agent-r1-call", daemon=True).start()
    return future


def wait_future(future: Future[_T], timeout: float, what: str) -> _T:
    """The result of ``future`` (raising what it raised), or :class:`CallTimeout` after ``timeout`` seconds."""
    # waited on first, so that a TimeoutError the user's code raises is passed on as its own, not taken for ours
    if not wait_futures([future], timeout).done:
        raise CallTimeout(f"{what} gave no answer in {timeout:g} s")
    return future.result()


def call_within(timeout: float, what: str, fn: Callable[..., _T], *args: Any) -> _T:
    """``fn(*args)``, at most ``timeout`` seconds (then :class:`CallTimeout` naming ``what``), from a thread."""
    return wait_future(_start(fn, args), timeout, what)


def start_call(fn: Callable[..., _T], *args: Any) -> Future[_T]:
    """``fn(*args)`` started in its own daemon thread, for a caller that waits on it later (a shared build)."""
    return _start(fn, args)


async def acall_within(timeout: float, what: str, fn: Callable[..., _T], *args: Any) -> _T:
    """``fn(*args)``, at most ``timeout`` seconds (then :class:`CallTimeout` naming ``what``), awaited on the running
    event loop without holding any of its threads."""
    return await await_within(_start(fn, args), timeout, what)


async def await_within(future: Future[_T], timeout: float, what: str) -> _T:
    """The result of ``future`` (raising what it raised), awaited at most ``timeout`` seconds (then
    :class:`CallTimeout` naming ``what``) on the running event loop."""
    waiting = asyncio.wrap_future(future)
    done, _ = await asyncio.wait({waiting}, timeout=timeout)
    if not done:
        waiting.add_done_callback(_retrieve)  # an abandoned call that fails later is not reported as unretrieved
        raise CallTimeout(f"{what} gave no answer in {timeout:g} s")
    return waiting.result()


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
