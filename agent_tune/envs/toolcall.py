"""Single-turn function calling scored with ToolRL's reward ("toolcall", :class:`ToolCallToolEnv`).

One question, a set of tools, one response: the response's tool calls (decoded with the configured
parser, reasoning stripped first) are compared with the ground-truth calls by ToolRL's reward
(:mod:`agent_tune.rewards.toolrl`). Nothing is executed: the step's final observation
(``format_tool_response``) is the env's verdict on each call block (accepted, unknown function, not
decodable), which the transcript and rollout dumps show; the episode ends there. The format reward is
ToolRL's structural check: 1 when the response has the shape the task expects (at least one tool call when the ground
truth calls tools, no call when it does not), every call block decodes and names a tool that was
offered, and, if ``require_reasoning`` is set, the response carries a reasoning block. (A plain-text
answer to a task that needs a call earns no format reward: otherwise "never try a call" would out-score
every imperfect attempt.) ``reward_scale="unit"`` maps ToolRL's [-3, 4] onto [0, 1].

A task is ``reset(question=..., tools=[...], ground_truth=[{"name", "arguments"}, ...])``
(``messages`` may replace ``question``); ``data_preprocess/toolcall.py`` writes such rows.

A BFCL single-turn entry is a task too: ``test_id`` (to the constructor or to ``reset``, e.g.
``"simple_python_12"``) plays that entry's question with its functions as tools
(:mod:`agent_tune.envs.bfcl.single_turn_task`). The reward stays ToolRL's, against one concrete accepted
answer; ``info["accuracy"]`` is then BFCL's AST verdict (:mod:`agent_tune.envs.bfcl.ast_check`) on the
decoded calls, and ``info["ast_error_type"]`` names the failed check ("" when right).
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from agent_tune.envs.base import BaseToolEnv, EnvStateError, Observation, StepResult, ToolResult
from agent_tune.envs.bfcl.single_turn import SingleTurnEntry
from agent_tune.envs.bfcl.single_turn_task import score_response, task_for
from agent_tune.envs.registry import register_env
from agent_tune.parsing import ParsedResponse, ToolCall
from agent_tune.parsing.response import ResponseParser
from agent_tune.rewards.toolrl import toolrl_score

REWARD_SCALES = ("toolrl", "unit")


def _as_call(item: Mapping[str, Any] | ToolCall) -> ToolCall:
    if isinstance(item, ToolCall):
        return item
    args = item.get("arguments", item.get("parameters", {}))
    if isinstance(args, str):
        args = json.loads(args)
    return ToolCall(name=str(item["name"]), arguments=dict(args or {}))


def _as_tool(item: Mapping[str, Any]) -> dict[str, Any]:
    """Accept OpenAI-style tools or bare function schemas."""
    if item.get("type") == "function" and "function" in item:
        return dict(item)
    return {"type": "function", "function": dict(item)}


@register_env("toolcall")
class ToolCallToolEnv(BaseToolEnv):
    """Single-turn function calling, rewarded by ToolRL's format + correctness reward."""

    description = "single-turn function calling scored with ToolRL's reward (format + name/parameter matching)"

    def __init__(
        self,
        tool_parser: str = "hermes",
        reasoning_parser: str = "none",
        require_reasoning: bool = False,
        reward_scale: str = "toolrl",
        system_prompt: str | None = None,
        test_id: str | None = None,
    ) -> None:
        if reward_scale not in REWARD_SCALES:
            raise ValueError(f"toolcall env: reward_scale={reward_scale!r} is not one of {', '.join(REWARD_SCALES)}")
        self.parser = ResponseParser(tool_parser, reasoning_parser)
        self.require_reasoning = require_reasoning
        self.reward_scale = reward_scale
        self.system_prompt = system_prompt
        self.test_id = test_id
        self.entry: SingleTurnEntry | None = None
        self._done = True

    def reset(
        self,
        question: str | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
        ground_truth: Sequence[Mapping[str, Any]] | str = (),
        messages: Sequence[Mapping[str, Any]] | None = None,
        test_id: str | None = None,
        **_: Any,
    ) -> Observation:
        """Start a task: the given question/messages, tools and ground truth, or the BFCL entry ``test_id``
        (given here or to the constructor), whose data replaces them."""
        self.entry = None
        if test_id or self.test_id:
            self.entry, task = task_for(test_id or self.test_id)
            question, messages, tools, ground_truth = None, task["messages"], task["tools"], task["ground_truth"]
        if isinstance(ground_truth, str):  # a JSON string, as parquet rows may carry it
            ground_truth = json.loads(ground_truth)
        if isinstance(messages, str):  # a JSON string, as parquet rows may carry it
            messages = json.loads(messages)
        if messages is None:
            if not question:
                raise ValueError("toolcall env: reset() needs `question` or `messages`")
            messages = [{"role": "user", "content": question}]
        if isinstance(tools, str):
            tools = json.loads(tools)
        self.tools = [_as_tool(t) for t in tools]
        self.ground_truth = [_as_call(c) for c in ground_truth]
        self.expects_calls = self.entry.expects_calls if self.entry is not None else bool(self.ground_truth)
        self._done = False
        first = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return Observation(messages=first + [dict(m) for m in messages], tools=self.tools)

    def extract_tool_calls(self, raw_response: str) -> ParsedResponse:
        """Strip reasoning with the reasoning parser, then decode calls with the tool-call parser."""
        return self.parser.parse(raw_response)[1]

    def format_tool_response(self, results: Sequence[ToolResult]) -> Observation:
        """The verdict on each call block as ``tool`` messages (the final observation)."""
        messages = [{"role": "tool", "content": r.content, **({"name": r.name} if r.name else {})} for r in results]
        return Observation(messages=messages, tools=self.tools)

    def _judge_calls(self, parsed: ParsedResponse) -> list[ToolResult]:
        """Per block: accepted (an offered function), unknown function, or not decodable."""
        offered = [t["function"]["name"] for t in self.tools]
        results = []
        for call in parsed.calls:
            if call.name in offered:
                results.append(ToolResult("accepted", call.name))
            else:
                text = f"Error: unknown function '{call.name}'. Available functions: {', '.join(offered)}"
                results.append(ToolResult(text, call.name, error=True))
        for err in parsed.errors:
            results.append(
                ToolResult(f"Error: tool call #{err.index + 1} could not be parsed: {err.reason}", error=True)
            )
        return results

    def step(self, raw_response: str) -> StepResult:
        if self._done:
            raise EnvStateError("toolcall env: step() with no episode running; call reset() first")
        self._done = True
        reasoning, parsed = self.parser.parse(raw_response)
        results = self._judge_calls(parsed)
        unknown = sum(1 for r in results if r.error and r.name is not None)
        right_shape = (not self.stop(raw_response)) == self.expects_calls
        format_ok = (right_shape and not parsed.errors and not unknown
                     and (reasoning is not None or not self.require_reasoning))
        score = toolrl_score(parsed.calls, self.ground_truth, format_ok)
        reward = score.reward if self.reward_scale == "toolrl" else (score.reward + 3.0) / 7.0
        info = {
            "accuracy": float(score.exact),
            "progress": (score.correctness + 3.0) / 6.0,
            "format_ok": float(format_ok),
            "format_errors": len(parsed.errors) + unknown,
            "num_steps": 1,
            "num_calls": len(parsed.calls),
            "turns_completed": 1,
            "name_match": score.name_match,
            "param_name_match": score.param_name_match,
            "param_value_match": score.param_value_match,
            "toolrl_reward": score.reward,
        }
        if self.entry is not None:  # BFCL single-turn: accuracy is BFCL's own rule
            verdict = score_response(self.entry, parsed)
            info["accuracy"], info["ast_error_type"] = float(verdict.valid), verdict.error_type
        return StepResult(self.format_tool_response(results), reward, True, info)

    def finalize(self, reason: str = "truncated") -> StepResult:
        """A response that never finished (token budget) scores as the worst answer: no format, no
        correctness. (Any higher value would pay the policy for rambling past a wrong answer.)"""
        if self._done:
            raise EnvStateError("toolcall env: finalize() with no episode running")
        self._done = True
        worst = -3.0 if self.reward_scale == "toolrl" else 0.0
        info = {"accuracy": 0.0, "progress": 0.0, "format_ok": 0.0, "format_errors": 1, "num_steps": 1,
                "num_calls": 0, "turns_completed": 0, "truncated": True, "finalize_reason": reason}
        return StepResult(Observation(), worst, True, info)
