"""A pids cgroup per sandbox run: the process limit that holds when the sandbox runs as host root.

``RLIMIT_NPROC`` is not enforced for host uid 0 (the kernel exempts the initial user), and a
bubblewrap sandbox started by root maps its uid to host root. So as root the local sandbox puts each
run in its own child cgroup of the pids controller with ``pids.max`` set, and uses the same cgroup to
kill whatever is left when the run ends. Works with cgroup v1 (a ``pids`` hierarchy) and with cgroup v2
when the ``pids`` controller is enabled for our cgroup's children; nothing here edits controllers or
touches cgroups it did not create.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

from agent_tune.errors import SetupError


class PidsCgroupUnavailable(SetupError, RuntimeError):
    """No writable pids cgroup hierarchy is available to this process."""


def _own_cgroup_dir() -> Path:
    """The directory of this process's cgroup in a hierarchy that has the pids controller."""
    own: dict[str, str] = {}  # controller list -> path
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        own[controllers] = path
    mounts: list[tuple[str, str, str, str]] = []  # (fstype, root, mountpoint, super options)
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) >= 5 and len(rfields) >= 3:
            mounts.append((rfields[0], fields[3], fields[4].replace("\\040", " "), rfields[2]))

    def locate(fstype: str, key: str, match) -> Path | None:
        path = own.get(key)
        if path is None:
            return None
        for mtype, root, mountpoint, opts in mounts:
            if mtype == fstype and match(opts) and (path == root or path.startswith(root.rstrip("/") + "/")):
                rel = path[len(root) :].lstrip("/") if root != "/" else path.lstrip("/")
                return Path(mountpoint) / rel
        return None

    v1_key = next((k for k in own if "pids" in k.split(",")), None)
    if v1_key is not None:
        found = locate("cgroup", v1_key, lambda opts: "pids" in opts.split(","))
        if found is not None:
            return found
    found = locate("cgroup2", "", lambda opts: True)
    if found is not None and "pids" in (found / "cgroup.subtree_control").read_text().split():
        return found
    raise PidsCgroupUnavailable("no cgroup hierarchy with the pids controller is available for child groups")


class PidsCgroupRoot:
    """A parent cgroup owned by one sandbox object; hands out one child cgroup per run."""

    def __init__(self) -> None:
        try:
            parent = _own_cgroup_dir()
            self.path = parent / f"agent_tune_sandbox_{os.getpid()}_{uuid.uuid4().hex[:8]}"
            self.path.mkdir()
        except (OSError, ValueError) as exc:
            raise PidsCgroupUnavailable(f"cannot create a pids cgroup: {exc}") from exc
        if not (self.path / "pids.max").exists():
            self.remove()
            raise PidsCgroupUnavailable(f"{self.path} has no pids.max (pids controller not enabled)")

    def new_run(self, max_pids: int) -> Path:
        """Create a child cgroup for one run with ``pids.max`` set; returns its directory."""
        run = self.path / f"run_{uuid.uuid4().hex[:12]}"
        run.mkdir()
        (run / "pids.max").write_text(str(int(max_pids)))
        return run

    @staticmethod
    def kill_and_remove(run: Path, wait_s: float = 5.0) -> bool:
        """SIGKILL everything left in ``run`` and remove it; True if the cgroup is gone."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                pids = [int(p) for p in (run / "cgroup.procs").read_text().split()]
            except FileNotFoundError:
                return True
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                run.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError:  # EBUSY: processes still exiting
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.005)

    def remove(self) -> None:
        """Remove the parent cgroup (and any run cgroups left behind)."""
        if not self.path.exists():
            return
        for child in self.path.iterdir():
            if child.is_dir():
                self.kill_and_remove(child)
        try:
            self.path.rmdir()
        except OSError:
            pass
