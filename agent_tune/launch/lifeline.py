"""No orphans: a training child stops when the process that started it dies, by any signal (SIGKILL included).

Two ties, both Linux's (elsewhere they do nothing):

- :func:`die_with_parent` (a ``preexec_fn``) asks the kernel to send the child SIGTERM when its parent dies
  (``prctl(PR_SET_PDEATHSIG)``), so the child shuts down as on the launcher's own SIGTERM: the train child's
  SIGTERM handler (Ray's, installed by ``ray.init``) leaves through the ``finally`` of
  :func:`agent_tune.launch.train.run`: ``ray.shutdown()`` and the ``/dev/shm`` clean-up; checkpoints are
  written whole or not at all by verl, so what is on disk stays resumable;
- :func:`watch_parent` (a thread in the child) sees the parent go, sends SIGTERM where the kernel did not
  (a child started without the ``preexec_fn``, such as torchrun's workers), and ends the process after
  ``grace_s`` if the shut-down hangs (:func:`exit_after`: its descendants first, Ray's and vLLM's processes,
  then the :func:`at_forced_exit` hooks such as the ``/dev/shm`` clean-up, which can remove a file only once
  no process maps it). Ray's own processes share its fate anyway: Ray starts its head processes with a
  parent-death SIGKILL, and its workers exit when their raylet goes.

Once the shut-down has begun, :func:`shield_shutdown` keeps further SIGINT / SIGTERM from cutting it short
(Ctrl-C reaches the child from the terminal and again from the launcher); :func:`tie_to_parent` leaves a closed
terminal's SIGHUP to the launcher, whose death then brings the one SIGTERM.

The child is not made a child-subreaper: Ray's orphans would then be ours to reap, and a reaper that waits on
any child takes exit statuses Ray's own ``Popen`` objects are waiting for.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import threading
import time
from typing import Callable, Iterable

logger = logging.getLogger(__name__)

# What must still run when a hung shut-down is ended (the /dev/shm clean-up): called in order, each guarded, just
# before the deadline's exit (:func:`at_forced_exit`). Per process, like the signal handlers it stands beside.
_AT_FORCED_EXIT: list[Callable[[], object]] = []
_FORCING = threading.Lock()  # held by the deadline that is ending the process

PR_SET_PDEATHSIG = 1
PR_GET_PDEATHSIG = 2
GRACE_S = 35.0  # the shut-down's bound after the parent died: Ray's teardown fits; with the forced exit (the
# descendants ended, at most 5 s; the /dev/shm clean-up, at most ~10 s) 60 s overall holds
DESCENDANTS_WAIT_S = 5.0


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()  # looked up before any fork: the preexec_fn only calls it


def die_with_parent(parent: int | None = None) -> Callable[[], None]:
    """A ``preexec_fn`` for ``subprocess.Popen``: the child gets SIGTERM when ``parent`` (default: the process
    calling this, i.e. the one about to start the child) dies; a parent already gone sends it at once.

    The kernel ties the signal to the thread that forks: call ``Popen`` from a thread that lives as long as
    the child should (the launcher's main thread)."""
    parent = os.getpid() if parent is None else parent

    def preexec() -> None:
        if _PRCTL is not None:
            _PRCTL(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the tie was made
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


def parent_death_signal() -> int:
    """The signal this process gets when its parent dies (0: none). Ask from the main thread: the kernel keeps the
    setting per thread, and a thread started later reads 0."""
    if _PRCTL is None:
        return 0
    value = ctypes.c_int(0)
    _PRCTL(PR_GET_PDEATHSIG, ctypes.byref(value), 0, 0, 0)
    return value.value


def shield_shutdown() -> None:
    """From now on SIGINT and SIGTERM do nothing in this process (main thread only): the shut-down under way
    runs whole. A Ctrl-C reaches the child twice (from the terminal, then passed on by the launcher) and the
    second would cut ``ray.shutdown()`` short; a shut-down that hangs is still ended by the launcher's kill
    or :func:`watch_parent`'s deadline."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, _frame: logger.info("%s: already stopping", signal.Signals(signum).name))


def at_forced_exit(fn: Callable[[], object]) -> None:
    """Run ``fn`` if a deadline (:func:`exit_after`: :func:`watch_parent`'s, the run watchdog's) ends this process
    (a shut-down that hung: the ``finally`` blocks it would have run are skipped), after its descendants were
    ended; it should be quick and bounded."""
    _AT_FORCED_EXIT.append(fn)


def _run_forced_exit_hooks() -> None:
    for fn in _AT_FORCED_EXIT:
        try:
            fn()
        except Exception:  # noqa: BLE001 - the process ends next whatever a hook does
            logger.exception("while ending the run")


def end_processes(pids: Iterable[int], wait_s: float = DESCENDANTS_WAIT_S) -> list[int]:
    """SIGKILL ``pids``, then wait up to ``wait_s`` for them to be gone; returns them, sorted."""
    pids = sorted(pids)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + wait_s
    while any(_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return pids


def end_descendants(wait_s: float = DESCENDANTS_WAIT_S) -> list[int]:
    """SIGKILL every live descendant of this process (Ray's head processes and workers, vLLM's), then wait up to
    ``wait_s`` for them to be gone; returns their pids. A forced exit does this before its hooks: a shared-memory
    file a live process of the run still maps cannot be removed, and the processes would die right after."""
    from verl_ext.cpu.shm import process_tree

    me = os.getpid()
    return end_processes(process_tree(me) - {me}, wait_s)


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie, dead but not yet reaped, maps nothing: it does not)."""
    try:
        stat = open(f"/proc/{pid}/stat").read()  # noqa: SIM115 - one read
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def exit_after(grace_s: float, message: str, code: int, exit_now: Callable[[int], None] = os._exit) -> None:
    """The deadline of a shut-down under way (call it from a daemon thread): ``grace_s`` from now, if this
    process still runs, log ``message``, end its descendants (:func:`end_descendants`), run the
    :func:`at_forced_exit` hooks and end it with ``code``. Of several deadlines, the first to expire does it."""
    time.sleep(grace_s)
    if not _FORCING.acquire(blocking=False):  # another deadline is ending the process
        return
    logger.error("%s", message)
    end_descendants()
    _run_forced_exit_hooks()
    exit_now(code)


def deadline(grace_s: float, message: str, code: int) -> threading.Thread:
    """:func:`exit_after` in a daemon thread, started now: the bound of a shut-down that has begun."""
    thread = threading.Thread(target=exit_after, args=(grace_s, message, code), name="agent-tune-deadline",
                              daemon=True)
    thread.start()
    return thread


def tie_to_parent(grace_s: float = GRACE_S) -> threading.Thread:
    """What a training child does first (unless detached): :func:`watch_parent`, and a closed terminal's
    SIGHUP left to the launcher. The launcher dies of it and the kernel's SIGTERM follows (:func:`die_with_parent`);
    a second signal would cut the shut-down short. A Python handler, not ``SIG_IGN``: the processes the child
    starts get the default action back at ``exec``."""
    signal.signal(signal.SIGHUP, lambda *_: None)
    return watch_parent(grace_s)


def watch_parent(grace_s: float = GRACE_S, interval_s: float = 1.0,
                 exit_now: Callable[[int], None] = os._exit) -> threading.Thread:
    """Watch this process's parent from a daemon thread: once it is gone, SIGTERM to this process (unless
    the kernel sends it, :func:`die_with_parent`) and, ``grace_s`` later, ``exit_now(128 + SIGTERM)``."""
    parent = os.getppid()
    # read here, not in the watch thread: the kernel keeps the parent-death signal per thread and a new thread
    # starts with none, so the thread would always send a second SIGTERM; one landing after Ray's shut-down (which
    # puts SIGTERM back to its default action) killed the child in the middle of its clean-up
    kernel_sends = parent_death_signal() == signal.SIGTERM

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(interval_s)
        logger.warning("the launcher (pid %d) is gone: stopping the run (at most %ds)", parent, int(grace_s))
        if not kernel_sends:
            os.kill(os.getpid(), signal.SIGTERM)
        exit_after(grace_s, f"the run did not stop {int(grace_s)}s after its launcher died: exiting now",
                   128 + signal.SIGTERM, exit_now)

    thread = threading.Thread(target=watch, name="agent-tune-parent-watch", daemon=True)
    thread.start()
    return thread
