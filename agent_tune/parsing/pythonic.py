"""Pythonic tool calls: ``[f(a=1), g(b='x')]`` (Llama 3.2 / BFCL prompting style).

Accepted (what bfcl-eval's ``default_decode_execute_prompting`` reads): a response that is only the call
list, or bare calls ``f(a=1)`` / ``f(a=1), g(b=2)`` (the scorer adds the brackets), optionally in a
plain triple-backtick fence or after ``<|python_tag|>``; dotted names (``math.factorial``) as the scorer joins
them. The text is parsed with ``ast`` and read through a whitelist; nothing is ever evaluated. Allowed
argument values: str/int/float/bool/None literals, ``-``/``+`` on numbers, lists, tuples (become lists)
and dicts of those. Errors: positional arguments, nested calls, names, ``**kwargs`` and every other
expression; a call list with text around it or in a triple-backtick ``python`` fence (the scorer then reads no
call) makes every call of the response an error. See docs/parsing.md.
"""

from __future__ import annotations

import ast
import re
import warnings
from typing import Any

from agent_tune.errors import RolloutError
from agent_tune.parsing._whole import whole_response_only
from agent_tune.parsing.base import ToolCallParser
from agent_tune.parsing.registry import register_tool_parser
from agent_tune.parsing.types import ParsedResponse, ToolCall, ToolCallError

PYTHON_TAG = "<|python_tag|>"
_LIST_START = re.compile(r"\[\s*[A-Za-z_][\w.]*\s*\(")
_BARE_CALL = re.compile(r"\s*[A-Za-z_][\w.]*\s*\(")
_FENCE_OPEN = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n?[ \t]*$")
_FENCE_CLOSE = re.compile(r"\s*```")
_WHOLE_FENCE = re.compile(r"\s*```[ \t]*(?:python|py)?[ \t]*\n(.*?)```\s*", re.DOTALL)
_FENCE_LANG = re.compile(r"py")
_SCALARS = (str, int, float, bool, type(None))
FORM = "[func_name(param=value, ...), ...]"


class _Rejected(RolloutError):
    """Internal: an expression outside the whitelist; the message is the reason."""


@register_tool_parser("pythonic")
class PythonicToolParser(ToolCallParser):
    """A Python list of keyword-argument calls, read with ``ast`` and never evaluated."""

    def parse(self, text: str) -> ParsedResponse:
        text = text.replace(PYTHON_TAG, "")
        if m := _LIST_START.search(text):
            start, end = m.start(), _match_bracket(text, m.start())
            tree = _try_parse(text[start:end]) if end else "unterminated list: no matching ']'"
            end = end or len(text)
        else:  # a response that is bare calls "f(a=1)" or "f(a=1), g(b=2)", possibly fenced
            fence = _WHOLE_FENCE.fullmatch(text)
            lo, hi = fence.span(1) if fence else (0, len(text))
            start, end = hi - len(text[lo:hi].lstrip()), lo + len(text[lo:hi].rstrip())
            tree = _try_parse(text[start:end]) if _BARE_CALL.match(text, start) else None
            if isinstance(tree, ast.Tuple) and tree.elts and all(isinstance(e, ast.Call) for e in tree.elts):
                tree = ast.List(elts=tree.elts)
            if not isinstance(tree, (ast.Call, ast.List)):
                return ParsedResponse(content=text.strip())
        src = text[start:end]
        outside = "text outside the call list"
        if (fo := _FENCE_OPEN.search(text, 0, start)) and (fc := _FENCE_CLOSE.match(text, end)):
            if _FENCE_LANG.search(fo.group(0)):
                outside = "a ```python fence (a plain ``` fence is fine)"
            else:
                start, end = fo.start(), fc.end()
        out = ParsedResponse(content=(text[:start] + text[end:]).strip())
        if isinstance(tree, str) or not isinstance(tree, (ast.List, ast.Call)):
            reason = tree if isinstance(tree, str) else "expected a list of calls like [f(a=1), g(b='x')]"
            out.errors.append(ToolCallError(0, src, reason))
            return out
        for i, node in enumerate([tree] if isinstance(tree, ast.Call) else tree.elts):
            raw = ast.get_source_segment(src, node) or src
            try:
                out.calls.append(_to_call(node, raw))
            except _Rejected as exc:
                out.errors.append(ToolCallError(i, raw, str(exc)))
        if out.content or outside != "text outside the call list":
            whole_response_only(out, f"the response holds {outside}; write only the list: {FORM}")
        return out

    def format_calls(self, calls: list[ToolCall], content: str = "") -> str:
        """The call list alone (the scorer reads nothing else); ``content`` only when there are no calls."""
        if not calls:
            return content
        return "[" + ", ".join(
            f"{c.name}({', '.join(f'{k}={_render(v)}' for k, v in c.arguments.items())})" for c in calls
        ) + "]"


def _to_call(node: ast.expr, raw: str) -> ToolCall:
    """Read one ``name(k=v, ...)`` node through the whitelist."""
    if not isinstance(node, ast.Call):
        raise _Rejected("not a function call; write name(arg=value, ...)")
    name = _dotted_name(node.func)
    if name is None:
        raise _Rejected("the called object must be a function name (dotted names like math.factorial are fine)")
    if node.args:
        raise _Rejected(f"positional arguments are not allowed in {name}(...); pass every argument as name=value")
    arguments: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise _Rejected(f"**kwargs unpacking is not allowed in {name}(...)")
        if kw.arg in arguments:
            raise _Rejected(f"argument {kw.arg!r} is given twice in {name}(...)")
        arguments[kw.arg] = _value(kw.value, f"argument {kw.arg!r} of {name}(...)")
    return ToolCall(name=name, arguments=arguments, raw=raw)


def _dotted_name(func: ast.expr) -> str | None:
    """``a.b.c`` for a chain of attributes over a plain name (as bfcl-eval's decoder joins it), else None."""
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    return ".".join([func.id, *reversed(parts)]) if isinstance(func, ast.Name) else None


def _value(node: ast.expr, where: str) -> Any:
    """The literal value of ``node``; raises ``_Rejected`` for anything outside the whitelist."""
    if isinstance(node, ast.Constant) and isinstance(node.value, _SCALARS):
        return node.value
    if (
        isinstance(node, ast.UnaryOp)
        and isinstance(node.op, (ast.USub, ast.UAdd))
        and isinstance(node.operand, ast.Constant)
        and type(node.operand.value) in (int, float)
    ):
        return -node.operand.value if isinstance(node.op, ast.USub) else node.operand.value
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_value(e, where) for e in node.elts]
    if isinstance(node, ast.Dict):
        out = {}
        for k, v in zip(node.keys, node.values):
            key = _value(k, where) if k is not None else None
            if k is None or not isinstance(key, _SCALARS):
                raise _Rejected(f"{where}: dict keys must be literals (no ** unpacking)")
            out[key] = _value(v, where)
        return out
    if isinstance(node, ast.Call):
        raise _Rejected(f"{where}: nested calls are not allowed; only literal values")
    if isinstance(node, ast.Name):
        raise _Rejected(f"{where}: bare name {node.id!r} is not a value (quote strings; use True/False/None)")
    raise _Rejected(f"{where}: {type(node).__name__} expressions are not allowed; only literal values")


def _render(value: Any) -> str:
    """Python source for a JSON-like value (the inverse of ``_value``)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_render(k)}: {_render(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_render(v) for v in value) + "]"
    return repr(value)


def _try_parse(src: str) -> ast.expr | str:
    """The expression tree of ``src``, or a readable reason why it is not valid Python."""
    try:
        with warnings.catch_warnings():  # e.g. "invalid escape sequence" in a string literal
            warnings.simplefilter("ignore")
            return ast.parse(src, mode="eval").body
    except SyntaxError as exc:
        where = f" (line {exc.lineno}, column {exc.offset})" if exc.lineno else ""
        return f"invalid Python syntax: {exc.msg}{where}"
    except (ValueError, RecursionError, MemoryError) as exc:
        return f"invalid Python syntax: {type(exc).__name__}: {exc}"


def _match_bracket(text: str, start: int) -> int | None:
    """End index (exclusive) of the bracket opened at ``start``, skipping string literals; None if unclosed."""
    depth, i = 0, start
    while i < len(text):
        c = text[i]
        if c in "\"'":
            quote = text[i : i + 3] if text[i : i + 3] in ('"""', "'''") else c
            i += len(quote)
            while i < len(text) and not text.startswith(quote, i):
                i += 2 if text[i] == "\\" else 1
            i += len(quote)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None
