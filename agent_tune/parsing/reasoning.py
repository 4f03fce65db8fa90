"""Reasoning parsers: split a response into its reasoning block and its visible content.

Rules shared by the tag-based parsers (``qwen3``, ``deepseek_r1``: ``<think>``; ``thinking``: ``<thinking>``):

* ``<think>R</think>C`` -> ``("R", "C")``; text before the opening tag is kept as content. Both parts
  are stripped; an empty block gives ``""`` (not None), telling "thought nothing" from "no block".
* only ``</think>`` (the chat template put ``<think>`` in the prompt): everything before it is reasoning.
* ``<think>`` never closed (e.g. truncated by the length limit): the whole rest is reasoning, and the
  content is the text before the tag, stripped (``""`` when the response starts with the tag).
* no tag at all: ``(None, text)``, except for ``deepseek_r1``, whose template always opens the block in
  the prompt, so an untagged response is an unfinished reasoning block: ``(text.strip(), "")``.
"""

from __future__ import annotations

from typing import ClassVar

from agent_tune.parsing.base import ReasoningParser
from agent_tune.parsing.registry import register_reasoning_parser


class TagReasoningParser(ReasoningParser):
    """A reasoning block delimited by ``start_tag`` / ``end_tag`` (see the module docstring)."""

    start_tag: ClassVar[str] = "<think>"
    end_tag: ClassVar[str] = "</think>"
    opened_in_prompt: ClassVar[bool] = False  # an untagged response is all reasoning

    def parse(self, text: str) -> tuple[str | None, str]:
        start, end = text.find(self.start_tag), text.find(self.end_tag)
        if end >= 0 and not 0 <= start < end:  # opened in the prompt
            return text[:end].strip(), text[end + len(self.end_tag) :].strip()
        if start < 0:
            return (text.strip(), "") if self.opened_in_prompt else (None, text)
        body = start + len(self.start_tag)
        if end < 0:  # unclosed: the rest is reasoning
            return text[body:].strip(), text[:start].strip()
        return text[body:end].strip(), (text[:start] + text[end + len(self.end_tag) :]).strip()


@register_reasoning_parser("qwen3")
class Qwen3ReasoningParser(TagReasoningParser):
    """Qwen3: ``<think>...</think>``; the template may put ``<think>`` in the prompt."""


@register_reasoning_parser("deepseek_r1")
class DeepSeekR1ReasoningParser(TagReasoningParser):
    """DeepSeek-R1: ``<think>...</think>``, opened by the template, so an untagged response is reasoning."""

    opened_in_prompt = True


@register_reasoning_parser("thinking")
class ThinkingReasoningParser(TagReasoningParser):
    """``<thinking>...</thinking>`` (the tag T3RL uses for Qwen3-4B-Instruct-2507)."""

    start_tag = "<thinking>"
    end_tag = "</thinking>"


@register_reasoning_parser("none")
class NoReasoningParser(ReasoningParser):
    """No reasoning block: the whole response is content, unchanged."""

    def parse(self, text: str) -> tuple[str | None, str]:
        return None, text
