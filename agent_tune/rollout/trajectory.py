"""The token trajectory of one episode (token in, token out).

``prompt_ids`` is the rendered initial conversation (system/user messages, tools, generation prompt).
``response_ids`` is everything after it, in order: the policy's tokens exactly as sampled (mask 1, with
their log-probs) interleaved with environment tokens (chat-template deltas or raw observation text;
mask 0, log-prob 0.0). The three response lists always have the same length: every append checks it.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Sequence

from agent_tune.errors import RolloutError

POLICY = 1
ENV = 0


class TrajectoryError(RolloutError, ValueError):
    """An append or truncation that would break the trajectory's alignment."""


@dataclass
class Trajectory:
    """Prompt and response tokens of one episode, with the loss mask and the sampler's log-probs."""

    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    response_logprobs: list[float] = field(default_factory=list)
    truncated: bool = False

    def __post_init__(self) -> None:
        self.prompt_ids = list(self.prompt_ids)
        self._check()

    # ------------------------------------------------------------------ appends
    def append_policy(self, ids: Sequence[int], logprobs: Sequence[float] | None) -> None:
        """Append tokens sampled by the policy (mask 1). ``logprobs`` must match ``ids`` one to one;
        ``None`` (a sampler that returned none) stores 0.0 for each token."""
        ids = _as_ids(ids)
        if logprobs is None:
            lps = [0.0] * len(ids)
        else:
            lps = [float(x) for x in logprobs]
            if len(lps) != len(ids):
                raise TrajectoryError(f"policy gave {len(ids)} tokens but {len(lps)} log-probs")
        self.response_ids.extend(ids)
        self.response_mask.extend([POLICY] * len(ids))
        self.response_logprobs.extend(lps)
        self._check()

    def append_env(self, ids: Sequence[int]) -> None:
        """Append environment tokens (mask 0, log-prob 0.0)."""
        ids = _as_ids(ids)
        self.response_ids.extend(ids)
        self.response_mask.extend([ENV] * len(ids))
        self.response_logprobs.extend([0.0] * len(ids))
        self._check()

    # --------------------------------------------------------------- truncation
    def truncate(self, max_response_length: int) -> bool:
        """Cut the response to ``max_response_length`` tokens, keeping the three lists aligned.

        Returns True (and sets ``truncated``) if anything was cut."""
        if max_response_length < 0:
            raise TrajectoryError(f"max_response_length must be >= 0, got {max_response_length}")
        if len(self.response_ids) <= max_response_length:
            return False
        del self.response_ids[max_response_length:]
        del self.response_mask[max_response_length:]
        del self.response_logprobs[max_response_length:]
        self.truncated = True
        self._check()
        return True

    # ------------------------------------------------------------------- views
    @property
    def all_ids(self) -> list[int]:
        """Prompt followed by response: what the policy conditions on next."""
        return self.prompt_ids + self.response_ids

    @property
    def num_policy_tokens(self) -> int:
        return sum(self.response_mask)

    def __len__(self) -> int:
        return len(self.response_ids)

    def policy_spans(self) -> list[tuple[int, int]]:
        """Half-open ``[start, end)`` index ranges of the response where the mask is 1."""
        spans: list[tuple[int, int]] = []
        start = None
        for i, m in enumerate(self.response_mask):
            if m and start is None:
                start = i
            elif not m and start is not None:
                spans.append((start, i))
                start = None
        if start is not None:
            spans.append((start, len(self.response_mask)))
        return spans

    def _check(self) -> None:
        n = len(self.response_ids)
        if not (n == len(self.response_mask) == len(self.response_logprobs)):
            raise TrajectoryError(
                "trajectory misaligned: "
                f"{n} response ids, {len(self.response_mask)} mask entries, "
                f"{len(self.response_logprobs)} log-probs"
            )


def _as_ids(ids: Sequence[int]) -> list[int]:
    out: list[int] = []
    for t in ids:
        if not isinstance(t, numbers.Integral) or isinstance(t, bool) or t < 0:
            raise TrajectoryError(f"token ids must be non-negative ints, got {t!r}")
        out.append(int(t))
    return out
