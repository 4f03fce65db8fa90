"""The rule shared by formats whose scorer reads the whole response as the calls (llama3_json, mistral,
pythonic): a response that mixes calls with other text runs none of them."""

from __future__ import annotations

from agent_tune.parsing.types import ParsedResponse, ToolCall, ToolCallError


def whole_response_only(out: ParsedResponse, why: str) -> None:
    """Turn every call in ``out`` into an error saying it was not run because of ``why``.

    The errors keep the calls' positions (``index``) among the response's call blocks; errors already in
    ``out`` stay. ``out.content`` is left as it is.
    """
    if not out.calls:
        return
    rejected = [(i, c.raw) for i, c in _positions(out)]
    out.errors = sorted(
        out.errors + [ToolCallError(i, raw, f"not run: {why}") for i, raw in rejected], key=lambda e: e.index
    )
    out.calls = []


def _positions(out: ParsedResponse) -> list[tuple[int, ToolCall]]:
    """``(index, call)`` for each call: the indices that the errors do not take, in order."""
    taken = {e.index for e in out.errors}
    free = (i for i in range(len(out.calls) + len(out.errors)) if i not in taken)
    return [(next(free), c) for c in out.calls]
