"""DeepSeek tool-call parsers (round trip, accepted and rejected variants) and reasoning tags set by
configuration (the ``tags:`` spec, the presets, ``agent_tune.reasoning_tags``)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_tune.options import AgentTuneOptions, parse_options
from agent_tune.parsing import (
    ParserSpecError,
    TagReasoningParser,
    ToolCall,
    UnknownParserError,
    get_reasoning_parser,
    get_tool_parser,
    tool_parser_names,
)
from agent_tune.parsing.deepseek import CALL_BEGIN, CALL_END, CALLS_BEGIN, CALLS_END, SEP
from agent_tune.utils.typed_config import OptionError

DEEPSEEK = ["deepseek_v3", "deepseek_v31"]
CALLS = [ToolCall("f", {"a": "Zoë ☕ \"q\" \n", "b": [1, None, {"c": True}]}), ToolCall("g", {})]


def pairs(calls: list[ToolCall]) -> list[tuple[str, dict]]:
    return [(c.name, c.arguments) for c in calls]


def v3_block(name: str, args: str, kind: str = "function") -> str:
    return f"{CALL_BEGIN}{kind}{SEP}{name}\n```json\n{args}\n```{CALL_END}"


@pytest.mark.parametrize("name", DEEPSEEK)
def test_registered_and_round_trip(name: str) -> None:
    assert set(DEEPSEEK) <= set(tool_parser_names())
    parser = get_tool_parser(name)
    assert parser.name == name
    for content in ("", "Let me check. "):
        parsed = parser.parse(parser.format_calls(CALLS, content))
        assert pairs(parsed.calls) == pairs(CALLS) and parsed.errors == [] and parsed.content == content.strip()
    assert parser.format_calls([], "just text") == "just text"


_idents = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.]{0,10}", fullmatch=True)
_values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                       lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
                       max_leaves=6)


@pytest.mark.parametrize("name", DEEPSEEK)
@settings(max_examples=30, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(calls=st.lists(st.builds(ToolCall, _idents, st.dictionaries(st.text(), _values, max_size=3)),
                      min_size=1, max_size=3),
       content=st.text(alphabet="ab .\n中", max_size=12), cut=st.integers(min_value=0))
def test_round_trip_property_and_damage(name: str, calls: list[ToolCall], content: str, cut: int) -> None:
    parser = get_tool_parser(name)
    text = parser.format_calls(calls, content)
    parsed = parser.parse(text)
    assert pairs(parsed.calls) == pairs(calls) and parsed.errors == [] and parsed.content == content.strip()
    damaged = parser.parse(text[: cut % len(text)])  # truncated: never raises, never a half call
    indices = [e.index for e in damaged.errors]
    assert len(set(indices)) == len(indices)
    assert pairs(damaged.calls) == pairs(calls[: len(damaged.calls)])
    assert damaged.errors or not damaged.calls  # a cut section (no end tag) is a format error


def test_v3_accepts_the_template_form_with_eos_and_text_around() -> None:
    second = v3_block("g", '{"x": 1}')
    text = f"Sure.{CALLS_BEGIN}{v3_block('f', '{}')}\n\n{second}{CALLS_END}<｜end▁of▁sentence｜>"
    parsed = get_tool_parser("deepseek_v3").parse(text)
    assert pairs(parsed.calls) == [("f", {}), ("g", {"x": 1})] and parsed.errors == [] and parsed.content == "Sure."


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (v3_block("f", "{\n  \"a\": 1\n}"), "one line"),
        (v3_block("f", "{\"a\": 1"), "invalid JSON"),
        (v3_block("f", "[1]"), "got an array"),
        (v3_block("f", "\"{}\""), "got a string"),
        (v3_block("f", "{}", kind="tool"), "must be 'function'"),
        (v3_block("my f", "{}"), "function name"),
        (v3_block("", "{}"), "function name"),
        (f"{CALL_BEGIN}function{SEP}f\n{{}}{CALL_END}", "```json fence"),
        (f"{CALL_BEGIN}function f\n```json\n{{}}\n```{CALL_END}", f"no {SEP}"),
        (f"{CALL_BEGIN}function{SEP}f ```json {{}} ```{CALL_END}", "no newline after the function name"),
    ],
)
def test_v3_malformed_block_is_an_error_beside_good_ones(body: str, reason: str) -> None:
    text = f"{CALLS_BEGIN}{v3_block('ok', '{}')}\n{body}\n{v3_block('ok2', '{}')}{CALLS_END}"
    parsed = get_tool_parser("deepseek_v3").parse(text)
    assert [c.name for c in parsed.calls] == ["ok", "ok2"]
    assert len(parsed.errors) == 1 and parsed.errors[0].index == 1 and reason in parsed.errors[0].reason
    assert parsed.errors[0].raw == body and CALLS_BEGIN in parsed.errors[0].reason  # names the accepted form


@pytest.mark.parametrize(
    ("text", "calls", "reason"),
    [
        (f"{CALLS_BEGIN}{v3_block('f', '{}')}", ["f"], "unterminated <｜tool▁calls▁begin｜> section"),
        (f"{CALLS_BEGIN}{CALL_BEGIN}function{SEP}f\n```json\n{{", [], "unterminated <｜tool▁call▁begin｜> block"),
        (f"hi {v3_block('f', '{}')}", [], "outside a <｜tool▁calls▁begin｜>"),
        (f"{CALLS_BEGIN}junk{v3_block('f', '{}')}{CALLS_END}", ["f"], "text inside the"),
        (f"done{CALLS_END}", [], "outside its place"),
        (f"a {SEP} b", [], "outside its place"),
    ],
)
def test_v3_section_faults(text: str, calls: list[str], reason: str) -> None:
    parsed = get_tool_parser("deepseek_v3").parse(text)
    assert [c.name for c in parsed.calls] == calls
    assert parsed.errors and any(reason in e.reason for e in parsed.errors)


def test_v31_form_and_faults() -> None:
    parser = get_tool_parser("deepseek_v31")
    good = f"{CALL_BEGIN}f{SEP}{{\"a\": 1}}{CALL_END}"
    bad = f"{CALL_BEGIN}g{{}}{CALL_END}{CALL_BEGIN}h{SEP}{{\n}}{CALL_END}"
    parsed = parser.parse(f"{CALLS_BEGIN}{good}\n{bad}{CALLS_END}")
    assert pairs(parsed.calls) == [("f", {"a": 1})]
    assert [e.index for e in parsed.errors] == [1, 2]
    assert f"no {SEP}" in parsed.errors[0].reason and "one line" in parsed.errors[1].reason
    # V3's body is not V3.1's: the type and fence end up in the name / arguments
    v3 = get_tool_parser("deepseek_v3").format_calls([ToolCall("f", {})])
    assert parser.parse(v3).calls == [] and parser.parse(v3).errors


def test_plain_text_is_content() -> None:
    for name in DEEPSEEK:
        assert get_tool_parser(name).parse("  no calls here \n").content == "no calls here"


# ----------------------------------------------------------------------------- reasoning tags by configuration
@pytest.mark.parametrize(("preset", "spec"), [
    ("qwen3", "tags:start=<think>,end=</think>"),
    ("deepseek_r1", "tags:start=<think>,end=</think>,opened_in_prompt=true"),
    ("thinking", "tags:start=<thinking>,end=</thinking>"),
])
def test_presets_are_the_tag_class_with_arguments(preset: str, spec: str) -> None:
    named, configured = get_reasoning_parser(preset), get_reasoning_parser(spec)
    assert type(named) is type(configured) is TagReasoningParser
    assert named.name == preset and configured.name == spec
    for text in ("<think>a</think>b", "<thinking>a</thinking>b", "untagged", "a</think>b", "<thinking>open"):
        assert named.parse(text) == configured.parse(text)


def test_any_tag_pair_without_a_class() -> None:
    parser = get_reasoning_parser(" tags:start = <seed:think> , end=</seed:think>")
    assert parser.name == "tags:start=<seed:think>,end=</seed:think>"  # canonical: built again from its name
    assert get_reasoning_parser(parser.name).parse("x<seed:think>r</seed:think>y") == ("r", "xy")
    assert parser.parse("<seed:think>r</seed:think>y") == ("r", "y")
    assert parser.parse("no tags") == (None, "no tags")
    opened = get_reasoning_parser("tags:start=◁think▷,end=◁/think▷,opened_in_prompt=TRUE")
    assert opened.parse("still thinking") == ("still thinking", "")


@pytest.mark.parametrize(("spec", "fault"), [
    ("tags:start=<t>", "missing end"),
    ("tags:start=<t>,end=</t>,colour=red", "unknown key 'colour'"),
    ("tags:start=<t>,start=<u>,end=</t>", "given twice"),
    ("tags:<t>,</t>", "is not key=value"),
    ("tags:start=<t>,end=</t>,opened_in_prompt=maybe", "true or false"),
    ("tags:start=<t>,end=<t>", "must differ"),
    ("tags:start=think,end=/think", "neither may hold the other"),
    ("tags:start=,end=</t>", "non-empty"),
])
def test_malformed_specs_name_the_fault(spec: str, fault: str) -> None:
    with pytest.raises(ParserSpecError) as info:
        get_reasoning_parser(spec)
    assert fault in str(info.value)


def test_unknown_name_lists_presets_and_the_spec_form() -> None:
    with pytest.raises(UnknownParserError) as info:
        get_reasoning_parser("qwen4")
    assert "qwen3" in str(info.value) and "tags:start=<S>,end=<E>" in str(info.value)
    with pytest.raises(UnknownParserError):
        get_reasoning_parser("brackets:start=[,end=]")


def test_reasoning_tags_option_becomes_the_spec() -> None:
    options = parse_options({"reasoning_parser": "none",
                             "reasoning_tags": {"start": "<reason>", "end": "</reason>", "opened_in_prompt": True}})
    assert options.reasoning_parser_spec == "tags:start=<reason>,end=</reason>,opened_in_prompt=true"
    assert get_reasoning_parser(options.reasoning_parser_spec).parse("r</reason>c") == ("r", "c")
    assert parse_options({"reasoning_parser": "qwen3"}).reasoning_parser_spec == "qwen3"
    assert AgentTuneOptions().reasoning_parser_spec is None


@pytest.mark.parametrize(("block", "key", "fault"), [
    ({"reasoning_parser": "qwen3", "reasoning_tags": {"start": "<a>", "end": "</a>"}}, "agent_tune.reasoning_tags",
     "give one of the two"),
    ({"reasoning_tags": {"start": "<a>", "end": "<a>"}}, "agent_tune.reasoning_tags.end", "must differ"),
    ({"reasoning_tags": {"start": " <a>", "end": "</a>"}}, "agent_tune.reasoning_tags.start", "whitespace"),
    ({"reasoning_tags": {"start": "<a>"}}, "agent_tune.reasoning_tags.end", "required"),
    ({"reasoning_tags": {"start": "<a>", "end": 5}}, "agent_tune.reasoning_tags.end", ""),
])
def test_bad_reasoning_tags_option_names_the_key(block: dict, key: str, fault: str) -> None:
    with pytest.raises(OptionError) as info:
        parse_options(block)
    assert info.value.key == key and fault in info.value.problem
