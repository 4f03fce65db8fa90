"""Worked examples of the call format ("shots") for BFCL single-turn tasks of the ``toolcall`` env.

A cold start: SmolLM2-135M rarely calls a tool from the tool listing alone. A shot is ANOTHER single-turn
entry answered by its reference calls, shown as earlier turns before the row's question::

    user       the other entry's question
    assistant  its reference calls (:func:`~agent_tune.envs.bfcl.single_turn.task.reference_calls`),
               written by the configured tool parser (``format_calls``)

Nothing follows the assistant turn: a single-turn episode is one generation, so the calls end the shot
(no tool result, no closing text). The shots' functions are offered beside the row's own
(:func:`single_turn_shot_tools`; the env lists them all in one seeded order), so a shot shows a call to a
listed function, the behaviour the row asks for. (Shots calling functions the listing does not offer taught
SmolLM2-135M to invent function names: in a 3-step GRPO check of that layout not one of 48 answers named an
offered function.) The row's checker still scores only the row's own functions: calling a shot's function
is a wrong function.

:func:`choose_single_turn_shots` picks them for a row, deterministically from a seed and the row's id,
from a pool of entries: never the row's own entry, only entries whose question is one user message with
a non-empty reference answer, whose rendered shot (question + calls, characters) stays under
``max_chars``, and whose calls the row's own checker would not accept (so a shot never shows the row's
answer). The pool is the caller's rule; ``data_preprocess/toolcall.py --source bfcl --shots K`` draws
every row's shots, train, val and test alike, from the TRAIN split's entries: no val/test entry's answer
is ever shown in any row (training rows included), and eval rows see the same kind of prompt training
rows do. :func:`single_turn_shot_messages` renders the chosen ids; the env prepends them (``shots=[...]``).
"""

from __future__ import annotations

import copy
from functools import lru_cache
from typing import Any, Iterable, Sequence

from agent_tune.envs.bfcl.single_turn.ast_check import ast_verdict
from agent_tune.envs.bfcl.single_turn.entries import SingleTurnEntry, load_single_turn
from agent_tune.envs.bfcl.single_turn.task import toolrl_ground_truth
from agent_tune.envs.shots import draw_shots, example_messages
from agent_tune.parsing import ToolCall, get_tool_parser

# A shot longer than this (question + calls written by the Hermes parser, characters) is not used: the
# median simple_python shot is ~210 characters, so this keeps ~85% of them and prompts stay short.
DEFAULT_MAX_SHOT_CHARS = 300
# The parser that measures a shot's size (the env writes shots with its configured parser).
SIZE_TOOL_PARSER = "hermes"


@lru_cache(maxsize=4096)
def _shot_parts(test_id: str) -> tuple[str, tuple[ToolCall, ...]] | None:
    """The question and reference calls of ``test_id``, or None when it cannot be a shot (no reference
    answer, or a question that is not exactly one user message)."""
    entry = load_single_turn(test_id)
    calls = tuple(ToolCall(c["name"], c["arguments"]) for c in toolrl_ground_truth(entry))
    if not calls or [m.get("role") for m in entry.messages] != ["user"]:
        return None
    return str(entry.messages[0].get("content", "")), calls


@lru_cache(maxsize=4096)
def shot_size(test_id: str) -> int:
    """Characters of a shot's question and its calls as the Hermes parser writes them (0: not a shot)."""
    parts = _shot_parts(test_id)
    if parts is None:
        return 0
    question, calls = parts
    return len(question) + len(get_tool_parser(SIZE_TOOL_PARSER).format_calls(list(calls)))


def _answers_row(row: SingleTurnEntry, calls: Sequence[ToolCall]) -> bool:
    """True if ``calls`` equal the row's reference calls or the row's checker would accept them (the
    (ir)relevance categories have no answer to show)."""
    shown = [{c.name: dict(c.arguments)} for c in calls]
    if shown == [{c["name"]: c["arguments"]} for c in toolrl_ground_truth(row)]:
        return True
    return row.possible_answer is not None and ast_verdict(row.functions, shown, row.possible_answer,
                                                           row.category).valid


def eligible_single_turn_shots(test_id: str, pool: Iterable[str],
                               max_chars: int = DEFAULT_MAX_SHOT_CHARS) -> list[str]:
    """The ids of ``pool`` that may serve as shots for ``test_id``, in pool order."""
    row = load_single_turn(test_id)
    out = []
    for cand in pool:
        if cand == test_id:
            continue
        parts = _shot_parts(cand)
        if parts is None or shot_size(cand) > max_chars or _answers_row(row, parts[1]):
            continue
        out.append(cand)
    return out


def choose_single_turn_shots(test_id: str, pool: Sequence[str], k: int, seed: int = 0,
                             max_chars: int = DEFAULT_MAX_SHOT_CHARS) -> list[str]:
    """``k`` shots for ``test_id`` drawn from ``pool`` (the same for a seed and row); fewer if fewer qualify."""
    return draw_shots(test_id, k, seed, lambda: eligible_single_turn_shots(test_id, pool, max_chars))


@lru_cache(maxsize=4096)
def _shot(test_id: str, tool_parser: str) -> tuple[tuple[str, str], ...]:
    parts = _shot_parts(test_id)
    if parts is None:
        raise ValueError(f"toolcall shots: {test_id} has no reference answer or is not one user question")
    question, calls = parts
    return tuple((m["role"], m["content"]) for m in example_messages(question, calls, get_tool_parser(tool_parser)))


def single_turn_shot_tools(ids: Sequence[str]) -> list[dict[str, Any]]:
    """The OpenAI-style tools of the shots' entries, in shot order, fresh dicts each call."""
    return [copy.deepcopy(tool) for test_id in ids for tool in load_single_turn(test_id).tools]


def single_turn_shot_messages(ids: Sequence[str], tool_parser: str = "hermes") -> list[dict[str, Any]]:
    """The conversation turns showing ``ids`` (single-turn test ids) as worked examples, fresh dicts each call."""
    return [{"role": role, "content": content} for test_id in ids for role, content in _shot(test_id, tool_parser)]
