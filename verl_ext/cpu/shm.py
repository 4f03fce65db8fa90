"""Remove the POSIX shared-memory files a CPU run leaves in ``/dev/shm``, and only this run's.

vLLM's processes (its message queues, Python ``multiprocessing`` shared memory and semaphores) create
``/dev/shm/psm_*`` and ``/dev/shm/sem.mp-*`` files, and verl's shared-memory weight transfer a
``/dev/shm/verl_weights_*`` bucket for each weight sync (the bucket's size, 1 GiB on the CPU configs; unlinked
when the sync ends). When Ray tears the processes down at the end of a run, some are never unlinked: about 420 MB
per run on a 135M model, and a whole bucket when the run is stopped during a weight sync.

Usage::

    snapshot = ShmSnapshot.take()      # this process is the run's root
    snapshot.watch()                   # note, every few seconds, the files the run's processes hold
    try:
        run()
    finally:
        removed = snapshot.cleanup()

Which files are this run's: the names cannot tell (``psm_<random>``), and neither can the time they were created
(another run on the machine, a training beside an eval or a replay, creates its own meanwhile). So the snapshot
keeps the process tree of its root (this process and its descendants: Ray's raylet, its workers, vLLM's
processes), and of the more roots ``roots_from`` names at each look (a run that joined a Ray cluster: its actors
on this machine, started by the cluster's raylet, not by the run), and, while :meth:`ShmSnapshot.watch` runs (and
once more at :meth:`ShmSnapshot.cleanup`), notes every matching file one of those processes maps or holds open:
those files are the run's. A new matching name in the directory triggers a look at once (a named semaphore is
mapped before its name appears). :meth:`ShmSnapshot.cleanup` removes only them, once no live process uses them
(waiting for dying processes to let go), and only those that did not exist at the snapshot and belong to this
user. A file another process was seen holding is never one of them, even when no process maps it at the moment of
the clean-up.

One more kind goes: a semaphore (``sem.mp-*``) created since the snapshot that no process at all was seen
holding. ``sem_open`` maps a semaphore before its name appears, and a holder keeps it mapped until it lets go,
so such a name was made and let go of within one listing (a quarter of a second): a process killed as it made
it, typically at Ray's shut-down. Nobody can be using it. The names no process of the run holds are looked up
among all processes (a few milliseconds), a bounded number of times per name.
"""

from __future__ import annotations

import fnmatch
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

SHM_DIR = Path("/dev/shm")
PATTERNS = ("psm_*", "sem.mp-*", "verl_weights_*")
WATCH_INTERVAL_S = 3.0  # how often the run's processes are looked at while it runs
STRAY_PATTERNS = ("sem.mp-*",)  # files that are mapped before their name appears: an unheld one is a leak
FOREIGN_LOOKS = 20  # how many looks at most search all processes for the holder of a new name the run does not hold
# how often the directory is listed: a new matching name triggers a look at once, so a file a process creates and
# lets go of within a few seconds (a semaphore made at shut-down) is still seen held; a listing costs microseconds
LIST_INTERVAL_S = 0.25


def _matching(directory: Path, patterns: tuple[str, ...]) -> set[str]:
    try:
        names = os.listdir(directory)
    except OSError:
        return set()
    return {n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)}


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _used_by(pid: int, prefix: str) -> set[str]:
    """Names under ``prefix`` (a directory path ending in ``/``) that process ``pid`` maps or holds open."""
    used: set[str] = set()
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                idx = line.find(prefix)
                if idx >= 0:
                    used.add(line[idx + len(prefix):].split()[0].split("/")[0])
    except OSError:
        pass
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith(prefix):
                used.add(target[len(prefix):].split(" ")[0])
    except OSError:
        pass
    return used


def names_used_by(pids: Iterable[int], directory: Path = SHM_DIR) -> set[str]:
    """Names of files under ``directory`` that the processes ``pids`` map or hold open (best effort)."""
    prefix = str(directory).rstrip("/") + "/"
    used: set[str] = set()
    for pid in pids:
        used |= _used_by(pid, prefix)
    return used


def paths_in_use(directory: Path = SHM_DIR) -> set[str]:
    """Names of files under ``directory`` that some live process maps or holds open (best effort)."""
    return names_used_by(_pids(), directory)


def start_time(pid: int) -> str | None:
    """When ``pid`` started (clock ticks since boot, ``/proc/<pid>/stat``), or None when it no longer runs (gone,
    or a zombie: dead, mapping nothing, not yet reaped). A pid and its start time name one process; a pid alone
    may be reused."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()  # the fields after the command, from field 3 (state)
    except OSError:
        return None
    if len(fields) < 20 or (fields[0] in ("Z", "X") and not _threads_run(pid)):
        return None
    return fields[19]  # field 22


def _threads_run(pid: int) -> bool:
    """Whether a thread of ``pid`` still runs: a leader thread turns zombie before the others have ended, and
    they still hold the process's files."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return False
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/stat", encoding="utf-8", errors="replace") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
                    return True
        except (OSError, IndexError):
            continue
    return False


def process_tree(root: int, *more: int) -> set[int]:
    """``root`` (and the ``more`` roots) and their live descendants (read from each process's parent in
    ``/proc/<pid>/stat``)."""
    children: dict[int, list[int]] = {}
    for pid in _pids():
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()  # after the command, which may hold spaces
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(pid)
    tree, todo = set(), [root, *more]
    while todo:
        pid = todo.pop()
        if pid not in tree:
            tree.add(pid)
            todo.extend(children.get(pid, ()))
    return tree


@dataclass
class ShmSnapshot:
    """The shared-memory files present before a run and those the run's processes were seen holding since;
    :meth:`cleanup` removes what the run left (see the module docstring)."""

    directory: Path = SHM_DIR
    patterns: tuple[str, ...] = PATTERNS
    before: set[str] = field(default_factory=set)
    root: int = field(default_factory=os.getpid)  # the run's root process
    # more roots of the run's processes, asked at every look: those the root did not start (the run's Ray actors on
    # this machine when the run joined a cluster: children of the cluster's raylet). Errors count as none.
    roots_from: Callable[[], Iterable[int]] | None = None
    owned: set[str] = field(default_factory=set)  # new files the run's processes were seen holding
    foreign: set[str] = field(default_factory=set)  # new files a process outside the run was seen holding
    # new names no process was seen holding, and how many looks searched for a holder
    unheld: dict[str, int] = field(default_factory=dict)
    # every process seen in the run's tree, with its start time (one reparented when its parent died stays the run's)
    _pids: dict[int, str] = field(default_factory=dict, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)

    @classmethod
    def take(cls, directory: Path = SHM_DIR, patterns: tuple[str, ...] = PATTERNS,
             root: int | None = None) -> ShmSnapshot:
        """Record the matching files present now; ``root`` (default: this process) roots the run's processes."""
        return cls(directory=Path(directory), patterns=patterns, before=_matching(Path(directory), patterns),
                   root=os.getpid() if root is None else int(root))

    def _new(self) -> set[str]:
        """Matching files created since the snapshot and owned by this user."""
        uid = os.getuid()
        out = set()
        for name in _matching(self.directory, self.patterns) - self.before:
            try:
                if (self.directory / name).lstat().st_uid == uid:
                    out.add(name)
            except OSError:
                pass
        return out

    def observe(self) -> set[str]:
        """One look: the new files the run's processes map or hold now become the run's; returns them all."""
        with self._lock:
            for pid in process_tree(self.root, *self._more_roots()) - self._pids.keys():
                started = start_time(pid)
                if started is not None:
                    self._pids[pid] = started
            live = self._live()
            new = self._new()
            self.owned |= new & names_used_by(live, self.directory)
            pending = {n for n in new - self.owned - self.foreign if self.unheld.get(n, 0) < FOREIGN_LOOKS}
            if pending:
                others = names_used_by(set(_pids()) - live, self.directory) & pending
                self.foreign |= others
                for name in pending - others:
                    self.unheld[name] = self.unheld.get(name, 0) + 1
            for name in self.owned | self.foreign:
                self.unheld.pop(name, None)
            return set(self.owned)

    def _more_roots(self) -> set[int]:
        if self.roots_from is None:
            return set()
        try:
            return {int(pid) for pid in self.roots_from()}
        except Exception:  # noqa: BLE001 - a look must never be what breaks the run (a GCS not answering)
            return set()

    def _live(self) -> set[int]:
        return {pid for pid, started in self._pids.items() if start_time(pid) == started}

    def live_processes(self) -> set[int]:
        """The processes seen in the run's tree (as of the last look) that still run, its root aside: after the
        run's shut-down, those that outlived it (a reparented vLLM engine, a Ray worker busy in C code), each
        still holding the files it mapped."""
        with self._lock:
            return self._live() - {self.root}

    def watch(self, interval_s: float = WATCH_INTERVAL_S, list_s: float = LIST_INTERVAL_S) -> None:
        """Look every ``interval_s`` seconds, and as soon as a listing every ``list_s`` seconds shows a new matching
        name, in a daemon thread, until :meth:`cleanup` (or :meth:`stop`)."""
        if self._thread is not None:
            return

        def loop(listed: set[str]) -> None:
            last = time.monotonic()
            while not self._stop.wait(min(list_s, interval_s)):
                names = _matching(self.directory, self.patterns)
                if names - listed or time.monotonic() - last >= interval_s:
                    self.observe()
                    last = time.monotonic()
                listed = names

        listed = _matching(self.directory, self.patterns)  # before the first look: nothing new slips between
        self.observe()
        self._thread = threading.Thread(target=loop, args=(listed,), name="agent_tune_shm_watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop watching (bounded wait for the watcher's last look)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(30)

    def leftovers(self) -> set[str]:
        """The run's files (seen held by its processes) and the stray semaphores (seen held by no process) that
        are still there."""
        new = self._new()
        strays = {n for n in new if n in self.unheld and any(fnmatch.fnmatchcase(n, p) for p in STRAY_PATTERNS)}
        return (new & self.owned) | strays

    def cleanup(self, wait_s: float = 10.0, poll_s: float = 0.5) -> list[str]:
        """Stop watching, look once more, then remove the run's leftovers no live process uses; wait up to
        ``wait_s`` for dying processes to let go.

        Returns:
            The names removed.
        """
        self.stop()
        self.observe()
        deadline = time.monotonic() + wait_s
        removed: list[str] = []
        while True:
            candidates = self.leftovers()
            if not candidates:
                return removed
            in_use = paths_in_use(self.directory)
            for name in sorted(candidates - in_use):
                try:
                    (self.directory / name).unlink()
                    removed.append(name)
                except OSError:  # gone meanwhile, or not ours to remove
                    pass
            if not (candidates & in_use) or time.monotonic() >= deadline:
                return removed
            time.sleep(poll_s)
