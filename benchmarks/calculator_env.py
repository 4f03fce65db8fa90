"""A plug-in calculator environment in one file, and the one safe arithmetic evaluator it shares with verl's tool.

The env is reached through the registry's path form, with nothing registered first::

    from agent_tune.envs import make_env
    env = make_env("benchmarks.calculator_env:CalculatorEnv")

or, in a dataset row, ``extra_info.env = {"name": "benchmarks.calculator_env:CalculatorEnv", "kwargs": {}}``
(the repository root on ``sys.path``). ``benchmarks/agent_loop_vs_verl.py`` plays it with agent-tune's agent
loop and gives verl's ``ToolAgentLoop`` a verl ``BaseTool`` calling the same :func:`run_calculator`, so both
sides answer a call with the same text.

:func:`safe_eval` never hands model output to ``eval``/``exec``: it parses with :mod:`ast` and walks the tree
itself, accepting only number literals, ``+ - * / **``, unary minus/plus and parentheses, with the input's
length, the exponent and the size of every intermediate result bounded.
"""

from __future__ import annotations

import ast
import math
import operator
from typing import Any, Callable, Sequence

from agent_tune.envs import BaseToolEnv, EnvStateError, Observation, StepResult, ToolResult
from agent_tune.parsing import ParsedResponse
from agent_tune.parsing.response import ResponseParser

MAX_EXPRESSION_CHARS = 200
MAX_EXPONENT = 64  # |b| in a ** b
MAX_MAGNITUDE = 10**40  # every intermediate value

TOOL_NAME = "calculator"
TOOL_SCHEMA: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": "Evaluate an arithmetic expression with + - * / ** and parentheses.",
        "parameters": {
            "type": "object",
            "properties": {"expression": {"type": "string", "description": "the arithmetic expression"}},
            "required": ["expression"],
        },
    },
}
TOOLS = [TOOL_SCHEMA]

# The worked examples every prompt carries (earlier turns of the conversation), so SmolLM2 calls the tool.
SYSTEM = ("You are a careful assistant. Use the calculator tool for every computation, "
          "then answer with the number.")
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
    """The conversation an episode starts from: system text, the worked example, the question."""
    return [{"role": "system", "content": SYSTEM}, *[dict(m) for m in EXAMPLE], {"role": "user", "content": question}]


class UnsafeExpressionError(ValueError):
    """The input is not a bounded arithmetic expression; nothing of it was evaluated."""


_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos}


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


def format_number(v: int | float) -> str:
    """``89`` for 89 and 89.0, ``0.3333333333`` for 1/3."""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v) if isinstance(v, int) else f"{v:.10g}"


def run_calculator(arguments: Any) -> tuple[str, bool]:
    """The calculator tool: ``(text the model reads, error?)`` for a call's arguments. Both agent loops of the
    benchmark answer calls with this, so equal calls read equal results."""
    expression = arguments.get("expression") if isinstance(arguments, dict) else None
    if not isinstance(expression, str):
        return 'Error: call calculator with {"expression": "<arithmetic>"}', True
    try:
        return format_number(safe_eval(expression)), False
    except ZeroDivisionError:
        return "Error: division by zero", True
    except UnsafeExpressionError as exc:
        return f"Error: {exc}", True


class CalculatorEnv(BaseToolEnv):
    """Arithmetic questions with one ``calculator`` tool; reward 1 if the final answer (a generation without a
    call) contains the expected number. The episode ends there, or after ``max_steps`` generations (the calls
    of that last generation are not run, as verl's ToolAgentLoop does at its turn limit)."""

    description = "benchmark: arithmetic with one calculator tool (safe ast evaluator), reward for the answer"

    def __init__(self, tool_parser: str = "hermes", max_steps: int = 8) -> None:
        self.parser = ResponseParser(tool_parser)
        self.max_steps = int(max_steps)
        self._running = False

    def reset(self, question: str = "", answer: Any = None, **_: Any) -> Observation:
        self.answer = answer
        self.steps = self.calls = self.format_errors = 0
        self._running = True
        return Observation(messages=prompt_messages(question), tools=TOOLS)

    def extract_tool_calls(self, raw_response: str) -> ParsedResponse:
        return self.parser.parse(raw_response)[1]

    def format_tool_response(self, results: Sequence[ToolResult]) -> Observation:
        return Observation(messages=[{"role": "tool", "content": r.content} for r in results], tools=TOOLS)

    def step(self, raw_response: str) -> StepResult:
        if not self._running:
            raise EnvStateError("calculator env: step() with no episode running; call reset() first")
        self.steps += 1
        parsed = self.extract_tool_calls(raw_response)
        if not parsed.has_tool_call_attempt:  # the final answer
            solved = self.answer is not None and format_number(self.answer) in parsed.content
            return self._end(1.0 if solved else 0.0)
        if self.steps >= self.max_steps:
            return self._end(0.0, {"max_steps": True})
        errors_before = self.format_errors
        results: list[ToolResult] = []
        for call in parsed.calls:
            self.calls += 1
            if call.name != TOOL_NAME:
                self.format_errors += 1
                results.append(ToolResult(f"Error: unknown tool {call.name!r}; the only tool is calculator",
                                          call.name, error=True))
                continue
            args = call.arguments
            text, error = run_calculator(args)
            if not (isinstance(args, dict) and isinstance(args.get("expression"), str)):
                self.format_errors += 1  # the call's arguments break the schema (a bad expression does not)
            results.append(ToolResult(text, call.name, error=error))
        for err in parsed.errors:
            self.format_errors += 1
            results.append(ToolResult(f"Error: tool call #{err.index + 1} could not be parsed: {err.reason}",
                                      error=True))
        info = {"format_errors": self.format_errors - errors_before, "calls": [c.name for c in parsed.calls]}
        return StepResult(self.format_tool_response(results), 0.0, False, info)

    def finalize(self, reason: str = "truncated") -> StepResult:
        if not self._running:
            raise EnvStateError("calculator env: finalize() with no episode running")
        return self._end(0.0, {"truncated": True, "finalize_reason": reason})

    def _end(self, reward: float, extra: dict[str, Any] | None = None) -> StepResult:
        self._running = False
        info = {"accuracy": reward, "progress": reward, "format_errors": self.format_errors,
                "num_steps": self.steps, "num_calls": self.calls, "turns_completed": int(not extra),
                **(extra or {})}
        return StepResult(Observation(), reward, True, info)

    def close(self) -> None:
        self._running = False
