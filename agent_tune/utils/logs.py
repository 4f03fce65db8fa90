"""Logging for agent-tune's entry points: one call, :func:`setup_logging`, in each command line.

Library code logs through ``logging.getLogger(__name__)`` under the ``agent_tune`` and ``verl_ext``
packages and never prints; the command lines (``agent-tune``, ``agent-tune train``, ``agent-tune eval``,
``python -m agent_tune.models.smollm2``, ...) call :func:`setup_logging` once, which sends those
packages' records to the console as ``[agent-tune] message`` lines (information on stdout, warnings
and errors on stderr, prefixed with their level). Other libraries' loggers are left as they are.
"""

from __future__ import annotations

import logging
import sys
from typing import TextIO

PREFIX = "[agent-tune]"
PACKAGES = ("agent_tune", "verl_ext")
_HANDLER_FLAG = "_agent_tune_console"


class ConsoleFormatter(logging.Formatter):
    """``[agent-tune] message`` for INFO and below, ``[agent-tune] warning: message`` above."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        if record.levelno > logging.INFO:
            return f"{PREFIX} {record.levelname.lower()}: {text}"
        return f"{PREFIX} {text}"


class _MaxLevel(logging.Filter):
    """Pass records up to ``level`` (the stdout handler leaves warnings to the stderr one)."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno <= self.level


class _ConsoleHandler(logging.StreamHandler):
    """Writes to a given stream, or to whatever ``sys.stdout`` / ``sys.stderr`` is when a record comes
    (so a replaced stream, as under pytest's capture, is followed rather than kept after it closes)."""

    def __init__(self, name: str, stream: TextIO | None) -> None:
        super().__init__(stream if stream is not None else getattr(sys, name))
        self._follow = name if stream is None else None

    def emit(self, record: logging.LogRecord) -> None:
        if self._follow is not None:
            self.stream = getattr(sys, self._follow)
        super().emit(record)


def setup_logging(verbose: bool = False, stdout: TextIO | None = None, stderr: TextIO | None = None) -> None:
    """Send the ``agent_tune`` / ``verl_ext`` loggers to the console; idempotent (re-calling replaces the
    handlers, never adds a second pair).

    Args:
        verbose: also show DEBUG records.
        stdout: stream for DEBUG/INFO lines (default: ``sys.stdout`` at the time of each record).
        stderr: stream for WARNING and above (default: ``sys.stderr`` likewise).
    """
    out = _ConsoleHandler("stdout", stdout)
    out.addFilter(_MaxLevel(logging.INFO))
    err = _ConsoleHandler("stderr", stderr)
    err.setLevel(logging.WARNING)
    for handler in (out, err):
        handler.setFormatter(ConsoleFormatter("%(message)s"))
        setattr(handler, _HANDLER_FLAG, True)
    for name in PACKAGES:
        logger = logging.getLogger(name)
        for old in [h for h in logger.handlers if getattr(h, _HANDLER_FLAG, False)]:
            logger.removeHandler(old)
        logger.addHandler(out)
        logger.addHandler(err)
        logger.setLevel(logging.DEBUG if verbose else logging.INFO)
        logger.propagate = False  # verl and Ray configure the root logger too: no line twice
