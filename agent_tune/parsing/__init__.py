"""Tool-call and reasoning parsers, chosen by name from config.

``get_tool_parser("hermes").parse(text)`` gives a ``ParsedResponse`` (content, calls, errors; it never
raises on model output) and ``format_calls`` renders calls as that model family writes them.
``get_reasoning_parser("qwen3").parse(text)`` gives ``(reasoning, content)``; any tag pair is a spec,
``get_reasoning_parser("tags:start=<think>,end=</think>")`` (no class per pair).
"""

from agent_tune.parsing.base import ReasoningParser, ToolCallParser
from agent_tune.parsing.registry import (
    ParserSpecError,
    UnknownParserError,
    get_reasoning_parser,
    get_tool_parser,
    reasoning_parser_names,
    register_reasoning_parser,
    register_reasoning_preset,
    register_reasoning_spec,
    register_tool_parser,
    tool_parser_names,
)
from agent_tune.parsing.types import ParsedResponse, ToolCall, ToolCallError

# Built-in parsers register themselves on import.
from agent_tune.parsing import deepseek, hermes, llama3_json, mistral, pythonic, reasoning, toolrl  # noqa: E402,F401  isort: skip
from agent_tune.parsing.reasoning import TagReasoningParser, tags_spec  # noqa: E402  isort: skip

__all__ = [
    "ParsedResponse",
    "ParserSpecError",
    "ReasoningParser",
    "TagReasoningParser",
    "ToolCall",
    "ToolCallError",
    "ToolCallParser",
    "UnknownParserError",
    "get_reasoning_parser",
    "get_tool_parser",
    "reasoning_parser_names",
    "register_reasoning_parser",
    "register_reasoning_preset",
    "register_reasoning_spec",
    "register_tool_parser",
    "tags_spec",
    "tool_parser_names",
]
