"""Perturbed BFCL multi-turn trajectories: the ground truth changed in ways bfcl-eval's checker must judge.

Each perturbation maps the ground truth (per turn, a list of calls) to another trajectory (per turn, a list of
steps). Every one of them is schema-valid, so both modes of the env execute them. Drawn from a seeded
``random.Random``, so a run is repeatable.

Used by the fidelity test (``tests/envs/test_bfcl_fidelity.py``) and the identity tool
(:mod:`agent_tune.testing.bfcl_identity`).
"""

from __future__ import annotations

import random
from typing import Any

from agent_tune.parsing import ToolCall


def _mutate_value(value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 1.5
    if isinstance(value, str):
        return value + "_x" if value else "x"
    if isinstance(value, list):
        return value[:-1] if value else ["x"]
    if isinstance(value, dict):
        return {}
    return value


def _one_step_per_turn(turns: list[list[ToolCall]]) -> list[list[list[ToolCall]]]:
    return [[list(t)] for t in turns]


def perturbations(turns: list[list[ToolCall]], rng: random.Random) -> list[tuple[str, list[list[list[ToolCall]]]]]:
    out: list[tuple[str, list[list[list[ToolCall]]]]] = []
    positions = [(t, i) for t, calls in enumerate(turns) for i in range(len(calls))]
    if positions:
        t, i = rng.choice(positions)
        dropped = [list(c) for c in turns]
        del dropped[t][i]
        out.append(("drop_call", _one_step_per_turn(dropped)))

        t, i = rng.choice(positions)
        call = turns[t][i]
        if call.arguments:
            key = rng.choice(sorted(call.arguments))
            changed = [list(c) for c in turns]
            changed[t][i] = ToolCall(call.name, {**call.arguments, key: _mutate_value(call.arguments[key])})
            out.append(("change_arg", _one_step_per_turn(changed)))

        t, i = rng.choice(positions)
        extra = [list(c) for c in turns]
        extra[t].insert(i, turns[t][i])
        out.append(("duplicate_call", _one_step_per_turn(extra)))

        t, i = rng.choice(positions)
        if t > 0:
            moved = [list(c) for c in turns]
            call = moved[t].pop(i)
            moved[t - 1].append(call)
            out.append(("call_to_previous_turn", _one_step_per_turn(moved)))

    non_empty = [t for t, calls in enumerate(turns) if calls]
    if non_empty:
        t = rng.choice(non_empty)
        out.append(("drop_turn", _one_step_per_turn([[] if k == t else list(c) for k, c in enumerate(turns)])))
        swapped = [list(c) for c in turns]
        rng.shuffle(swapped[t])
        out.append(("shuffle_turn", _one_step_per_turn(swapped)))
    # one call per step instead of all calls in one step (same calls: should pass)
    out.append(("one_call_per_step", [[[c] for c in calls] for calls in turns]))
    # a call from another turn's ground truth inserted at the start of a turn
    if len(positions) > 1:
        (t1, i1), (t2, _) = rng.sample(positions, 2)
        foreign = [list(c) for c in turns]
        foreign[t2].insert(0, turns[t1][i1])
        out.append(("foreign_call", _one_step_per_turn(foreign)))
    return out
