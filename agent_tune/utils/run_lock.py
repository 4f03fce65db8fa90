"""One run per folder: the lock every writer of a run folder (or of an appended output file) takes first.

The lock is ``<folder>/.agent_tune.lock`` (for a file such as ``agent-tune eval --output``:
``.<name>.agent_tune.lock`` beside it). Taking it is an ``fcntl.flock`` on an open descriptor, held for the run's
life, so two starters cannot both win and a process that dies by any signal lets go at once. The file also
holds who has it (pid, host, boot, the process's start time from ``/proc``, the command, the training child),
which names the other run in a refusal and catches what ``flock`` alone cannot:

- a holder on another host (a shared folder): refused; only its owner knows whether it is gone;
- a holder recorded on this host whose processes are all gone (pid dead, or reused by a process started at
  another time, or another boot) while nobody holds the ``flock``: taken over, with a one-line note;
- a recorded holder still alive while the ``flock`` is free (a file system where ``flock`` does not reach,
  another pid namespace): refused, to be safe.

The training child inherits its launcher's descriptor (the same open file, so the same ``flock``): the folder
stays locked until the launcher and the child are both gone, and the launcher never waits on its own lock.
"""

from __future__ import annotations

import datetime
import errno
import fcntl
import json
import logging
import os
import shlex
import socket
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from agent_tune.errors import ConfigError

logger = logging.getLogger(__name__)

LOCK_NAME = ".agent_tune.lock"


class RunFolderBusy(ConfigError):
    """Another run holds the folder's lock; the message names it and how to stop it (exit 2: nothing ran)."""


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def process_start(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot (``/proc/<pid>/stat`` field 22); None when no
    such process runs (none, a zombie nobody reaped yet, or no ``/proc``)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) is in parentheses and may hold spaces: count fields after the last ')'
    fields = stat[stat.rindex(")") + 2:].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


def _alive(pid: int | None, ticks: int | None) -> bool:
    """Whether ``pid`` is the process that started at ``ticks`` (a reused pid has another start time)."""
    if pid is None:
        return False
    now = process_start(pid)
    if now is None and Path("/proc/self/stat").is_file():
        return False
    if now is None:
        try:
            os.kill(pid, 0)  # no /proc: existence is all we can tell
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return ticks is None
    return ticks is None or now == ticks


@dataclass(frozen=True)
class Holder:
    """Who holds a lock: the process that took it and, once started, its training child."""

    pid: int
    host: str
    boot: str
    ticks: int | None  # the process's start time (process_start)
    started: str  # wall time, for people
    command: str
    child_pid: int | None = None
    child_ticks: int | None = None

    @classmethod
    def me(cls, command: str | None = None) -> "Holder":
        """This process, running ``command`` (default: this interpreter's command line)."""
        pid = os.getpid()
        return cls(pid, socket.gethostname(), _boot_id(), process_start(pid),
                   datetime.datetime.now().isoformat(timespec="seconds"),
                   command or shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]]))

    @classmethod
    def parse(cls, text: str) -> "Holder | None":
        """The holder a lock file records; None for an empty or unreadable one (a lock let go of cleanly)."""
        try:
            data = json.loads(text)
            return cls(**{k: data.get(k) for k in cls.__dataclass_fields__})
        except (ValueError, TypeError):
            return None

    def here(self) -> bool:
        """Whether it ran on this host (only then can its processes be looked up)."""
        return self.host == socket.gethostname()

    def alive(self) -> bool:
        """Whether one of its processes still runs on this host (none has since a reboot)."""
        if not self.here() or (self.boot and self.boot != _boot_id()):
            return False
        return _alive(self.pid, self.ticks) or _alive(self.child_pid, self.child_ticks)

    def describe(self) -> str:
        child = f", training child pid {self.child_pid}" if self.child_pid else ""
        return f"pid {self.pid}{child} on host {self.host}, started {self.started}, command: {self.command}"


def busy_message(target: Path, lock_file: Path, holder: Holder | None, elsewhere: str) -> str:
    """The one-line refusal: who holds ``target`` and the way out (``elsewhere``: how to choose another)."""
    if holder is None:
        return (f"{target} is in use by another run (its lock {lock_file} is held; no holder recorded yet, retry "
                f"in a few seconds), or {elsewhere}")
    if not holder.here():
        return (f"{target} is in use by another run: {holder.describe()}; stop it on {holder.host}, or if that run "
                f"is gone delete {lock_file}, or {elsewhere}")
    pids = [str(p) for p, t in ((holder.pid, holder.ticks), (holder.child_pid, holder.child_ticks)) if _alive(p, t)]
    stop = f"kill {' '.join(pids or [str(holder.pid)])}"
    return (f"{target} is in use by another run: {holder.describe()}; stop it with `{stop}` (it shuts down "
            f"cleanly, keeping what it saved), or {elsewhere}")


class RunLock:
    """The lock on a run folder (:meth:`folder`) or an output file (:meth:`file`), held from :meth:`acquire`
    until :meth:`release` (or the end of the process and of every process that inherited :attr:`fd`)."""

    def __init__(self, lock_file: Path, target: Path, elsewhere: str) -> None:
        self.lock_file, self.target, self.elsewhere = lock_file, target, elsewhere
        self.fd: int | None = None
        self.holder: Holder | None = None

    @classmethod
    def folder(cls, run_dir: str | os.PathLike[str], elsewhere: str = "choose another run folder") -> "RunLock":
        run_dir = Path(run_dir)
        return cls(run_dir / LOCK_NAME, run_dir, elsewhere)

    @classmethod
    def file(cls, output: str | os.PathLike[str], elsewhere: str = "choose another output file") -> "RunLock":
        output = Path(output)
        return cls(output.with_name(f".{output.name}{LOCK_NAME}"), output, elsewhere)

    def acquire(self, command: str | None = None) -> str | None:
        """Take the lock for this process; the takeover note when a gone run's lock was taken over, else None.

        Raises:
            RunFolderBusy: another run holds it (the message names it and how to stop it).
        """
        self.lock_file.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                    break  # a file system without flock: the record below is the only check
                os.close(fd)
                if exc.errno not in (errno.EWOULDBLOCK, errno.EACCES):
                    raise
                raise RunFolderBusy(busy_message(self.target, self.lock_file, self._recorded(), self.elsewhere)) \
                    from None
            if self._same_file(fd):
                break
            os.close(fd)  # the file was replaced between open and flock: lock the one now at the path
        previous = self._recorded()
        if previous is not None and (not previous.here() or previous.alive()):
            os.close(fd)
            raise RunFolderBusy(busy_message(self.target, self.lock_file, previous, self.elsewhere))
        self.fd = fd
        self._write(Holder.me(command))
        if previous is None:
            return None
        return f"took over the lock of {self.target} from a run that is gone ({previous.describe()})"

    def set_child(self, pid: int) -> None:
        """Record the training child, so a refusal names it and a gone launcher's lock is not taken over
        while its child still runs."""
        if self.holder is not None:
            self._write(Holder(**{**asdict(self.holder), "child_pid": pid, "child_ticks": process_start(pid)}))

    def release(self) -> None:
        """Let go: the record is emptied (a clean end leaves no holder to take over from), then the flock."""
        if self.fd is None:
            return
        try:
            os.ftruncate(self.fd, 0)
        finally:
            os.close(self.fd)
            self.fd, self.holder = None, None

    def hand_over(self) -> None:
        """Close this process's descriptor but keep the record: a child that inherited it holds the lock alone
        (``--detach``)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def __enter__(self) -> "RunLock":
        note = self.acquire()
        if note:
            logger.info("%s", note)
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _same_file(self, fd: int) -> bool:
        try:
            at_path = os.stat(self.lock_file)
        except FileNotFoundError:
            return False
        held = os.fstat(fd)
        return (held.st_dev, held.st_ino) == (at_path.st_dev, at_path.st_ino)

    def _recorded(self) -> Holder | None:
        try:
            return Holder.parse(self.lock_file.read_text(encoding="utf-8"))
        except OSError:
            return None

    def _write(self, holder: Holder) -> None:
        assert self.fd is not None
        data = json.dumps(asdict(holder)).encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)
        os.fsync(self.fd)
        self.holder = holder
