"""One way to run a server for a test or a benchmark: start it with its output in a log file, wait until it
answers, stop it with everything it started.

    with ServerProcess("vLLM", cmd, log, env=env) as server:
        server.wait_ready(openai_ready(base_url), timeout_s=600)
        ...  # use it
    # stopped here: SIGTERM to its process group, SIGKILL after the grace period

The server runs in a process group of its own (``start_new_session``), so a stop reaches the processes it started
(vLLM's engine core, SGLang's scheduler) and a Ctrl-C in the terminal reaches it only through the stop.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Callable, Mapping, Sequence

from agent_tune.errors import SetupError

STOP_GRACE_S = 60.0
LOG_TAIL_LINES = 40
_LOG_TAIL_BYTES = 16_000  # read from a log's end for its last lines (a server's log can be large)


class ServerStartError(SetupError, RuntimeError):
    """The server exited, or did not answer in time, before it was ready; the message ends with its log's tail."""


def free_port() -> int:
    """A TCP port free on loopback now (the OS's pick)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def http_ready(url: str, timeout_s: float = 2.0) -> Callable[[], bool]:
    """A readiness probe: ``GET url`` answers with a 2xx status."""

    def ready() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=timeout_s):
                return True
        except OSError:  # no answer yet, or an error status (HTTPError)
            return False

    return ready


def openai_ready(base_url: str, timeout_s: float = 2.0) -> Callable[[], bool]:
    """A readiness probe for an OpenAI-compatible server: ``GET {base_url}/models`` lists at least one model
    (``base_url`` is the ``.../v1`` root)."""
    url = f"{base_url.rstrip('/')}/models"

    def ready() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=timeout_s) as resp:
                return bool(json.load(resp).get("data"))
        except (OSError, ValueError, AttributeError):  # not up yet, or not (yet) the JSON a model list is
            return False

    return ready


class ServerProcess:
    """A server command run in the background with its stdout and stderr in ``log``; a context manager that starts
    it on entry and stops it (:meth:`stop`) on exit. ``env``: the child's whole environment (default: ours)."""

    def __init__(self, name: str, cmd: Sequence[str], log: Path | str, *, env: Mapping[str, str] | None = None,
                 cwd: Path | str | None = None, grace_s: float = STOP_GRACE_S) -> None:
        self.name = name
        self.cmd = [str(part) for part in cmd]
        self.log = Path(log)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.grace_s = grace_s
        self.proc: subprocess.Popen | None = None
        self.started_at = 0.0  # time.monotonic() at start

    @property
    def pid(self) -> int:
        """The server's pid (its process group's id too)."""
        if self.proc is None:
            raise RuntimeError(f"{self.name} was not started")
        return self.proc.pid

    def start(self) -> ServerProcess:
        """Start the command (once), its output truncating ``log``."""
        if self.proc is not None:
            raise RuntimeError(f"{self.name} was already started (pid {self.proc.pid})")
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         env=self.env, cwd=self.cwd, start_new_session=True)
        self.started_at = time.monotonic()
        return self

    def wait_ready(self, ready: Callable[[], bool], timeout_s: float, poll_s: float = 2.0) -> float:
        """Call ``ready`` every ``poll_s`` until it returns true; the seconds since :meth:`start`.

        Raises:
            ServerStartError: the server exited first (at once, not at the deadline), or ``timeout_s`` passed
                since the wait began; the message names the log and ends with its last lines.
        """
        proc = self.proc
        if proc is None:
            raise RuntimeError(f"{self.name} was not started")
        deadline = time.monotonic() + timeout_s
        while True:
            if proc.poll() is not None:
                raise ServerStartError(f"{self.name} exited with {proc.returncode} before it answered; "
                                       f"{self._tail_text()}")
            if ready():
                if proc.poll() is None:  # not another process on the port, answering for a server that died
                    return time.monotonic() - self.started_at
                continue
            if time.monotonic() > deadline:
                raise ServerStartError(f"{self.name} did not answer in {timeout_s:g} s; {self._tail_text()}")
            time.sleep(poll_s)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of the log ("" when there is none)."""
        try:
            with self.log.open("rb") as f:
                f.seek(max(0, f.seek(0, os.SEEK_END) - _LOG_TAIL_BYTES))
                text = f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _tail_text(self) -> str:
        return f"the last lines of {self.log}:\n{self.log_tail()}"

    def _group_alive(self) -> bool:
        """A process of the server's group is still running (zombies, which no signal ends, do not count)."""
        proc_fs = Path("/proc")
        if not proc_fs.is_dir():  # no procfs: ask the kernel, zombies included
            try:
                os.killpg(self.pid, 0)
            except ProcessLookupError:
                return False
            except PermissionError:  # a member we may not signal: still there
                return True
            return True
        for stat in proc_fs.glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, pgrp
            except (OSError, IndexError):
                continue  # gone meanwhile
            if fields[2] == str(self.pid) and fields[0] != "Z":
                return True
        return False

    def _signal_group(self, sig: int) -> None:
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self, grace_s: float | None = None) -> int | None:
        """SIGTERM to the server's process group; SIGKILL to what is left of it after ``grace_s`` (default: the
        constructor's). Waits for the server and returns its exit status (None if it was never started)."""
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is not None and not self._group_alive():
            return proc.returncode  # stopped already (or exited alone, leaving nothing): nothing to signal
        grace_s = self.grace_s if grace_s is None else grace_s
        deadline = time.monotonic() + grace_s
        self._signal_group(signal.SIGTERM)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            pass
        # the server gone, what it started may still be shutting down: they get the rest of the grace period
        while self._group_alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        if self._group_alive():
            self._signal_group(signal.SIGKILL)
        return proc.wait()

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
