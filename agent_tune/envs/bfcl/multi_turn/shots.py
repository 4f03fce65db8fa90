"""Worked examples of the call format ("shots"): a cold start for models that rarely call a tool.

A shot is the first turn of ANOTHER BFCL scenario played by its ground truth, shown as earlier turns of
the conversation::

    user       the other scenario's first question
    assistant  its first-turn ground-truth calls, written by the configured tool parser (format_calls)
    tool       each call's result, executed for real on that scenario's own backend
    assistant  a short closing text (what ends a turn)

:func:`choose_shots` picks them for a row, deterministically from a seed: base entries of other
scenarios whose first-turn ground truth is non-empty, calls only functions the row shows (visible from
its first turn), satisfies their schema, repeats none of the row's ground-truth calls, and stays short
(results included). :func:`shot_messages` renders the chosen test ids; the BFCL env prepends them to
its first observation (``shots=[...]``) and ``data_preprocess/bfcl.py --shots K`` writes them into
training rows. SmolLM2-135M almost never calls a BFCL tool without them (docs/bfcl.md: on
train_base at temperature 0.7 it attempts a call in its first answer 0% of the time with 0-1 shots, 20% with 3).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterable, Sequence

from agent_tune.envs.bfcl.calls import parse_call_string, syntax_error_text
from agent_tune.envs.bfcl.multi_turn.backend import BFCLBackend
from agent_tune.envs.bfcl.multi_turn.data import category_of, load_entry
from agent_tune.envs.bfcl.schema import tool_name, validate_arguments
from agent_tune.envs.shots import draw_shots, example_messages
from agent_tune.parsing import ToolCall, get_tool_parser

SHOT_CATEGORY = "multi_turn_base"
CLOSING_TEXT = "Done."
# A shot longer than this (question + calls + results, characters) is not used: prompts must stay short.
DEFAULT_MAX_SHOT_CHARS = 500


def scenario_of(test_id: str) -> int:
    """``multi_turn_miss_func_12`` -> 12 (entries sharing the number are variants of one scenario)."""
    return int(test_id.rsplit("_", 1)[1])


@lru_cache(maxsize=512)
def _first_turn(test_id: str) -> tuple[tuple[ToolCall, ...], tuple[str, ...]] | None:
    """The first-turn ground-truth calls of ``test_id`` and their results on its own backend, or None
    when the turn has no call or a call string does not parse."""
    entry = load_entry(test_id)
    strings = entry.ground_truth[0] if entry.ground_truth else []
    if not strings or any(syntax_error_text(s) is not None for s in strings):
        return None
    backend = BFCLBackend.for_entry(test_id)
    calls, results = [], []
    for text in strings:
        try:
            call = parse_call_string(text, backend.param_names)
        except (ValueError, KeyError):
            return None
        calls.append(ToolCall(call.name, call.arguments))
        results.append(backend.execute(call.name, call.arguments))
    return tuple(calls), tuple(results)


def _key(call: ToolCall) -> tuple[str, str]:
    return call.name, repr(sorted(call.arguments.items()))


def _row_calls(test_id: str) -> set[tuple[str, str]]:
    """Every ground-truth call of the row, normalised (name, sorted arguments)."""
    entry = load_entry(test_id)
    backend = BFCLBackend.for_entry(test_id)
    out = set()
    for turn in entry.ground_truth:
        for text in turn:
            if syntax_error_text(text) is None:
                try:
                    out.add(_key(parse_call_string(text, backend.param_names)))
                except (ValueError, KeyError):
                    continue
    return out


def shot_size(test_id: str) -> int:
    """Characters of a shot's question, calls and results (a proxy for its prompt tokens)."""
    first = _first_turn(test_id)
    if first is None:
        return 0
    question = "".join(str(m.get("content", "")) for m in load_entry(test_id).question[0])
    return len(question) + sum(len(repr(c.arguments)) + len(c.name) for c in first[0]) + sum(map(len, first[1]))


def eligible_shots(test_id: str, pool: Iterable[str], max_shot_chars: int = DEFAULT_MAX_SHOT_CHARS) -> list[str]:
    """The test ids of ``pool`` that may serve as shots for ``test_id``, in pool order."""
    entry = load_entry(test_id)
    visible = {tool_name(t): t for t in entry.functions}
    row_calls = _row_calls(test_id)
    own = scenario_of(test_id)
    out = []
    for cand in pool:
        if scenario_of(cand) == own or category_of(cand) != SHOT_CATEGORY:
            continue
        first = _first_turn(cand)
        if first is None or shot_size(cand) > max_shot_chars:
            continue
        calls = first[0]
        if all(c.name in visible and not validate_arguments(visible[c.name], c.arguments) for c in calls) \
                and not any(_key(c) in row_calls for c in calls):
            out.append(cand)
    return out


def choose_shots(test_id: str, k: int, pool: Sequence[str], seed: int = 0,
                 max_shot_chars: int = DEFAULT_MAX_SHOT_CHARS) -> list[str]:
    """``k`` shots for ``test_id`` drawn from ``pool`` (reproducible for a seed and row); fewer if fewer qualify."""
    return draw_shots(test_id, k, seed, lambda: eligible_shots(test_id, pool, max_shot_chars))


@lru_cache(maxsize=1024)
def _shot(test_id: str, tool_parser: str) -> tuple[tuple[tuple[str, Any], ...], ...]:
    first = _first_turn(test_id)
    if first is None:
        raise ValueError(f"bfcl shots: {test_id} has no usable first-turn ground truth")
    calls, results = first
    messages = example_messages(load_entry(test_id).question[0], calls, get_tool_parser(tool_parser), results,
                                CLOSING_TEXT)
    return tuple(tuple(m.items()) for m in messages)


def shot_messages(shots: Sequence[str], tool_parser: str = "hermes") -> list[dict[str, Any]]:
    """The conversation turns showing ``shots`` (test ids) as worked examples, fresh dicts each call."""
    return [dict(m) for test_id in shots for m in _shot(test_id, tool_parser)]
