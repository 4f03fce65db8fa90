"""The run-folder lock (:mod:`agent_tune.utils.run_lock`): one holder at a time across processes, a gone holder's
lock taken over with a note, another host's refused, the refusal naming the run and how to stop it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from agent_tune.errors import ConfigError, exit_code
from agent_tune.utils.run_lock import LOCK_NAME, Holder, RunFolderBusy, RunLock, process_start

# Another process holding the lock of argv[1] until killed; says "held" once it has it.
HOLDER = textwrap.dedent("""
    import sys, time
    from agent_tune.utils.run_lock import RunLock
    lock = RunLock.folder(sys.argv[1])
    lock.acquire("agent-tune train --config-name other")
    print("held", flush=True)
    time.sleep(120)
""")


def _hold(run_dir: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(run_dir)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def _record(run_dir: Path, holder: Holder) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / LOCK_NAME).write_text(json.dumps(asdict(holder)))


def test_a_second_process_is_refused_naming_the_run_and_takes_over_once_it_is_killed(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    other = _hold(run_dir)
    try:
        with pytest.raises(RunFolderBusy) as refused:
            RunLock.folder(run_dir, elsewhere="choose another folder (trainer.default_local_dir=...)").acquire()
        message = str(refused.value)
        assert "\n" not in message and exit_code(refused.value) == 2 and isinstance(refused.value, ConfigError)
        assert message.startswith(f"{run_dir} is in use by another run: pid {other.pid} on host "
                                  f"{socket.gethostname()}, started 20")
        assert "command: agent-tune train --config-name other" in message
        assert f"stop it with `kill {other.pid}`" in message
        assert message.endswith("or choose another folder (trainer.default_local_dir=...)")
    finally:
        other.kill()
        other.wait()
    # killed (no clean release): its record is still there, its flock is not
    lock = RunLock.folder(run_dir)
    note = lock.acquire("mine")
    try:
        assert note is not None and note.startswith(f"took over the lock of {run_dir} from a run that is gone "
                                                    f"(pid {other.pid} ")
        assert lock.holder is not None and lock.holder.pid == os.getpid() and lock.holder.command == "mine"
    finally:
        lock.release()
    # a clean release leaves nobody to take over from
    again = RunLock.folder(run_dir)
    assert again.acquire() is None
    again.release()


def test_the_same_folder_twice_in_one_process_is_refused_too(tmp_path: Path) -> None:
    with RunLock.folder(tmp_path):
        with pytest.raises(RunFolderBusy, match=f"pid {os.getpid()} "):
            RunLock.folder(tmp_path).acquire()


def test_a_dead_or_reused_pid_is_taken_over(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(done.stdout)
    me = Holder.me("old run")
    for name, holder in (("dead", replace(me, pid=dead, ticks=None)),
                         ("reused", replace(me, ticks=(me.ticks or 0) + 1)),  # our pid, another start time
                         ("rebooted", replace(me, boot="another-boot"))):
        _record(tmp_path / name, holder)
        lock = RunLock.folder(tmp_path / name)
        assert "from a run that is gone" in (lock.acquire() or ""), name
        lock.release()


def test_a_live_recorded_holder_is_refused_even_where_the_flock_is_free(tmp_path: Path) -> None:
    # the record names a running process (ours, with its real start time) that holds no flock: a file system
    # where flock does not reach; refusing is the safe side
    _record(tmp_path, Holder.me("elsewhere on this host"))
    with pytest.raises(RunFolderBusy, match="command: elsewhere on this host"):
        RunLock.folder(tmp_path).acquire()


def test_another_hosts_lock_is_refused_with_how_to_clear_it(tmp_path: Path) -> None:
    _record(tmp_path, replace(Holder.me("agent-tune train"), host="node-7"))
    with pytest.raises(RunFolderBusy) as refused:
        RunLock.folder(tmp_path, elsewhere="choose another folder").acquire()
    message = str(refused.value)
    assert "on host node-7" in message and "stop it on node-7" in message
    assert f"if that run is gone delete {tmp_path / LOCK_NAME}" in message


def test_an_inherited_descriptor_keeps_the_folder_locked_after_its_first_holder_closes(tmp_path: Path) -> None:
    lock = RunLock.folder(tmp_path)
    lock.acquire("launcher")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], pass_fds=(lock.fd,))
    try:
        lock.set_child(child.pid)
        lock.hand_over()  # as --detach: the launcher returns, the child holds the folder
        with pytest.raises(RunFolderBusy) as refused:
            RunLock.folder(tmp_path).acquire()
        assert f"training child pid {child.pid}" in str(refused.value)
        assert f"`kill {os.getpid()} {child.pid}`" in str(refused.value)
    finally:
        child.kill()
        child.wait()
    # the child gone too, but the record names our live pid: refused until the launcher is gone
    with pytest.raises(RunFolderBusy):
        RunLock.folder(tmp_path).acquire()


def test_an_output_file_has_its_lock_beside_it(tmp_path: Path) -> None:
    lock = RunLock.file(tmp_path / "eval.jsonl")
    assert lock.lock_file == tmp_path / f".eval.jsonl{LOCK_NAME}"
    with lock:
        with pytest.raises(RunFolderBusy, match=f"^{tmp_path / 'eval.jsonl'} is in use .* or choose another "
                                                "output file$"):
            RunLock.file(tmp_path / "eval.jsonl").acquire()


def test_process_start_reads_proc_and_tells_a_gone_process(tmp_path: Path) -> None:
    if not Path("/proc/self/stat").is_file():
        pytest.skip("no /proc")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        ticks = process_start(proc.pid)
        assert isinstance(ticks, int) and ticks >= process_start(os.getpid())
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert process_start(proc.pid) is None


def test_without_flock_the_record_alone_decides(tmp_path: Path, monkeypatch) -> None:
    import errno

    from agent_tune.utils import run_lock

    def no_flock(fd: int, op: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(run_lock.fcntl, "flock", no_flock)
    with RunLock.folder(tmp_path):
        with pytest.raises(RunFolderBusy, match=f"pid {os.getpid()} "):
            RunLock.folder(tmp_path).acquire()
    lock = RunLock.folder(tmp_path)
    assert lock.acquire() is None  # released cleanly: free
    lock.release()
