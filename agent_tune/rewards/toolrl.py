"""ToolRL's tool-call reward (Qian et al., 2025, "ToolRL: Reward is All Tool Learning Needs").

``R = R_format + R_correct (+ R_length)``; with the default configuration ``R_format`` in {0, 1} and
``R_correct`` in [-3, 3] (Section 3.3; ToolRL's code: ``compute_tool_call_reward`` in
``verl/utils/reward_score/rlla.py``):

* name match: the overlap of the predicted and ground-truth tool names;
* predicted calls are paired with ground-truth calls, and for every ground-truth call ``g`` paired with ``p``:
  parameter-name match = the overlap of their parameter names, parameter-value match = number of keys of
  ``g`` whose value ``p`` gives exactly (``==``);
* ``S`` = name match + the two sums, ``S_max = 1 + |G| + sum(|keys(g)|)``, ``R_correct = 6 S / S_max - 3``,
  i.e. ``min + (max - min) S / S_max`` for the correctness range ``(min, max)``.

How "overlap" and "paired" read is the config's ``matching`` (one function each below):

* ``toolrl`` (the default; ToolRL's code): the overlap is ToolRL's ``match_score`` (:func:`_overlap`): 1 if
  the two lists are equal, else 0 if either is empty, else the Jaccard index of the lists as multisets
  (duplicate names count: ``[f, f]`` against ``[f]`` is 1/2; the paper writes sets); calls are paired
  greedily in ground-truth order (:func:`_greedy_pairing`: each ground-truth call takes the unused
  prediction of the same name with the highest parameter-name + parameter-value score, the first one on a
  tie, and only when that score is above 0); predicted calls equal to the ground truth as ordered lists
  earn ``S_max`` outright (ToolRL's exact-match short-cut);
* ``optimal``: the overlap is the Jaccard index of the sets, and the pairing is the one-to-one pairing with
  the highest total (:func:`_optimal_pairing`); nothing depends on the order of the calls or of their
  arguments, so parallel calls given in another order than the ground truth's lose nothing.

When neither side has a call (the right answer is not to call a tool) ``S / S_max`` is 1. The
granularity variants (Section 5.3) are :func:`match_calls`; the scale and length variants (Sections 5.1,
5.2) and the choice among them are :class:`~agent_tune.rewards.toolrl_config.ToolRLRewardConfig`.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from itertools import permutations
from typing import Sequence

from agent_tune.parsing.types import ToolCall
from agent_tune.rewards.toolrl_config import GRANULARITIES, MATCHINGS, ToolRLRewardConfig

_EXHAUSTIVE_LIMIT = 7  # pair exhaustively up to this many calls per side, greedily beyond
_DEFAULT = ToolRLRewardConfig()


@dataclass(frozen=True)
class CallMatch:
    """How the predicted calls match the ground truth: ``score`` out of ``max_score`` and its parts."""

    name_match: float  # coarse: the all-or-nothing score
    param_name_match: float  # summed over the pairs
    param_value_match: float  # summed over the pairs (intermediate: calls reproduced exactly)
    score: float
    max_score: float
    # every ground-truth call reproduced exactly and nothing else called, in any order under either matching
    # (the env's accuracy; the reward's own rule is the granularity's and the matching's)
    exact: bool

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
    exact: bool  # every ground-truth call reproduced exactly and nothing else called, in any order
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


def _overlap(a: Sequence[str], b: Sequence[str], matching: str, binary: bool) -> float:
    """How far two lists of names (tool names, parameter names) agree, in [0, 1].

    ``toolrl``: ToolRL's ``match_score``: 1 if the lists are equal (in order), else 0 if ``binary``
    (REFINEDREWARD) or either list is empty, else the multiset Jaccard index ``|a & b| / (|a| + |b| - |a & b|)``
    with ``&`` the multiset intersection. ``optimal``: the same on the sets, order and duplicates ignored
    (``binary``: 1 iff the sets are equal; two empty sets agree fully).
    """
    if matching == "optimal":
        sa, sb = set(a), set(b)
        if binary:
            return float(sa == sb)
        union = sa | sb
        return len(sa & sb) / len(union) if union else 1.0
    if list(a) == list(b):
        return 1.0
    if binary or not a or not b:
        return 0.0
    common = sum((Counter(a) & Counter(b)).values())
    return common / (len(a) + len(b) - common)


def _pair_score(gt: ToolCall, pred: ToolCall, granularity: str, matching: str) -> tuple[float, float]:
    """(parameter-name match, parameter-value match) of ``pred`` as the answer to ``gt``; (0, 0) across names.

    ``intermediate`` (INTERMEDIATEREWARD): (0, 1) iff the call is reproduced exactly (name and arguments).
    """
    if gt.name != pred.name:
        return 0.0, 0.0
    if granularity == "intermediate":
        return 0.0, float(gt.arguments == pred.arguments)
    keys = _overlap(list(gt.arguments), list(pred.arguments), matching, binary=granularity == "finegrained")
    values = sum(1.0 for k, v in gt.arguments.items() if k in pred.arguments and pred.arguments[k] == v)
    return keys, values


Table = Sequence[Sequence[tuple[float, float]]]  # [ground-truth call][prediction] -> pair score


def _greedy_pairing(table: Table) -> tuple[float, float]:
    """ToolRL's pairing (``compute_tool_call_reward``): in ground-truth order, each call takes the unused
    prediction with the highest score (the first on a tie), if that score is above 0; summed (names, values)."""
    used: set[int] = set()
    names = values = 0.0
    for row in table:
        best, best_j = 0.0, None
        for j, score in enumerate(row):
            if j not in used and sum(score) > best:
                best, best_j = sum(score), j
        if best_j is not None:
            used.add(best_j)
            names, values = names + row[best_j][0], values + row[best_j][1]
    return names, values


def _optimal_pairing(table: Table) -> tuple[float, float]:
    """The one-to-one pairing with the highest summed score (exhaustive up to ``_EXHAUSTIVE_LIMIT`` calls a
    side, :func:`_greedy_pairing` beyond); summed (names, values)."""
    n_gt, n_pred = len(table), len(table[0]) if table else 0
    if n_gt == 0 or n_pred == 0:
        return 0.0, 0.0
    if n_gt > _EXHAUSTIVE_LIMIT or n_pred > _EXHAUSTIVE_LIMIT:
        return _greedy_pairing(table)

    def total(assign: Sequence[int | None]) -> tuple[float, float]:
        pairs = [table[i][j] for i, j in enumerate(assign) if j is not None]
        return sum(p[0] for p in pairs), sum(p[1] for p in pairs)

    slots: list[int | None] = list(range(n_pred)) + [None] * max(0, n_gt - n_pred)
    return max((total(p) for p in permutations(slots, n_gt)), key=sum)


def _same_call(a: ToolCall, b: ToolCall) -> bool:
    return a.name == b.name and a.arguments == b.arguments  # arguments as dicts: their order does not count


def _same_calls(gt: Sequence[ToolCall], pred: Sequence[ToolCall], ordered: bool) -> bool:
    """The two lists hold the same calls (name and arguments): position by position if ``ordered``
    (ToolRL's ``gt_tools == pd_tools``), else in any order."""
    if len(gt) != len(pred):
        return False
    if ordered:
        return all(_same_call(g, p) for g, p in zip(gt, pred))
    free = list(pred)
    for g in gt:  # equality is an equivalence: matching greedily is enough
        j = next((j for j, p in enumerate(free) if _same_call(p, g)), None)
        if j is None:
            return False
        free.pop(j)
    return True


def match_calls(predicted: Sequence[ToolCall], ground_truth: Sequence[ToolCall],
                granularity: str = "default", matching: str = "toolrl") -> CallMatch:
    """``S`` and ``S_max`` of the predicted calls at a reward granularity (Sections 3.3 and 5.3) under a
    ``matching`` (module docstring: ``toolrl`` is ToolRL's code, ``optimal`` order-free).

    ``default``: ``S = O(names) + sum over pairs of [O(keys) + values right]``,
    ``S_max = 1 + |G| + sum |keys(g)|`` (O: :func:`_overlap`). ``finegrained`` (REFINEDREWARD): the same
    with each overlap binary (``toolrl``: 1 iff the lists are equal in order, so the tool names' order and
    each call's argument order count; ``optimal``: iff the sets are equal). ``intermediate``
    (INTERMEDIATEREWARD): ``S = O(names) + ground-truth calls paired with a call reproducing them exactly``,
    ``S_max = 1 + |G|``. ``coarse`` (COARSEREWARD): ``S = S_max = 1`` if the calls equal the ground truth
    (``toolrl``: as ordered lists; ``optimal``: in any order), else ``S = 0``. Under ``toolrl`` calls equal
    to the ground truth as ordered lists score ``S_max`` at every granularity, each part at its maximum.
    """
    if granularity not in GRANULARITIES:
        raise ValueError(f"reward.granularity={granularity!r} is not one of {', '.join(GRANULARITIES)}")
    if matching not in MATCHINGS:
        raise ValueError(f"reward.matching={matching!r} is not one of {', '.join(MATCHINGS)}")
    exact = _same_calls(ground_truth, predicted, ordered=False)
    full = _same_calls(ground_truth, predicted, ordered=True) if matching == "toolrl" else exact
    if granularity == "coarse":
        return CallMatch(float(full), 0.0, 0.0, float(full), 1.0, exact)
    intermediate = granularity == "intermediate"
    n_keys = 0 if intermediate else sum(len(g.arguments) for g in ground_truth)
    max_score = 1.0 + len(ground_truth) + n_keys
    if full and matching == "toolrl":  # ToolRL's exact-match short-cut
        names, values = (0.0, float(len(ground_truth))) if intermediate else (float(len(ground_truth)), float(n_keys))
        return CallMatch(1.0, names, values, max_score, max_score, exact)
    name_match = _overlap([g.name for g in ground_truth], [p.name for p in predicted], matching,
                          binary=granularity == "finegrained")
    table = [[_pair_score(g, p, granularity, matching) for p in predicted] for g in ground_truth]
    names, values = (_greedy_pairing if matching == "toolrl" else _optimal_pairing)(table)
    return CallMatch(name_match, names, values, name_match + names + values, max_score, exact)


def toolrl_score(
    predicted: Sequence[ToolCall],
    ground_truth: Sequence[ToolCall],
    format_ok: bool,
    config: ToolRLRewardConfig | None = None,
    step: int | None = None,
    reasoning: str | None = None,
    undecodable_calls: bool = False,
) -> ToolRLScore:
    """Score predicted calls against the ground truth with ToolRL's reward, in ``config``'s variant
    (granularity and matching: :func:`match_calls`).

    ``step`` is the trainer's global step (``None`` outside training), ``reasoning`` the response's
    reasoning block for the length reward, ``undecodable_calls`` that a call block failed to decode
    (ToolRL's answer format: the correctness is then its minimum, as ToolRL's reward gives it).
    """
    config = config or _DEFAULT
    match = match_calls(predicted, ground_truth, config.granularity, config.matching)
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
