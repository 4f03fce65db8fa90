"""ToolRL's answer layout and its format rule (Qian et al., 2025, Section 3.3, format reward).

A ToolRL answer is ``<think>...</think>`` followed, on the next line, by what the task needs: a
``<tool_call>`` block (one JSON object per line, read by the ``toolrl`` tool parser), a
``<response>...</response>``, or both in that order::

    <think> reasoning </think>
    <tool_call>
    {"name": "f", "parameters": {"x": 1}}
    </tool_call>
    <response> text for the user </response>

The format reward is earned when the (stripped) answer has exactly the parts the ground-truth answer has,
in that order and nothing around them, with one ``<tool_call>``/``</tool_call>`` pair when calls are
expected and one ``<response>``/``</response>`` pair when a response is. The ``<think>`` block may hold
anything (ToolRL matches it lazily up to the first ``</think>`` that the rest of the layout follows).
"""

from __future__ import annotations

import json
import re
from typing import Any, Mapping, Sequence

_THINK = r"<think>.*?</think>"
_CALLS = r"<tool_call>\n.*?\n</tool_call>"
_RESPONSE = r"<response>.*?</response>"
_LAYOUTS = {  # (calls expected, response expected) -> the whole answer
    (True, False): re.compile(rf"{_THINK}\n{_CALLS}", re.DOTALL),
    (False, True): re.compile(rf"{_THINK}\n{_RESPONSE}", re.DOTALL),
    (True, True): re.compile(rf"{_THINK}\n{_CALLS}\n{_RESPONSE}", re.DOTALL),
    (False, False): re.compile(_THINK, re.DOTALL),
}
_ONCE = {True: ("<tool_call>", "</tool_call>"), False: ()}
_ONCE_RESPONSE = {True: ("<response>", "</response>"), False: ()}


def toolrl_format_ok(answer: str, expects_calls: bool, expects_response: bool) -> bool:
    """Whether ``answer`` has ToolRL's layout for a ground truth with (or without) calls and a response."""
    text = answer.strip()
    if _LAYOUTS[(expects_calls, expects_response)].fullmatch(text) is None:
        return False
    return all(text.count(tag) == 1 for tag in _ONCE[expects_calls] + _ONCE_RESPONSE[expects_response])


def toolrl_reasoning(answer: str) -> str | None:
    """The reasoning the length reward counts, as ToolRL reads it: the text after the last ``<think>`` up to
    the next ``</think>`` (or the end), stripped; ``None`` unless both tags occur in the answer."""
    if "<think>" not in answer or "</think>" not in answer:
        return None
    return answer.rsplit("<think>", 1)[1].split("</think>", 1)[0].strip()


def toolrl_system_prompt(tools: Sequence[Mapping[str, Any]]) -> str:
    """A system prompt asking for ToolRL's layout and listing ``tools`` (OpenAI-style or bare schemas) as
    ToolRL's prompts do, for tasks that do not bring ToolRL's own prompt."""
    lines = ["You can call tools to solve the user's task.", "", "Available tools:"]
    for i, tool in enumerate(tools, 1):
        fn = tool.get("function", tool)
        params = (fn.get("parameters") or {}).get("properties", {})
        lines += [f"{i}. Name: {fn.get('name', '')}", f"Description: {fn.get('description', '')}",
                  f"Parameters: {json.dumps(params, ensure_ascii=False)}"]
    lines += [
        "",
        "Answer in this layout:",
        "<think> your reasoning </think>",
        "<tool_call>",
        '{"name": "tool name", "parameters": {"parameter name": "value"}}',
        "(one JSON object per line, one line per call)",
        "</tool_call>",
        "<response> your reply to the user </response>",
        "",
        "Always begin with <think>. Then write a <tool_call> block, a <response>, or both in this order, as the "
        "task needs, and leave out the part it does not need.",
    ]
    return "\n".join(lines)


def toolrl_answer_task(answer: str) -> dict[str, Any]:
    """The toolcall env's task fields for one of ToolRL's ground-truth answers (its data's ``output``):
    ``ground_truth`` (the calls of its ``<tool_call>`` block as ``{"name", "arguments"}``) and
    ``expects_response`` (whether it has a ``<response>``). Raises ``ValueError`` on a call that does not
    decode."""
    from agent_tune.parsing import get_tool_parser

    parsed = get_tool_parser("toolrl").parse(answer)
    if parsed.errors:
        raise ValueError(f"ToolRL answer has an undecodable call: {parsed.errors[0].reason}")
    calls = [{"name": c.name, "arguments": c.arguments} for c in parsed.calls]
    return {"ground_truth": calls, "expects_response": "<response>" in answer}
