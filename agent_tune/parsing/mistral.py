"""Mistral tool calls, in both forms the family uses.

* v0.3 style (scored by bfcl-eval's Mistral FC handler, which ``json.loads`` the whole response):
  ``[TOOL_CALLS] [{"name": "f", "arguments": {...}}, ...]``;
* newer tokenizers (v11+, no bfcl-eval scorer; vLLM's mistral parser reads it):
  ``[TOOL_CALLS]f[ARGS]{...}`` repeated per call, optionally with ``[CALL_ID]id`` after the name.

Rejected as errors: a bare object instead of an array, ``arguments`` missing, null or a JSON string,
an unterminated or malformed array, and, because the scorer reads the whole response as the calls,
every call of a response that also holds text (before ``[TOOL_CALLS]`` or after the calls) or a
malformed call. ``format_calls`` writes the array form alone. See docs/parsing.md.
"""

from __future__ import annotations

import re

from agent_tune.parsing import _json
from agent_tune.parsing._whole import whole_response_only
from agent_tune.parsing.base import ToolCallParser
from agent_tune.parsing.registry import register_tool_parser
from agent_tune.parsing.types import ParsedResponse, ToolCall, ToolCallError

TOOL_CALLS, ARGS = "[TOOL_CALLS]", "[ARGS]"
FORM = '[TOOL_CALLS] [{"name": <function-name>, "arguments": <args-json-object>}, ...]'
_EOS = re.compile(r"</s>\s*$")
_NAME = re.compile(r"\s*([^\s\[\]{}]+)\s*(?:\[CALL_ID\]\s*[^\s\[]*\s*)?" + re.escape(ARGS))


@register_tool_parser("mistral")
class MistralToolParser(ToolCallParser):
    """``[TOOL_CALLS]`` followed by a JSON array, or by ``name[ARGS]{json}``."""

    def parse(self, text: str) -> ParsedResponse:
        segments = _EOS.sub("", text).split(TOOL_CALLS)
        out = ParsedResponse(content="")
        content = [segments[0]]
        for seg in segments[1:]:
            content.append(_parse_segment(seg, out))
        out.content = "".join(content).strip()
        if out.content:
            whole_response_only(out, f"the response holds text besides the calls; write only {FORM}")
        elif out.errors:
            whole_response_only(out, f"another call in the response is malformed, so none is read; write {FORM}")
        return out

    def format_calls(self, calls: list[ToolCall], content: str = "") -> str:
        """``[TOOL_CALLS] [...]`` alone (the scorer reads nothing else); ``content`` only without calls."""
        if not calls:
            return content
        return f"{TOOL_CALLS} {_json.dumps([{'name': c.name, 'arguments': c.arguments} for c in calls])}"


def _parse_segment(seg: str, out: ParsedResponse) -> str:
    """Decode the calls in the text after one ``[TOOL_CALLS]`` into ``out``; return the leftover content."""

    def fail(raw: str, reason: str) -> None:
        out.errors.append(ToolCallError(len(out.calls) + len(out.errors), raw.strip(), reason))

    def add(obj: object, raw: str) -> None:
        try:
            out.calls.append(_json.strict_call(obj, raw))
        except _json.DecodeFailure as exc:
            fail(raw, exc.reason)

    pos = _json.skip_ws(seg, 0)
    if (named := _NAME.match(seg)) is not None:  # name[ARGS]{...}
        start = _json.skip_ws(seg, named.end())
        try:
            args, end = _json.raw_decode(seg, start)
        except _json.DecodeFailure as exc:
            fail(TOOL_CALLS + seg, exc.reason)
            return ""
        add({"name": named.group(1), "arguments": args}, TOOL_CALLS + seg[:end])
        return seg[end:]
    if seg[pos : pos + 1] == "{":
        fail(TOOL_CALLS + seg, f"the calls after {TOOL_CALLS} must be a JSON array, even for one call; write {FORM}")
        return ""
    if seg[pos : pos + 1] != "[":
        fail(TOOL_CALLS + seg, f"expected a JSON array or name{ARGS}{{...}} after {TOOL_CALLS}")
        return ""
    pos = _json.skip_ws(seg, pos + 1)
    while seg[pos : pos + 1] != "]":
        if pos >= len(seg):
            fail(TOOL_CALLS + seg, f"unterminated JSON array after {TOOL_CALLS}")
            return ""
        try:
            obj, end = _json.raw_decode(seg, pos)
        except _json.DecodeFailure as exc:
            fail(seg[pos:], exc.reason)
            return ""
        add(obj, seg[pos:end])
        pos = _json.skip_ws(seg, end)
        if seg[pos : pos + 1] == ",":
            pos = _json.skip_ws(seg, pos + 1)
        elif pos < len(seg) and seg[pos : pos + 1] != "]":
            fail(seg[pos:], "expected ',' or ']' between tool calls in the array")
            return ""
    return seg[pos + 1 :]
