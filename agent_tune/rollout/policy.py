"""What the episode runner needs from a policy: token ids in, token ids and log-probs out.

The shape is that of verl's ``server_manager.generate`` (``TokenOutput``) and of a vLLM
``/v1/completions`` call with a token prompt and ``logprobs``, so either adapts in a few lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

StopReason = Literal["stop", "length", "abort"]

# Names other samplers use for the same outcomes (verl's TokenOutput, vLLM/OpenAI finish_reason).
_STOP_REASON_ALIASES: dict[str | None, StopReason] = {
    None: "stop",
    "stop": "stop",
    "eos": "stop",
    "completed": "stop",  # verl folds "stop" and "length" into "completed"; the runner re-derives length
    "length": "length",
    "abort": "abort",
    "aborted": "abort",
    "error": "abort",  # vLLM's FinishReason.ERROR: nothing usable was generated
}


def normalize_stop_reason(reason: str | None) -> StopReason:
    """Map a sampler's stop/finish reason onto ``"stop" | "length" | "abort"``.

    verl reports ``"completed"`` for both a natural stop and the length limit: it maps to ``"stop"``
    and the runner recognises the length case itself (token count reached ``max_tokens``)."""
    try:
        return _STOP_REASON_ALIASES[reason]
    except KeyError:
        raise ValueError(
            f"unknown stop reason {reason!r}; expected one of {sorted(k for k in _STOP_REASON_ALIASES if k)}"
        ) from None


@dataclass
class GenerationOutput:
    """One generation: the sampled token ids (the end-of-turn token included when the sampler stopped
    on it, as vLLM returns it), their log-probs (``None`` if the sampler gave none) and why it stopped."""

    token_ids: list[int]
    log_probs: list[float] | None = None
    stop_reason: StopReason = "stop"

    def __post_init__(self) -> None:
        self.token_ids = [int(t) for t in self.token_ids]
        if self.log_probs is not None:
            self.log_probs = [float(x) for x in self.log_probs]
            if len(self.log_probs) != len(self.token_ids):
                raise ValueError(
                    f"GenerationOutput has {len(self.token_ids)} tokens but {len(self.log_probs)} log-probs"
                )
        self.stop_reason = normalize_stop_reason(self.stop_reason)


@runtime_checkable
class Policy(Protocol):
    """A sampler the runner can drive.

    ``sampling_params`` follows vLLM's ``SamplingParams`` names (``max_tokens``, ``temperature``,
    ``stop``, ``include_stop_str_in_output``, ``stop_token_ids``, ``logprobs``, ...)."""

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> GenerationOutput:
        """Continue ``prompt_ids``; return the new tokens only."""
        ...
