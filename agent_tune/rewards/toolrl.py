"""ToolRL's tool-call reward (Qian et al., 2025, "ToolRL: Reward is All Tool Learning Needs").

``R = R_format + R_correct`` with ``R_format`` in {0, 1} and ``R_correct`` in [-3, 3]:

* name match: Jaccard overlap of the predicted and ground-truth tool-name sets;
* then predicted calls are paired one-to-one with ground-truth calls so that the summed score is
  highest, and for every ground-truth call ``g`` paired with ``p``:
  parameter-name match = Jaccard(keys(g), keys(p)), parameter-value match = number of keys of ``g``
  whose value ``p`` gives exactly;
* ``S`` = name match + the two sums, ``S_max = 1 + |G| + sum(|keys(g)|)``, ``R_correct = 6 S / S_max - 3``.

When neither side has a call (the right answer is not to call a tool) the correctness score is 3.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import permutations
from typing import Sequence

from agent_tune.parsing.types import ToolCall

_EXHAUSTIVE_LIMIT = 7  # pair exhaustively up to this many calls per side, greedily beyond


@dataclass(frozen=True)
class ToolRLScore:
    """The parts of ToolRL's correctness score and the final reward."""

    name_match: float
    param_name_match: float
    param_value_match: float
    max_score: float
    correctness: float  # in [-3, 3]
    format_reward: float  # 0 or 1
    exact: bool  # every ground-truth call reproduced exactly and nothing else called

    @property
    def reward(self) -> float:
        """``R_format + R_correct``, in [-3, 4]."""
        return self.format_reward + self.correctness


def _jaccard(a: set, b: set) -> float:
    union = a | b
    return len(a & b) / len(union) if union else 1.0


def _pair_score(gt: ToolCall, pred: ToolCall) -> tuple[float, float]:
    if gt.name != pred.name:
        return 0.0, 0.0
    keys_g, keys_p = set(gt.arguments), set(pred.arguments)
    values = sum(1.0 for k in keys_g if k in pred.arguments and pred.arguments[k] == gt.arguments[k])
    return _jaccard(keys_g, keys_p), values


def _best_pairing(gt: Sequence[ToolCall], pred: Sequence[ToolCall]) -> tuple[float, float]:
    """Highest (param-name, param-value) sums over one-to-one pairings of ground truth with predictions."""
    if not gt or not pred:
        return 0.0, 0.0
    table = [[_pair_score(g, p) for p in pred] for g in gt]

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


def toolrl_score(predicted: Sequence[ToolCall], ground_truth: Sequence[ToolCall], format_ok: bool) -> ToolRLScore:
    """Score predicted calls against the ground truth with ToolRL's reward."""
    max_score = 1.0 + len(ground_truth) + sum(len(g.arguments) for g in ground_truth)
    if not predicted and not ground_truth:
        return ToolRLScore(1.0, 0.0, 0.0, max_score, 3.0, float(format_ok), True)
    name_match = _jaccard({g.name for g in ground_truth}, {p.name for p in predicted})
    param_names, param_values = _best_pairing(ground_truth, predicted)
    score = name_match + param_names + param_values
    correctness = 6.0 * score / max_score - 3.0
    exact = len(predicted) == len(ground_truth) and score >= max_score - 1e-9
    return ToolRLScore(name_match, param_names, param_values, max_score, correctness, float(format_ok), exact)
