"""agent_tune/testing/server_process.py with a real server process (tests/testing/models_server.py, an
``http.server`` answering ``GET /v1/models``): start with a log, wait (fail fast on exit, time out), stop the whole
process group (SIGTERM, SIGKILL after the grace period), the context manager."""

from __future__ import annotations

import json
import signal
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from agent_tune.testing.server_process import ServerProcess, ServerStartError, free_port, http_ready, openai_ready

SERVER = Path(__file__).with_name("models_server.py")


def models_server(tmp_path: Path, *flags: str, port: int | None = None) -> tuple[ServerProcess, str]:
    """The tiny server (not started) and its ``/v1`` URL."""
    port = free_port() if port is None else port
    cmd = [sys.executable, str(SERVER), str(port), *flags]
    return ServerProcess("the models server", cmd, tmp_path / "logs" / "server.log"), f"http://127.0.0.1:{port}/v1"


def running(pid: int) -> bool:
    """``pid`` is a process that has not ended (a zombie has)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_for_file(path: Path, timeout_s: float = 30.0) -> str:
    deadline = time.monotonic() + timeout_s
    while not (path.exists() and path.read_text()):
        assert time.monotonic() < deadline, f"{path} not written"
        time.sleep(0.05)
    return path.read_text()


def test_start_wait_use_stop(tmp_path) -> None:
    server, base = models_server(tmp_path, "--delay", "1.0", "--models", "smol,user")
    with server:
        pid = server.pid
        assert not openai_ready(base)()  # still in its delay
        up_s = server.wait_ready(openai_ready(base), timeout_s=60, poll_s=0.1)
        assert up_s >= 1.0
        with urllib.request.urlopen(f"{base}/models", timeout=5) as resp:
            assert [m["id"] for m in json.load(resp)["data"]] == ["smol", "user"]
        assert running(pid)
    assert not running(pid)
    assert server.proc is not None and server.proc.returncode == -signal.SIGTERM
    assert not openai_ready(base)()  # the port answers no more
    log = server.log.read_text()  # created with its folder; stdout and stderr both in it
    assert f"starting on port {base.split(':')[2].split('/')[0]}" in log and '"GET /v1/models HTTP/1.1" 200' in log


def test_an_exit_before_answering_fails_at_once_with_the_logs_tail(tmp_path) -> None:
    server, base = models_server(tmp_path, "--exit", "3")
    t0 = time.monotonic()
    with server, pytest.raises(ServerStartError) as caught:
        server.wait_ready(openai_ready(base), timeout_s=120, poll_s=0.1)
    assert time.monotonic() - t0 < 30  # not the timeout
    message = str(caught.value)
    assert message.startswith("the models server exited with 3 before it answered")
    assert str(server.log) in message and "boom: told to exit with 3" in message
    assert isinstance(caught.value, RuntimeError)  # what the fixtures catch


def test_no_answer_in_time_fails_and_the_server_is_stopped(tmp_path) -> None:
    server, base = models_server(tmp_path, "--models", "")  # answers, but lists no model: not ready
    with pytest.raises(ServerStartError, match=r"the models server did not answer in 1.5 s; the last lines of .*"
                                               r"server\.log:\n.*starting on port"):
        with server:
            server.wait_ready(openai_ready(base), timeout_s=1.5, poll_s=0.1)
    assert server.proc is not None and server.proc.returncode == -signal.SIGTERM  # the context manager stopped it


def test_a_server_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path) -> None:
    server, base = models_server(tmp_path, "--ignore-term")
    with server:
        server.wait_ready(openai_ready(base), timeout_s=60, poll_s=0.1)
        t0 = time.monotonic()
        assert server.stop(grace_s=1.0) == -signal.SIGKILL
        assert 1.0 <= time.monotonic() - t0 < 20
    assert server.stop() == -signal.SIGKILL  # again (and the context's exit): nothing more to do


@pytest.mark.parametrize("child_ignores_term", [False, True])
def test_stop_ends_the_whole_process_group(tmp_path, child_ignores_term) -> None:
    pid_file = tmp_path / "child.pid"
    flags = ["--child-pid", str(pid_file)] + (["--child-ignores-term"] if child_ignores_term else [])
    server, base = models_server(tmp_path, *flags)
    with server:
        server.wait_ready(openai_ready(base), timeout_s=60, poll_s=0.1)
        child = int(wait_for_file(pid_file))
        assert running(child)
        t0 = time.monotonic()
        assert server.stop(grace_s=2.0) == -signal.SIGTERM  # the server itself obeys SIGTERM
        # a child that ignores SIGTERM outlives its parent until the grace period ends, then is killed
        assert (time.monotonic() - t0 >= 2.0) == child_ignores_term
    deadline = time.monotonic() + 10  # reaped by init
    while running(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(child)


def test_the_log_tail_is_its_last_lines(tmp_path) -> None:
    server = ServerProcess("x", ["true"], tmp_path / "x.log")
    assert server.log_tail() == ""  # no log yet
    server.log.write_text("".join(f"line {i}\n" for i in range(1000)))
    assert server.log_tail(3) == "line 997\nline 998\nline 999"
    assert server.log_tail().splitlines()[0] == "line 960"  # 40 by default


def test_misuse_is_refused(tmp_path) -> None:
    server = ServerProcess("x", [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "x.log")
    assert server.stop() is None  # never started: nothing to stop
    with pytest.raises(RuntimeError, match="x was not started"):
        server.wait_ready(lambda: True, timeout_s=1)
    with server:
        with pytest.raises(RuntimeError, match=r"x was already started \(pid \d+\)"):
            server.start()
    assert server.proc is not None and server.proc.returncode == -signal.SIGTERM


def test_probes(tmp_path) -> None:
    nothing = f"http://127.0.0.1:{free_port()}/v1"
    assert not openai_ready(nothing)() and not http_ready(f"{nothing}/models")()
    server, base = models_server(tmp_path)
    with server:
        server.wait_ready(http_ready(f"{base}/models"), timeout_s=60, poll_s=0.1)
        assert openai_ready(base)() and openai_ready(base + "/")()
        assert not http_ready(f"{base}/other")()  # a 404 is not ready
