"""ToolRL's tool-call reward (Qian et al., 2025, "ToolRL: Reward is All Tool Learning Needs").

``R = R_format + R_correct (+ R_length)``; with the default configuration ``R_format`` in {0, 1} and
``R_correct`` in [-3, 3] (Section 3.3):

* name match: Jaccard overlap of the predicted and ground-truth tool-name sets;
* then predicted calls are paired one-to-one with ground-truth calls so that the summed score is
  highest, and for every ground-truth call ``g`` paired with ``p``:
  parameter-name match = Jaccard(keys(g), keys(p)), parameter-value match = number of keys of ``g``
  whose value ``p`` gives exactly;
* ``S`` = name match + the two sums, ``S_max = 1 + |G| + sum(|keys(g)|)``, ``R_correct = 6 S / S_max - 3``,
  i.e. ``min + (max - min) S / S_max`` for the correctness range ``(min, max)``.

When neither side has a call (the right answer is not to call a tool) ``S / S_max`` is 1. The
granularity variants (Section 5.3) are :func:`match_calls`; the scale and length variants (Sections 5.1,
5.2) and the choice among them are :class:`~agent_tune.rewards.toolrl_config.ToolRLRewardConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations
from typing import Callable, Sequence

from agent_tune.parsing.types import ToolCall
from agent_tune.rewards.toolrl_config import GRANULARITIES, ToolRLRewardConfig

_EXHAUSTIVE_LIMIT = 7  # pair exhaustively up to this many calls per side, greedily beyond
_DEFAULT = ToolRLRewardConfig()


@dataclass(frozen=True)
class CallMatch:
    """How the predicted calls match the ground truth: ``score`` out of ``max_score`` and its parts."""

    name_match: float
    param_name_match: float  # summed over the pairs
    param_value_match: float  # summed over the pairs (intermediate: calls reproduced exactly)
    score: float
    max_score: float
    exact: bool  # every ground-truth call reproduced exactly and nothing else called

    @property
    def fraction(self) -> float:
        """``S / S_max`` in [0, 1]."""
        return self.score / self.max_score


@dataclass(frozen=True)
class ToolRLScore:
    """The parts of ToolRL's reward, and its range at the step it was computed for."""

    name_match: float
    param_name_match: float
    param_value_match: float
    max_score: float
    correctness: float  # default: in [-3, 3]
    format_reward: float  # default: 0 or 1
    exact: bool  # every ground-truth call reproduced exactly and nothing else called
    length_reward: float = 0.0
    fraction: float = 0.0  # S / S_max of the matching, in [0, 1]
    min_reward: float = -3.0
    max_reward: float = 4.0

    @property
    def reward(self) -> float:
        """``R_format + R_correct + R_length`` (default: in [-3, 4])."""
        return self.format_reward + self.correctness + self.length_reward

    @property
    def unit_reward(self) -> float:
        """The reward mapped from its range onto [0, 1]."""
        return (self.reward - self.min_reward) / (self.max_reward - self.min_reward)


def _jaccard(a: set, b: set) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 1.0


def _binary(a: set, b: set) -> float:
    return 1.0 if a == b else 0.0


PairScore = Callable[[ToolCall, ToolCall], tuple[float, float]]


def _pair_partial(gt: ToolCall, pred: ToolCall, overlap: Callable[[set, set], float] = _jaccard) -> tuple[float, float]:
    if gt.name != pred.name:
        return 0.0, 0.0
    values = sum(1.0 for k in gt.arguments if k in pred.arguments and pred.arguments[k] == gt.arguments[k])
    return overlap(set(gt.arguments), set(pred.arguments)), values


def _pair_binary(gt: ToolCall, pred: ToolCall) -> tuple[float, float]:
    return _pair_partial(gt, pred, _binary)


def _pair_exact(gt: ToolCall, pred: ToolCall) -> tuple[float, float]:
    return 0.0, float(gt.name == pred.name and gt.arguments == pred.arguments)


def _best_pairing(gt: Sequence[ToolCall], pred: Sequence[ToolCall], pair: PairScore) -> tuple[float, float]:
    """Highest (param-name, param-value) sums over one-to-one pairings of ground truth with predictions."""
    if not gt or not pred:
        return 0.0, 0.0
    table = [[pair(g, p) for p in pred] for g in gt]

    def total(assign: Sequence[int | None]) -> tuple[float, float]:
        names = sum(table[i][j][0] for i, j in enumerate(assign) if j is not None)
        values = sum(table[i][j][1] for i, j in enumerate(assign) if j is not None)
        return names, values

    if len(gt) <= _EXHAUSTIVE_LIMIT and len(pred) <= _EXHAUSTIVE_LIMIT:
        slots: list[int | None] = list(range(len(pred))) + [None] * max(0, len(gt) - len(pred))
        return max((total(p[: len(gt)]) for p in permutations(slots, len(gt))), key=sum)
    free = set(range(len(pred)))
    assign: list[int | None] = []
    for i in range(len(gt)):  # greedy: best remaining prediction for each ground-truth call
        j = max(free, key=lambda j: sum(table[i][j]), default=None)
        assign.append(j)
        free.discard(j)
    return total(assign)


def _is_exact(gt: Sequence[ToolCall], pred: Sequence[ToolCall]) -> bool:
    """The two lists hold the same calls (name and arguments), in any order."""
    if len(gt) != len(pred):
        return False
    free = list(pred)
    for g in gt:  # equality is an equivalence: matching greedily is enough
        j = next((j for j, p in enumerate(free) if p.name == g.name and p.arguments == g.arguments), None)
        if j is None:
            return False
        free.pop(j)
    return True


def match_calls(predicted: Sequence[ToolCall], ground_truth: Sequence[ToolCall],
                granularity: str = "default") -> CallMatch:
    """``S`` and ``S_max`` of the predicted calls at a reward granularity (Sections 3.3 and 5.3).

    ``default``: ``S = J(names) + sum over pairs of [J(keys) + values right]``,
    ``S_max = 1 + |G| + sum |keys(g)|`` (J: Jaccard of the sets). ``finegrained`` (REFINEDREWARD): the same
    with each Jaccard term made binary (1 iff the two sets are equal). ``intermediate``
    (INTERMEDIATEREWARD): ``S = J(names) + ground-truth calls reproduced exactly`` (one-to-one),
    ``S_max = 1 + |G|``. ``coarse`` (COARSEREWARD): ``S = S_max = 1`` if the calls equal the ground truth
    (in any order), else ``S = 0``.
    """
    if granularity not in GRANULARITIES:
        raise ValueError(f"reward.granularity={granularity!r} is not one of {', '.join(GRANULARITIES)}")
    exact = _is_exact(ground_truth, predicted)
    if granularity == "coarse":
        return CallMatch(float(exact), 0.0, 0.0, float(exact), 1.0, exact)
    names_g, names_p = {g.name for g in ground_truth}, {p.name for p in predicted}
    if granularity == "intermediate":
        _, calls = _best_pairing(ground_truth, predicted, _pair_exact)
        name_match = _jaccard(names_g, names_p)
        return CallMatch(name_match, 0.0, calls, name_match + calls, 1.0 + len(ground_truth), exact)
    overlap, pair = (_binary, _pair_binary) if granularity == "finegrained" else (_jaccard, _pair_partial)
    name_match = overlap(names_g, names_p)
    param_names, param_values = _best_pairing(ground_truth, predicted, pair)
    max_score = 1.0 + len(ground_truth) + sum(len(g.arguments) for g in ground_truth)
    return CallMatch(name_match, param_names, param_values, name_match + param_names + param_values, max_score, exact)


def toolrl_score(
    predicted: Sequence[ToolCall],
    ground_truth: Sequence[ToolCall],
    format_ok: bool,
    config: ToolRLRewardConfig | None = None,
    step: int | None = None,
    reasoning: str | None = None,
    undecodable_calls: bool = False,
) -> ToolRLScore:
    """Score predicted calls against the ground truth with ToolRL's reward, in ``config``'s variant.

    ``step`` is the trainer's global step (``None`` outside training), ``reasoning`` the response's
    reasoning block for the length reward, ``undecodable_calls`` that a call block failed to decode
    (ToolRL's answer format: the correctness is then its minimum, as ToolRL's reward gives it).
    """
    config = config or _DEFAULT
    match = match_calls(predicted, ground_truth, config.granularity)
    low, high = config.correctness_range(step)
    if not ground_truth and config.no_call_tasks == "ignored":
        correctness = 0.0
    elif undecodable_calls:
        correctness = low
    else:
        correctness = low + (high - low) * match.fraction
    f_low, f_high = config.format_range(step)
    min_reward, max_reward = config.reward_range(step)
    return ToolRLScore(
        name_match=match.name_match,
        param_name_match=match.param_name_match,
        param_value_match=match.param_value_match,
        max_score=match.max_score,
        correctness=correctness,
        format_reward=f_high if format_ok else f_low,
        exact=match.exact and not undecodable_calls,
        length_reward=config.length_reward(reasoning, step),
        fraction=0.0 if undecodable_calls else match.fraction,
        min_reward=min_reward,
        max_reward=max_reward,
    )
