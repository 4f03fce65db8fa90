"""The training child's tie to its launcher (:mod:`agent_tune.launch.lifeline`): a parent killed by SIGKILL
takes the child with it, by the kernel's parent-death signal or by the child's own watch."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="parent-death ties are Linux's")

BOUND_S = 60.0  # the contract: nothing of a run outlives its launcher by more than this


def gone(pid: int) -> bool:
    """Whether ``pid`` has exited (a zombie nobody reaped counts: it runs nothing). Every thread is looked at:
    a leader thread turns zombie before its other threads have ended, and they still hold its files."""
    states = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        states.append(stat[stat.rindex(")") + 2])
    return all(state in "ZX" for state in states)


def wait_gone(pid: int, bound_s: float = BOUND_S) -> float:
    """Seconds until ``pid`` exits; fails past ``bound_s``."""
    start = time.monotonic()
    while not gone(pid):
        assert time.monotonic() - start < bound_s, f"pid {pid} still runs {bound_s:.0f}s after its parent died"
        time.sleep(0.1)
    return time.monotonic() - start


# A parent that starts argv[1] (python code) as its child and prints the child's pid, then waits.
PARENT = textwrap.dedent("""
    import subprocess, sys, time
    from agent_tune.launch.lifeline import die_with_parent
    tie = {"preexec_fn": die_with_parent()} if sys.argv[2] == "kernel" else {}
    child = subprocess.Popen([sys.executable, "-c", sys.argv[1]], **tie)
    print(child.pid, flush=True)
    time.sleep(120)
""")


def _family(child_code: str, tie: str, marker: Path) -> tuple[subprocess.Popen, int]:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, child_code, tie], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    start = time.monotonic()
    while not marker.exists():  # the child is up and has set its handlers
        assert time.monotonic() - start < 60 and not gone(child)
        time.sleep(0.05)
    return parent, child


def test_the_kernel_sends_sigterm_when_the_parent_is_killed(tmp_path: Path) -> None:
    marker = tmp_path / "up"
    code = textwrap.dedent(f"""
        import pathlib, signal, sys, time
        def stop(*_):
            pathlib.Path({str(tmp_path / 'stopped')!r}).write_text("SIGTERM")
            sys.exit(0)
        signal.signal(signal.SIGTERM, stop)
        from agent_tune.launch.lifeline import parent_death_signal
        pathlib.Path({str(marker)!r}).write_text(str(parent_death_signal()))
        time.sleep(120)
    """)
    parent, child = _family(code, "kernel", marker)
    assert marker.read_text() == "15"  # the tie survived exec
    parent.kill()
    parent.wait()
    wait_gone(child)
    assert (tmp_path / "stopped").read_text() == "SIGTERM"  # a shut-down, not a kill: the finally blocks run


def test_the_childs_watch_stops_it_and_ends_a_hung_shut_down(tmp_path: Path) -> None:
    # no kernel tie (as torchrun's workers), and a SIGTERM that does not stop the process: the watch sends
    # SIGTERM, then ends the process after its grace
    marker = tmp_path / "up"
    code = textwrap.dedent(f"""
        import pathlib, signal, time
        signal.signal(signal.SIGTERM, lambda *_: pathlib.Path({str(tmp_path / 'term')!r}).write_text("seen"))
        from agent_tune.launch.lifeline import at_forced_exit, watch_parent
        at_forced_exit(lambda: 1 / 0)  # a failing hook does not keep the next from running
        at_forced_exit(lambda: pathlib.Path({str(tmp_path / 'hook')!r}).write_text("ran"))
        watch_parent(grace_s=1.0, interval_s=0.1)
        pathlib.Path({str(marker)!r}).write_text("up")
        while True:
            time.sleep(0.1)
    """)
    parent, child = _family(code, "none", marker)
    parent.kill()
    parent.wait()
    wait_gone(child)
    assert (tmp_path / "term").read_text() == "seen"
    assert (tmp_path / "hook").read_text() == "ran"  # what the hung shut-down skipped (the /dev/shm clean-up) ran


def test_with_the_kernels_tie_the_watch_sends_no_second_sigterm(tmp_path: Path) -> None:
    # the kernel keeps the parent-death signal per thread (a new thread reads 0): read in the watch thread, it made
    # the watch send a second SIGTERM, which killed the training child outright when it landed after Ray's
    # shut-down had put SIGTERM back to its default action (the run's clean-up skipped, Ray's agents orphaned)
    marker, seen = tmp_path / "up", tmp_path / "signals"
    code = textwrap.dedent(f"""
        import pathlib, signal, time
        from agent_tune.launch.lifeline import watch_parent
        count = []
        def term(*_):
            count.append(1)
            pathlib.Path({str(seen)!r}).write_text(str(len(count)))
        signal.signal(signal.SIGTERM, term)
        watch_parent(grace_s=30.0, interval_s=0.05)
        pathlib.Path({str(marker)!r}).write_text("up")
        while True:
            time.sleep(0.05)
    """)
    parent, child = _family(code, "kernel", marker)
    try:
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while not seen.exists():
            assert time.monotonic() < deadline, "no SIGTERM reached the child"
            time.sleep(0.05)
        time.sleep(1.0)  # the watch (every 0.05 s) has seen the parent go long since
        assert seen.read_text() == "1"  # the kernel's alone
    finally:
        os.kill(child, 9)


def test_a_parent_gone_before_the_tie_is_made_sends_the_signal_at_once(monkeypatch) -> None:
    from agent_tune.launch import lifeline

    sent = []
    monkeypatch.setattr(lifeline.os, "kill", lambda pid, sig: sent.append((pid, sig)))
    monkeypatch.setattr(lifeline, "_PRCTL", None)  # not on the test process itself
    lifeline.die_with_parent(parent=os.getpid() + 10**6)()  # this process's parent is not that one
    assert sent == [(os.getpid(), 15)]


def test_a_shielded_shut_down_is_not_cut_short_by_more_signals() -> None:
    code = textwrap.dedent("""
        import os, signal, time
        from agent_tune.launch.lifeline import shield_shutdown
        from agent_tune.utils.logs import setup_logging
        setup_logging()
        shield_shutdown()
        for sig in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C twice, then the launcher's stop
            os.kill(os.getpid(), sig)
        time.sleep(0.2)
        print("shut-down finished", flush=True)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("shut-down finished")
    assert "SIGINT: already stopping" in proc.stdout + proc.stderr


# A worker of the run (as a Ray worker below the raylet): maps a shared-memory file and does not stop on SIGTERM
HOLDER = textwrap.dedent("""
    import mmap, signal, sys, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with open(sys.argv[1], "w+b") as f:
        f.write(b"w" * 4096)
        f.flush()
        held = mmap.mmap(f.fileno(), 4096)
    print("holding", flush=True)
    time.sleep(600)
""")


def test_a_forced_exit_ends_the_runs_processes_then_removes_their_shared_memory_files(tmp_path: Path) -> None:
    # the training child's clean-up on a hung shut-down (agent_tune.launch.train.run): the file a live worker
    # of the run maps cannot be removed until that worker is gone, so the forced exit ends the workers first
    shm, marker = tmp_path / "shm", tmp_path / "up"
    shm.mkdir()
    code = textwrap.dedent(f"""
        import pathlib, signal, subprocess, sys, time
        from agent_tune.launch.lifeline import at_forced_exit, watch_parent
        from verl_ext.cpu.shm import ShmSnapshot
        shm = pathlib.Path({str(shm)!r})
        snapshot = ShmSnapshot.take(directory=shm)
        snapshot.watch(interval_s=0.2, list_s=0.05)
        at_forced_exit(lambda: snapshot.cleanup(wait_s=2.0))
        holder = subprocess.Popen([sys.executable, "-c", {HOLDER!r}, str(shm / "psm_weights")],
                                  stdout=subprocess.PIPE, text=True)
        holder.stdout.readline()
        while "psm_weights" not in snapshot.observe():  # seen held by the run's process: the run's file
            time.sleep(0.05)
        signal.signal(signal.SIGTERM, lambda *_: None)  # a shut-down that hangs
        watch_parent(grace_s=1.0, interval_s=0.1)
        pathlib.Path({str(marker)!r}).write_text(str(holder.pid))
        while True:
            time.sleep(0.1)
    """)
    parent, child = _family(code, "none", marker)
    holder = int(marker.read_text())
    assert (shm / "psm_weights").is_file()
    try:
        parent.kill()
        parent.wait()
        wait_gone(child)
        wait_gone(holder, 10.0)  # ended by the forced exit, not left behind
    finally:
        if not gone(holder):
            os.kill(holder, 9)
    assert not (shm / "psm_weights").exists()


def test_of_two_deadlines_the_first_ends_the_process_and_runs_the_hooks_once() -> None:
    # the run watchdog's and the failed run's own deadline may both be running
    code = textwrap.dedent("""
        import threading, time
        from agent_tune.launch.lifeline import at_forced_exit, deadline
        at_forced_exit(lambda: print("hook", flush=True))
        at_forced_exit(lambda: time.sleep(0.5))  # the second deadline expires while the first runs its hooks
        deadline(0.2, "first", 3)
        deadline(0.3, "second", 4)
        time.sleep(10)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3 and proc.stdout.count("hook") == 1, (proc.returncode, proc.stdout, proc.stderr)


def test_after_the_shut_down_what_outlived_it_is_ended_and_its_shared_memory_files_removed(tmp_path: Path) -> None:
    # agent_tune.launch.train.run's last act: a process of the run still alive after Ray's shut-down (a vLLM engine
    # whose parent was killed) maps the run's files; waiting for it would leave them (a killed launcher's run left
    # vLLM's buffers and verl's 1 GiB bucket so), so it is ended first
    from agent_tune.launch.train import _end_and_clean_up
    from verl_ext.cpu.shm import ShmSnapshot

    snapshot = ShmSnapshot.take(directory=tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "psm_engine")], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        assert snapshot.observe() == {"psm_engine"}
        _end_and_clean_up(snapshot, wait_s=0)
        assert holder.wait(5) == -9 and os.listdir(tmp_path) == []
    finally:
        holder.kill()
        holder.wait(30)
