"""SGLang's native generation protocol, for samplers that talk to SGLang: token ids in, token ids and log-probs out.

The episode runner names sampling parameters as vLLM does (``max_tokens``, ``seed``, ``include_stop_str_in_output``,
...). SGLang's ``sampling_params`` take other names for some of them and refuse every key they do not know (its
``/generate`` answers HTTP 400, its engine raises ``TypeError``), so a request for SGLang goes through
:func:`sglang_sampling_params` first. Two callers: the evaluator's policy over SGLang's HTTP ``POST /generate``
(:mod:`agent_tune.eval.sglang_policy`) and verl's agent loop when verl's rollout engine is SGLang
(``actor_rollout_ref.rollout.name=sglang``, :mod:`verl_ext.agent_loop`).

The ``/generate`` exchange (SGLang's documented native API):

* request: ``{"input_ids": [...], "sampling_params": {...}, "return_logprob": true}``;
* answer: ``{"text": ..., "output_ids": [...], "meta_info": {"finish_reason": {"type": "stop" | "length" |
  "abort", ...}, "prompt_tokens": N, "completion_tokens": N, "output_token_logprobs": [[logprob, token_id,
  text_or_null], ...], ...}}``. ``output_ids`` keep the token that stopped the generation (the end-of-turn
  token, the last token of a stop string): SGLang trims only the ``text``, as vLLM does with its token ids.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from agent_tune.errors import ConfigError, RolloutError
from agent_tune.rollout.policy import GenerationOutput

# vLLM's name -> SGLang's, for the parameters SGLang names differently. ``include_stop_str_in_output`` and
# ``no_stop_trim`` both only decide whether the stop string stays in the answer's *text*: the token ids keep it
# either way.
RENAMED = {
    "max_tokens": "max_new_tokens",
    "min_tokens": "min_new_tokens",
    "seed": "sampling_seed",
    "include_stop_str_in_output": "no_stop_trim",
}
# Sampling parameters SGLang's ``sampling_params`` accepts under these names (its documented set, less the
# constrained-decoding and streaming ones the runner never sends).
SGLANG_KEYS = frozenset({
    "max_new_tokens", "min_new_tokens", "sampling_seed", "no_stop_trim", "temperature", "top_p", "top_k", "min_p",
    "stop", "stop_token_ids", "stop_regex", "ignore_eos", "repetition_penalty", "presence_penalty",
    "frequency_penalty", "skip_special_tokens", "spaces_between_special_tokens", "n", "logit_bias",
})
# Request-level in SGLang (beside ``sampling_params``): vLLM's ``logprobs`` (how many log-probs per token) becomes
# ``return_logprob``; only the sampled token's log-prob is ever needed.
LOGPROBS_KEY = "logprobs"
SGLANG_TOP_K_ALL = -1  # SGLang refuses 0; vLLM reads 0 and -1 alike as "all tokens"


class SGLangSamplingError(ConfigError):
    """A sampling parameter SGLang has no equivalent for (the message names it)."""


def sglang_sampling_params(params: Mapping[str, Any]) -> tuple[dict[str, Any], bool | None]:
    """``params`` (vLLM's names, SGLang's own accepted too) as SGLang's ``sampling_params``, and whether log-probs
    are asked for (``None``: the caller did not say).

    ``None`` values are dropped (the server's default applies); ``top_k`` 0 becomes -1. Raises
    :class:`SGLangSamplingError` naming a key SGLang would refuse."""
    out: dict[str, Any] = {}
    logprobs: bool | None = None
    for key, value in params.items():
        if key == LOGPROBS_KEY:
            logprobs = value is not None and value is not False
            continue
        if value is None:
            continue
        name = RENAMED.get(key, key)
        if name not in SGLANG_KEYS:
            raise SGLangSamplingError(
                f"sampling parameter {key!r} has no SGLang equivalent (SGLang accepts: "
                f"{', '.join(sorted(SGLANG_KEYS | set(RENAMED)))})"
            )
        if name in out:
            raise SGLangSamplingError(f"sampling parameter {name!r} is given twice ({key!r} and {name!r})")
        if name == "top_k" and int(value) == 0:
            value = SGLANG_TOP_K_ALL
        out[name] = list(value) if isinstance(value, (list, tuple, set)) else value
    return out, logprobs


def generate_request(prompt_ids: Sequence[int], params: Mapping[str, Any], logprobs: bool = True) -> dict[str, Any]:
    """The JSON body of one ``POST /generate``: the prompt as token ids, ``params`` translated
    (:func:`sglang_sampling_params`), the sampled tokens' log-probs asked for unless ``params`` or ``logprobs`` say
    no, special tokens kept in the text (the ids are what counts; this keeps the text readable alongside)."""
    sampling, asked = sglang_sampling_params(params)
    sampling.setdefault("skip_special_tokens", False)
    return {
        "input_ids": [int(t) for t in prompt_ids],
        "sampling_params": sampling,
        "return_logprob": bool(logprobs if asked is None else asked),
        "stream": False,
    }


class GenerateAnswerError(RolloutError, ValueError):
    """A ``/generate`` answer without what token mode needs (the output ids); the message shows the answer."""


def parse_generate(data: Any) -> GenerationOutput:
    """Token ids, log-probs and stop reason of a ``/generate`` answer (one prompt, not streamed).

    Log-probs are those of ``meta_info.output_token_logprobs`` (``[logprob, token_id, text]`` triples), kept only
    when there is one per output id and their ids are the output ids (else ``None``: an answer SGLang padded, e.g.
    for zero new tokens). A finish reason of type ``abort`` gives stop reason ``abort``."""
    if not isinstance(data, Mapping) or not isinstance(data.get("meta_info"), Mapping):
        raise GenerateAnswerError(f"not an SGLang /generate answer (no meta_info): {str(data)[:300]}")
    ids = data.get("output_ids")
    if not isinstance(ids, list):
        raise GenerateAnswerError(
            f"the /generate answer has no output_ids, which token mode needs (an SGLang too old to return "
            f"them?): {str(data)[:300]}"
        )
    meta = data["meta_info"]
    finish = meta.get("finish_reason")
    reason = finish.get("type") if isinstance(finish, Mapping) else finish
    triples = meta.get("output_token_logprobs")
    log_probs = None
    if isinstance(triples, list) and len(triples) == len(ids):
        try:
            if all(int(t[1]) == int(i) for t, i in zip(triples, ids)):
                log_probs = [float(t[0]) for t in triples]
        except (TypeError, ValueError, IndexError):
            log_probs = None
    return GenerationOutput([int(t) for t in ids], log_probs, reason or "stop")
