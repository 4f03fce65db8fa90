"""Llama 3.1 / 3.2 JSON tool calls: ``{"name": ..., "parameters": {...}}``.

Accepted (what bfcl-eval's Llama 3.1 handler reads): a response that is only the calls, JSON objects
with a string ``"name"`` and an object ``"parameters"``, separated by ``;``, optionally after a leading
``<|python_tag|>`` and before ``<|eom_id|>``/``<|eot_id|>``. A ``{`` at the start of the response, of a
line, or after ``;`` opens a candidate; one that decodes to an object with a ``"name"``, or fails to
decode but starts like a call (``{"name"``), is a call attempt; other JSON and text stay content.
Rejected as errors: ``"arguments"`` instead of ``"parameters"``, ``parameters`` missing, null or a JSON
string, calls not separated by ``;``, and, because the scorer decodes the whole response, every call
of a response that also holds text or a malformed call. See docs/parsing.md.
"""

from __future__ import annotations

import re

from agent_tune.parsing import _json
from agent_tune.parsing._whole import whole_response_only
from agent_tune.parsing.base import ToolCallParser
from agent_tune.parsing.registry import register_tool_parser
from agent_tune.parsing.types import ParsedResponse, ToolCall, ToolCallError

PYTHON_TAG = "<|python_tag|>"
_END_TOKENS = re.compile(r"<\|(?:eom_id|eot_id)\|>")
_CALL_START = re.compile(r'\{\s*"name"\s*:')
_SEPARATOR = re.compile(r"\s*;")
FORM = '{"name": <function-name>, "parameters": <args-json-object>}; {...}'


@register_tool_parser("llama3_json")
class Llama3JsonToolParser(ToolCallParser):
    """JSON tool calls as Llama 3.1 / 3.2 write them."""

    def parse(self, text: str) -> ParsedResponse:
        text = _END_TOKENS.sub("", text)
        tag = text.find(PYTHON_TAG)
        body_start = 0 if tag < 0 else tag + len(PYTHON_TAG)
        out = ParsedResponse(content="")
        content = [text[:tag]] if tag >= 0 else []
        text = text[body_start:]
        pos = scan = 0
        separated = False
        while (start := text.find("{", scan)) >= 0:
            scan = start + 1
            if not _opens_line(text, start):
                continue
            index = len(out.calls) + len(out.errors)
            try:
                obj, end = _json.raw_decode(text, start)
            except _json.DecodeFailure as exc:
                if not _CALL_START.match(text, start):
                    continue
                nxt = _next_call_start(text, start + 1)
                content.append(text[pos:start])
                out.errors.append(ToolCallError(index, text[start:nxt].rstrip(), exc.reason))
                pos = scan = nxt
                separated = True  # the broken call is the error; do not blame the next one too
                continue
            if not (isinstance(obj, dict) and "name" in obj):
                scan = end  # plain JSON inside the text: content
                continue
            content.append(text[pos:start])
            try:
                if index > 0 and not separated:
                    raise _json.DecodeFailure(f'calls must be separated by ";"; write {FORM}')
                out.calls.append(_json.strict_call(obj, text[start:end], "parameters"))
            except _json.DecodeFailure as exc:
                out.errors.append(ToolCallError(index, text[start:end], exc.reason))
            sep = _SEPARATOR.match(text, end)
            pos = scan = sep.end() if sep else end
            separated = sep is not None
        content.append(text[pos:])
        out.content = "".join(content).strip()
        if out.content:
            whole_response_only(out, f"the response holds text besides the calls; write only the calls: {FORM}")
        elif out.errors:
            whole_response_only(out, f"another call in the response is malformed, so none is read; write {FORM}")
        return out

    def format_calls(self, calls: list[ToolCall], content: str = "") -> str:
        """The calls alone, ``; ``-separated (the scorer reads nothing else); ``content`` only without calls."""
        if not calls:
            return content
        return "; ".join(f'{{"name": {_json.dumps(c.name)}, "parameters": {_json.dumps(c.arguments)}}}' for c in calls)


def _opens_line(text: str, pos: int) -> bool:
    """True if only spaces/tabs lie between ``pos`` and the start of the text, a newline or a ``;``."""
    before = text[:pos].rstrip(" \t")
    return not before or before[-1] in "\n;"


def _next_call_start(text: str, pos: int) -> int:
    """Start of the next line-opening ``{"name"`` after ``pos``, or the end of the text."""
    for m in _CALL_START.finditer(text, pos):
        if _opens_line(text, m.start()):
            return m.start()
    return len(text)
