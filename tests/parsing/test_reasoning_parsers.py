"""Reasoning parsers: tag handling, prompt-opened blocks, unclosed blocks, registry."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_tune.parsing import ReasoningParser, UnknownParserError, get_reasoning_parser, reasoning_parser_names

NAMES = ["qwen3", "thinking", "deepseek_r1", "none"]
TAGS = {
    "qwen3": ("<think>", "</think>"),
    "deepseek_r1": ("<think>", "</think>"),
    "thinking": ("<thinking>", "</thinking>"),
}


def test_registry() -> None:
    assert set(NAMES) <= set(reasoning_parser_names())
    for name in NAMES:
        parser = get_reasoning_parser(name)
        assert isinstance(parser, ReasoningParser) and parser.name == name
    with pytest.raises(UnknownParserError) as info:
        get_reasoning_parser("qwen4")
    assert isinstance(info.value, KeyError) and all(n in str(info.value) for n in NAMES)


@pytest.mark.parametrize("name", ["qwen3", "thinking", "deepseek_r1"])
@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{o}\nLet me think.\n{c}\n\nThe answer is 4.", ("Let me think.", "The answer is 4.")),
        ("Let me think.\n{c}\n\nThe answer is 4.", ("Let me think.", "The answer is 4.")),  # <think> in prompt
        ("{o}\n\n{c}\n\nHi.", ("", "Hi.")),  # empty block (Qwen3 non-thinking mode)
        ("{o}\nstill thinking when the length limit hit", ("still thinking when the length limit hit", "")),
        ("{o}a{c}b{o}c{c}d", ("a", "b{o}c{c}d")),  # only the first block is reasoning
        ("{c}", ("", "")),
    ],
)
def test_tag_parsers(name: str, template: str, expected: tuple[str, str]) -> None:
    o, c = TAGS[name]
    reasoning, content = get_reasoning_parser(name).parse(template.format(o=o, c=c))
    assert (reasoning, content) == (expected[0], expected[1].format(o=o, c=c))


def test_untagged_response() -> None:
    text = "  No reasoning here.\n"
    assert get_reasoning_parser("qwen3").parse(text) == (None, text)
    assert get_reasoning_parser("thinking").parse(text) == (None, text)
    # DeepSeek-R1's template opens <think> in the prompt: untagged output is unfinished reasoning.
    assert get_reasoning_parser("deepseek_r1").parse(text) == ("No reasoning here.", "")


def test_thinking_ignores_think_tags_and_vice_versa() -> None:
    assert get_reasoning_parser("thinking").parse("<think>x</think>y") == (None, "<think>x</think>y")
    assert get_reasoning_parser("qwen3").parse("<thinking>x</thinking>y") == (None, "<thinking>x</thinking>y")


def test_none_returns_text_unchanged() -> None:
    text = "<think>kept</think> as is "
    assert get_reasoning_parser("none").parse(text) == (None, text)


def test_content_before_an_unclosed_block_is_kept() -> None:
    assert get_reasoning_parser("qwen3").parse("Answer first. <think>then rambling") == (
        "then rambling", "Answer first."
    )


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=30, deadline=None, database=None)
@given(
    text=st.lists(st.sampled_from(["<think>", "</think>", "<thinking>", "</thinking>", "a", " ", "\n"])).map("".join)
)
def test_never_raises_and_loses_no_visible_text(name: str, text: str) -> None:
    reasoning, content = get_reasoning_parser(name).parse(text)
    kept = (reasoning or "") + content
    assert kept.count("a") == text.count("a")
