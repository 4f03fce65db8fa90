"""SGLang's native protocol (agent_tune.rollout.sglang_protocol): vLLM-named sampling parameters become SGLang's,
a ``/generate`` body carries the token prompt as it is, and an answer's ids and log-probs come back unchanged."""

from __future__ import annotations

import pytest

from agent_tune.rollout.sglang_protocol import (
    GenerateAnswerError,
    SGLangSamplingError,
    generate_request,
    parse_generate,
    sglang_sampling_params,
)

# SGLang's documented sampling_params of /generate (its sampling-parameters reference); unknown keys are refused.
DOCUMENTED_SAMPLING = {
    "max_new_tokens", "stop", "stop_token_ids", "stop_regex", "temperature", "top_p", "top_k", "min_p",
    "frequency_penalty", "presence_penalty", "repetition_penalty", "min_new_tokens", "n", "json_schema", "regex",
    "ebnf", "structural_tag", "ignore_eos", "skip_special_tokens", "spaces_between_special_tokens", "no_stop_trim",
    "stream_interval", "logit_bias", "sampling_seed", "custom_params",
}


def test_vllm_names_become_sglang_names() -> None:
    params = {"max_tokens": 64, "min_tokens": 2, "seed": 7, "include_stop_str_in_output": True, "temperature": 0.8,
              "top_p": 0.9, "top_k": 20, "stop": ("</tool_call>",), "stop_token_ids": [151645], "logprobs": 0,
              "repetition_penalty": 1.1, "presence_penalty": None}
    out, logprobs = sglang_sampling_params(params)
    assert out == {"max_new_tokens": 64, "min_new_tokens": 2, "sampling_seed": 7, "no_stop_trim": True,
                   "temperature": 0.8, "top_p": 0.9, "top_k": 20, "stop": ["</tool_call>"],
                   "stop_token_ids": [151645], "repetition_penalty": 1.1}
    assert set(out) <= DOCUMENTED_SAMPLING
    assert logprobs is True  # vLLM's logprobs=0: the sampled token's log-prob
    assert sglang_sampling_params({"logprobs": False})[1] is False
    assert sglang_sampling_params({"temperature": 1.0})[1] is None


def test_top_k_zero_means_all_tokens() -> None:
    assert sglang_sampling_params({"top_k": 0})[0] == {"top_k": -1}
    assert sglang_sampling_params({"top_k": -1})[0] == {"top_k": -1}


def test_sglang_names_pass_and_unknown_names_are_refused_by_name() -> None:
    assert sglang_sampling_params({"max_new_tokens": 5, "sampling_seed": 1})[0] == {"max_new_tokens": 5,
                                                                                    "sampling_seed": 1}
    with pytest.raises(SGLangSamplingError, match="'best_of' has no SGLang equivalent"):
        sglang_sampling_params({"best_of": 2})
    with pytest.raises(SGLangSamplingError, match="'max_new_tokens' is given twice"):
        sglang_sampling_params({"max_tokens": 5, "max_new_tokens": 6})


def test_generate_request_shape() -> None:
    body = generate_request([1, 2, 3], {"max_tokens": 10, "temperature": 0.0, "stop_token_ids": [9]})
    assert body == {"input_ids": [1, 2, 3], "return_logprob": True, "stream": False,
                    "sampling_params": {"max_new_tokens": 10, "temperature": 0.0, "stop_token_ids": [9],
                                        "skip_special_tokens": False}}
    assert generate_request([1], {"logprobs": None}, logprobs=True)["return_logprob"] is False
    assert generate_request([1], {}, logprobs=False)["return_logprob"] is False


def answer(ids, triples, finish) -> dict:
    return {"text": "x", "output_ids": ids,
            "meta_info": {"id": "r", "finish_reason": finish, "prompt_tokens": 3, "completion_tokens": len(ids),
                          "cached_tokens": 0, "output_token_logprobs": triples}}


def test_parse_generate_keeps_ids_and_log_probs() -> None:
    out = parse_generate(answer([5, 6, 2], [[-0.5, 5, None], [-0.25, 6, None], [-0.125, 2, None]],
                                {"type": "stop", "matched": 2}))
    assert out.token_ids == [5, 6, 2] and out.log_probs == [-0.5, -0.25, -0.125] and out.stop_reason == "stop"
    out = parse_generate(answer([5], [[-1.0, 5, "a"]], {"type": "length", "length": 1}))
    assert out.stop_reason == "length"
    assert parse_generate(answer([], [], {"type": "abort", "message": "x"})).stop_reason == "abort"


def test_parse_generate_drops_log_probs_that_do_not_line_up() -> None:
    # SGLang pads the log-probs of a zero-token answer; a triple of another token is not this token's log-prob
    assert parse_generate(answer([], [[-1.0, 7, None]], {"type": "length", "length": 0})).log_probs is None
    assert parse_generate(answer([5, 6], [[-1.0, 5, None], [-1.0, 8, None]], None)).log_probs is None
    assert parse_generate(answer([5], None, None)).log_probs is None


def test_parse_generate_refuses_answers_without_output_ids() -> None:
    with pytest.raises(GenerateAnswerError, match="no output_ids"):
        parse_generate({"text": "x", "meta_info": {"finish_reason": None}})
    with pytest.raises(GenerateAnswerError, match="not an SGLang /generate answer"):
        parse_generate({"choices": []})
