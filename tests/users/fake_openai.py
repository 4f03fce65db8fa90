"""A tiny OpenAI-compatible server on loopback for the user tests: answers ``GET /models`` and
``POST /chat/completions`` (any POST) with replies a test queues (a dict is sent as JSON, a str as a raw body,
an int as that HTTP status, a ``(status, dict)`` pair as that status with that JSON body); once the queue is
empty it repeats ``default`` (a callable: called with the request body, its result sent as above). Records
every request body (``requests``), and the path and headers of every request (``seen``)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agent_tune.testing.server_process import free_port


def completion(content: str | None = None, tool_calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [{"id": f"c{i}", "type": "function",
                                  "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments", {}))}}
                                 for i, c in enumerate(tool_calls)]
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    return {"id": "x", "object": "chat.completion", "model": "fake-model", "created": 0, "choices": [choice]}


class FakeOpenAI:
    def __init__(self, model: str = "user-model", default: Any = None) -> None:
        self.model = model
        self.queue: list[Any] = []
        self.default = default if default is not None else completion("Please help me.")
        self.requests: list[dict[str, Any]] = []
        self.seen: list[tuple[str, str, dict[str, str]]] = []  # (method, path, headers with lower-case names)
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _record(self) -> None:
                owner.seen.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))

            def do_GET(self) -> None:  # noqa: N802
                self._record()
                if self.path.endswith("/models"):
                    self._send(200, json.dumps({"data": [{"id": owner.model}]}).encode())
                else:
                    self._send(404, b"{}")

            def do_POST(self) -> None:  # noqa: N802
                self._record()
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                owner.requests.append(body)
                item = owner.queue.pop(0) if owner.queue else owner.default
                if callable(item):
                    item = item(body)
                if isinstance(item, tuple):
                    self._send(item[0], json.dumps(item[1]).encode())
                elif isinstance(item, int):
                    self._send(item, b'{"error": "boom"}')
                elif isinstance(item, str):
                    self._send(200, item.encode())
                else:
                    self._send(200, json.dumps(item).encode())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def user_config(self, **extra: Any) -> dict[str, Any]:
        return {"kind": "llm", "base_url": self.base_url, "model": self.model, "backoff_s": 0.0, "max_retries": 2,
                "timeout_s": 5.0, **extra}

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


def free_port_url() -> str:
    """A loopback URL where nothing listens."""
    return f"http://127.0.0.1:{free_port()}/v1"
