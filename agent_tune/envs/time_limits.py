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
docstring when it derives another bound). The bounded calls (in :mod:`agent_tune.sync`, with the other bridges
between threads and loops):

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

Each raises :class:`EnvTimeoutError` (a ``TimeoutError``; defined in :mod:`agent_tune.sync`) naming what waited and
for how long.
"""

from __future__ import annotations

from typing import Any

from pydantic import model_validator

from agent_tune.sync import EnvTimeoutError
from agent_tune.utils.typed_config import ConfigModel, OptionError

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


__all__ = [
    "DEFAULT_CALL_TIMEOUT",
    "DEFAULT_START_TIMEOUT",
    "EnvTimeoutError",
    "StartTimeoutError",
    "TimeLimits",
    "backstop",
    "check_timeout",
    "step_time_limit",
    "timeout_text",
]
