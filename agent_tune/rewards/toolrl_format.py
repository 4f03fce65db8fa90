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

import re

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
