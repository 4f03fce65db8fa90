"""Tool-call parsers: registry, per-family behaviour, malformed input, injection, round trips."""

from __future__ import annotations

import itertools
import keyword
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_tune.parsing import (
    ToolCall,
    ToolCallParser,
    UnknownParserError,
    get_tool_parser,
    register_tool_parser,
    tool_parser_names,
)

PARSERS = ["hermes", "llama3_json", "mistral", "pythonic", "toolrl"]


def calls_of(parsed) -> list[tuple[str, dict]]:
    return [(c.name, c.arguments) for c in parsed.calls]


# ----------------------------------------------------------------------------- registry


def test_registry_lists_and_builds_every_parser() -> None:
    assert set(PARSERS) <= set(tool_parser_names())
    for name in PARSERS:
        parser = get_tool_parser(name)
        assert isinstance(parser, ToolCallParser) and parser.name == name


def test_unknown_tool_parser_lists_known_names() -> None:
    with pytest.raises(UnknownParserError) as info:
        get_tool_parser("hermess")
    assert isinstance(info.value, KeyError)
    message = str(info.value)
    assert "hermess" in message and all(name in message for name in PARSERS)


def test_register_rejects_non_parsers_and_name_clashes() -> None:
    with pytest.raises(TypeError):
        register_tool_parser("not_a_parser")(dict)

    class Clash(ToolCallParser):
        def parse(self, text):  # pragma: no cover - never called
            raise NotImplementedError

        def format_calls(self, calls, content=""):  # pragma: no cover
            raise NotImplementedError

    with pytest.raises(ValueError, match="already registered"):
        register_tool_parser("hermes")(Clash)
    assert type(get_tool_parser("hermes")).__name__ == "HermesToolParser"


# ----------------------------------------------------------------------------- hermes


def test_hermes_several_blocks_and_content() -> None:
    text = (
        "I will look both up.\n<tool_call>\n"
        '{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "get_time", "arguments": {"tz": "CET"}}\n</tool_call>'
    )
    parsed = get_tool_parser("hermes").parse(text)
    assert calls_of(parsed) == [("get_weather", {"city": "Paris"}), ("get_time", {"tz": "CET"})]
    assert parsed.errors == [] and parsed.content == "I will look both up."
    assert parsed.calls[1].raw.startswith("<tool_call>") and parsed.calls[1].raw.endswith("</tool_call>")


def test_hermes_whitespace_around_the_json_inside_the_block() -> None:
    text = (
        '<tool_call>\n{"name":"a","arguments":{"x":1}}\n</tool_call>'
        '<tool_call>\n  \t{ "name" : "b" , "arguments" : {} }  \n</tool_call>'
    )
    parsed = get_tool_parser("hermes").parse(text)
    assert calls_of(parsed) == [("a", {"x": 1}), ("b", {})] and parsed.content == "" and parsed.errors == []


@pytest.mark.parametrize(
    ("block", "reason_part"),
    [
        ('{"name": "a" "arguments": {}}', "invalid JSON at char 13: Expecting ',' delimiter"),
        ('{"name": "a", "arguments": {"x": 1,}}', "invalid JSON at char"),
        ("[1, 2]", "must be a JSON object, got an array"),
        ('{"arguments": {}}', '"name" must be a non-empty string (missing)'),
        ('{"name": 7, "arguments": {}}', '"name" must be a non-empty string (got a number)'),
        ('{"name": "a", "arguments": [1]}', '"arguments" must be a JSON object, got an array'),
        ('{"name": "a", "arguments": "{oops"}', '"arguments" must be a JSON object, not a string holding JSON'),
        ('{"name": "a", "arguments": "[1]"}', '"arguments" must be a JSON object, not a string holding JSON'),
        ("", "invalid JSON at char 0: Expecting value"),
    ],
)
def test_hermes_bad_block_among_valid_ones(block: str, reason_part: str) -> None:
    good = '<tool_call>\n{"name": "ok", "arguments": {"n": %d}}\n</tool_call>'
    text = "\n".join([good % 0, f"<tool_call>\n{block}\n</tool_call>", good % 2, "done"])
    parsed = get_tool_parser("hermes").parse(text)
    assert calls_of(parsed) == [("ok", {"n": 0}), ("ok", {"n": 2})]
    assert len(parsed.errors) == 1
    error = parsed.errors[0]
    assert error.index == 1 and reason_part in error.reason
    assert error.raw == f"<tool_call>\n{block}\n</tool_call>"
    assert parsed.content == "done" and parsed.has_tool_call_attempt


def test_hermes_close_tag_inside_a_string_argument() -> None:
    parsed = get_tool_parser("hermes").parse(
        '<tool_call>\n{"name": "echo", "arguments": {"s": "</tool_call> x"}}\n</tool_call>'
    )
    assert calls_of(parsed) == [("echo", {"s": "</tool_call> x"})]


def test_hermes_no_calls_is_plain_content() -> None:
    parsed = get_tool_parser("hermes").parse("  The answer is 42.  ")
    assert parsed.content == "The answer is 42." and not parsed.has_tool_call_attempt


def test_hermes_format_is_qwen_canonical() -> None:
    calls = [ToolCall("get_weather", {"city": "Zürich"}), ToolCall("noop", {})]
    assert get_tool_parser("hermes").format_calls(calls, content="Checking.") == (
        'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Zürich"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "noop", "arguments": {}}\n</tool_call>'
    )
    assert get_tool_parser("hermes").format_calls(calls[1:]).startswith("<tool_call>\n")


_block_pieces = st.sampled_from(
    ["<tool_call>", "</tool_call>", "\n", "x", "{}", " ", "<tool_call>\n", "\n</tool_call>"]
)


@settings(max_examples=300, deadline=None, database=None)
@given(text=st.lists(_block_pieces, max_size=30).map("".join))
def test_hermes_block_scan_finds_the_spans_of_bfcl_evals_regex(text: str) -> None:
    """``_blocks`` (str.find) yields exactly the spans the scorer's regex ``_BLOCK.finditer`` matches."""
    from agent_tune.parsing.hermes import _BLOCK, _blocks

    assert list(_blocks(text)) == [(m.start(), m.group(1), m.end()) for m in _BLOCK.finditer(text)]


_parse_pieces = _block_pieces | st.sampled_from(
    ['{"name": "f", "arguments": {}}', '{"name": "g", "arguments": {"a": "</tool_call>"}}', '{"name": "f"', '"',
     '{"name": "h", "arguments": null}', "[1]", "\t"]
)


def _hermes_parse_by_the_regex(text: str):
    """What ``HermesToolParser.parse`` must return, its blocks found by bfcl-eval's regex
    (``_BLOCK.finditer``) instead of parse's inlined ``str.find`` loop; each span decoded and each gap
    scanned with the same helpers."""
    from agent_tune.parsing import ParsedResponse
    from agent_tune.parsing.hermes import _BLOCK, _decode_block, _next_index, _scan_gap
    from agent_tune.parsing.types import ToolCallError

    out = ParsedResponse(content="")
    content, pos = [], 0
    for m in _BLOCK.finditer(text):
        content.append(_scan_gap(text, pos, m.start(), out))
        result = _decode_block(m.group(1), m.group(0))
        if isinstance(result, ToolCall):
            out.calls.append(result)
        else:
            out.errors.append(ToolCallError(_next_index(out), m.group(0), result))
        pos = m.end()
    content.append(_scan_gap(text, pos, len(text), out))
    out.content = "".join(content).strip()
    return out


@settings(max_examples=400, deadline=None, database=None)
@given(text=st.lists(_parse_pieces, max_size=30).map("".join))
def test_hermes_parse_reads_the_spans_of_bfcl_evals_regex(text: str) -> None:
    """``HermesToolParser.parse`` (its own inlined block loop, not ``_blocks``) returns what a parse over
    the scorer's regex spans returns: the same calls, errors (raw text, index, reason) and content."""
    from agent_tune.parsing.hermes import _BLOCK

    parsed = get_tool_parser("hermes").parse(text)
    assert parsed == _hermes_parse_by_the_regex(text)
    # every span the regex matches is one call or one error, in order, with its exact text
    items = sorted([(e.index, e.raw) for e in parsed.errors] + [(i, c.raw) for i, c in _call_indices(parsed)])
    assert [i for i, _ in items] == list(range(len(items)))
    raws = [raw for _, raw in items]
    spans = [m.group(0) for m in _BLOCK.finditer(text)]
    it = iter(raws)
    assert all(span in it for span in spans)  # the regex's spans are a subsequence of what parse read


def _call_indices(parsed):
    """(block index, call) of each call: the indices the errors leave free, in order."""
    taken = {e.index for e in parsed.errors}
    free = (i for i in itertools.count() if i not in taken)
    return [(next(free), c) for c in parsed.calls]


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
_call_objects = st.fixed_dictionaries(
    {}, optional={"name": st.sampled_from(["f", " ", "", 3, None]) | st.text(max_size=4), "arguments": _json_values,
                  "parameters": _json_values},
)


@settings(max_examples=200, deadline=None, database=None)
@given(obj=_call_objects | _json_values, pad=st.sampled_from(["", " ", "\n\t", "\u00a0"]),
       tail=st.sampled_from(["", "}", " x", "\n</tool_call>"]))
def test_hermes_fast_decode_agrees_with_the_checked_path(obj: object, pad: str, tail: str) -> None:
    """The inlined fast path of ``_decode_block`` gives what the step-by-step path gives, calls and reasons."""
    import json

    from agent_tune.parsing.hermes import _decode_block, _decode_block_checked

    body = pad + json.dumps(obj) + pad + tail
    assert _decode_block(body, "raw") == _decode_block_checked(body, "raw")


# ----------------------------------------------------------------------------- llama3_json


def test_llama3_python_tag_and_semicolons() -> None:
    text = '<|python_tag|>{"name": "a", "parameters": {"x": 1}}; {"name": "b", "parameters": {"y": [2]}}<|eom_id|>'
    parsed = get_tool_parser("llama3_json").parse(text)
    assert calls_of(parsed) == [("a", {"x": 1}), ("b", {"y": [2]})]
    assert parsed.content == "" and parsed.errors == []


def test_llama3_plain_text_and_json_data_are_content() -> None:
    text = 'The config is {"x": 1} and\n{"debug": true}\nthat is all.'
    parsed = get_tool_parser("llama3_json").parse(text)
    assert parsed.content == text and not parsed.has_tool_call_attempt


def test_llama3_broken_call_is_an_error_and_stops_the_others() -> None:
    text = (
        '{"name": "a", "parameters": {}};\n'
        '{"name": "b", "parameters": {"x": }}\n'
        '{"name": "c", "parameters": {"z": 3}}'
    )
    parsed = get_tool_parser("llama3_json").parse(text)
    assert parsed.calls == []  # the scorer reads none of a response's calls when one is malformed
    assert [e.index for e in parsed.errors] == [0, 1, 2]
    assert parsed.errors[1].raw == '{"name": "b", "parameters": {"x": }}'
    assert "invalid JSON at char" in parsed.errors[1].reason
    assert all(parsed.errors[i].reason.startswith("not run: another call") for i in (0, 2))


def test_llama3_bad_parameters_type_is_an_error() -> None:
    parsed = get_tool_parser("llama3_json").parse('{"name": "a", "parameters": 5}')
    assert parsed.calls == [] and '"parameters" must be a JSON object' in parsed.errors[0].reason


def test_llama3_format() -> None:
    calls = [ToolCall("a", {"x": "ü"}), ToolCall("b", {})]
    assert get_tool_parser("llama3_json").format_calls(calls) == (
        '{"name": "a", "parameters": {"x": "ü"}}; {"name": "b", "parameters": {}}'
    )


# ----------------------------------------------------------------------------- mistral


def test_mistral_array_form() -> None:
    text = '[TOOL_CALLS] [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]</s>'
    parsed = get_tool_parser("mistral").parse(text)
    assert calls_of(parsed) == [("a", {"x": 1}), ("b", {})]
    assert parsed.content == "" and parsed.errors == []


def test_mistral_name_args_form_with_call_id() -> None:
    text = '[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[CALL_ID]a1b2c3d4e[ARGS]{}'
    parsed = get_tool_parser("mistral").parse(text)
    assert calls_of(parsed) == [("get_weather", {"city": "Paris"}), ("get_time", {})]


def test_mistral_bad_elements() -> None:
    text = '[TOOL_CALLS] [{"name": "a", "arguments": {}}, {"name": ""}, {"name": "c", "arguments": {}}]'
    parsed = get_tool_parser("mistral").parse(text)
    assert parsed.calls == []  # the scorer's json.loads of the response reads no call when one is bad
    assert [(e.index, e.raw) for e in parsed.errors][1] == (1, '{"name": ""}')
    assert [e.index for e in parsed.errors] == [0, 1, 2]
    broken = get_tool_parser("mistral").parse(
        '[TOOL_CALLS] [{"name": "a", "arguments": {}}, {"name": "b" "arguments": {}}]'
    )
    assert broken.calls == [] and [e.index for e in broken.errors] == [0, 1]
    assert "Expecting ','" in broken.errors[1].reason


@pytest.mark.parametrize("tail", ["", " hello", " [", '[ARGS]{"x": 1}'])
def test_mistral_tag_without_calls_is_an_error(tail: str) -> None:
    parsed = get_tool_parser("mistral").parse("[TOOL_CALLS]" + tail)
    assert parsed.calls == [] and len(parsed.errors) == 1 and parsed.errors[0].index == 0


def test_mistral_format() -> None:
    assert get_tool_parser("mistral").format_calls([ToolCall("a", {"x": [1, "é"]})]) == (
        '[TOOL_CALLS] [{"name": "a", "arguments": {"x": [1, "é"]}}]'
    )


# ----------------------------------------------------------------------------- pythonic


def test_pythonic_list_with_literals() -> None:
    text = "[f(a=1, b=-2.5, c='x', d=[1, (2, 3)], e={'k': None, 1: True}, g=+4), h()]"
    parsed = get_tool_parser("pythonic").parse(text)
    assert calls_of(parsed) == [
        ("f", {"a": 1, "b": -2.5, "c": "x", "d": [1, [2, 3]], "e": {"k": None, 1: True}, "g": 4}),
        ("h", {}),
    ]
    assert parsed.calls[1].raw == "h()"


def test_pythonic_fence_tag_and_bare_call() -> None:
    parser = get_tool_parser("pythonic")
    fenced = parser.parse("```\n[f(a='] not the end')]\n```")
    assert calls_of(fenced) == [("f", {"a": "] not the end"})] and fenced.content == ""
    assert calls_of(parser.parse("<|python_tag|>[g(x=1)]")) == [("g", {"x": 1})]
    assert calls_of(parser.parse("```\nf(a=1)\n```")) == [("f", {"a": 1})]
    assert calls_of(parser.parse(" f(a=[1]) ")) == [("f", {"a": [1]})]
    plain = parser.parse("Hello (world), see [1] and f(x) is nice")
    assert not plain.has_tool_call_attempt and plain.content == "Hello (world), see [1] and f(x) is nice"


@pytest.mark.parametrize(
    ("element", "reason_part"),
    [
        ("f(1)", "positional arguments are not allowed"),
        ("f(a=g(b=1))", "nested calls are not allowed"),
        ("__import__('os').system('x')", "must be a function name"),
        ("f(a=__import__('os').system('x'))", "nested calls are not allowed"),
        ("f(a=x)", "bare name 'x'"),
        ("f(a=x.y)", "Attribute expressions are not allowed"),
        ("f(a={1, 2})", "Set expressions are not allowed"),
        ("f(a=lambda: 0)", "Lambda expressions are not allowed"),
        ("f(a=1 + 2)", "BinOp expressions are not allowed"),
        ("f(a=b'x')", "Constant expressions are not allowed"),
        ("f(a=[*x])", "Starred expressions are not allowed"),
        ("f(**kw)", "**kwargs unpacking"),
        ("f(a={**d})", "dict keys must be literals"),
        ("f(a=1, a=2)", "given twice"),
        ("f(a=-x)", "UnaryOp expressions are not allowed"),
        ("(lambda: 0)()", "must be a function name"),
        ("f", "not a function call"),
        ("f(a=(yield))", "Yield expressions are not allowed"),
        ("f(a=)", "invalid Python syntax"),
    ],
)
def test_pythonic_rejections_keep_valid_neighbours(element: str, reason_part: str) -> None:
    parsed = get_tool_parser("pythonic").parse(f"[ok(n=0), {element}, ok(n=2)]")
    if "invalid Python syntax" in reason_part:  # the whole list fails to parse
        assert parsed.calls == [] and parsed.errors[0].index == 0
    else:
        assert calls_of(parsed) == [("ok", {"n": 0}), ("ok", {"n": 2})]
        assert [(e.index, e.raw) for e in parsed.errors] == [(1, element)]
    assert reason_part in parsed.errors[0].reason


@pytest.mark.parametrize(
    "payload",
    [
        "__import__('os').system('touch {p}')",
        "[__import__('pathlib').Path('{p}').touch()]",
        "[f(a=__import__('pathlib').Path('{p}').touch())]",
        "[f(a=open('{p}', 'w'))]",
        "[f(a=[c for c in ().__class__.__base__.__subclasses__()])]",
        "[exec(code=\"open('{p}', 'w')\")]",
        "[f(a=eval(\"open('{p}', 'w')\"))]",
        "```python\nimport os; os.system('touch {p}')\n```",
    ],
)
def test_pythonic_never_evaluates(payload: str, tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    parsed = get_tool_parser("pythonic").parse(payload.format(p=marker))
    assert not marker.exists()
    for call in parsed.calls:  # a call named exec is just data; its argument stays a string
        assert call.name == "exec" and call.arguments == {"code": f"open('{marker}', 'w')"}
    if "exec(" not in payload and "import os" not in payload:
        assert parsed.calls == [] and parsed.errors


def test_pythonic_unterminated_and_comprehension() -> None:
    parser = get_tool_parser("pythonic")
    assert parser.parse("[f(a=1)").errors[0].reason == "unterminated list: no matching ']'"
    assert "expected a list of calls" in parser.parse("[f(a=x) for x in y]").errors[0].reason


def test_pythonic_format() -> None:
    calls = [ToolCall("f", {"a": "it's", "b": [1, {"k": None}], "c": -0.5}), ToolCall("g", {})]
    assert get_tool_parser("pythonic").format_calls(calls) == '[f(a="it\'s", b=[1, {\'k\': None}], c=-0.5), g()]'


# ----------------------------------------------------------------------------- every parser


UNICODE_CALLS = [
    ToolCall("send_message", {"to": "Zoë", "body": "naïve café ☕ — 中文\n\"quoted\" \\ back", "tags": []}),
    ToolCall("nested", {"a": {"b": [1, -2.5, True, None, {"c": ["x", {"d": {}}]}]}, "e": 10**20}),
    ToolCall("no_args", {}),
]


@pytest.mark.parametrize("name", PARSERS)
def test_round_trip_unicode_and_nested(name: str) -> None:
    parser = get_tool_parser(name)
    for content in ("", "Let me do that for you."):
        parsed = parser.parse(parser.format_calls(UNICODE_CALLS, content=content))
        assert calls_of(parsed) == calls_of_list(UNICODE_CALLS)
        assert parsed.errors == [] and parsed.content == kept_content(name, content)


def kept_content(name: str, content: str) -> str:
    """What ``format_calls`` keeps of ``content`` next to calls: hermes's scorer and ToolRL's answer read text
    beside calls."""
    return content.strip() if name in ("hermes", "toolrl") else ""


def calls_of_list(calls: list[ToolCall]) -> list[tuple[str, dict]]:
    return [(c.name, c.arguments) for c in calls]


_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
_values = st.recursive(
    _scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3), max_leaves=8
)
_idents = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True).filter(lambda s: not keyword.iskeyword(s))
_calls = st.lists(st.builds(ToolCall, _idents, st.dictionaries(_idents, _values, max_size=4)), min_size=1, max_size=3)
_content = st.text(alphabet="abc XYZ.,!?\n\u00e9\u4e2d", max_size=30)


@pytest.mark.parametrize("name", PARSERS)
@settings(max_examples=30, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=_calls, content=_content)
def test_round_trip_property(name: str, calls: list[ToolCall], content: str) -> None:
    parser = get_tool_parser(name)
    parsed = parser.parse(parser.format_calls(calls, content=content))
    assert calls_of(parsed) == calls_of_list(calls)
    assert parsed.errors == [] and parsed.content == kept_content(name, content)


@pytest.mark.parametrize("name", PARSERS)
@settings(max_examples=30, deadline=None, database=None)
@given(calls=_calls, cut=st.integers(min_value=0), junk=st.text(max_size=6))
def test_parse_never_raises_on_damaged_output(name: str, calls: list[ToolCall], cut: int, junk: str) -> None:
    parser = get_tool_parser(name)
    text = parser.format_calls(calls)
    cut %= len(text) + 1
    for damaged in (text[:cut], text[:cut] + junk + text[cut:], text[:cut] + text[cut + 1 :]):
        parsed = parser.parse(damaged)
        indices = sorted(e.index for e in parsed.errors)
        assert len(set(indices)) == len(indices)
        assert all(isinstance(c.arguments, dict) and c.name for c in parsed.calls)


_pieces = st.sampled_from(
    list("{}[]()\"',:;\\ \nab=1")
    + ["<tool_call>", "</tool_call>", "[TOOL_CALLS]", "[ARGS]", '"name"', "<|python_tag|>", "```", "f(", "<think>"]
)


@pytest.mark.parametrize("name", PARSERS)
@settings(max_examples=30, deadline=None, database=None)
@given(text=st.lists(_pieces, max_size=25).map("".join) | st.text(max_size=40))
def test_parse_never_raises_on_noise(name: str, text: str) -> None:
    parsed = get_tool_parser(name).parse(text)
    assert isinstance(parsed.content, str)


@pytest.mark.parametrize("name", PARSERS)
def test_deep_nesting_is_an_error_not_a_crash(name: str) -> None:
    parser = get_tool_parser(name)
    deep = parser.format_calls([ToolCall("f", {"a": 1})]).replace("1", "[" * 100_000 + "]" * 100_000)
    parsed = parser.parse(deep)
    assert parsed.calls == [] and parsed.errors


def test_hermes_bfcl_reads_only_what_bfcl_eval_reads() -> None:
    p = get_tool_parser("hermes_bfcl")
    canonical = '<tool_call>\n{"name": "ls", "arguments": {"a": true}}\n</tool_call>'
    compact = '<tool_call>{"name": "cd", "arguments": {"folder": "x"}}</tool_call>'
    broken = '<tool_call>\n{"name": "cd", "arguments": {\n</tool_call>'
    r = p.parse(f"hi\n{canonical}\n{compact}\n{broken}")
    assert [c.name for c in r.calls] == ["ls"]
    assert len(r.errors) == 1 and r.errors[0].index == 1
    assert compact in r.content  # not a call for bfcl-eval's Qwen handler
    assert get_tool_parser("hermes").parse(compact).errors  # hermes reports what the scorer ignores
    assert p.parse(p.format_calls(r.calls)).calls == r.calls
