"""Shared-memory cleanup removes only this run's files: new, matching vLLM's patterns, seen held by the run's own
processes, and no longer used; another run's files created meanwhile survive, mapped or not."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from verl_ext.cpu.shm import ShmSnapshot, process_tree

# Creates and maps a file (argv[1]), says so on stdout, and holds it until its stdin closes (or argv[2] seconds;
# with a third argument, argv[2] seconds whatever stdin does).
HOLDER = """
import mmap, sys, time, select
with open(sys.argv[1], "wb") as fh:
    fh.write(b"\\0" * 4096)
fh = open(sys.argv[1], "r+b")
mapping = mmap.mmap(fh.fileno(), 4096)
print("holding", flush=True)
if len(sys.argv) > 3:
    time.sleep(float(sys.argv[2]))
else:
    select.select([sys.stdin], [], [], float(sys.argv[2]))
"""


def _hold(path: Path, seconds: float = 30.0) -> subprocess.Popen:
    """A child of this process (so of the run's tree) holding ``path`` mapped."""
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), str(seconds)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "holding"
    return proc


def _hold_outside_the_tree(path: Path, seconds: float) -> int:
    """Another run's process: started through a shell that exits at once, so it is no descendant of this process;
    it holds ``path`` mapped for ``seconds``, then lets go. Returns its pid."""
    ready = path.with_name(f"ready-{path.name}.txt")  # a name no pattern matches
    script = f"{sys.executable} -c '{HOLDER}' {path} {seconds} sleep </dev/null >{ready} 2>&1 & echo $!"
    pid = int(subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout.strip())
    deadline = time.monotonic() + 30
    while "holding" not in (ready.read_text() if ready.exists() else ""):
        assert time.monotonic() < deadline, "the other run's process did not start"
        time.sleep(0.05)
    return pid


def _gone(pid: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while os.path.exists(f"/proc/{pid}") and "Z" not in _state(pid):
        assert time.monotonic() < deadline, f"process {pid} did not exit"
        time.sleep(0.05)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def test_only_files_the_runs_processes_held_are_removed(tmp_path: Path) -> None:
    (tmp_path / "psm_old").write_bytes(b"x")
    snap = ShmSnapshot.take(directory=tmp_path)
    ours = _hold(tmp_path / "psm_ours")
    held = _hold(tmp_path / "sem.mp-held")
    (tmp_path / "psm_unseen").write_bytes(b"x")  # created since the start, held by no process of the run
    (tmp_path / "other_file").write_bytes(b"x")
    assert snap.observe() == {"psm_ours", "sem.mp-held"}
    ours.stdin.close()
    ours.wait(30)
    removed = snap.cleanup(wait_s=0)  # sem.mp-held is still mapped: left for now
    assert removed == ["psm_ours"]
    assert sorted(os.listdir(tmp_path)) == ["other_file", "psm_old", "psm_unseen", "sem.mp-held"]
    held.stdin.close()
    held.wait(30)
    assert snap.cleanup(wait_s=0) == ["sem.mp-held"]  # once nobody maps it, the run's leftover goes too
    assert sorted(os.listdir(tmp_path)) == ["other_file", "psm_old", "psm_unseen"]


def test_a_weight_sync_bucket_left_by_a_stopped_sync_is_removed(tmp_path: Path) -> None:
    # verl's shared-memory weight transfer: a run stopped during a sync never unlinks the bucket (1 GiB on CPU)
    snap = ShmSnapshot.take(directory=tmp_path)
    bucket = _hold(tmp_path / "verl_weights_0123abcd")
    assert snap.observe() == {"verl_weights_0123abcd"}
    bucket.stdin.close()
    bucket.wait(30)
    assert snap.cleanup(wait_s=0) == ["verl_weights_0123abcd"] and os.listdir(tmp_path) == []


def test_two_runs_side_by_side_keep_each_others_files(tmp_path: Path) -> None:
    """A run cleaning up beside another (a training beside a replay): the other run's semaphore, created after this
    run started, seen held by the other run's process and mapped by no process at the moment of the clean-up,
    survives; this run's own files go."""
    snap = ShmSnapshot.take(directory=tmp_path)
    snap.watch(interval_s=0.1)
    other = _hold_outside_the_tree(tmp_path / "sem.mp-other", seconds=1.0)
    assert other not in process_tree(os.getpid())
    ours = _hold(tmp_path / "psm_ours")
    deadline = time.monotonic() + 10
    while "psm_ours" not in snap.owned:  # the watcher's look finds this run's file
        assert time.monotonic() < deadline
        time.sleep(0.05)
    ours.stdin.close()
    ours.wait(30)
    _gone(other)  # the other run's process let go of its file: nothing maps it now
    removed = snap.cleanup(wait_s=0)
    assert removed == ["psm_ours"] and "sem.mp-other" not in snap.owned and "sem.mp-other" in snap.foreign
    assert (tmp_path / "sem.mp-other").exists()


def test_a_process_of_the_run_it_did_not_start_is_rooted_by_roots_from(tmp_path: Path) -> None:
    """A run that joined a Ray cluster: its actor here is the cluster raylet's child, not a descendant of the run's
    root. Named by ``roots_from`` (the GCS's answer), its file is the run's and goes once it lets go; a ``roots_from``
    that fails (a GCS not answering) counts as no root, and the same file of a process no root reaches stays."""
    snap = ShmSnapshot.take(directory=tmp_path)
    actor = _hold_outside_the_tree(tmp_path / "psm_actor", seconds=1.0)
    stranger = _hold_outside_the_tree(tmp_path / "psm_stranger", seconds=1.0)
    assert actor not in process_tree(os.getpid())
    snap.roots_from = lambda: (_ for _ in ()).throw(ConnectionError("GCS down"))
    assert snap.observe() == set()
    snap.roots_from = lambda: [actor]
    assert snap.observe() == {"psm_actor"} and actor in snap.live_processes()
    _gone(actor)
    _gone(stranger)
    assert snap.cleanup(wait_s=0) == ["psm_actor"]
    assert sorted(os.listdir(tmp_path)) == ["psm_stranger", "ready-psm_actor.txt", "ready-psm_stranger.txt"]


def test_a_file_held_briefly_between_two_looks_is_still_the_runs(tmp_path: Path) -> None:
    """A semaphore a process of the run makes and lets go of within a second, long before the next timed look (one a
    minute here), and never unlinks: its new name triggers a look at once, so the clean-up removes it."""
    snap = ShmSnapshot.take(directory=tmp_path)
    snap.watch(interval_s=60.0, list_s=0.05)
    brief = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "sem.mp-brief"), "1.0"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert brief.stdout.readline().strip() == "holding"
    brief.wait(30)  # let go after a second, the file left behind
    assert snap.cleanup(wait_s=0) == ["sem.mp-brief"]
    assert os.listdir(tmp_path) == []


def test_a_semaphore_no_process_was_seen_holding_is_removed(tmp_path: Path) -> None:
    """A semaphore made and let go of before any look could see its holder (a process killed as it made it): no
    process can be using it, so it goes; another kind of file nobody was seen holding stays (its maker may map it
    later), and so does a semaphore that existed at the snapshot."""
    (tmp_path / "sem.mp-old").write_bytes(b"x")
    snap = ShmSnapshot.take(directory=tmp_path)
    (tmp_path / "sem.mp-stray").write_bytes(b"x")
    (tmp_path / "psm_unheld").write_bytes(b"x")
    assert snap.cleanup(wait_s=0) == ["sem.mp-stray"]
    assert sorted(os.listdir(tmp_path)) == ["psm_unheld", "sem.mp-old"]


def test_nothing_new_nothing_removed(tmp_path: Path) -> None:
    (tmp_path / "psm_a").write_bytes(b"x")
    assert ShmSnapshot.take(directory=tmp_path).cleanup(wait_s=0) == []
    assert os.listdir(tmp_path) == ["psm_a"]


def test_the_process_tree_holds_the_children_not_the_parent() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        tree = process_tree(os.getpid())
        assert {os.getpid(), child.pid} <= tree and os.getppid() not in tree
    finally:
        child.kill()
        child.wait(30)


def test_a_process_of_the_run_reparented_when_its_parent_died_stays_the_runs(tmp_path: Path) -> None:
    """A vLLM engine whose parent (a Ray worker) was killed lives on under init: it is no longer a descendant of
    the run's root, but the snapshot saw it in the run's tree, so it is still one of the run's live processes."""
    ready = tmp_path / "ready.txt"
    script = f"{sys.executable} -c '{HOLDER}' {tmp_path / 'psm_engine'} 30 sleep >{ready} 2>&1 & echo $!; read x"
    parent = subprocess.Popen(["sh", "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    engine = int(parent.stdout.readline())
    try:
        deadline = time.monotonic() + 30
        while "holding" not in (ready.read_text() if ready.exists() else ""):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        snap = ShmSnapshot.take(directory=tmp_path)
        snap.observe()
        assert {parent.pid, engine} <= snap.live_processes() and os.getpid() not in snap.live_processes()
        parent.stdin.close()  # the engine's parent exits
        parent.wait(30)
        assert engine not in process_tree(os.getpid())
        assert snap.live_processes() == {engine}
    finally:
        os.kill(engine, 9)
    _gone(engine)
    assert snap.live_processes() == set()


def test_a_reused_pid_is_not_taken_for_the_runs_process() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        snap = ShmSnapshot.take()
        snap.observe()
        assert child.pid in snap.live_processes()
        snap._pids[child.pid] = "0"  # as if the run's process had gone and another got its pid
        assert child.pid not in snap.live_processes()
    finally:
        child.kill()
        child.wait(30)
