"""Issue 8: each parser accepts the call variants its scorer reads and reports every other one as an error.

One case per accepted and per rejected variant per parser (the table in docs/parsing.md). A rejected
variant must come out as a ``ToolCallError`` (never a call), with a reason naming the fault, and count as
a tool-call attempt. Hermes is also cross-checked against bfcl-eval's own Qwen FC decoding.
"""

from __future__ import annotations

import importlib.util
import sys
import types

import pytest

from agent_tune.parsing import get_tool_parser

A = '{"name": "a", "arguments": {"x": 1}}'
B = '{"name": "b", "arguments": {}}'
LA = '{"name": "a", "parameters": {"x": 1}}'
LB = '{"name": "b", "parameters": {}}'

# (parser, text, expected calls as (name, arguments))
ACCEPTED = [
    ("hermes", f"<tool_call>\n{A}\n</tool_call>", [("a", {"x": 1})]),
    ("hermes", f"<tool_call>\n{A}\n</tool_call>\n<tool_call>\n{B}\n</tool_call>", [("a", {"x": 1}), ("b", {})]),
    ("hermes", f"Let me check.\n<tool_call>\n{A}\n</tool_call>\nDone.", [("a", {"x": 1})]),
    ("hermes", f"<tool_call>\n  {A}\t\n\n</tool_call>", [("a", {"x": 1})]),
    ("hermes", '<tool_call>\n{"name": "e", "arguments": {"s": "</tool_call>"}}\n</tool_call>',
     [("e", {"s": "</tool_call>"})]),
    ("hermes", '<tool_call>\n{"name": "a", "arguments": {}, "id": 3}\n</tool_call>', [("a", {})]),
    ("llama3_json", LA, [("a", {"x": 1})]),
    ("llama3_json", f"<|python_tag|>{LA}; {LB}<|eom_id|>", [("a", {"x": 1}), ("b", {})]),
    ("llama3_json", f"{LA};\n{LB}", [("a", {"x": 1}), ("b", {})]),
    ("mistral", f"[TOOL_CALLS] [{A}, {B}]", [("a", {"x": 1}), ("b", {})]),
    ("mistral", f"[TOOL_CALLS][{A}]</s>", [("a", {"x": 1})]),
    ("mistral", '[TOOL_CALLS]a[ARGS]{"x": 1}[TOOL_CALLS]b[CALL_ID]k9[ARGS]{}', [("a", {"x": 1}), ("b", {})]),
    ("pythonic", "[a(x=1), b()]", [("a", {"x": 1}), ("b", {})]),
    ("pythonic", "a(x=1)", [("a", {"x": 1})]),
    ("pythonic", "a(x=1), b()", [("a", {"x": 1}), ("b", {})]),
    ("pythonic", "```\n[a(x=1)]\n```", [("a", {"x": 1})]),
    ("pythonic", "<|python_tag|>[a(x=1)]", [("a", {"x": 1})]),
    ("pythonic", "[math.factorial(number=5)]", [("math.factorial", {"number": 5})]),
    ("toolrl", f"<think> t </think>\n<tool_call>\n{LA}\n{LB}\n</tool_call>\n<response> r </response>",
     [("a", {"x": 1}), ("b", {})]),
    ("toolrl", f"<tool_call>{LA}</tool_call>", [("a", {"x": 1})]),  # ToolRL's reward strips the body
    ("toolrl", f"<tool_call>\n  {LA}  \r\n{LB}\n\n</tool_call>", [("a", {"x": 1}), ("b", {})]),
]

# (parser, text, fragment one error's reason must contain, calls still accepted)
REJECTED = [
    ("hermes", f"<tool_call>{A}</tool_call>",
     "no newline right after <tool_call>; no newline right before </tool_call>", []),
    ("hermes", f"<tool_call>\n{A}</tool_call>", "no newline right before </tool_call>", []),
    ("hermes", f"<tool_call>{A}\n</tool_call>", "no newline right after <tool_call>", []),
    ("hermes", f"<tool_call>\r\n{A}\r\n</tool_call>", "no newline right after <tool_call>", []),
    ("hermes", f"text <tool_call>\n{A}\n", "unterminated <tool_call> block (no </tool_call>)", []),
    ("hermes", f"<tool_call>\n{A}\n<tool_call>\n{B}\n</tool_call>",
     "another <tool_call> starts before its </tool_call>", []),
    ("hermes", f"<tool_call>\n{A}</tool_call>\n<tool_call>\n{B}\n</tool_call>",
     "</tool_call> must be on its own line", []),
    ("hermes", f"<tool_call>\n{A}\n</tool_call>\n</tool_call>",
     "</tool_call> without an opening <tool_call>", [("a", {"x": 1})]),
    ("hermes", "<tool_call>\n</tool_call>", "empty block", []),
    ("hermes", '<tool_call>\n{"name": "a"}\n</tool_call>', 'missing "arguments"', []),
    ("hermes", '<tool_call>\n{"name": "a", "arguments": null}\n</tool_call>',
     '"arguments" must be a JSON object, got null', []),
    ("hermes", '<tool_call>\n{"name": "a", "arguments": "{\\"x\\": 1}"}\n</tool_call>',
     "not a string holding JSON", []),
    ("hermes", '<tool_call>\n{"name": "a", "parameters": {}}\n</tool_call>',
     'found "parameters", but this format names it "arguments"', []),
    ("hermes", f"<tool_call>\n{A} {B}\n</tool_call>", "extra data after the JSON value", []),
    ("hermes", f"<tool_call>\n[{A}]\n</tool_call>", "must be a JSON object, got an array", []),
    ("llama3_json", '{"name": "a", "arguments": {"x": 1}}',
     'found "arguments", but this format names it "parameters"', []),
    ("llama3_json", f"{LA}\n{LB}", "another call in the response is malformed", []),
    ("llama3_json", f"Sure.\n{LA}", "not run: the response holds text besides the calls", []),
    ("llama3_json", f"{LA}\nThat is the call.", "not run: the response holds text besides the calls", []),
    ("llama3_json", '{"name": "a", "parameters": "{}"}', "not a string holding JSON", []),
    ("llama3_json", '{"name": "a", "parameters": {"x": }}', "invalid JSON at char", []),
    ("mistral", f"[TOOL_CALLS] {A}", "must be a JSON array, even for one call", []),
    ("mistral", f"Let me check. [TOOL_CALLS] [{A}]", "not run: the response holds text besides the calls", []),
    ("mistral", f"[TOOL_CALLS] [{A}] done", "not run: the response holds text besides the calls", []),
    ("mistral", '[TOOL_CALLS] [{"name": "a", "arguments": "{}"}]', "not a string holding JSON", []),
    ("mistral", '[TOOL_CALLS] [{"name": "a", "parameters": {}}]', 'missing "arguments"', []),
    ("mistral", f"[TOOL_CALLS] [{A}", "unterminated JSON array", []),
    ("mistral", f'[TOOL_CALLS] [{A}, {{"name": ""}}]', '"name" must be a non-empty string', []),
    ("pythonic", "Sure: [a(x=1)]", "not run: the response holds text outside the call list", []),
    ("pythonic", "[a(x=1)]\nDone.", "not run: the response holds text outside the call list", []),
    ("pythonic", "```python\n[a(x=1)]\n```", "not run: the response holds a ```python fence", []),
    ("pythonic", "[a(1)]", "positional arguments are not allowed", []),
    ("pythonic", "[a(x=1)", "unterminated list", []),
    ("toolrl", f"<tool_call>\n{A}\n</tool_call>", 'found "arguments", but this format names it "parameters"', []),
    ("toolrl", f"<tool_call>\n{LA}\n\n{LB}\n</tool_call>", "an empty line inside the block",
     [("a", {"x": 1}), ("b", {})]),
    ("toolrl", "<tool_call>\n \n</tool_call>", "empty block", []),
    ("toolrl", f"<tool_call>\n{LA} {LB}\n</tool_call>", "extra data after the JSON value", []),
    ("toolrl", f"<tool_call>\n{LA}\n</tool_call>\n<tool_call>\n{LB}\n</tool_call>", "a second <tool_call> block",
     [("a", {"x": 1})]),
    ("toolrl", f"<tool_call>\n{LA}\n", "unterminated <tool_call> block", []),
    ("toolrl", f"{LA}\n</tool_call>", "</tool_call> without an opening <tool_call>", []),
    ("toolrl", '<tool_call>\n{"name": "a", "parameters": "{}"}\n</tool_call>', "not a string holding JSON", []),
]


def _calls(parsed) -> list[tuple[str, dict]]:
    return [(c.name, c.arguments) for c in parsed.calls]


@pytest.mark.parametrize(("parser", "text", "calls"), ACCEPTED)
def test_accepted_variant(parser: str, text: str, calls: list) -> None:
    parsed = get_tool_parser(parser).parse(text)
    assert _calls(parsed) == calls
    assert parsed.errors == []


@pytest.mark.parametrize(("parser", "text", "reason", "calls"), REJECTED)
def test_rejected_variant_is_an_instructive_error(parser: str, text: str, reason: str, calls: list) -> None:
    parsed = get_tool_parser(parser).parse(text)
    assert _calls(parsed) == calls
    assert parsed.errors and parsed.has_tool_call_attempt
    assert any(reason in e.reason for e in parsed.errors)
    assert sorted(e.index for e in parsed.errors) == sorted(set(e.index for e in parsed.errors))


@pytest.mark.parametrize("parser", ["hermes", "llama3_json", "mistral", "pythonic", "toolrl"])
def test_format_errors_name_the_accepted_form(parser: str) -> None:
    """Off-form errors end with the form to write, as format_calls writes it."""
    bad = {"hermes": f"<tool_call>{A}</tool_call>", "llama3_json": f"Sure.\n{LA}",
           "mistral": f"ok [TOOL_CALLS] [{A}]", "pythonic": "Sure: [a(x=1)]",
           "toolrl": f"<tool_call>\n{A}\n</tool_call>"}[parser]
    reason = get_tool_parser(parser).parse(bad).errors[0].reason
    head = {"hermes": "<tool_call>\\n{", "llama3_json": '{"name": <function-name>, "parameters"',
            "mistral": "[TOOL_CALLS] [{", "pythonic": "[func_name(",
            "toolrl": '<tool_call>\\n{"name": <function-name>, "parameters"'}[parser]
    assert head in reason


def test_whole_response_rule_keeps_error_indices_in_order() -> None:
    parsed = get_tool_parser("pythonic").parse("Here: [a(1), b(x=2), c()]")
    assert parsed.calls == []
    assert [e.index for e in parsed.errors] == [0, 1, 2]
    assert "positional" in parsed.errors[0].reason and parsed.errors[1].reason.startswith("not run:")


def test_hermes_bfcl_unchanged_hermes_reports_what_it_ignores() -> None:
    """hermes_bfcl (eval parity) keeps off-form blocks as content; hermes makes them errors."""
    text = f"<tool_call>{A}</tool_call>\n<tool_call>\n{B}\n</tool_call>"
    strict = get_tool_parser("hermes_bfcl").parse(text)
    assert _calls(strict) == [("b", {})] and strict.errors == [] and f"<tool_call>{A}</tool_call>" in strict.content
    training = get_tool_parser("hermes").parse(text)
    assert _calls(training) == [("b", {})] and [e.index for e in training.errors] == [0]


# ----------------------------------------------------------------------------- bfcl-eval cross-check


@pytest.fixture(scope="module")
def qwen_fc():
    """bfcl-eval's Qwen FC handler (its Java/JS parsers, unused here, need tree-sitter: stubbed). Skipped only
    when the bfcl_eval package is absent; any other import error fails the cross-check loudly."""
    if importlib.util.find_spec("bfcl_eval") is None:  # pragma: no cover - bfcl-eval is a pinned dependency
        pytest.skip("bfcl-eval is not installed")
    stubs = {"bfcl_eval.model_handler.parser.java_parser": "parse_java_function_call",
             "bfcl_eval.model_handler.parser.js_parser": "parse_javascript_function_call"}
    for name, attr in stubs.items():
        if name not in sys.modules:
            module = types.ModuleType(name)
            setattr(module, attr, None)
            sys.modules[name] = module
    from bfcl_eval.model_handler.local_inference.qwen_fc import QwenFCHandler

    return QwenFCHandler("Qwen/Qwen3-4B-Instruct-2507", 0.0, "Qwen/Qwen3-4B-Instruct-2507-FC", True)


def _bfcl_calls(handler, text: str) -> list[tuple[str, dict]] | None:
    """The calls bfcl-eval scores for ``text`` (both decoders must read them), or None if it fails."""
    try:
        ast_calls = handler.decode_ast(text, "Python", False)
        handler.decode_execute(text, False)
    except Exception:  # noqa: BLE001 - any failure is "the scorer reads no call"
        return None
    return [(name, args) for call in ast_calls for name, args in call.items()]


@pytest.mark.parametrize("text", [t for p, t, *_ in ACCEPTED + REJECTED if p == "hermes"])
def test_hermes_agrees_with_bfcl_eval_qwen_fc(qwen_fc, text: str) -> None:
    """Every call hermes accepts is one bfcl-eval reads; every block it rejects bfcl-eval does not read."""
    parsed = get_tool_parser("hermes").parse(text)
    theirs = _bfcl_calls(qwen_fc, text)
    if parsed.errors and not parsed.calls:
        assert not theirs  # None (decode fails) or [] (no block read)
    else:
        assert theirs == _calls(parsed)
