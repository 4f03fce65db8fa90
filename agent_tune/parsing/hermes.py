"""Hermes-style tool calls, as Qwen2.5 and Qwen3 write them.

Each call is a block ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``; a response may
hold several, with text around them (the content). Tolerated: missing newlines or extra whitespace,
``arguments`` given as a JSON string holding an object, a ``</tool_call>`` inside a JSON string.

A block without ``</tool_call>`` (e.g. the sampler stopped on that string) is accepted when it holds
one complete JSON call object followed only by whitespace up to the next ``<tool_call>`` or the end of
the response; otherwise it is an error that says it is unterminated.
"""

from __future__ import annotations

import re

from agent_tune.parsing import _json
from agent_tune.parsing.base import ToolCallParser
from agent_tune.parsing.registry import register_tool_parser
from agent_tune.parsing.types import ParsedResponse, ToolCall, ToolCallError

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_AFTER_JSON = re.compile(rf"\s*({re.escape(CLOSE)}|{re.escape(OPEN)}|$)")


@register_tool_parser("hermes")
class HermesToolParser(ToolCallParser):
    """``<tool_call>{json}</tool_call>`` blocks (Qwen2.5 / Qwen3)."""

    def parse(self, text: str) -> ParsedResponse:
        out = ParsedResponse(content="")
        content: list[str] = []
        pos = 0
        while (start := text.find(OPEN, pos)) >= 0:
            content.append(text[pos:start])
            pos, result = _read_block(text, start)
            if isinstance(result, ToolCall):
                out.calls.append(result)
            else:
                out.errors.append(ToolCallError(len(out.calls) + len(out.errors), text[start:pos], result))
        content.append(text[pos:])
        out.content = "".join(content).strip()
        return out

    def format_calls(self, calls: list[ToolCall], content: str = "") -> str:
        blocks = [f"{OPEN}\n{_json.dumps({'name': c.name, 'arguments': c.arguments})}\n{CLOSE}" for c in calls]
        return "\n".join(([content] if content else []) + blocks)


def _read_block(text: str, start: int) -> tuple[int, ToolCall | str]:
    """Decode the block opening at ``start``: return where it ends and its call, or why it failed."""
    body = start + len(OPEN)
    try:  # JSON-aware end first, so a "</tool_call>" inside a string argument does not cut the block
        obj, end = _json.raw_decode(text, _json.skip_ws(text, body))
    except _json.DecodeFailure:
        end = -1
    if end >= 0 and (after := _AFTER_JSON.match(text, end)):  # closed, or unterminated but complete
        stop = after.end() if after.group(1) == CLOSE else after.start(1)
        return stop, _checked(obj, text[start:stop])
    close, nxt = text.find(CLOSE, body), text.find(OPEN, body)
    if nxt >= 0 and (close < 0 or nxt < close):  # unterminated: the block ends where the next one opens
        close, stop = -1, nxt
    else:
        stop = len(text) if close < 0 else close + len(CLOSE)
    try:
        obj = _json.loads(text[body : stop if close < 0 else close])
    except _json.DecodeFailure as exc:
        return stop, exc.reason if close >= 0 else f"unterminated {OPEN} block (no {CLOSE}): {exc.reason}"
    return stop, _checked(obj, text[start:stop])


def _checked(obj: object, raw: str) -> ToolCall | str:
    try:
        return _json.call_from_object(obj, raw)
    except _json.DecodeFailure as exc:
        return exc.reason


_STRICT_BLOCK = re.compile(rf"{re.escape(OPEN)}\n(.*?)\n{re.escape(CLOSE)}", re.DOTALL)


@register_tool_parser("hermes_bfcl")
class StrictHermesToolParser(HermesToolParser):
    """Hermes blocks exactly as bfcl-eval's Qwen FC handler reads them, for leaderboard parity.

    Only ``<tool_call>\\n...\\n</tool_call>`` (newlines required) is a call block; anything else, a
    compact ``<tool_call>{...}</tool_call>`` included, is plain content, as the handler ignores it.
    ``format_calls`` is hermes's (canonical Qwen form).
    """

    def parse(self, text: str) -> ParsedResponse:
        out = ParsedResponse(content=_STRICT_BLOCK.sub("", text).strip())
        for i, match in enumerate(_STRICT_BLOCK.finditer(text)):
            try:
                result: ToolCall | str = _checked(_json.loads(match.group(1)), match.group(0))
            except _json.DecodeFailure as exc:
                result = exc.reason
            if isinstance(result, ToolCall):
                out.calls.append(result)
            else:
                out.errors.append(ToolCallError(i, match.group(0), result))
        return out
