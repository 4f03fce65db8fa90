"""A tiny OpenAI-like server for the tests of agent_tune/testing/server_process.py: ``GET /v1/models`` lists the
models given; options make it slow to start, exit at once, ignore SIGTERM or start a child in its process group.

    python tests/testing/models_server.py PORT [--models a,b] [--delay S] [--exit CODE] [--ignore-term]
        [--child-pid FILE [--child-ignores-term]]
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

# the child: writes its pid (once its SIGTERM handling is set) and sleeps until signalled, or killed
CHILD = """import os, signal, sys, time
if sys.argv[1] == "1":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(sys.argv[2] + ".part", "w") as f:
    f.write(str(os.getpid()))
os.replace(sys.argv[2] + ".part", sys.argv[2])
time.sleep(600)
"""


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("port", type=int)
    p.add_argument("--models", default="m")
    p.add_argument("--delay", type=float, default=0.0)
    p.add_argument("--exit", type=int, default=None)
    p.add_argument("--ignore-term", action="store_true")
    p.add_argument("--child-pid", default=None)
    p.add_argument("--child-ignores-term", action="store_true")
    args = p.parse_args()
    print(f"starting on port {args.port}", flush=True)
    if args.exit is not None:
        print(f"boom: told to exit with {args.exit}", file=sys.stderr, flush=True)
        sys.exit(args.exit)
    if args.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.child_pid:
        subprocess.Popen([sys.executable, "-c", CHILD, "1" if args.child_ignores_term else "0", args.child_pid])
    time.sleep(args.delay)
    models = [{"id": name, "object": "model"} for name in args.models.split(",") if name]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path != "/v1/models":
                self.send_error(404)
                return
            body = json.dumps({"object": "list", "data": models}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    HTTPServer(("127.0.0.1", args.port), Handler).serve_forever()


if __name__ == "__main__":
    main()
