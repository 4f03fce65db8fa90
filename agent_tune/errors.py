"""Exceptions shared across agent-tune's packages: the root of every exception agent-tune defines.

A leaf module: it imports nothing from ``agent_tune`` or ``verl_ext``, so any module may import it without
creating an import cycle (tests/test_import_cycles.py). An exception that more than one module raises or
catches belongs here rather than in the module of its first user.

Every exception class of ``agent_tune`` and ``verl_ext`` derives from one branch of :class:`AgentTuneError`,
and keeps the builtin it refines as a second base (``class EnvStateError(EnvError, RuntimeError)``), so
``except RuntimeError`` still catches it (tests/test_errors.py checks both). The branches, with the exit
status a command gives for them (:func:`exit_code`)::

    AgentTuneError
    ├── ConfigError   2  the command line or config cannot run (also a ValueError); nothing ran
    ├── DataError     3  an input file, row or dataset cannot be read or is malformed
    ├── SetupError    4  this machine lacks what the run needs: a package, a packaged file, a sandbox backend
    ├── EnvError      1  an environment misused or failed: a step without reset, a dead server or user
    │   └── BackendGoneError  the server, session or process an env waits on is gone (or gave no answer)
    └── RolloutError  1  the episode runner, chat rendering, the inference server; a run stopped midway

Any other exception a command reports exits 1 unless the command says otherwise (``agent-tune data`` and
``agent-tune eval report``: 2). A command stopped by signal N exits 128 + N.
"""

from __future__ import annotations

from typing import Any


class AgentTuneError(Exception):
    """The root of agent-tune's exceptions; a copy made by pickle (Ray) keeps ``args`` and attributes."""

    def __reduce__(self) -> tuple[Any, ...]:
        # BaseException's own reduce calls ``cls(*args)``, which fails for a constructor whose parameters are
        # not its message; rebuild without calling ``__init__`` instead
        return _rebuild, (type(self), self.args, self.__dict__)


def _rebuild(cls: type[AgentTuneError], args: tuple[Any, ...], state: dict[str, Any]) -> AgentTuneError:
    exc = cls.__new__(cls, *args)
    exc.args = args
    exc.__dict__.update(state)
    return exc


class ConfigError(AgentTuneError, ValueError):
    """A configuration that cannot run; the message names the offending key.

    Raised by the launchers' start-up checks (:mod:`agent_tune.launch`); ``agent-tune train`` / ``sft`` /
    ``curriculum`` report it and exit with status 2.
    """


class DataError(AgentTuneError):
    """An input file, row or dataset that cannot be read or is malformed (the message names the file or row)."""


class SetupError(AgentTuneError):
    """This machine lacks something the run needs: a package, a file a package ships, a sandbox backend."""


class EnvError(AgentTuneError):
    """An environment misused (``step`` before ``reset``) or failed (its server, user or backend went away)."""


class BackendGoneError(EnvError, RuntimeError):
    """A backend an environment waits on (a server, a session, a tool process) is gone or failed, so the episode
    cannot start or go on. ``timed_out``: it gave no answer in time (the time-limit rule) rather than failing."""

    def __init__(self, message: str, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


def error_text(exc: BaseException) -> str:
    """How an exception reads in an episode's ``error``: ``TypeName: message`` (the type alone without one)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class RolloutError(AgentTuneError):
    """The episode runner's side: trajectories, chat rendering, the inference server; a run stopped midway."""


EXIT_CODES: dict[type[AgentTuneError], int] = {
    ConfigError: 2,
    DataError: 3,
    SetupError: 4,
    EnvError: 1,
    RolloutError: 1,
}


def exit_code(exc: BaseException, default: int = 1) -> int:
    """The exit status a command gives for ``exc``: its branch's (:data:`EXIT_CODES`), else ``default``."""
    for branch, code in EXIT_CODES.items():
        if isinstance(exc, branch):
            return code
    return default
