"""The local (bubblewrap) sandbox: escape attempts must fail and come back to the caller as errors."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from agent_tune.tools import ExecutionLimits, LocalSandbox, LocalSandboxConfig, SandboxUnavailableError

from .sandbox_helpers import is_root, wait_no_children

FAST = ExecutionLimits(cpu_seconds=3, wall_seconds=8, memory_mb=512, max_processes=16)


@pytest.fixture(scope="module")
def box():
    sandbox = LocalSandbox(limits=FAST, max_concurrency=4)
    yield sandbox
    sandbox.close()


def _failed(result) -> bool:
    """Reported to the model as a failure: non-zero exit with a traceback, or a sandbox error."""
    return (result.exit_code not in (0, None) and result.stderr.strip() != "") or result.error is not None


def test_plain_program_runs(box):
    r = box.run("import sys\nprint(sum(range(10)))\nprint('err', file=sys.stderr)")
    assert r.ok and r.stdout == "45\n" and r.stderr == "err\n"


def test_exception_traceback_shows_program_lines(box):
    r = box.run("x = 1\ny = x / 0\n")
    assert r.exit_code == 1 and "ZeroDivisionError" in r.stderr
    assert 'File "<code>", line 2' in r.stderr and "y = x / 0" in r.stderr
    assert "exec(" not in r.stderr  # the bootstrap frame is hidden


def test_network_outside_unreachable(box):
    r = box.run("import socket\nsocket.create_connection(('1.1.1.1', 53), timeout=3)\nprint('CONNECTED')")
    assert "CONNECTED" not in r.stdout and _failed(r)
    assert "OSError" in r.stderr or "unreachable" in r.stderr.lower()
    r = box.run("import socket\nprint(socket.getaddrinfo('pypi.org', 443))")
    assert _failed(r) and "gaierror" in r.stderr


def test_host_loopback_unreachable(box):
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    accepted: list = []
    stop = threading.Event()

    def accept_loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                accepted.append(conn)
            except OSError:
                pass

    t = threading.Thread(target=accept_loop, daemon=True)
    t.start()
    try:
        # the listener is reachable from the host...
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
        time.sleep(0.3)
        host_accepts = len(accepted)
        assert host_accepts == 1
        # ...but not from the sandbox, whose loopback is its own
        r = box.run(
            f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=3)\nprint('CONNECTED')"
        )
        time.sleep(0.3)
        assert "CONNECTED" not in r.stdout and _failed(r)
        assert "ConnectionRefusedError" in r.stderr
        assert len(accepted) == host_accepts
    finally:
        stop.set()
        t.join()
        server.close()
        for c in accepted:
            c.close()


def test_host_files_invisible(box, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET")
    for path in (str(secret), "/root/.bashrc", "/etc/passwd", "/work/main/setup.py", str(Path.cwd() / "setup.py")):
        r = box.run(f"print(open({path!r}).read())")
        assert "TOP-SECRET" not in r.stdout and _failed(r), path
        assert "FileNotFoundError" in r.stderr or "PermissionError" in r.stderr, (path, r.stderr)
    r = box.run(
        "import os\nprint(sorted(os.listdir('/')))\n"
        "print(os.path.exists('/root'), os.path.exists('/work'), os.path.exists('/home'))"
    )
    assert r.ok
    top = eval(r.stdout.splitlines()[0])  # our own test output, not model output
    assert set(top) <= {"bin", "dev", "lib", "lib32", "lib64", "libx32", "opt", "proc", "sbin", "tmp", "usr"}
    assert r.stdout.splitlines()[1] == "False False False"


def test_writes_outside_tmp_fail_and_tmp_is_private(box):
    for path in ("/usr/evil.txt", "/opt/python/evil.txt", "/evil.txt", "/proc/evil"):
        r = box.run(f"open({path!r}, 'w').write('x')\nprint('WROTE')")
        assert "WROTE" not in r.stdout and _failed(r), path
        assert any(e in r.stderr for e in ("OSError", "PermissionError", "Read-only", "FileNotFoundError")), r.stderr
    marker = f"agent_tune_sandbox_marker_{os.getpid()}"
    r = box.run(
        f"open('/tmp/{marker}', 'w').write('x')\nimport os\nprint(os.getcwd(), os.path.exists('/tmp/{marker}'))"
    )
    assert r.ok and r.stdout == "/tmp True\n"
    assert not Path("/tmp", marker).exists()
    r = box.run(f"import os\nprint(os.path.exists('/tmp/{marker}'))")  # a fresh sandbox per run
    assert r.stdout == "False\n"


def test_signals_cannot_reach_host_processes(box):
    victim = subprocess.Popen(["sleep", "60"])
    try:
        r = box.run(f"import os, signal\nos.kill({victim.pid}, signal.SIGKILL)\nprint('KILLED')")
        assert "KILLED" not in r.stdout and "ProcessLookupError" in r.stderr
        r = box.run(f"import os, signal\nos.kill({os.getpid()}, signal.SIGKILL)\nprint('KILLED')")
        assert "KILLED" not in r.stdout and "ProcessLookupError" in r.stderr
        # the parent seen from inside is the sandbox's own init, never a host process
        r = box.run(
            "import os, signal\nprint(os.getppid())\n"
            "os.kill(os.getppid(), signal.SIGKILL)\nos.kill(-1, signal.SIGKILL)"
        )
        assert r.stdout.splitlines()[0] == "1"
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait()
    assert box.run("print('still fine')").stdout == "still fine\n"


def test_no_capabilities_and_clean_environment(box, monkeypatch):
    monkeypatch.setenv("AGENT_TUNE_HOST_SECRET", "leak")
    r = box.run(
        "import os\n"
        "caps = dict(l.split(':', 1) for l in open('/proc/self/status') if l.startswith('Cap'))\n"
        "print(caps['CapEff'].strip(), caps['CapBnd'].strip())\n"
        "print('AGENT_TUNE_HOST_SECRET' in os.environ, os.getuid())\n"
    )
    assert r.ok
    eff, bnd = r.stdout.splitlines()[0].split()
    assert int(eff, 16) == 0 and int(bnd, 16) == 0
    assert r.stdout.splitlines()[1] == "False 65534"


FORK_BOMB = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"


def test_fork_bomb_is_contained(box):
    limits = FAST.__class__(**{**FAST.__dict__, "wall_seconds": 3.0})
    before = len(__import__("psutil").pids())
    t0 = time.monotonic()
    r = box.run(FORK_BOMB, limits)
    assert time.monotonic() - t0 < 10
    assert r.timed_out and r.exit_code is None and "wall-clock" in r.error
    assert wait_no_children() == []
    assert len(__import__("psutil").pids()) < before + 20
    # the process cap is what stopped it: count how many forks succeed
    r = box.run(
        "import os, time\nn = 0\ntry:\n    while True:\n"
        "        if os.fork() == 0:\n            time.sleep(5); os._exit(0)\n"
        "        n += 1\nexcept OSError as e:\n    print(n, e.errno)\n",
        limits,
    )
    forks, errno = r.stdout.split()
    assert int(forks) < FAST.max_processes and errno == "11"  # EAGAIN
    assert wait_no_children() == []


def test_fork_bomb_does_not_starve_a_neighbour(box):
    limits = FAST.__class__(**{**FAST.__dict__, "wall_seconds": 4.0})
    normal = (
        "import os, time\ntime.sleep(1)\npids = [os.fork() for _ in range(4)]\n"
        "if 0 in pids: os._exit(0)\nfor p in pids: os.waitpid(p, 0)\nprint('neighbour ok')"
    )
    results = box.run_batch([FORK_BOMB, normal, FORK_BOMB], limits)
    assert results[1].ok and results[1].stdout == "neighbour ok\n"
    assert results[0].timed_out and results[2].timed_out


def test_memory_bomb(box):
    r = box.run("x = bytearray(4 * 1024 ** 3)\nprint('ALLOCATED')")
    assert "ALLOCATED" not in r.stdout and "MemoryError" in r.stderr and _failed(r)
    r = box.run("chunks = []\nwhile True:\n    chunks.append(b'x' * (16 * 1024 ** 2))")
    assert "MemoryError" in r.stderr and _failed(r)


def test_infinite_loop_cpu_limit(box):
    limits = ExecutionLimits(cpu_seconds=1, wall_seconds=20)
    r = box.run("while True:\n    pass", limits)
    # killed by the CPU limit, not by the 20 s wall clock (no wall-time bound here: a loaded box stretches it)
    assert not r.timed_out and r.error and "SIGXCPU" in r.error and "CPU time limit" in r.error


def test_sleeping_program_wall_clock_limit(box):
    limits = ExecutionLimits(cpu_seconds=10, wall_seconds=1.5)
    t0 = time.monotonic()
    r = box.run("import time\nprint('started', flush=True)\ntime.sleep(60)", limits)
    assert time.monotonic() - t0 < 30  # not the program's 60 s sleep (generous: a loaded box is slow)
    assert r.timed_out and r.exit_code is None and r.stdout == "started\n"
    assert "wall-clock limit" in r.error
    assert wait_no_children() == []


def test_output_flood_is_cut_and_killed(box):
    limits = ExecutionLimits(max_output_bytes=10_000, wall_seconds=10)
    t0 = time.monotonic()
    r = box.run("while True:\n    print('x' * 1000)", limits)
    assert time.monotonic() - t0 < 5
    assert r.truncated and not r.timed_out and r.exit_code is None
    assert len(r.stdout.encode()) == 10_000 and "OutputLimitExceeded" in r.error
    r = box.run("import sys\nwhile True:\n    sys.stderr.write('e' * 1000)", limits)
    assert r.truncated and len(r.stderr.encode()) == 10_000


def test_huge_file_and_full_tmp(box):
    limits = ExecutionLimits(max_file_size_mb=4, tmp_size_mb=16)
    r = box.run("with open('/tmp/big', 'wb') as f:\n    f.write(b'x' * (64 * 1024 ** 2))\nprint('WROTE')", limits)
    assert "WROTE" not in r.stdout and "File too large" in r.stderr
    r = box.run(
        "for i in range(10):\n    with open(f'/tmp/part{i}', 'wb') as f:\n"
        "        f.write(b'x' * (3 * 1024 ** 2))\nprint('WROTE')",
        limits,
    )
    assert "WROTE" not in r.stdout and "No space left on device" in r.stderr


def test_open_files_limit(box):
    r = box.run("fs = [open('/dev/null') for _ in range(10000)]", ExecutionLimits(max_open_files=64))
    assert "Too many open files" in r.stderr


def test_limits_cannot_be_raised(box):
    r = box.run("import resource\nresource.setrlimit(resource.RLIMIT_NPROC, (10**6, 10**6))\nprint('RAISED')")
    assert "RAISED" not in r.stdout and "ValueError" in r.stderr


def test_unavailable_bwrap_fails_at_construction(tmp_path):
    with pytest.raises(SandboxUnavailableError, match="not an executable"):
        LocalSandbox(LocalSandboxConfig(bwrap_path=str(tmp_path / "missing-bwrap")))
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    with pytest.raises(SandboxUnavailableError, match="start-up check.*No permissions"):
        LocalSandbox(LocalSandboxConfig(bwrap_path=str(fake)))


def test_a_bwrap_that_does_not_isolate_is_refused(tmp_path):
    """A 'bwrap' that runs the command without namespaces fails the start-up check (no silent fallback)."""
    import sys

    exe = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    fake = tmp_path / "bwrap"
    # drops every bwrap option and runs the host interpreter directly (the probe's own code only)
    fake.write_text(f'#!/bin/sh\nwhile [ "$1" != "--" ]; do shift; done\nshift; shift\nexec {exe} "$@"\n')
    fake.chmod(0o755)
    with pytest.raises(SandboxUnavailableError, match="start-up check"):
        LocalSandbox(LocalSandboxConfig(bwrap_path=str(fake)))


def test_bad_limits_rejected():
    with pytest.raises(ValueError, match="cpu_seconds"):
        ExecutionLimits(cpu_seconds=0)
    with pytest.raises(ValueError, match="process_limit"):
        LocalSandboxConfig(process_limit="none")  # type: ignore[arg-type]


@pytest.mark.skipif(not is_root() or not os.path.exists("/usr/bin/python3"), reason="root-only path")
def test_root_without_cgroup_drops_to_unprivileged_uid():
    """As root, process_limit='rlimit' starts bwrap as an unprivileged host uid so RLIMIT_NPROC holds."""
    box = LocalSandbox(LocalSandboxConfig(python_executable="/usr/bin/python3", process_limit="rlimit"), limits=FAST)
    try:
        assert box.process_limit_method == "rlimit"
        assert host_uids_of_sandboxed_program(box) == {65534}  # not host root
        limits = ExecutionLimits(wall_seconds=3, max_processes=16)
        r = box.run(
            "import os, time\nn = 0\ntry:\n    while True:\n"
            "        if os.fork() == 0:\n            time.sleep(5); os._exit(0)\n"
            "        n += 1\nexcept OSError as e:\n    print(n, e.errno)\n",
            limits,
        )
        forks, errno = r.stdout.split()
        assert int(forks) < 16 and errno == "11"
    finally:
        box.close()
    assert wait_no_children() == []


def host_uids_of_sandboxed_program(box) -> set[int]:
    """Run a sleeping program and read, from the host, the real uid of the python inside the sandbox."""
    import psutil

    with ThreadPoolExecutor(1) as pool:
        fut = pool.submit(box.run, "import time\nprint('up', flush=True)\ntime.sleep(3)")
        uids: set[int] = set()
        deadline = time.monotonic() + 5
        while not uids and time.monotonic() < deadline:
            for p in psutil.Process().children(recursive=True):
                try:
                    if "resource" in " ".join(p.cmdline()) and "bwrap" not in p.name():
                        uids.add(p.uids().real)
                except psutil.Error:
                    pass
            time.sleep(0.05)
        assert fut.result().ok
    return uids


@pytest.mark.skipif(not is_root(), reason="root-only path")
def test_root_cgroup_mode_maps_to_host_root_and_uses_pids_cgroup(box):
    """Documents the root default: sandbox uid maps to host root, so the pids cgroup is the process cap."""
    assert box.process_limit_method == "cgroup"
    assert host_uids_of_sandboxed_program(box) == {0}
    r = box.run("print(open('/proc/self/cgroup').read())")
    assert r.ok  # the cgroup namespace hides the host path


@pytest.mark.skipif(not is_root(), reason="root-only path")
def test_root_rlimit_mode_with_unreadable_runtime_fails_clearly():
    """The venv's runtime under /root is unreadable to uid 65534: a clear start-up error, no fallback."""
    import sys

    exe = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    if not exe.startswith("/root/"):
        pytest.skip("the runtime is readable by other users here")
    with pytest.raises(SandboxUnavailableError, match="must be able to read"):
        LocalSandbox(LocalSandboxConfig(process_limit="rlimit"))
