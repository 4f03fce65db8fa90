"""Worked examples ("shots"): earlier turns that show a model the call format, for envs of every kind.

A worked example is a task played right, shown before the real question::

    user       the example's question
    assistant  its calls, written by the env's tool parser (``format_calls``)
    tool       each call's result (when the example has results)
    assistant  the example's closing answer (when it has one)

:func:`example_messages` renders one; :func:`draw_shots` is the one rule that picks ``k`` of them for a task,
reproducibly from a seed and the task's id. BFCL's multi-turn and single-turn shots and the mcp env's use both.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Sequence

from agent_tune.parsing import ToolCall


def draw_shots(task_id: str, k: int, seed: int, candidates: Callable[[], Sequence[Any]]) -> list[Any]:
    """``k`` of the ``candidates()`` (computed only when ``k > 0``) for task ``task_id``, the same for a seed
    and task; fewer if fewer qualify."""
    if k < 0:
        raise ValueError(f"number of shots must be >= 0, got {k}")
    if k == 0:
        return []
    pool = list(candidates())
    return random.Random(f"{seed}:{task_id}").sample(pool, min(k, len(pool)))


def example_messages(question: Sequence[dict[str, Any]] | str, calls: Sequence[ToolCall], tool_parser: Any,
                     results: Sequence[str] | None = None, answer: str | None = None) -> list[dict[str, Any]]:
    """The turns of one worked example: the question (a user message, or the messages given), the calls as the
    parser writes them, the results as tool messages (one per call) and the closing answer, fresh dicts."""
    if results is not None and len(results) != len(calls):
        raise ValueError(f"worked example: {len(calls)} call(s) but {len(results)} result(s)")
    messages = [{"role": "user", "content": question}] if isinstance(question, str) else [dict(m) for m in question]
    messages.append({"role": "assistant", "content": tool_parser.format_calls(list(calls))})
    messages.extend({"role": "tool", "name": c.name, "content": r} for c, r in zip(calls, results or ()))
    if answer is not None:
        messages.append({"role": "assistant", "content": answer})
    return messages
