"""Conversions between tool calls and BFCL's call strings (``name(k=v, ...)``).

BFCL stores ground truth and decoded model output as Python call strings. Ground truth is parsed
here with ``ast`` (literals only, never evaluated); calls are written back in BFCL's decoded form,
``name(k=repr(v), ...)``, the form its checker reads.
"""

from __future__ import annotations

import ast
from typing import Any, Callable, Sequence

from agent_tune.parsing.types import ToolCall


def to_call_string(call: ToolCall) -> str:
    """``ToolCall("cd", {"folder": "x"})`` -> ``"cd(folder='x')"`` (BFCL's decoded-call form)."""
    arguments = call.arguments
    if len(arguments) == 1:  # the usual call: no list to join
        ((key, value),) = arguments.items()
        return f"{call.name}({key}={value!r})"
    parts = []  # a loop, not a comprehension: no frame (one per call of two or more arguments)
    for key, value in arguments.items():
        parts.append(f"{key}={value!r}")
    return f"{call.name}({','.join(parts)})"


def syntax_error_text(text: str) -> str | None:
    """The message bfcl-eval's engine gets when a call string is not valid Python, else ``None``.

    A few ground-truth strings of the composite category are malformed; bfcl-eval's engine turns
    them into ``Error during execution: <this message>``. Only compiled to an AST, never run.
    """
    try:
        compile(text, "<string>", "eval", flags=ast.PyCF_ONLY_AST)
    except SyntaxError as exc:
        return str(exc)
    return None


def parse_call_string(text: str, param_names: Callable[[str], Sequence[str]] | None = None) -> ToolCall:
    """Parse one BFCL call string such as ``"mv(source='a', destination='b')"``.

    Positional arguments (the ground truth uses a few, e.g. ``sort('f.txt')``) are named with
    ``param_names(function_name)``, which returns the function's parameters in signature order.
    Raises ``ValueError`` for anything that is not a single call with literal arguments.
    """
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ValueError(f"not a call: {text!r} ({exc.msg})") from None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a plain function call: {text!r}")
    name = node.func.id
    arguments: dict[str, Any] = {}
    if node.args:
        if param_names is None:
            raise ValueError(f"positional arguments need a signature: {text!r}")
        names = list(param_names(name))
        if len(node.args) > len(names):
            raise ValueError(f"too many positional arguments for {name}: {text!r}")
        for pname, arg in zip(names, node.args):
            arguments[pname] = ast.literal_eval(arg)
    for kw in node.keywords:
        if kw.arg is None:
            raise ValueError(f"**kwargs are not supported: {text!r}")
        arguments[kw.arg] = ast.literal_eval(kw.value)
    return ToolCall(name=name, arguments=arguments, raw=text)
