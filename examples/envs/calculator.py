"""A complete tool environment in one file: arithmetic with a ``calculator`` tool, rewarded for the right answer.

Everything else comes from the contract (:class:`agent_tune.envs.BaseToolEnv`): the parser, the step, the
counting of steps, calls and format errors, the episode record. Reach it without registering anything, by
its path (the repository root on ``sys.path``)::

    from agent_tune.envs import make_env
    env = make_env("examples.envs.calculator:CalculatorEnv")

or in a dataset row, ``extra_info.env = {"name": "examples.envs.calculator:CalculatorEnv", "kwargs": {}}``;
importing the module also registers it as ``"calculator"``. ``benchmarks/agent_loop_vs_verl.py`` gives verl's
``ToolAgentLoop`` a verl tool calling the same :func:`run_calculator`, so both loops answer a call alike.

:func:`safe_eval` never hands model output to ``eval``/``exec``: it parses with :mod:`ast` and walks the tree
itself, accepting only number literals, ``+ - * / **``, unary minus/plus and parentheses, with the input's
length, the exponent and the size of every intermediate result bounded.
"""

from __future__ import annotations

import ast
import math
import operator
import random
import re
from typing import Any, Callable

from agent_tune.envs import CallToolEnv, Observation, Outcome, Task, TaskCatalogue, ToolResult, register_env
from agent_tune.parsing import ToolCall
from agent_tune.parsing.response import ResponseParser

TOOL_NAME = "calculator"
TOOL_SCHEMA: dict[str, Any] = {"type": "function", "function": {
    "name": TOOL_NAME, "description": "Evaluate an arithmetic expression with + - * / ** and parentheses.",
    "parameters": {"type": "object", "required": ["expression"],
                   "properties": {"expression": {"type": "string", "description": "the arithmetic expression"}}}}}
TOOLS = [TOOL_SCHEMA]
SYSTEM = "You are a careful assistant. Use the calculator tool for every computation, then answer with the number."
# Worked examples before every question (earlier turns of the conversation), so a small model calls the tool.
EXAMPLE: list[dict[str, str]] = [
    turn
    for question, expression, result in (("What is 12 * 7 + 5?", "12 * 7 + 5", "89"),
                                         ("What is 45 + 38 * 2?", "45 + 38 * 2", "121"),
                                         ("What is 9 ** 3 - 100?", "9 ** 3 - 100", "629"))
    for turn in (
        {"role": "user", "content": question},
        {"role": "assistant", "content": '<tool_call>\n{"name": "calculator", "arguments": {"expression": "'
                                         + expression + '"}}\n</tool_call>'},
        {"role": "tool", "content": result},
        {"role": "assistant", "content": f"{expression} = {result}. The answer is {result}."},
    )
]


def prompt_messages(question: str) -> list[dict[str, str]]:
    """The conversation an episode starts from: system text, the worked examples, the question."""
    return [{"role": "system", "content": SYSTEM}, *[dict(m) for m in EXAMPLE], {"role": "user", "content": question}]


def calculator_tasks(split: str, size: int = 64, seed: int = 0) -> list[Task]:
    """``size`` questions of two or three operations on small numbers, drawn from ``seed``; the test questions
    never appear in train."""
    def draw(name: str, n: int, exclude: set[str]) -> list[str]:
        rng, out = random.Random(f"{name}-{seed}"), []
        while len(out) < n:
            terms = [str(rng.randint(2, 99)) for _ in range(rng.randint(3, 4))]
            q = " ".join(t for pair in zip(terms, [rng.choice("+-*") for _ in terms]) for t in pair)[:-2]
            if q not in exclude and q not in out:
                out.append(q)
        return out
    test = draw("test", size, set())
    chosen = test if split == "test" else draw("train", size, set(test))
    return [Task(f"{split}-{i}", {"question": f"What is {q}?", "answer": safe_eval(q)}, "arithmetic")
            for i, q in enumerate(chosen)]


@register_env("calculator")
class CalculatorEnv(CallToolEnv):
    """Arithmetic questions with one ``calculator`` tool; reward 1 if the final answer (a generation without a
    call) contains the expected number. The episode ends there, or after ``max_steps`` generations."""

    description = "example: arithmetic with one calculator tool (safe ast evaluator), reward for the right answer"
    catalogue = TaskCatalogue(splits=("train", "test"), tasks=calculator_tasks)

    def __init__(self, tool_parser: str = "hermes", max_steps: int = 8) -> None:
        if int(max_steps) < 1:
            raise ValueError(f"calculator env: max_steps must be >= 1, got {max_steps}")
        self.parser, self.max_steps, self.tools = ResponseParser(tool_parser), int(max_steps), TOOLS

    def reset(self, question: str, answer: float) -> Observation:
        self.question, self.answer, self.solved = question, answer, False
        super().reset()
        return Observation(messages=prompt_messages(question), tools=TOOLS)

    def call_tool(self, call: ToolCall) -> ToolResult:
        if call.name != TOOL_NAME:
            return ToolResult(f"Error: unknown tool {call.name!r}; the only tool is calculator", call.name, error=True)
        text, _ = run_calculator(call.arguments)
        # arguments that break the schema are a format error; a well-formed bad expression (1 / 0) is not
        return ToolResult(text, call.name, error=not isinstance(call.arguments.get("expression"), str))

    def on_answer(self, step: Any) -> None:
        self.solved = format_number(self.answer) in step.parsed.content
        super().on_answer(step)

    def outcome(self) -> Outcome:
        return Outcome(reward=float(self.solved), accuracy=float(self.solved))

    def reference_replies(self) -> list[str] | None:
        """A correct play, as the worked examples show one: a call with the question's expression, then the
        number (``None`` for a question not of the catalogue's form ``What is <expression>?``)."""
        match = re.fullmatch(r"What is (.+)\?", self.question.strip())
        if match is None:
            return None
        expression, value = match.group(1), format_number(self.answer)
        call = self.parser.tool_parser.format_calls([ToolCall(TOOL_NAME, {"expression": expression})])
        return [call, f"{expression} = {value}. The answer is {value}."]


class UnsafeExpressionError(ValueError):
    """The input is not a bounded arithmetic expression; nothing of it was evaluated."""


MAX_EXPRESSION_CHARS = 200
MAX_EXPONENT = 64  # |b| in a ** b
MAX_MAGNITUDE = 10**40  # every intermediate value
_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}


def run_calculator(arguments: Any) -> tuple[str, bool]:
    """The calculator tool: ``(text the model reads, error?)`` for a call's arguments."""
    expression = arguments.get("expression") if isinstance(arguments, dict) else None
    if not isinstance(expression, str):
        return 'Error: call calculator with {"expression": "<arithmetic>"}', True
    try:
        return format_number(safe_eval(expression)), False
    except ZeroDivisionError:
        return "Error: division by zero", True
    except UnsafeExpressionError as exc:
        return f"Error: {exc}", True


def format_number(v: int | float) -> str:
    """``89`` for 89 and 89.0, ``0.3333333333`` for 1/3."""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v) if isinstance(v, int) else f"{v:.10g}"


def safe_eval(expression: str) -> int | float:
    """The value of an arithmetic expression, or :class:`UnsafeExpressionError` (anything else: names, calls,
    attributes, subscripts, comparisons, strings, too long, exponent beyond ``MAX_EXPONENT``, values beyond
    ``MAX_MAGNITUDE``); ``ZeroDivisionError`` for a division by zero. The tree is checked as it is walked:
    an exponent is bounded before the power is computed."""
    if not isinstance(expression, str):
        raise UnsafeExpressionError(f"expression must be a string, not {type(expression).__name__}")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise UnsafeExpressionError(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise UnsafeExpressionError(f"not an arithmetic expression: {type(exc).__name__}") from None
    return _value(tree.body)


def _value(node: ast.AST) -> int | float:
    if isinstance(node, ast.Constant):
        v = node.value
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise UnsafeExpressionError(f"only numbers are allowed, not {v!r}")
        return _bounded(v)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _bounded(_UNARY[type(node.op)](_value(node.operand)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _value(node.left), _value(node.right)
        if isinstance(node.op, ast.Pow):
            if abs(right) > MAX_EXPONENT:
                raise UnsafeExpressionError(f"exponent beyond {MAX_EXPONENT}")
            if left == 0 and right < 0:
                raise ZeroDivisionError("0 to a negative power")
            if left < 0 and isinstance(right, float) and not right.is_integer():
                raise UnsafeExpressionError("a negative number to a fractional power")
        try:
            return _bounded(_BINARY[type(node.op)](left, right))
        except OverflowError:
            raise UnsafeExpressionError("result too large") from None
    raise UnsafeExpressionError(f"{type(node).__name__} is not allowed (numbers, + - * / ** and parentheses only)")


def _bounded(v: int | float) -> int | float:
    if isinstance(v, float) and not math.isfinite(v):
        raise UnsafeExpressionError("result is not finite")
    if abs(v) > MAX_MAGNITUDE:
        raise UnsafeExpressionError("result too large")
    return v
