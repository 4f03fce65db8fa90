"""What libraries say while a launcher imports and checks, held off the console.

verl, Ray and PyTorch warn at import time (verl's "engine is not available", its platform fallback notes) and
the launcher imports them for its start-up checks; none of it is something a user acts on, so the launcher holds
it (:func:`held_library_output`) and writes it to the run's log (:func:`write_held`) instead of the console.
agent-tune's own records (``agent_tune``, ``verl_ext``) still reach the console: they never propagate to the root.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import warnings
from pathlib import Path
from typing import Iterator


class _Held(logging.Handler):
    def __init__(self, lines: list[str]) -> None:
        super().__init__(logging.NOTSET)
        self.lines = lines
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@contextlib.contextmanager
def held_library_output() -> Iterator[list[str]]:
    """Within the block, ``warnings.warn`` calls and records reaching the root logger become lines of the yielded
    list (in order) instead of console output; both are restored after it. A library that configures the root
    logger at import (``logging.basicConfig``) finds it configured, so it stays quiet afterwards too."""
    lines: list[str] = []
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers, root.level = [_Held(lines)], logging.WARNING

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: object = None,
             line: str | None = None) -> None:
        lines.append(f"{category.__name__}: {message} ({filename}:{lineno})")

    try:
        with warnings.catch_warnings():
            warnings.showwarning = show
            yield lines
    finally:
        root.handlers, root.level = handlers, level


def write_held(log: Path, lines: list[str]) -> None:
    """Append ``lines`` (what :func:`held_library_output` held) to the run's log ``log``, under a header."""
    if not lines:
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().isoformat(timespec="seconds")
    with log.open("a", encoding="utf-8") as f:
        f.write(f"----- the launcher's start-up, {stamp}: {len(lines)} library messages held off the console -----\n")
        f.writelines(line + "\n" for line in lines)
