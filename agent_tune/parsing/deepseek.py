"""DeepSeek tool calls: V3's form (``deepseek_v3``) and V3.1's (``deepseek_v31``).

Both put the calls in one section, ``<｜tool▁calls▁begin｜>`` ... ``<｜tool▁calls▁end｜>``, one block
``<｜tool▁call▁begin｜>`` ... ``<｜tool▁call▁end｜>`` per call; only the block's body differs:

* V3 (DeepSeek-V3, R1): ``function<｜tool▁sep｜>NAME\\n```json\\nARGS\\n```\\``, blocks joined by ``\\n``;
* V3.1: ``NAME<｜tool▁sep｜>ARGS``, blocks side by side.

The reference reader is vLLM's ``deepseek_v3`` / ``deepseek_v31`` tool parser (a regex per block whose
``.`` does not cross lines, then the arguments as JSON); the writer is the models' chat template (content,
then the section, then ``<｜end▁of▁sentence｜>``). Accepted: that form, whitespace between the blocks, text
before (and after) the section as content, a trailing ``<｜end▁of▁sentence｜>``. Everything else that carries
one of the five tags is a ``ToolCallError`` naming the fault and the form: a section without its end tag (its
complete blocks still run, as vLLM reads them), a block outside a section, an unterminated block, text
inside the section between blocks, a stray tag, a missing ``<｜tool▁sep｜>``, a type other than
``function`` (V3), a name that is empty or holds whitespace, the V3 fence missing, arguments over several
lines (vLLM's pattern misses them), invalid JSON, arguments that are not a JSON object. See docs/parsing.md.
"""

from __future__ import annotations

import re

from agent_tune.parsing import _json
from agent_tune.parsing.base import ToolCallParser
from agent_tune.parsing.registry import register_tool_parser
from agent_tune.parsing.types import ParsedResponse, ToolCall, ToolCallError

CALLS_BEGIN, CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL_BEGIN, CALL_END, SEP = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>", "<｜tool▁sep｜>"
EOS = "<｜end▁of▁sentence｜>"
_TAG_PREFIX = "<｜tool▁"  # every tag above starts with it
_STRAY = re.compile("|".join(re.escape(t) for t in (CALLS_END, CALL_BEGIN, CALL_END, SEP)))
_EOS_AT_END = re.compile(re.escape(EOS) + r"\s*$")
_FENCE_OPEN, _FENCE_CLOSE = "```json\n", "\n```"


class DeepSeekToolParser(ToolCallParser):
    """The section and block rules shared by DeepSeek's forms; a subclass reads and writes one block body."""

    form: str = ""  # the accepted form, quoted in every error
    joiner: str = ""  # what the template writes between two blocks

    def parse(self, text: str) -> ParsedResponse:
        if _TAG_PREFIX not in text:  # no tag at all (the usual answer to the user): all content
            return ParsedResponse(content=text.strip())
        text = _EOS_AT_END.sub("", text)
        out = ParsedResponse(content="")
        content: list[str] = []
        pos = 0
        while (begin := text.find(CALLS_BEGIN, pos)) >= 0:
            content.append(self._scan_gap(text, pos, begin, out))
            inner = begin + len(CALLS_BEGIN)
            end, again = text.find(CALLS_END, inner), text.find(CALLS_BEGIN, inner)
            if end < 0 or 0 <= again < end:
                stop = again if again >= 0 else len(text)
                self._scan_section(text, inner, stop, out)
                self._fail(out, text[begin:stop], f"unterminated {CALLS_BEGIN} section (no {CALLS_END}); "
                                                  f"write {self.form}")
                pos = stop
            else:
                self._scan_section(text, inner, end, out)
                pos = end + len(CALLS_END)
        content.append(self._scan_gap(text, pos, len(text), out))
        out.content = "".join(content).strip()
        return out

    def format_calls(self, calls: list[ToolCall], content: str = "") -> str:
        """``content`` then the section, as the chat template writes an assistant turn (less its EOS)."""
        if not calls:
            return content
        blocks = self.joiner.join(f"{CALL_BEGIN}{self._write_body(c)}{CALL_END}" for c in calls)
        return f"{content}{CALLS_BEGIN}{blocks}{CALLS_END}"

    def _write_body(self, call: ToolCall) -> str:
        raise NotImplementedError

    def _read_body(self, body: str) -> tuple[str, str] | str:
        """``(name, arguments text)`` of one block's body, or why it is not in the form."""
        raise NotImplementedError

    def _fail(self, out: ParsedResponse, raw: str, reason: str) -> None:
        out.errors.append(ToolCallError(len(out.calls) + len(out.errors), raw, reason))

    def _scan_section(self, text: str, lo: int, hi: int, out: ParsedResponse) -> None:
        """Decode the blocks of the section body ``text[lo:hi]`` into ``out``."""
        pos = lo
        while (pos := _json.skip_ws(text, pos)) < hi:
            if not text.startswith(CALL_BEGIN, pos):
                stop = text.find(CALL_BEGIN, pos, hi)
                stop = hi if stop < 0 else stop
                self._fail(out, text[pos:stop], f"text inside the {CALLS_BEGIN} section outside a call block; "
                                                f"write {self.form}")
                pos = stop
                continue
            body = pos + len(CALL_BEGIN)
            end, again = text.find(CALL_END, body, hi), text.find(CALL_BEGIN, body, hi)
            if end < 0 or 0 <= again < end:
                stop = again if again >= 0 else hi
                self._fail(out, text[pos:stop], f"unterminated {CALL_BEGIN} block (no {CALL_END}); write {self.form}")
                pos = stop
                continue
            self._add(out, text[body:end], text[pos : end + len(CALL_END)])
            pos = end + len(CALL_END)

    def _add(self, out: ParsedResponse, body: str, raw: str) -> None:
        read = self._read_body(body)
        if isinstance(read, str):
            return self._fail(out, raw, f"{read}; write {self.form}")
        name, args_text = read
        if not name or name != name.strip() or any(ch.isspace() for ch in name) or _TAG_PREFIX in name:
            return self._fail(out, raw, f"the function name must be non-empty, without whitespace, got {name!r}; "
                                        f"write {self.form}")
        if "\n" in args_text:
            return self._fail(out, raw, f"the arguments must be JSON on one line (the reader does not cross "
                                        f"lines); write {self.form}")
        try:
            args = _json.loads(args_text)
        except _json.DecodeFailure as exc:
            return self._fail(out, raw, f"{exc.reason}; write {self.form}")
        if not isinstance(args, dict):
            return self._fail(out, raw, f"the arguments must be a JSON object ({{}} for none), got "
                                        f"{_json.kind(args)}; write {self.form}")
        out.calls.append(ToolCall(name, args, raw))

    def _scan_gap(self, text: str, lo: int, hi: int, out: ParsedResponse) -> str:
        """Record every tag in ``text[lo:hi]`` (outside the sections) as an error; return the rest (content)."""
        tag = _STRAY.search(text, lo, hi)
        if tag is None:
            return text[lo:hi]
        content: list[str] = []
        pos = lo
        while tag is not None:
            content.append(text[pos : tag.start()])
            stop = tag.end()
            if tag.group(0) == CALL_BEGIN:
                end, again = text.find(CALL_END, stop, hi), text.find(CALL_BEGIN, stop, hi)
                stop = end + len(CALL_END) if end >= 0 and not 0 <= again < end else (again if again >= 0 else hi)
                reason = f"a {CALL_BEGIN} block outside a {CALLS_BEGIN} ... {CALLS_END} section"
            else:
                reason = f"{tag.group(0)} outside its place"
            self._fail(out, text[tag.start() : stop], f"{reason}; write {self.form}")
            pos = stop
            tag = _STRAY.search(text, pos, hi)
        content.append(text[pos:hi])
        return "".join(content)


@register_tool_parser("deepseek_v3")
class DeepSeekV3ToolParser(DeepSeekToolParser):
    """DeepSeek-V3 / R1: blocks ``<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\\n```json\\nARGS\\n```\
<｜tool▁call▁end｜>``."""

    form = (f"{CALLS_BEGIN}{CALL_BEGIN}function{SEP}<function-name>\\n```json\\n<args-json-object>\\n```"
            f"{CALL_END}...{CALLS_END}")
    joiner = "\n"

    def _write_body(self, call: ToolCall) -> str:
        return f"function{SEP}{call.name}\n{_FENCE_OPEN}{_json.dumps(call.arguments)}{_FENCE_CLOSE}"

    def _read_body(self, body: str) -> tuple[str, str] | str:
        kind, sep, rest = body.partition(SEP)
        if not sep:
            return f"no {SEP} in the call block"
        if kind != "function":
            return f"the call type before {SEP} must be 'function', got {kind!r}"
        name, newline, fenced = rest.partition("\n")
        if not newline:
            return "no newline after the function name"
        if not (fenced.startswith(_FENCE_OPEN) and fenced.endswith(_FENCE_CLOSE)
                and len(fenced) >= len(_FENCE_OPEN) + len(_FENCE_CLOSE)):
            return "the arguments must sit in a ```json fence: ```json, newline, the JSON, newline, ```"
        return name, fenced[len(_FENCE_OPEN) : len(fenced) - len(_FENCE_CLOSE)]


@register_tool_parser("deepseek_v31")
class DeepSeekV31ToolParser(DeepSeekToolParser):
    """DeepSeek-V3.1: ``<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>ARGS<｜tool▁call▁end｜>``."""

    form = f"{CALLS_BEGIN}{CALL_BEGIN}<function-name>{SEP}<args-json-object>{CALL_END}...{CALLS_END}"
    joiner = ""

    def _write_body(self, call: ToolCall) -> str:
        return f"{call.name}{SEP}{_json.dumps(call.arguments)}"

    def _read_body(self, body: str) -> tuple[str, str] | str:
        name, sep, args = body.partition(SEP)
        if not sep:
            return f"no {SEP} in the call block"
        return name, args
