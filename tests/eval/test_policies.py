"""The chat-mode policy writes a server's separate reasoning back in the configured reasoning parser's own tags."""

from __future__ import annotations

from agent_tune.eval.policies import ChatCompletionsPolicy, reasoning_tags
from agent_tune.parsing import get_reasoning_parser, get_tool_parser


def test_reasoning_tags_are_the_parsers_own() -> None:
    assert reasoning_tags("qwen3") == ("<think>", "</think>")
    assert reasoning_tags("none") is None
    assert reasoning_tags("tags:start=<reason>,end=</reason>") == ("<reason>", "</reason>")


def test_kept_reasoning_round_trips_through_the_parser() -> None:
    spec = "tags:start=<reason>,end=</reason>"
    policy = ChatCompletionsPolicy(None, "m", None, get_tool_parser("hermes"), reasoning_tags=reasoning_tags(spec))
    text, _ = policy._to_text({"role": "assistant", "content": "It is 4.", "reasoning_content": "2 + 2"})
    assert text == "<reason>\n2 + 2\n</reason>\n\nIt is 4."
    reasoning, content = get_reasoning_parser(spec).parse(text)
    assert (reasoning.strip(), content.strip()) == ("2 + 2", "It is 4.")
    plain = ChatCompletionsPolicy(None, "m", None, get_tool_parser("hermes"), reasoning_tags=None)
    assert plain._to_text({"role": "assistant", "content": "It is 4.", "reasoning_content": "2 + 2"})[0] == "It is 4."
