"""The BFCL multi-turn scoring rule, per turn, as bfcl-eval's ``multi_turn_checker`` applies it.

A turn whose ground truth is non-empty passes iff
1. the model made at least one decoded tool-call step in the turn,
2. every public attribute of every backend instance equals the ground truth's (state check), and
3. the ground truth's results for the turn are a multiset subset of all the model's results so far
   (response check; order does not matter, duplicates must be matched one for one).
An entry is correct iff every such turn passes and inference was not force-terminated.
When the model's backend has run exactly the ground truth's calls by the end of the turn (same methods, same
arguments type for type, same order: ``ground_truth.run_key``), check 2 holds by construction and is not walked
(``turn_error``'s ``same_calls``).
Turns with empty ground truth are not scored by BFCL (``BFCLToolEnv`` may score them in training).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from agent_tune.envs.bfcl.multi_turn.backend import BFCLBackend


@dataclass
class TurnVerdict:
    """Why a turn passed or failed (``error_type`` uses bfcl-eval's names)."""

    passed: bool
    error_type: str | None = None
    details: dict[str, Any] = field(default_factory=dict)


def state_differences(model: BFCLBackend, ground_truth_state: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per class, the public attributes whose values differ from the ground truth's (empty when equal).

    ``ground_truth_state`` maps class -> public attributes of the ground truth's instance, the
    attributes bfcl-eval's state checker compares.
    """
    diffs: dict[str, dict[str, Any]] = {}
    for class_name, gt_attrs in ground_truth_state.items():
        model_instance = model.instances[class_name]
        for attr, gt_value in gt_attrs.items():
            model_value = getattr(model_instance, attr)
            if model_value != gt_value:
                diffs.setdefault(class_name, {})[attr] = {"model": model_value, "ground_truth": gt_value}
    return diffs


def missing_results(model_results: Mapping[str, int], ground_truth_results: Mapping[str, int]) -> list[str]:
    """Ground-truth results not matched one-for-one by the model's results (multiset difference), in the
    ground truth's order. Both are multisets, result text -> count (a ``Counter``; the env keeps the
    model's up to date as calls run, so a turn's check costs the size of its ground truth)."""
    missing: list[str] = []
    for result, count in ground_truth_results.items():
        short = count - model_results.get(result, 0)
        if short > 0:
            missing.extend([result] * short)
    return missing


EMPTY_TURN = "multi_turn:empty_turn_model_response"
STATE_MISMATCH = "multi_turn:instance_state_mismatch"
RESPONSE_MISMATCH = "multi_turn:execution_response_mismatch"


def turn_error(
    model_acted: bool,
    model: BFCLBackend,
    ground_truth_state: dict[str, dict[str, Any]],
    all_model_results: Mapping[str, int],
    ground_truth_results: Mapping[str, int],
    same_calls: bool = False,
) -> str | None:
    """The per-turn rule's verdict alone: ``None`` when the turn passes, else the first check it fails (bfcl-eval's
    ``error_type``). What :func:`score_turn` decides, stopping at the first difference and building no details: the
    env scores every turn with it (one per turn of every episode).

    ``same_calls``: the model's backend, copied from the entry's initial state, has run exactly the calls the ground
    truth ran by the end of this turn (the same methods, arguments type for type, in the same order). The backends
    are deterministic, so the two states are then the same state and the state check has nothing to find: it is not
    walked (``tests/envs/test_bfcl_scoring.py`` checks that premise on every entry's ground truth)."""
    if not model_acted:
        return EMPTY_TURN
    if not same_calls:
        instances = model.instances
        # = state_differences(...) is not empty, stopping at the first attribute that differs
        for class_name, gt_attrs in ground_truth_state.items():
            model_instance = instances[class_name]
            for attr, gt_value in gt_attrs.items():
                if getattr(model_instance, attr) != gt_value:
                    return STATE_MISMATCH
    # = missing_results(...) is not empty, stopping at the first result missing
    get = all_model_results.get
    for result, count in ground_truth_results.items():
        if count > get(result, 0):
            return RESPONSE_MISMATCH
    return None


def score_turn(
    turn_index: int,
    model_acted: bool,
    model: BFCLBackend,
    ground_truth_state: dict[str, dict[str, Any]],
    all_model_results: Mapping[str, int],
    ground_truth_results: Mapping[str, int],
) -> TurnVerdict:
    """Apply the per-turn rule to a turn with non-empty ground truth (state after both have run), with the details of
    a failure (the attributes that differ, the results missing).

    ``all_model_results`` counts every result text of the model's calls so far, ``ground_truth_results``
    those the turn requires (multisets, e.g. ``Counter``).
    """
    error = turn_error(model_acted, model, ground_truth_state, all_model_results, ground_truth_results)
    if error is None:
        return TurnVerdict(True)
    if error == EMPTY_TURN:
        return TurnVerdict(False, error, {"turn": turn_index})
    if error == STATE_MISMATCH:
        diffs = state_differences(model, ground_truth_state)
        return TurnVerdict(False, error, {"turn": turn_index, "differences": diffs})
    missing = missing_results(all_model_results, ground_truth_results)
    return TurnVerdict(False, error, {"turn": turn_index, "missing": missing})
