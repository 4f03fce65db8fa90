"""End-to-end evaluation against the scripted OpenAI-compatible server (token and chat modes)."""

from __future__ import annotations

import os
import time

import pytest

from agent_tune.eval.cli import main as eval_main
from agent_tune.eval.evaluate import EvalSettings, Evaluator
from agent_tune.eval.store import read_results
from agent_tune.testing.scripted_server import ScriptedServer, garbage_script, oracle_script

IDS = ["multi_turn_base_0", "multi_turn_base_5", "multi_turn_miss_func_1", "multi_turn_miss_param_2",
       "multi_turn_long_context_3"]


def settings(srv: ScriptedServer, **kw) -> EvalSettings:
    base = dict(base_url=srv.base_url, model="scripted", template="qwen3", concurrency=3, progress=False)
    base.update(kw)
    return EvalSettings(**base)


@pytest.mark.parametrize("mode", ["tokens", "chat"])
async def test_ground_truth_server_scores_100(qwen_tok, tmp_path, mode):
    async with ScriptedServer(qwen_tok, oracle_script(IDS), IDS, latency=0.01) as srv:
        out = await Evaluator(settings(srv, mode=mode), qwen_tok).run(IDS, tmp_path / "r.jsonl")
        assert srv.max_in_flight <= 3
    assert out.ran == len(IDS) and not out.failed
    records = {r["test_id"]: r for r in read_results(tmp_path / "r.jsonl")[1]}
    assert set(records) == set(IDS)
    for r in records.values():
        assert r["accuracy"] == 1.0 and r["progress"] == 1.0, r["test_id"]
        assert r["format_errors"] == 0 and r["end_reason"] == "completed"
        assert r["tokens_generated"] > 0
        assert len(r["responses"]) == r["num_turns"]
    if mode == "tokens":
        body = srv.requests[-1]
        assert isinstance(body["prompt"], list) and body["return_token_ids"] is True
        assert body["logprobs"] == 0 and body["skip_special_tokens"] is False
        assert qwen_tok.convert_tokens_to_ids("<|im_end|>") in body["stop_token_ids"]
    else:
        assert all("messages" in b and b["tools"] for b in srv.requests)
        # tool results go back with the ids of the calls they answer
        tool_msgs = [m for b in srv.requests for m in b["messages"] if m["role"] == "tool"]
        assert tool_msgs and all(m.get("tool_call_id", "").startswith("call_") for m in tool_msgs)


async def test_garbage_server_scores_0_with_format_errors(qwen_tok, tmp_path):
    async with ScriptedServer(qwen_tok, garbage_script, IDS) as srv:
        out = await Evaluator(settings(srv), qwen_tok).run(IDS, tmp_path / "r.jsonl")
    assert len(out.records) == len(IDS)
    for r in out.records:
        assert r["accuracy"] == 0.0
        assert r["format_errors"] == r["num_steps"] == r["num_turns"] > 0  # one bad block per turn
        assert r["decoded_calls"] == [[] for _ in range(r["num_turns"])]


async def test_transient_errors_are_retried(qwen_tok, tmp_path):
    async with ScriptedServer(qwen_tok, oracle_script(IDS[:1]), IDS[:1], fail_first=3) as srv:
        s = settings(srv)
        ev = Evaluator(s, qwen_tok)
        out = await ev.run(IDS[:1], tmp_path / "r.jsonl")
    assert out.records[0]["accuracy"] == 1.0
    assert sum(1 for b in srv.requests if "prompt" in b) == out.records[0]["num_generations"] + 3


async def test_rerun_skips_finished_entries(qwen_tok, tmp_path):
    async with ScriptedServer(qwen_tok, oracle_script(IDS), IDS) as srv:
        await Evaluator(settings(srv), qwen_tok).run(IDS[:2], tmp_path / "r.jsonl")
        n_requests = len(srv.requests)
        out = await Evaluator(settings(srv), qwen_tok).run(IDS, tmp_path / "r.jsonl")
        assert out.skipped == 2 and out.ran == len(IDS) - 2
        requests_second = len(srv.requests) - n_requests
    # nothing re-ran for the two finished entries
    first_two = sum(r["num_generations"] for r in out.records if r["test_id"] in IDS[:2])
    total = sum(r["num_generations"] for r in out.records)
    assert requests_second == total - first_two


async def test_n_samples_give_pass_at_k(qwen_tok, tmp_path):
    async with ScriptedServer(qwen_tok, oracle_script(IDS[:2]), IDS[:2]) as srv:
        out = await Evaluator(settings(srv, n=3, temperature=0.7, seed=1), qwen_tok).run(IDS[:2], tmp_path / "r.jsonl")
    assert sorted((r["test_id"], r["sample"]) for r in out.records) == [
        (t, k) for t in sorted(IDS[:2]) for k in range(3)
    ]
    seeds = {b["seed"] for b in srv.requests}
    assert seeds == {1, 2, 3}


def test_cli_fails_fast_when_server_is_down(qwen_tok_dir, tmp_path, capsys):
    t0 = time.time()
    rc = eval_main(["--base-url", "http://127.0.0.1:9/v1", "--model", "x", "--ids", IDS[0],
                    "--tokenizer", str(qwen_tok_dir), "--template", "qwen3", "--output", str(tmp_path / "r.jsonl")])
    assert rc == 1 and time.time() - t0 < 15
    err = capsys.readouterr().err
    assert "no OpenAI-compatible server answers at http://127.0.0.1:9/v1" in err
    assert not (tmp_path / "r.jsonl").exists()


async def test_wrong_model_name_fails_fast(qwen_tok, tmp_path):
    from agent_tune.eval.client import ModelNotFoundError

    async with ScriptedServer(qwen_tok, garbage_script, IDS[:1], served="smol") as srv:
        with pytest.raises(ModelNotFoundError, match="does not serve model 'scripted'; it serves: 'smol'"):
            await Evaluator(settings(srv), qwen_tok).run(IDS[:1], tmp_path / "r.jsonl")
        assert not [b for b in srv.requests]  # nothing generated


async def test_server_without_token_ids_is_refused_in_token_mode(qwen_tok, tmp_path):
    from agent_tune.eval.evaluate import EvalAbortedError

    async with ScriptedServer(qwen_tok, oracle_script(IDS[:1]), IDS[:1], return_token_ids=False) as srv:
        with pytest.raises(EvalAbortedError, match="--mode chat"):
            await Evaluator(settings(srv), qwen_tok).run(IDS[:1], tmp_path / "r.jsonl")


async def test_context_limit_ends_episode_as_failed(qwen_tok, tmp_path):
    # a context smaller than the first prompt: the entry cannot be played and BFCL fails it
    async with ScriptedServer(qwen_tok, oracle_script(IDS[:1]), IDS[:1], max_model_len=500) as srv:
        out = await Evaluator(settings(srv), qwen_tok).run(IDS[:1], tmp_path / "r.jsonl")
    r = out.records[0]
    assert r["accuracy"] == 0.0 and r["end_reason"] == "prompt_too_long"


@pytest.mark.parametrize("locked", ["--output", "--sft-out"])
def test_cli_refuses_an_output_another_eval_appends_to(qwen_tok_dir, tmp_path, capsys, locked):
    from agent_tune.utils.run_lock import RunLock

    files = {"--output": tmp_path / "r.jsonl", "--sft-out": tmp_path / "sft.jsonl"}
    with RunLock.file(files[locked]):  # another eval resuming into the same file
        rc = eval_main(["--base-url", "http://127.0.0.1:9/v1", "--model", "x", "--ids", IDS[0], "--mode", "tokens",
                        "--tokenizer", str(qwen_tok_dir), "--template", "qwen3", "--output", str(files["--output"]),
                        "--sft-out", str(files["--sft-out"])])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {files[locked]} is in use by another run: pid {os.getpid()} ")
    assert err.rstrip().endswith(f"or choose another {locked}") and "no OpenAI-compatible server" not in err
    assert not files["--output"].exists()
