"""Reasoning parsers: split a response into its reasoning block and its visible content.

One class, :class:`TagReasoningParser`, reads a block between any start / end tag pair; the model families
are presets of it (``qwen3``, ``deepseek_r1``: ``<think>``; ``thinking``: ``<thinking>``), and any other pair
is set in configuration, with no new class: the spec ``tags:start=<S>,end=<E>`` (add
``,opened_in_prompt=true`` when the chat template opens the block in the prompt), given wherever a reasoning
parser name is (``agent_tune.reasoning_parser``, ``--reasoning-parser``), or ``agent_tune.reasoning_tags``.

Rules shared by every tag pair (shown with ``<think>``):

* ``<think>R</think>C`` -> ``("R", "C")``; text before the opening tag is kept as content. Both parts
  are stripped; an empty block gives ``""`` (not None), telling "thought nothing" from "no block".
* only ``</think>`` (the chat template put ``<think>`` in the prompt): everything before it is reasoning.
* ``<think>`` never closed (e.g. truncated by the length limit): the whole rest is reasoning, and the
  content is the text before the tag, stripped (``""`` when the response starts with the tag).
* no tag at all: ``(None, text)``, except with ``opened_in_prompt`` (``deepseek_r1``, whose template always
  opens the block in the prompt): an untagged response is an unfinished reasoning block: ``(text.strip(), "")``.
"""

from __future__ import annotations

from pydantic import model_validator

from agent_tune.parsing.base import ReasoningParser
from agent_tune.parsing.registry import (
    ParserSpecError,
    register_reasoning_parser,
    register_reasoning_preset,
    register_reasoning_spec,
)
from agent_tune.utils.typed_config import ConfigModel, OptionError

SPEC_KIND = "tags"
SPEC_FORM = "tags:start=<S>,end=<E>[,opened_in_prompt=true]"
_TRUE, _FALSE = ("true", "yes", "1"), ("false", "no", "0")


def tags_problem(start: str, end: str) -> tuple[str, str] | None:
    """``(which tag, why)`` when ``start`` / ``end`` cannot delimit a reasoning block, None when they can: each
    must be a non-empty string without surrounding whitespace or ``,`` (the spec's separator), the two must
    differ and neither may hold the other (a search for one would stop inside the other)."""
    for key, tag in (("start", start), ("end", end)):
        if not isinstance(tag, str) or not tag:
            return key, f"the {key} tag must be a non-empty string, got {tag!r}"
        if tag != tag.strip():
            return key, f"the {key} tag {tag!r} has whitespace around it"
        if "," in tag:
            return key, f"the {key} tag {tag!r} holds ',' (it separates the spec's arguments)"
    if start in end or end in start:
        return "end", f"the start tag {start!r} and the end tag {end!r} must differ and neither may hold the other"
    return None


def tags_spec(start: str, end: str, opened_in_prompt: bool = False) -> str:
    """The canonical spec of a tag pair, ``tags:start=<S>,end=<E>[,opened_in_prompt=true]`` (what
    ``get_reasoning_parser`` reads and what the parser's ``name`` is); ``ParserSpecError`` for a bad pair."""
    problem = tags_problem(start, end)
    if problem is not None:
        raise ParserSpecError(f"reasoning tags: {problem[1]}")
    return f"{SPEC_KIND}:start={start},end={end}" + (",opened_in_prompt=true" if opened_in_prompt else "")


class ReasoningTags(ConfigModel):
    """``agent_tune.reasoning_tags`` (T3RL's ``think_start_token`` / ``think_end_token``): the reasoning block's
    tags, for a model family without a named reasoning parser; the envs get the parser spec :attr:`spec`.
    ``opened_in_prompt``: the chat template opens the block in the prompt, so an untagged response is
    unfinished reasoning."""

    start: str
    end: str
    opened_in_prompt: bool = False

    @model_validator(mode="after")
    def _delimits(self) -> ReasoningTags:
        problem = tags_problem(self.start, self.end)
        if problem is not None:
            raise OptionError(*problem)
        return self

    @property
    def spec(self) -> str:
        """The reasoning parser spec of these tags (what ``get_reasoning_parser`` reads)."""
        return tags_spec(self.start, self.end, self.opened_in_prompt)


class TagReasoningParser(ReasoningParser):
    """A reasoning block delimited by ``start_tag`` / ``end_tag`` (see the module docstring)."""

    def __init__(self, start_tag: str = "<think>", end_tag: str = "</think>", opened_in_prompt: bool = False) -> None:
        self.name = tags_spec(start_tag, end_tag, opened_in_prompt)  # checks the pair; a preset renames it
        self.start_tag, self.end_tag, self.opened_in_prompt = start_tag, end_tag, opened_in_prompt

    @classmethod
    def from_spec(cls, args: str) -> TagReasoningParser:
        """The parser of a spec's arguments, ``start=<S>,end=<E>[,opened_in_prompt=true|false]`` (the text
        after ``tags:``); items are stripped. ``ParserSpecError`` names what is wrong and the accepted form."""
        values: dict[str, str] = {}
        for item in args.split(","):
            key, eq, value = item.strip().partition("=")
            if not eq:
                raise ParserSpecError(f"reasoning parser spec: {item.strip()!r} is not key=value; write {SPEC_FORM}")
            key = key.strip()
            if key not in ("start", "end", "opened_in_prompt"):
                raise ParserSpecError(f"reasoning parser spec: unknown key {key!r} (known: start, end, "
                                      f"opened_in_prompt); write {SPEC_FORM}")
            if key in values:
                raise ParserSpecError(f"reasoning parser spec: {key!r} is given twice; write {SPEC_FORM}")
            values[key] = value.strip()
        missing = [k for k in ("start", "end") if k not in values]
        if missing:
            raise ParserSpecError(f"reasoning parser spec: missing {' and '.join(missing)}; write {SPEC_FORM}")
        opened = values.get("opened_in_prompt", "false").lower()
        if opened not in _TRUE + _FALSE:
            raise ParserSpecError(f"reasoning parser spec: opened_in_prompt must be true or false, got "
                                  f"{values['opened_in_prompt']!r}")
        return cls(values["start"], values["end"], opened in _TRUE)

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


# Qwen3: the template may put <think> in the prompt.
register_reasoning_preset("qwen3", TagReasoningParser, start_tag="<think>", end_tag="</think>")
# DeepSeek-R1: opened by the template, so an untagged response is reasoning.
register_reasoning_preset("deepseek_r1", TagReasoningParser, start_tag="<think>", end_tag="</think>",
                          opened_in_prompt=True)
# <thinking>...</thinking>: the tag T3RL uses for Qwen3-4B-Instruct-2507.
register_reasoning_preset("thinking", TagReasoningParser, start_tag="<thinking>", end_tag="</thinking>")
register_reasoning_spec(SPEC_KIND, TagReasoningParser.from_spec, SPEC_FORM)


@register_reasoning_parser("none")
class NoReasoningParser(ReasoningParser):
    """No reasoning block: the whole response is content, unchanged."""

    def parse(self, text: str) -> tuple[str | None, str]:
        return None, text
