"""The sandbox_fusion backend against a tiny local HTTP server that mimics SandboxFusion's /run_code.

The test double never executes code: it answers from a table keyed by the submitted program.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agent_tune.tools import (
    ExecutionLimits,
    SandboxConfig,
    SandboxFusionConfig,
    SandboxFusionSandbox,
    SandboxUnavailableError,
    make_sandbox,
)


def _finished(stdout="", stderr="", code=0, status="Finished"):
    return {
        "status": "Success" if code == 0 and status == "Finished" else "Failed",
        "message": "",
        "compile_result": None,
        "run_result": {
            "status": status, "execution_time": 0.01, "return_code": code, "stdout": stdout, "stderr": stderr
        },
        "executor_pod_name": None,
        "files": {},
    }


CANNED = {
    "print(6 * 7)": _finished("42\n"),
    "1/0": _finished("", "Traceback...\nZeroDivisionError: division by zero\n", 1),
    "while True: pass": _finished("", "", None, "TimeLimitExceeded"),
    "print('x' * 100)": _finished("x" * 100 + "\n"),
}


class FakeFusion:
    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.sandbox_errors_left = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append({"path": self.path, **body})
                if self.path != "/run_code":
                    self.send_response(404)
                    self.end_headers()
                    return
                if fake.sandbox_errors_left > 0:
                    fake.sandbox_errors_left -= 1
                    reply = {"status": "SandboxError", "message": "pod crashed", "run_result": None}
                else:
                    reply = CANNED.get(body["code"], _finished("", "unknown program", 1))
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake():
    server = FakeFusion()
    yield server
    server.close()


def test_maps_replies_and_sends_documented_payload(fake):
    box = make_sandbox(SandboxConfig(backend="sandbox_fusion", sandbox_fusion=SandboxFusionConfig(url=fake.url + "/")))
    assert isinstance(box, SandboxFusionSandbox)
    try:
        ok = box.run("print(6 * 7)", ExecutionLimits(wall_seconds=7, memory_mb=256))
        assert ok.ok and ok.stdout == "42\n"
        req = fake.requests[-1]
        assert req["path"] == "/run_code" and req["language"] == "python" and req["code"] == "print(6 * 7)"
        assert req["run_timeout"] == 7 and req["memory_limit_MB"] == 256
        err = box.run("1/0")
        assert err.exit_code == 1 and "ZeroDivisionError" in err.stderr and not err.ok
        slow = box.run("while True: pass")
        assert slow.timed_out and slow.exit_code is None and "time limit" in slow.error
        cut = box.run("print('x' * 100)", ExecutionLimits(max_output_bytes=10))
        assert cut.truncated and cut.stdout == "x" * 10
        batch = box.run_batch(["print(6 * 7)", "1/0"] * 5)
        assert [r.exit_code for r in batch] == [0, 1] * 5
    finally:
        box.close()


def test_sandbox_errors_are_retried_then_reported(fake):
    box = SandboxFusionSandbox(SandboxFusionConfig(url=fake.url, max_retries=2))
    fake.sandbox_errors_left = 2
    assert box.run("print(6 * 7)").stdout == "42\n"  # two failures, third attempt succeeds
    fake.sandbox_errors_left = 3
    r = box.run("print(6 * 7)")
    assert r.exit_code is None and "SandboxError: pod crashed" in r.error
    box.close()


def test_unreachable_server_fails_at_construction():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    with pytest.raises(SandboxUnavailableError, match="start-up check"):
        SandboxFusionSandbox(SandboxFusionConfig(url=f"http://127.0.0.1:{port}", max_retries=0))
    with pytest.raises(ValueError, match="http"):
        SandboxFusionSandbox(SandboxFusionConfig(url="localhost:8080"))
