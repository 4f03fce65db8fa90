"""``agent-tune view --serve``: the page on 127.0.0.1, following a run while it trains.

``GET /`` is the page (:func:`agent_tune.view.page.render_page`, marked live); the page asks
``GET /updates?rows=N&shared=S`` every few seconds and gets what it lacks (:meth:`agent_tune.view.page.View.updates`:
the episodes recorded since, the curves and report as they are now). Only the loopback interface is served: the
records hold prompts and model output.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from agent_tune.view.page import View, render_page

HOST = "127.0.0.1"


class ViewServer(ThreadingHTTPServer):
    """An HTTP server for one :class:`View`; requests are answered one at a time over it (a lock), since a poll
    reads the run's files and grows the view."""

    daemon_threads = True

    def __init__(self, view: View, port: int = 0) -> None:
        self.view = view
        self.lock = threading.Lock()
        super().__init__((HOST, port), _Handler)

    @property
    def url(self) -> str:
        """The page's address (the port the system chose when asked for port 0)."""
        return f"http://{HOST}:{self.server_address[1]}/"


class _Handler(BaseHTTPRequestHandler):
    server: ViewServer

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        url = urlparse(self.path)
        if url.path == "/favicon.ico":  # browsers ask; the page has none
            self.send_response(204)
            self.end_headers()
            return
        try:
            with self.server.lock:
                if url.path in ("/", "/index.html"):
                    body, kind = render_page(self.server.view, live=True).encode("utf-8"), "text/html; charset=utf-8"
                elif url.path == "/updates":
                    query = parse_qs(url.query)
                    updates = self.server.view.updates(_int(query, "rows"), _int(query, "shared"))
                    body = json.dumps(updates, ensure_ascii=False, default=str).encode("utf-8")
                    kind = "application/json"
                else:
                    self.send_error(404)
                    return
        except Exception as exc:  # noqa: BLE001 - a run's file being rewritten: the page retries at its next poll
            self.send_error(500, explain=f"{type(exc).__name__}: {exc}")
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - http.server's signature
        pass  # the page polls every few seconds: no line per request


def _int(query: dict[str, list[str]], key: str) -> int:
    try:
        return max(0, int(query.get(key, ["0"])[0]))
    except ValueError:
        return 0
