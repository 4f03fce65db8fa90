"""ToolRL's call block: one ``<tool_call>`` block holding one JSON object per line.

ToolRL (Qian et al., 2025) asks for ``<tool_call>\\n{"name": ..., "parameters": {...}}\\n{...}\\n</tool_call>``
and reads it as its reward does: the text between ``<tool_call>`` and ``</tool_call>``, stripped, split on
newlines, every line ``json.loads``-ed into an object with ``"name"`` and ``"parameters"``. This parser
accepts exactly that (whitespace around the block's body and around each line is fine) and reports every
other tagged variant as a ``ToolCallError`` naming the fault: an empty block or an empty line, invalid
JSON, ``"arguments"`` instead of ``"parameters"`` (or it missing, null, a JSON string), an unterminated
block, a stray ``</tool_call>``, and a second block (ToolRL's answer has one; every call goes on its own
line of it). Nothing is evaluated: lines are decoded with ``json`` only. See docs/parsing.md.
"""

from __future__ import annotations

import re

from agent_tune.parsing import _json
from agent_tune.parsing.base import ToolCallParser
from agent_tune.parsing.registry import register_tool_parser
from agent_tune.parsing.types import ParsedResponse, ToolCall, ToolCallError

OPEN, CLOSE = "<tool_call>", "</tool_call>"
ARG_KEY = "parameters"
FORM = '<tool_call>\\n{"name": <function-name>, "parameters": <args-json-object>}\\n<one call per line>\\n</tool_call>'
_TAG = re.compile(rf"{re.escape(OPEN)}|{re.escape(CLOSE)}")


@register_tool_parser("toolrl")
class ToolRLToolParser(ToolCallParser):
    """One ``<tool_call>`` block, one ``{"name", "parameters"}`` JSON object per line (ToolRL's layout)."""

    def parse(self, text: str) -> ParsedResponse:
        out = ParsedResponse(content="")
        content: list[str] = []
        pos, blocks = 0, 0
        while (tag := _TAG.search(text, pos)) is not None:
            content.append(text[pos : tag.start()])
            if tag.group(0) == CLOSE:
                _error(out, CLOSE, f"{CLOSE} without an opening {OPEN}; write {FORM}")
                pos = tag.end()
                continue
            close, nxt = text.find(CLOSE, tag.end()), text.find(OPEN, tag.end())
            if close < 0 or 0 <= nxt < close:
                stop = nxt if nxt >= 0 else len(text)
                _error(out, text[tag.start() : stop], f"unterminated {OPEN} block (no {CLOSE}); write {FORM}")
                pos = stop
                continue
            end = close + len(CLOSE)
            blocks += 1
            if blocks > 1:
                _error(out, text[tag.start() : end],
                       f"a second {OPEN} block: put every call on its own line of one block; write {FORM}")
            else:
                _read_block(text[tag.end() : close], out)
            pos = end
        content.append(text[pos:])
        out.content = "".join(content).strip()
        return out

    def format_calls(self, calls: list[ToolCall], content: str = "") -> str:
        if not calls:
            return content
        lines = "\n".join(_json.dumps({"name": c.name, ARG_KEY: c.arguments}) for c in calls)
        return "\n".join(([content] if content else []) + [f"{OPEN}\n{lines}\n{CLOSE}"])


def _error(out: ParsedResponse, raw: str, reason: str) -> None:
    out.errors.append(ToolCallError(len(out.calls) + len(out.errors), raw, reason))


def _read_block(body: str, out: ParsedResponse) -> None:
    """Every line of the block's stripped body is one call (ToolRL's ``strip().split("\\n")``)."""
    body = body.strip()
    if not body:
        _error(out, f"{OPEN}\n{CLOSE}", f"empty block; write {FORM}")
        return
    for line in body.split("\n"):
        if not line.strip():
            _error(out, line, f"an empty line inside the block: one call per line, no blank lines; write {FORM}")
            continue
        try:
            call = _json.strict_call(_json.loads(line), line.strip(), ARG_KEY)
        except _json.DecodeFailure as exc:
            _error(out, line, f"{exc.reason}; write {FORM}")
            continue
        out.calls.append(call)
