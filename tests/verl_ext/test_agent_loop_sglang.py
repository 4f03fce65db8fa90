"""verl's agent loop ``agent_tune`` with verl's SGLang rollout (``actor_rollout_ref.rollout.name=sglang``).

verl's SGLang server (``verl.workers.rollout.sglang_rollout.async_sglang_server``, verl 0.9.1) reads
``max_new_tokens`` / ``max_tokens`` and ``logprobs`` from the sampling parameters and hands the rest to SGLang's
``SamplingParams`` as keyword arguments, which refuse any name they do not define. :class:`VerlSGLangServer`
does the same (no GPU, no Ray), so these tests fail if the loop sends a vLLM-only name to an SGLang rollout.
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("verl")

from omegaconf import OmegaConf  # noqa: E402
from verl.experimental.agent_loop.agent_loop import DictConfigWrap  # noqa: E402

from agent_tune.envs.bfcl.multi_turn.data import load_entry  # noqa: E402
from agent_tune.envs.bfcl.multi_turn.replay import ground_truth_responses  # noqa: E402
from agent_tune.parsing import get_tool_parser  # noqa: E402
from verl_ext.agent_loop import AgentTuneLoop, VerlServerPolicy, engine_sampling_params  # noqa: E402

# The fields of SGLang's SamplingParams (sglang.srt.sampling.sampling_params), the keyword arguments it takes.
SGLANG_SAMPLING_PARAMS = {
    "max_new_tokens", "stop", "stop_token_ids", "stop_regex", "temperature", "top_p", "top_k", "min_p",
    "frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens", "n", "json_schema", "regex",
    "ebnf", "structural_tag", "ignore_eos", "skip_special_tokens", "spaces_between_special_tokens", "no_stop_trim",
    "stream_interval", "logit_bias", "sampling_seed", "custom_params",
}


class VerlSGLangServer:
    """A server manager answering as verl's SGLang server does with SGLang behind it: scripted replies, each
    token's log-prob ``-0.01 * (k + 1)`` over the run."""

    def __init__(self, tokenizer: Any, texts: list[str], max_model_len: int = 32768) -> None:
        end = tokenizer.encode("<|im_end|>", add_special_tokens=False)
        self.replies = [tokenizer.encode(t, add_special_tokens=False) + end for t in texts]
        self.max_model_len = max_model_len
        self.sglang_params: list[dict[str, Any]] = []
        self.emitted: list[int] = []

    async def generate(self, request_id, *, prompt_ids, sampling_params, **_):
        from verl.workers.rollout.replica import TokenOutput

        params = dict(sampling_params)
        room = self.max_model_len - len(prompt_ids) - 1
        if "max_new_tokens" in params:
            max_new = params.pop("max_new_tokens")
        else:
            max_new = params.pop("max_tokens", room)
        params["max_new_tokens"] = max(0, min(max_new, room))
        return_logprob = params.pop("logprobs", False)
        params.pop("prompt_logprobs", None)
        for key in params:  # SamplingParams(**params)
            if key not in SGLANG_SAMPLING_PARAMS:
                raise TypeError(f"Unexpected keyword argument '{key}'")
        top_k = params.get("top_k", -1)
        if top_k != -1 and top_k < 1:
            raise ValueError(f"top_k must be -1 (disable) or at least 1, got {top_k}.")
        self.sglang_params.append(params)
        ids = self.replies[len(self.sglang_params) - 1][: params["max_new_tokens"]]
        start = len(self.emitted)
        self.emitted += ids
        log_probs = [-0.01 * (start + i + 1) for i in range(len(ids))] if return_logprob else None
        return TokenOutput(token_ids=ids, log_probs=log_probs, stop_reason="stop", extra_fields={"global_steps": 1})


def _config(engine: str):
    return OmegaConf.create({
        "actor_rollout_ref": {"rollout": {"name": engine, "prompt_length": 12000, "response_length": 6000}},
        "data": {},
        "agent_tune": {"template": "tokenizer", "tool_parser": "hermes", "reasoning_parser": "none",
                       "env_kwargs": {"bfcl": {"reward": "progress"}}},
    })


async def test_episode_through_verls_sglang_server(qwen_tok) -> None:
    entry = load_entry("multi_turn_base_5")
    texts = ground_truth_responses(entry, get_tool_parser("hermes"))
    cfg = _config("sglang")
    server = VerlSGLangServer(qwen_tok, texts)
    loop = AgentTuneLoop(trainer_config=DictConfigWrap(cfg), server_manager=server, tokenizer=qwen_tok,
                         processor=None, dataset_cls=None, data_config=DictConfigWrap(cfg.data))
    row = {"raw_prompt": [], "extra_info": {"index": 0, "env": {"name": "bfcl", "kwargs": {"test_id": entry.id}}}}
    # verl's own sampling parameters for a validation batch (greedy: top_k -1) and its log-prob switch
    out = await loop.run({"temperature": 0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0,
                          "logprobs": True}, **row)
    assert out.reward_score == 1.0 and len(server.sglang_params) == len(texts)
    assert [t for t, m in zip(out.response_ids, out.response_mask) if m == 1] == server.emitted
    lps = [lp for lp, m in zip(out.response_logprobs, out.response_mask) if m == 1]
    assert lps == pytest.approx([-0.01 * (k + 1) for k in range(len(server.emitted))])
    eot = qwen_tok.convert_tokens_to_ids("<|im_end|>")
    assert all(eot in p["stop_token_ids"] and p["temperature"] == 0 for p in server.sglang_params)


async def test_vllm_only_names_are_translated_for_sglang(qwen_tok) -> None:
    # what the runner sends for an env with stop strings (ReTool's </code>), with a seed
    params = {"temperature": 1.0, "top_k": 0, "seed": 5, "stop": ["</code>"], "include_stop_str_in_output": True,
              "stop_token_ids": [7], "max_tokens": 12, "logprobs": True}
    server = VerlSGLangServer(qwen_tok, ["a"])
    without_seed = {k: v for k, v in params.items() if k != "seed"}
    with pytest.raises(TypeError, match="include_stop_str_in_output"):  # as vLLM's names reach SGLang untranslated
        await VerlServerPolicy(server, "r", translate=None).generate([1, 2], without_seed)
    out = await VerlServerPolicy(server, "r", engine_sampling_params("sglang")).generate([1, 2], dict(params))
    assert out.token_ids and out.log_probs is not None
    assert server.sglang_params[-1] == {"temperature": 1.0, "top_k": -1, "sampling_seed": 5, "stop": ["</code>"],
                                        "no_stop_trim": True, "stop_token_ids": [7], "max_new_tokens": 12}
    assert engine_sampling_params("vllm") is None and engine_sampling_params(None) is None
