"""The nemo_gym adapter's failures through the contract, against a small stand-in HTTP server (runs without NeMo
Gym's own venv): a tool's failure is a counted tool error, a dropped connection ends the episode
``server_error``, a failed ``/verify`` scores 0 with its ``error``."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest

pytest.importorskip("httpx")

from agent_tune.envs import StopReason  # noqa: E402
from agent_tune.envs.nemo_gym.env import NemoGymEnv  # noqa: E402

TOOLS = [{"type": "function", "name": name, "parameters": {"type": "object", "properties": {}}}
         for name in ("ok", "broken", "die")]
ROW = {"responses_create_params": {"input": "Call the tools.", "tools": TOOLS}}


class _Handler(BaseHTTPRequestHandler):
    verify_fails = False

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/die":  # the server goes away mid-call: no answer, the connection closed
            self.close_connection = True
            self.connection.close()
            return
        status, body = {"/seed_session": (200, {}), "/ok": (200, {"result": "fine"}),
                        "/broken": (500, {"detail": "backend is down"}),
                        "/verify": (500, {"detail": "no grader"}) if type(self).verify_fails
                        else (200, {"reward": 1.0})}.get(self.path, (404, {}))
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture()
def url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Handler.verify_fails = False
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def call(name: str) -> str:
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": {}})}\n</tool_call>'


def test_a_failing_tool_is_a_tool_error_and_verify_scores(url: str) -> None:
    env = NemoGymEnv(base_url=url, call_timeout=5, start_timeout=5)
    env.reset(row=ROW)
    broken = env.step(call("broken") + call("ok"))
    assert not broken.done and broken.info["format_errors"] == 0
    end = env.step("done")
    assert end.done and end.reward == 1.0 and end.episode.tool_errors == 1 and end.info["tool_errors"] == 1
    assert end.episode.stop_reason is StopReason.DONE and end.episode.error is None


def test_a_dropped_connection_ends_the_episode_as_a_server_error(url: str) -> None:
    env = NemoGymEnv(base_url=url, call_timeout=5, start_timeout=5)
    env.reset(row=ROW)
    end = env.step(call("ok") + call("die") + call("ok"))
    assert end.done and end.episode.stop_reason is StopReason.SERVER_ERROR and end.reward == 0.0
    assert end.info["error"].startswith("POST /die failed") and end.episode.accuracy == 0.0
    assert [m["content"] for m in end.observation.messages][1].startswith("Error: the environment server stopped")
    assert len(end.observation.messages) == 2  # the call after the lost session was not run


def test_a_failed_verify_scores_zero_with_its_error(url: str) -> None:
    _Handler.verify_fails = True
    env = NemoGymEnv(base_url=url, call_timeout=5, start_timeout=5)
    env.reset(row=ROW)
    end = env.step("done")
    assert end.done and end.reward == 0.0 and end.episode.stop_reason is StopReason.SERVER_ERROR
    assert end.info["error"].startswith("verify failed: /verify answered HTTP 500")
