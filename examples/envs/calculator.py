"""A complete small tool environment: arithmetic with two tools, rewarded for the right final answer.

Register it and check it against the contract::

    from agent_tune.envs import check_env, make_env
    import examples.envs.calculator  # registers "calculator"

    check_env(lambda: make_env("calculator"), task={"question": "What is (2 + 3) * 4?", "answer": 20},
              valid_response='<tool_call>\\n{"name": "add", "arguments": {"a": 2, "b": 3}}\\n</tool_call>',
              malformed_response="<tool_call>\\n{oops\\n</tool_call>")

Rows use it with ``extra_info.env = {"name": "calculator", "kwargs": {}}`` and the task fields
(``question``, ``answer``) in ``extra_info``; or, without importing it first, with the path
``"examples.envs.calculator:CalculatorToolEnv"`` as the name.
"""

from __future__ import annotations

from typing import Any, Sequence

from agent_tune.envs import BaseToolEnv, EnvStateError, Observation, StepResult, ToolResult, register_env
from agent_tune.parsing import ParsedResponse
from agent_tune.parsing.response import ResponseParser

TOOLS = [
    {"type": "function", "function": {
        "name": name, "description": f"{name.capitalize()} two numbers.",
        "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                       "required": ["a", "b"]}}}
    for name in ("add", "multiply")
]
OPERATIONS = {"add": lambda a, b: a + b, "multiply": lambda a, b: a * b}


@register_env("calculator")
class CalculatorToolEnv(BaseToolEnv):
    """Arithmetic with ``add`` and ``multiply``; reward 1 if the final answer (a response without a call)
    contains the right number."""

    description = "example: arithmetic with add/multiply tools, reward for the right final answer"

    def __init__(self, tool_parser: str = "hermes", max_steps: int = 8) -> None:
        self.parser = ResponseParser(tool_parser)
        self.max_steps = max_steps
        self._running = False

    def reset(self, question: str = "", answer: float = 0, **_: Any) -> Observation:
        self.answer, self.steps, self.calls, self.format_errors, self._running = answer, 0, 0, 0, True
        return Observation(messages=[{"role": "user", "content": question}], tools=TOOLS)

    def extract_tool_calls(self, raw_response: str) -> ParsedResponse:
        return self.parser.parse(raw_response)[1]

    def format_tool_response(self, results: Sequence[ToolResult]) -> Observation:
        return Observation(messages=[{"role": "tool", "content": r.content} for r in results], tools=TOOLS)

    def step(self, raw_response: str) -> StepResult:
        if not self._running:
            raise EnvStateError("calculator env: step() with no episode running; call reset() first")
        self.steps += 1
        if self.stop(raw_response):  # no call: this is the final answer
            solved = str(self.answer) in self.extract_tool_calls(raw_response).content
            return self._end(1.0 if solved else 0.0)
        parsed = self.extract_tool_calls(raw_response)
        errors_before = self.format_errors
        results = []
        for call in parsed.calls:
            self.calls += 1
            args = call.arguments
            if call.name not in OPERATIONS or not all(isinstance(args.get(k), (int, float)) for k in ("a", "b")):
                self.format_errors += 1
                results.append(ToolResult(f"Error: call add or multiply with numbers a and b, not {call.name}({args})",
                                          call.name, error=True))
                continue
            results.append(ToolResult(str(OPERATIONS[call.name](args["a"], args["b"])), call.name))
        for err in parsed.errors:
            self.format_errors += 1
            results.append(
                ToolResult(f"Error: tool call #{err.index + 1} could not be parsed: {err.reason}", error=True)
            )
        if self.steps >= self.max_steps:
            return self._end(0.0)
        # a step's own errors while the episode goes on; the total in the step that ends it
        return StepResult(self.format_tool_response(results), 0.0, False,
                          {"format_errors": self.format_errors - errors_before})

    def finalize(self, reason: str = "truncated") -> StepResult:
        if not self._running:
            raise EnvStateError("calculator env: finalize() with no episode running")
        return self._end(0.0, {"truncated": True, "finalize_reason": reason})

    def _end(self, reward: float, extra: dict[str, Any] | None = None) -> StepResult:
        self._running = False
        info = {"accuracy": reward, "progress": reward, "format_errors": self.format_errors, "num_steps": self.steps,
                "num_calls": self.calls, "turns_completed": int(not extra), **(extra or {})}
        return StepResult(Observation(), reward, True, info)
