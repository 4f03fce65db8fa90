"""Kill a CLI run mid-way (SIGKILL), rerun the same command: no entry lost, none duplicated."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from agent_tune.eval.store import read_results
from agent_tune.testing.scripted_server import ScriptedServer, oracle_script

REPO = Path(__file__).resolve().parents[2]
IDS = [f"multi_turn_base_{i}" for i in range(8)] + [f"multi_turn_miss_param_{i}" for i in range(8, 12)]


class ServerThread:
    """A ScriptedServer on its own event loop in a background thread (so a subprocess can use it)."""

    def __init__(self, **kw):
        self.kw = kw
        self.ready = threading.Event()
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        asyncio.set_event_loop(self.loop)
        self.server = ScriptedServer(**self.kw)
        self.loop.run_until_complete(self.server.__aenter__())
        self.ready.set()
        self.loop.run_forever()
        self.loop.run_until_complete(self.server.__aexit__(None, None, None))

    def __enter__(self):
        self.thread.start()
        assert self.ready.wait(30)
        return self.server

    def __exit__(self, *exc):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)


def records_in(path: Path) -> int:
    if not path.exists():
        return 0
    return sum(1 for line in path.read_text().splitlines() if line.startswith('{"test_id"'))


def test_kill_and_resume(qwen_tok, qwen_tok_dir, tmp_path):
    out = tmp_path / "r.jsonl"
    with ServerThread(tokenizer=qwen_tok, script=oracle_script(IDS), test_ids=IDS, latency=0.15) as srv:
        cmd = [sys.executable, "-m", "agent_tune.eval.cli", "--base-url", srv.base_url, "--model", "scripted",
               "--ids", *IDS, "--tokenizer", str(qwen_tok_dir), "--template", "qwen3", "--output", str(out),
               "--concurrency", "2", "--no-progress"]
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.time() + 120
        while records_in(out) < 3 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert proc.poll() is None, f"the run ended before it could be killed: {proc.communicate()}"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        killed_at = records_in(out)
        assert 3 <= killed_at < len(IDS)
        # simulate the worst case: the kill landed in the middle of a line
        with out.open("a") as f:
            f.write('{"test_id": "multi_turn_base_7", "sample": 0, "accur')

        rerun = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
        assert rerun.returncode == 0, rerun.stderr
        assert f"{killed_at} already in" in rerun.stdout
    meta, records = read_results(out)
    keys = [(r["test_id"], r["sample"]) for r in records]
    assert sorted(keys) == sorted((t, 0) for t in IDS)
    raw = [json.loads(line) for line in out.read_text().splitlines()]  # every line is whole JSON now
    assert len(raw) == 1 + len(IDS)  # header + one line per entry: nothing duplicated
    assert all(r["accuracy"] == 1.0 for r in records)
    assert len({r["run_id"] for r in records}) == 2
