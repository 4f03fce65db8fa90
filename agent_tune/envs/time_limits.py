"""The time-limit rule every environment that waits on something it does not control follows.

An adapter (SkyRL, verifiers, MCP, OpenEnv, Agent-R1, verl's tools) or a built-in backend (tau2's simulated
user) waits on code or a server that may never answer: a slow SQL query, a dead service, a tool that loops. One
rule bounds every such wait, with the same two options and the same counted outcome:

* ``call_timeout`` (seconds, > 0): one call during an episode (a step of the adapted env, a tool call, a user's
  reply, the scoring the backend does at the end). A call with no answer in time ends the episode: stop reason
  :attr:`~agent_tune.envs.base.StopReason.TIMEOUT`, the ``error`` extra ``no answer in N s (what)``, scored on
  what was done so far; training logs its share per step as ``stop/timeout``.
* ``start_timeout`` (seconds, > 0): the start of one episode (``reset``: building the env, opening a session,
  starting a server). A start with no answer in time raises :class:`StartTimeoutError` from ``reset``; the
  episode runner records the episode as played by nobody (no response token, reward 0, stop reason ``timeout``,
  the error kept), so a batch goes on: training and ``agent-tune eval`` count it, never crash on it.

Both default to :data:`DEFAULT_CALL_TIMEOUT` and :data:`DEFAULT_START_TIMEOUT` (an adapter says so in its
docstring when it derives another bound). The bounded calls:

* :func:`call_in_thread` (sync code) and :func:`acall_in_thread` (async code) run a *blocking* function in a
  thread of its own and wait at most ``timeout`` seconds. A call that does not return in time is abandoned, not
  joined: its daemon thread goes on until the function returns (Python cannot stop a thread), holds no worker of
  a pool (so other episodes never wait for it) and its result is dropped; the caller must not use the object the
  call was working on again (end the episode, drop the env's handle).
* :func:`bounded` awaits a coroutine at most ``timeout`` seconds (cancelling it then): for async backends.
* :func:`start_in_thread` starts a blocking function in a thread of its own and hands back its future;
  :func:`wait_future` (sync) and :func:`await_future` (async) wait on such a future at most ``timeout`` seconds
  without cancelling it: for a result several episodes wait on, each within its own bound (a build shared by a
  process's episodes, a batch gathered from concurrent episodes).

A wait around a call that has its own bound (a server's request timeout) allows :data:`CALL_SLACK` more:
:func:`backstop`, so that the call's own bound, which names what timed out, fires first. A step that makes several
bounded calls to a remote server (an MCP server's tools, an OpenEnv session, a NeMo Gym server, verl's tools) is
bounded as a whole too, as a backstop in case a call's own bound fails: :func:`step_time_limit`, one formula, which
:class:`~agent_tune.envs.base.CallToolEnv` applies to every ``async`` ``call_tool`` (and OpenEnv's text mode to its
one action).

Each raises :class:`EnvTimeoutError` (a ``TimeoutError``; defined in :mod:`agent_tune.sync`, re-exported here)
naming what waited and for how long.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from concurrent.futures import Future
from concurrent.futures import wait as futures_wait
from typing import Any, Awaitable, Callable, TypeVar

from pydantic import model_validator

from agent_tune.sync import EnvTimeoutError
from agent_tune.utils.typed_config import ConfigModel, OptionError

T = TypeVar("T")

DEFAULT_CALL_TIMEOUT = 60.0  # seconds for one call during an episode
DEFAULT_START_TIMEOUT = 60.0  # seconds for the start of an episode (reset)


class StartTimeoutError(EnvTimeoutError):
    """``reset`` could not start the episode within ``start_timeout``; the runner records the episode as not
    played (stop reason ``timeout``) instead of failing the batch."""


def timeout_text(seconds: float, what: str = "") -> str:
    """How a timeout reads in an episode's ``error``: ``no answer in N s`` and, when given, what waited."""
    return EnvTimeoutError.text(seconds, what)


CALL_SLACK = 3.0  # seconds a call's transport may take beyond its own bound (the waits add 1-2 s)
STEP_SLACK = 10.0  # seconds the whole step may take beyond its calls (the hop to the background loop, the answers)


def backstop(seconds: float) -> float:
    """The bound of a wait around a call that has its own bound of ``seconds`` (a server's request timeout, a
    client's message timeout): ``seconds + CALL_SLACK``, so the call's own bound, which names what timed out,
    fires first."""
    return float(seconds) + CALL_SLACK


def step_time_limit(call_timeout: float, calls: int) -> float:
    """The bound of one step that makes ``calls`` bounded calls (a backstop: each call has its own
    ``call_timeout``): ``backstop(call_timeout) * (calls + 1) + STEP_SLACK`` seconds, one call more than the step
    decodes for what it waits on besides."""
    return backstop(call_timeout) * (int(calls) + 1) + STEP_SLACK


def check_timeout(key: str, seconds: Any) -> float:
    """``seconds`` as a float > 0, else :class:`OptionError` naming ``key`` (an env's ``call_timeout`` ...)."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds > 0:
        raise OptionError(key, f"must be a number of seconds > 0, got {seconds!r}")
    return float(seconds)


class TimeLimits(ConfigModel):
    """An env's two time limits, as its constructor takes them (``call_timeout``, ``start_timeout``; see the
    module docstring). ``TimeLimits(call_timeout=5)`` keeps the other default; an invalid value is an
    :class:`OptionError` naming the option."""

    call_timeout: float = DEFAULT_CALL_TIMEOUT
    start_timeout: float = DEFAULT_START_TIMEOUT

    @model_validator(mode="after")
    def _positive(self) -> TimeLimits:
        check_timeout("call_timeout", self.call_timeout)
        check_timeout("start_timeout", self.start_timeout)
        return self


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


def wait_future(future: Future[T], timeout: float, what: str = "",
                error: type[EnvTimeoutError] = EnvTimeoutError) -> T:
    """The result of ``future`` (raising what it raised), waited for at most ``timeout`` seconds from synchronous
    code; then ``error``. The future is left as it is: whatever produces it may still finish it for others."""
    # waited on first, so that a TimeoutError the function raised in time is passed on as its own
    if not futures_wait([future], timeout).done:
        raise error(timeout, what)
    return future.result()


async def await_future(future: Future[T], timeout: float, what: str = "",
                       error: type[EnvTimeoutError] = EnvTimeoutError) -> T:
    """:func:`wait_future` awaited from an event loop (no thread waits). The future is never cancelled: one not
    yet running (a batch still gathering) stays valid for whoever finishes it."""
    waiting = asyncio.wrap_future(future)
    done, _ = await asyncio.wait({waiting}, timeout=timeout)
    if not done:
        waiting.add_done_callback(_retrieved)  # an abandoned call failing later is not logged as never retrieved
        raise error(timeout, what)
    return waiting.result()


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


def call_in_thread(fn: Callable[..., T], *args: Any, timeout: float, what: str = "",
                   error: type[EnvTimeoutError] = EnvTimeoutError) -> T:
    """``fn(*args)`` in a thread of its own, waited for at most ``timeout`` seconds from synchronous code; then
    the thread is abandoned and ``error`` (:class:`EnvTimeoutError`, or :class:`StartTimeoutError` for a start)
    is raised. What ``fn`` raises in time is raised here."""
    return wait_future(start_in_thread(fn, *args, what=what), timeout, what, error)


async def acall_in_thread(fn: Callable[..., T], *args: Any, timeout: float, what: str = "",
                          error: type[EnvTimeoutError] = EnvTimeoutError) -> T:
    """:func:`call_in_thread` awaited from an event loop: no thread of a pool waits, so a call that never returns
    holds nothing the other episodes need."""
    return await await_future(start_in_thread(fn, *args, what=what), timeout, what, error)


async def bounded(awaitable: Awaitable[T], timeout: float, what: str = "",
                  error: type[EnvTimeoutError] = EnvTimeoutError) -> T:
    """Await ``awaitable`` at most ``timeout`` seconds; then cancel it and raise ``error``."""
    try:
        return await asyncio.wait_for(awaitable, timeout)
    except asyncio.TimeoutError:
        raise error(timeout, what) from None


__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_START_TIMEOUT",
    "EnvTimeoutError",
    "StartTimeoutError",
    "TimeLimits",
    "acall_in_thread",
    "await_future",
    "backstop",
    "bounded",
    "call_in_thread",
    "check_timeout",
    "start_in_thread",
    "step_time_limit",
    "timeout_text",
    "wait_future",
]
