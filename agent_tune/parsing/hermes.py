"""Hermes-style tool calls, as Qwen2.5 and Qwen3 write them.

Each call is a block ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``; a response may
hold several, with text around them (the content). The accepted set is what bfcl-eval's Qwen FC handler
(the leaderboard's scorer) reads: its regex ``<tool_call>\\n(.*?)\\n</tool_call>``, ``json.loads`` of
the span, and a JSON object with a string ``"name"`` and an object ``"arguments"``. Whitespace inside
the block around the JSON and a ``</tool_call>`` inside a JSON string are fine (the scorer reads them).
Everything else that carries a ``<tool_call>``/``</tool_call>`` tag is a ``ToolCallError`` whose reason
names the fault and the accepted form: no newline after ``<tool_call>`` or before ``</tool_call>``, an
unterminated block, a block that runs into the next one, invalid JSON, ``arguments`` missing, null or a
JSON string, a stray ``</tool_call>``. See docs/parsing.md.
"""

from __future__ import annotations

import re
from typing import Iterator

from agent_tune.parsing import _json
from agent_tune.parsing.base import ToolCallParser
from agent_tune.parsing.registry import register_tool_parser
from agent_tune.parsing.types import ParsedResponse, ToolCall, ToolCallError

OPEN, CLOSE = "<tool_call>", "</tool_call>"
FORM = '<tool_call>\\n{"name": <function-name>, "arguments": <args-json-object>}\\n</tool_call>'
_BLOCK = re.compile(rf"{re.escape(OPEN)}\n(.*?)\n{re.escape(CLOSE)}", re.DOTALL)  # bfcl-eval's regex
_OPEN_NL, _NL_CLOSE = OPEN + "\n", "\n" + CLOSE
_OPEN_NL_LEN, _NL_CLOSE_LEN = len(_OPEN_NL), len(_NL_CLOSE)
_WS_CLOSE = re.compile(r"\s*" + re.escape(CLOSE))
_TAG = re.compile(rf"{re.escape(OPEN)}|{re.escape(CLOSE)}")
_MIN_TAG = min(len(OPEN), len(CLOSE))


@register_tool_parser("hermes")
class HermesToolParser(ToolCallParser):
    """``<tool_call>\\n{json}\\n</tool_call>`` blocks (Qwen2.5 / Qwen3), as the leaderboard reads them."""

    def parse(self, text: str) -> ParsedResponse:
        if OPEN not in text and CLOSE not in text:  # no tag at all (the usual answer to the user): all content
            return ParsedResponse(text.strip(), [], [])  # the lists given: no default factories called
        out = ParsedResponse("", [], [])
        content: list[str] = []
        pos = 0
        # the spans of _blocks(text), inlined (no generator per answer)
        while (start := text.find(_OPEN_NL, pos)) >= 0:
            close = text.find(_NL_CLOSE, start + _OPEN_NL_LEN)
            if close < 0:
                break
            end = close + _NL_CLOSE_LEN
            # a gap shorter than a tag holds none (the usual "\n" between blocks): no search
            content.append(text[pos:start] if start - pos < _MIN_TAG else _scan_gap(text, pos, start, out))
            raw = text[start:end]
            result = _decode_block(text[start + _OPEN_NL_LEN : close], raw)
            if type(result) is not str:  # a ToolCall (else the reason)
                out.calls.append(result)
            else:
                out.errors.append(ToolCallError(_next_index(out), raw, result))
            pos = end
        content.append(text[pos:] if len(text) - pos < _MIN_TAG else _scan_gap(text, pos, len(text), out))
        out.content = "".join(content).strip()
        return out

    def format_calls(self, calls: list[ToolCall], content: str = "") -> str:
        blocks = [f"{OPEN}\n{_json.dumps({'name': c.name, 'arguments': c.arguments})}\n{CLOSE}" for c in calls]
        return "\n".join(([content] if content else []) + blocks)


def _blocks(text: str) -> Iterator[tuple[int, str, int]]:
    """(start, body, end) of every span ``_BLOCK.finditer`` matches, found with ``str.find`` (same spans,
    without the regex's character-by-character lazy scan): the leftmost ``<tool_call>\\n``, its body up
    to the first ``\\n</tool_call>`` after it, and on from the end; with no close after the leftmost open
    there is none after any later one either."""
    pos = 0
    while (start := text.find(_OPEN_NL, pos)) >= 0:
        close = text.find(_NL_CLOSE, start + len(_OPEN_NL))
        if close < 0:
            return
        pos = close + len(_NL_CLOSE)
        yield start, text[start + len(_OPEN_NL) : close], pos


def _next_index(out: ParsedResponse) -> int:
    return len(out.calls) + len(out.errors)


_scan_once = _json.DECODER.scan_once
_JSON_WS = _json.JSON_WS


def _decode_block(body: str, raw: str) -> ToolCall | str:
    """The call (its ``raw`` text given) in the span the scorer's regex captured, or why the scorer would
    not take it."""
    # Fast path, the well-formed call: the same tests as the path below, inlined; anything else (and any
    # decoding error) goes down that path, which words the reason.
    stripped = body.strip(_JSON_WS)
    try:
        obj, end = _scan_once(stripped, 0)  # = _json.DECODER.raw_decode(stripped, 0), less its Python frame
    except (StopIteration, ValueError, RecursionError):
        obj, end = None, -1
    if end == len(stripped) and type(obj) is dict:
        name, args = obj.get("name"), obj.get("arguments")
        if type(name) is str and name.strip() and type(args) is dict:
            return ToolCall(name, args, raw)
    return _decode_block_checked(body, raw)


def _decode_block_checked(body: str, raw: str) -> ToolCall | str:
    """:func:`_decode_block` step by step, with the reason for every way a block can fail."""
    try:
        obj = _json.loads(body)
    except _json.DecodeFailure as exc:
        if CLOSE in body:
            return (f"{CLOSE} must be on its own line: without a newline before it the block runs on to the "
                    f"next \\n{CLOSE} and is unreadable (with the blocks in between); write {FORM}")
        if OPEN in body:
            return (f"unterminated {OPEN} block: another {OPEN} starts before its {CLOSE}, so both blocks "
                    f"are unreadable; close every block, one per call: {FORM}")
        return f"{exc.reason}; write {FORM}"
    try:
        return _json.strict_call(obj, raw)
    except _json.DecodeFailure as exc:
        return exc.reason


def _scan_gap(text: str, lo: int, hi: int, out: ParsedResponse) -> str:
    """Record every tag in ``text[lo:hi]`` (outside accepted-form blocks) as an error; return the rest."""
    tag = _TAG.search(text, lo, hi)
    if tag is None:  # the usual gap
        return text[lo:hi]
    content: list[str] = []
    pos = lo
    while tag is not None:
        content.append(text[pos : tag.start()])
        if tag.group(0) == CLOSE:
            stop, reason = tag.end(), f"{CLOSE} without an opening {OPEN}; write {FORM}"
        else:
            stop, reason = _off_form_block(text, tag.start(), hi)
        out.errors.append(ToolCallError(_next_index(out), text[tag.start() : stop], reason))
        pos = stop
        tag = _TAG.search(text, pos, hi)
    content.append(text[pos:hi])
    return "".join(content)


def _off_form_block(text: str, start: int, hi: int) -> tuple[int, str]:
    """End and reason for a ``<tool_call>`` at ``start`` that the scorer's regex does not match."""
    body = start + len(OPEN)
    close, nxt = -1, text.find(OPEN, body, hi)
    try:  # JSON-aware end first, so a "</tool_call>" inside a string does not cut the block
        _, end = _json.raw_decode(text, _json.skip_ws(text, body))
        if after := _WS_CLOSE.match(text, end, hi):
            close = after.end() - len(CLOSE)
    except _json.DecodeFailure:
        pass
    if close < 0 and (c := text.find(CLOSE, body, hi)) >= 0 and (nxt < 0 or c < nxt):
        close = c
    stop = close + len(CLOSE) if close >= 0 else (nxt if nxt >= 0 else hi)
    faults = []
    if not text.startswith("\n", body):
        faults.append(f"no newline right after {OPEN}")
    if close < 0:
        faults.append(f"unterminated {OPEN} block (no {CLOSE})")
    elif text[close - 1 : close] != "\n":
        faults.append(f"no newline right before {CLOSE}")
    if not faults:  # "<tool_call>\n</tool_call>": one newline, nothing between
        faults.append("empty block")
    return stop, f"{'; '.join(faults)}, so the block is not read as a call; write {FORM}"


def _checked(obj: object, raw: str) -> ToolCall | str:
    """``hermes_bfcl``'s per-block check (kept as it was: ``arguments`` may be missing or a JSON string)."""
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
