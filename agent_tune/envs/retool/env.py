"""ReTool: math reasoning with a Python interpreter, in raw text ("retool", :class:`ReToolToolEnv`).

Protocol (one episode): the policy writes reasoning and, when it wants to compute, a program between
``<code>`` and ``</code>`` (a ```` ```python ```` fenced block inside is accepted). Generation stops at
``</code>`` (the env's :attr:`sampler_hints`), so each ``step`` receives one segment ending in at most
one code block. The env runs the program in the code sandbox and answers with the raw text
``"\\n<interpreter>\\n{output}\\n</interpreter>\\n"``, appended after the policy's tokens; the policy then
continues. The episode ends when a segment has no code block (the policy has answered) or when the
policy asks for more than ``max_tool_calls`` executions (that call is not run). The reward compares the
last ``\\boxed{...}`` in the policy's text (outside code blocks) with the ground truth by mathematical
equivalence (Math-Verify).

Decisions:

* An unterminated ``<code>`` (no ``</code>``: the generation hit its length limit) is a format error
  and ends the episode; a cut-off program is not run.
* An empty ``<code></code>`` is a format error answered with an interpreter error; it counts as a
  tool call so that it cannot loop forever.
* If a segment holds several complete blocks (the stop string was not honoured), only the first runs
  and the extra blocks count as one format error.
* Programs are independent: each runs in a fresh sandbox; nothing persists between them.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Mapping, Sequence

from agent_tune.envs.base import BaseToolEnv, Observation, Outcome, SamplerHints, Step
from agent_tune.envs.catalogue import TaskCatalogue
from agent_tune.envs.registry import register_env
from agent_tune.envs.retool.tasks import retool_tasks
from agent_tune.parsing.types import ParsedResponse, ToolCall, ToolCallError
from agent_tune.rewards.math_answer import extract_boxed, math_equivalent
from agent_tune.tools.config import SandboxConfig, shared_sandbox
from agent_tune.tools.sandbox import CodeSandbox, ExecutionResult

DEFAULT_SYSTEM_PROMPT = (
    "Solve the math problem step by step. You may run Python code to help: write a program between "
    "<code> and </code> (a ```python fenced block inside is fine). Each program runs on its own in a "
    "fresh sandbox without internet and keeps no state from earlier programs, so print every value "
    "you need. Its output is shown to you between <interpreter> and </interpreter>; use it to "
    "continue reasoning. Put the final answer in \\boxed{}."
)

_OPEN, _CLOSE = "<code>", "</code>"
# What a text-observation SFT row (agent_tune/sft/rows.py, the ReTool SFT configs'
# `data.observation_pattern`) cuts out of an assistant message as env tokens: the env's own block
# (interpreter_block) exactly, and also blocks of other ReTool-style data with fewer newlines.
INTERPRETER_BLOCK_PATTERN = r"\n?<interpreter>[\s\S]*?</interpreter>\n?"
_FENCE_RE = re.compile(r"^\s*```[A-Za-z0-9_+-]*[ \t]*\n(.*?)\n?[ \t]*```\s*$", re.S)


def _strip_fence(code: str) -> str:
    """Remove a ```python ... ``` fence wrapping the whole block, if there is one."""
    m = _FENCE_RE.match(code)
    return m.group(1) if m else code


def interpreter_block(output: str) -> str:
    """The observation text the env appends after a program ran: ``output`` in an ``<interpreter>`` block."""
    return f"\n<interpreter>\n{output}\n</interpreter>\n"


def retool_prompt(
    question: str, system_prompt: str | None = DEFAULT_SYSTEM_PROMPT, user_template: str = "{question}"
) -> list[dict[str, str]]:
    """The first messages of an episode: an optional system message and the user's question."""
    messages = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    messages.append({"role": "user", "content": user_template.replace("{question}", question)})
    return messages


@register_env("retool")
class ReToolToolEnv(BaseToolEnv):
    """Math with a sandboxed Python interpreter, ``<code>``/``<interpreter>`` raw-text protocol.

    Keyword arguments (all from the dataset row's ``env.kwargs`` or the trainer config):
    ``sandbox`` (a :class:`CodeSandbox`, a :class:`SandboxConfig` or its dict; default: the process's
    shared ``local`` sandbox), ``max_tool_calls``, ``max_tool_response_chars`` (longer interpreter
    output is cut and marked), ``correct_reward``, ``incorrect_reward``, ``no_answer_penalty``
    (subtracted from ``incorrect_reward`` when there is no ``\\boxed`` answer), ``system_prompt``
    (``None``: no system message) and ``user_template`` (``{question}`` is replaced).
    """

    description: ClassVar[str] = (
        "ReTool: math with a sandboxed Python interpreter (<code>/<interpreter>, \\boxed answer)"
    )
    sampler_hints: ClassVar[SamplerHints] = SamplerHints(
        stop=(_CLOSE,), include_stop_str_in_output=True, observation_kind="text"
    )
    truncation_marker: ClassVar[str] = "\n... [output truncated: {n} more characters]"
    # math problems of a local file or a Hub dataset (input=..., question_field, answer_field, val_size, seed, ...)
    catalogue = TaskCatalogue(splits=("train", "val"), tasks=retool_tasks)

    def __init__(
        self,
        sandbox: CodeSandbox | SandboxConfig | Mapping[str, Any] | None = None,
        max_tool_calls: int = 8,
        max_tool_response_chars: int = 2048,
        correct_reward: float = 1.0,
        incorrect_reward: float = 0.0,
        no_answer_penalty: float = 0.0,
        system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
        user_template: str = "{question}",
    ) -> None:
        if max_tool_calls < 0:
            raise ValueError(f"max_tool_calls must be >= 0, got {max_tool_calls}")
        if max_tool_response_chars < 1:
            raise ValueError(f"max_tool_response_chars must be >= 1, got {max_tool_response_chars}")
        if "{question}" not in user_template:
            raise ValueError("user_template must contain '{question}'")
        self.sandbox = sandbox if isinstance(sandbox, CodeSandbox) else shared_sandbox(sandbox)
        self.max_tool_calls = int(max_tool_calls)
        self.max_tool_response_chars = int(max_tool_response_chars)
        self.correct_reward = float(correct_reward)
        self.incorrect_reward = float(incorrect_reward)
        self.no_answer_penalty = float(no_answer_penalty)
        self.system_prompt = system_prompt
        self.user_template = user_template
        self._last_parse: tuple[str, ParsedResponse] | None = None
        self.question = ""
        self.ground_truth = ""
        self.segments: list[str] = []
        self.num_tool_calls = 0
        self._ending: dict[str, Any] = {}

    # -- episode ---------------------------------------------------------------------------------
    def reset(self, question: str, ground_truth: Any) -> Observation:
        """Start an episode on ``question``; ``ground_truth`` is the reference answer (a catalogue task's kwargs,
        :mod:`agent_tune.envs.retool.tasks`; any other key is a ``TypeError`` naming it)."""
        if not isinstance(question, str) or not question.strip():
            raise ValueError("retool env: reset() needs a non-empty `question`")
        if ground_truth is None or str(ground_truth).strip() == "":
            raise ValueError("retool env: reset() needs a non-empty `ground_truth`")
        self.question, self.ground_truth = question, str(ground_truth)
        self.segments, self.num_tool_calls, self._ending = [], 0, {}
        super().reset()
        return Observation(messages=retool_prompt(question, self.system_prompt, self.user_template))

    async def act(self, step: Step) -> None:
        """Run the segment's code block (if any) in the sandbox's pool, or end the episode: concurrent episodes'
        programs run in parallel, up to the sandbox's ``max_concurrency``."""
        code = self._begin(step)
        if code is not None:
            self._ran(step, await self.sandbox.arun(code))

    # -- parsing and formatting ------------------------------------------------------------------
    def extract_tool_calls(self, raw_response: str) -> ParsedResponse:
        """Decode ``<code>...</code>`` blocks into ``python`` calls; unterminated/empty ones are errors.

        The last response's result is kept (``step`` asks ``is_answer``, then for the calls)."""
        if self._last_parse is None or self._last_parse[0] != raw_response:
            self._last_parse = (raw_response, self._parse_code_blocks(raw_response))
        return self._last_parse[1]

    @staticmethod
    def _parse_code_blocks(raw_response: str) -> ParsedResponse:
        calls: list[ToolCall] = []
        errors: list[ToolCallError] = []
        content_parts: list[str] = []
        pos, index = 0, 0
        while True:
            start = raw_response.find(_OPEN, pos)
            if start == -1:
                content_parts.append(raw_response[pos:])
                break
            content_parts.append(raw_response[pos:start])
            end = raw_response.find(_CLOSE, start + len(_OPEN))
            if end == -1:
                errors.append(ToolCallError(index, raw_response[start:], "unterminated <code> block (no </code>)"))
                break
            raw = raw_response[start : end + len(_CLOSE)]
            code = _strip_fence(raw_response[start + len(_OPEN) : end]).strip("\n")
            if code.strip():
                calls.append(ToolCall(name="python", arguments={"code": code}, raw=raw))
            else:
                errors.append(ToolCallError(index, raw, "empty <code> block"))
            index += 1
            pos = end + len(_CLOSE)
        return ParsedResponse(content="".join(content_parts).strip(), calls=calls, errors=errors)

    def format_tool_response(self, results: Sequence[ExecutionResult | str]) -> Observation:
        """Wrap the first result's output in an ``<interpreter>`` block, cut to the configured length."""
        if not results:
            return Observation()
        first = results[0]
        text = first if isinstance(first, str) else self.render_result(first)
        if len(text) > self.max_tool_response_chars:
            extra = len(text) - self.max_tool_response_chars
            text = text[: self.max_tool_response_chars] + self.truncation_marker.format(n=extra)
        return Observation(text=interpreter_block(text))

    @staticmethod
    def render_result(result: ExecutionResult) -> str:
        """What the model reads for one run: stdout, then stderr, then the sandbox's account of any limit hit."""
        parts = [p.rstrip("\n") for p in (result.stdout, result.stderr) if p.strip()]
        if result.error:
            parts.append(f"Error: {result.error}")
        elif result.exit_code not in (0, None) and not result.stderr.strip():
            parts.append(f"Error: the program exited with status {result.exit_code}")
        return "\n".join(parts) if parts else "(no output)"

    # -- internals -------------------------------------------------------------------------------
    def _begin(self, step: Step) -> str | None:
        """The program to run for this segment, or None when the step is decided without one (the episode
        ends, or an empty block is answered)."""
        self.segments.append(step.raw)
        if step.answer:  # no code block: the policy has answered
            return self._end_here(step)
        parsed = step.parsed
        unterminated = [e for e in parsed.errors if e.reason.startswith("unterminated")]
        empty = [e for e in parsed.errors if e.reason.startswith("empty")]
        if unterminated and not parsed.calls:
            step.format_errors += 1
            return self._end_here(step, unterminated_code=True)
        if self.num_tool_calls >= self.max_tool_calls:
            return self._end_here(step, tool_call_limit_reached=True)
        self.num_tool_calls += 1
        if len(parsed.calls) + len(empty) > 1 or unterminated:
            step.format_errors += 1
        if not parsed.calls:  # only an empty block
            step.format_errors += 1
            step.results.append("Error: the <code> block is empty; put a Python program inside it.")
            step.info = {"num_tool_calls": self.num_tool_calls, "executed": False}
            return None
        return parsed.calls[0].arguments["code"]

    def _end_here(self, step: Step, **ending: Any) -> None:
        self._ending = ending
        self.status.turns_completed = 1
        step.done = True
        return None

    def _ran(self, step: Step, result: ExecutionResult) -> None:
        step.results.append(result)
        step.info = {"num_tool_calls": self.num_tool_calls, "executed": True, "calls": ["python"],
                     "exit_code": result.exit_code,
                     "timed_out": result.timed_out, "sandbox_error": result.error}

    def final_answer(self) -> str | None:
        """The last ``\\boxed{}`` answer in the policy's text so far, outside code blocks."""
        prose = "\n".join(self.extract_tool_calls(s).content for s in self.segments)
        return extract_boxed(prose)

    def outcome(self) -> Outcome:
        """The last ``\\boxed{}`` answer against the ground truth: ``correct_reward``, ``incorrect_reward``, or
        ``incorrect_reward - no_answer_penalty`` without an answer (also for an episode cut short)."""
        answer = self.final_answer()
        correct = answer is not None and math_equivalent(answer, self.ground_truth)
        if answer is None:
            reward = self.incorrect_reward - self.no_answer_penalty
        else:
            reward = self.correct_reward if correct else self.incorrect_reward
        extras = {"num_tool_calls": self.num_tool_calls, "executed": False, "answer": answer,
                  "has_answer": answer is not None, "tool_call_limit_reached": False, **self._ending}
        return Outcome(reward, 1.0 if correct else 0.0, extras=extras)
