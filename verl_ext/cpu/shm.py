"""Remove the POSIX shared-memory files a CPU run leaves in ``/dev/shm``.

vLLM's processes (its message queues, Python ``multiprocessing`` shared memory and semaphores) and verl's
shared-memory weight transfer create ``/dev/shm/psm_*`` and ``/dev/shm/sem.mp-*`` files. When Ray tears the
processes down at the end of a run, some are never unlinked: about 420 MB per run on a 135M model.

Usage::

    snapshot = ShmSnapshot.take()
    try:
        run()
    finally:
        removed = snapshot.cleanup()

Only files that match the patterns, did not exist when the snapshot was taken, belong to this user and are
no longer mapped or open by any live process are removed, so files of other programs (including another run
started meanwhile, whose processes still hold theirs) are left alone.
"""

from __future__ import annotations

import fnmatch
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

SHM_DIR = Path("/dev/shm")
PATTERNS = ("psm_*", "sem.mp-*")


def _matching(directory: Path, patterns: tuple[str, ...]) -> set[str]:
    try:
        names = os.listdir(directory)
    except OSError:
        return set()
    return {n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)}


def paths_in_use(directory: Path = SHM_DIR) -> set[str]:
    """Names of files under ``directory`` that some live process maps or holds open (best effort)."""
    prefix = str(directory).rstrip("/") + "/"
    used: set[str] = set()
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as maps:
                for line in maps:
                    idx = line.find(prefix)
                    if idx >= 0:
                        used.add(line[idx + len(prefix) :].split()[0].split("/")[0])
        except OSError:
            pass
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith(prefix):
                    used.add(target[len(prefix) :].split(" ")[0])
        except OSError:
            pass
    return used


@dataclass
class ShmSnapshot:
    """The shared-memory files present before a run; :meth:`cleanup` removes what the run left."""

    directory: Path = SHM_DIR
    patterns: tuple[str, ...] = PATTERNS
    before: set[str] = field(default_factory=set)

    @classmethod
    def take(cls, directory: Path = SHM_DIR, patterns: tuple[str, ...] = PATTERNS) -> "ShmSnapshot":
        """Record the matching files present now."""
        return cls(directory=Path(directory), patterns=patterns, before=_matching(Path(directory), patterns))

    def leftovers(self) -> set[str]:
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

    def cleanup(self, wait_s: float = 10.0, poll_s: float = 0.5) -> list[str]:
        """Remove leftovers no live process uses; wait up to ``wait_s`` for dying processes to let go.

        Returns:
            The names removed.
        """
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
                except FileNotFoundError:
                    pass
                except OSError:
                    pass
            if not (candidates & in_use) or time.monotonic() >= deadline:
                return removed
            time.sleep(poll_s)
