"""Single-turn function calling scored with ToolRL's reward ("toolcall", :class:`ToolCallToolEnv`).

One question, a set of tools, one response: the response's tool calls (decoded with the configured
parser, reasoning stripped first) are compared with the ground-truth calls by ToolRL's reward
(:mod:`agent_tune.rewards.toolrl`). Nothing is executed: the step's final observation
(``format_tool_response``) is the env's verdict on each call block (accepted, unknown function, not
decodable), which the transcript and rollout dumps show; the episode ends there. The format reward is
ToolRL's structural check: 1 when the response has the shape the task expects (at least one tool call
when the ground truth calls tools, no call when it does not), every call block decodes, and, if
``require_reasoning`` is set, the response carries a reasoning block. As in ToolRL's reward, the format
does not ask which function was called: a well-formed call of a function that was not offered keeps the
format reward, loses the correctness (no name matches), and counts as a format error in ``info``. (A plain-text
answer to a task that needs a call earns no format reward: otherwise "never try a call" would out-score
every imperfect attempt.) ``reward_scale="unit"`` maps the reward's range (ToolRL's [-3, 4] by default)
onto [0, 1].

``reward`` picks ToolRL's reward variant (:class:`~agent_tune.rewards.toolrl_config.ToolRLRewardConfig`:
length reward, scale schedule, granularity, matching as ToolRL's code or order-free), whose schedules read the
trainer step the runner hands over (``env.status.global_step``). ``answer_format="toolrl"`` asks for
ToolRL's own layout (:mod:`agent_tune.rewards.toolrl_format`: ``<think>``, then a ``<tool_call>`` block of
JSON lines and/or a ``<response>``; ``tool_parser`` must be ``toolrl``): the format reward is ToolRL's
structural rule for the parts the ground truth has (``expects_response`` in the task, default: a response iff
no call), the reasoning is ToolRL's ``<think>`` block, and a call line that does not decode makes the
correctness its minimum, as in ToolRL's reward. The tools are then listed in the system prompt (the task's
own, as ToolRL's rows carry it, else one written from ``tools``), not given to the chat template.

A task is ``reset(question=..., tools=[...], ground_truth=[{"name", "arguments"}, ...])``
(``messages`` may replace ``question``); the env's catalogue (:mod:`agent_tune.envs.toolcall.tasks`) lists such
tasks from ToolRL's rlla data, a jsonl file or synthetic arithmetic.

A BFCL single-turn entry is a task too: ``test_id`` (to the constructor or to ``reset``, e.g.
``"simple_python_12"``) plays that entry's question with its functions as tools
(:mod:`agent_tune.envs.bfcl.single_turn.task`). The reward stays ToolRL's, against one concrete accepted
answer; ``info["accuracy"]`` is then BFCL's AST verdict (:mod:`agent_tune.envs.bfcl.single_turn.ast_check`) on the
decoded calls, and ``info["ast_error_type"]`` names the failed check ("" when right). ``shots`` (test ids
of OTHER single-turn entries, chosen by the catalogue's ``shots`` option) puts worked
examples of the call format before the task's question: each entry's question and its reference calls,
written by ``tool_parser`` (:mod:`agent_tune.envs.bfcl.single_turn.shots`); the shots' functions are offered
beside the task's own, in an order seeded by the task.
"""

from __future__ import annotations

import json
import random
from typing import Any, Literal, Mapping, Sequence, get_args

from agent_tune.envs.base import BaseToolEnv, Observation, Outcome, Step, ToolResult, undecodable_text
from agent_tune.envs.bfcl.reports import BFCL_REPORT
from agent_tune.envs.bfcl.single_turn.entries import LIVE, NON_LIVE, SINGLE_TURN_CATEGORIES, SingleTurnEntry
from agent_tune.envs.bfcl.single_turn.shots import single_turn_shot_messages, single_turn_shot_tools
from agent_tune.envs.bfcl.single_turn.task import score_response, task_for
from agent_tune.envs.catalogue import TaskCatalogue
from agent_tune.envs.registry import register_env
from agent_tune.envs.toolcall import tasks as toolcall_tasks_module
from agent_tune.parsing import ParsedResponse, ToolCall
from agent_tune.parsing.response import ResponseParser
from agent_tune.rewards.toolrl import ToolRLScore, toolrl_score
from agent_tune.rewards.toolrl_config import ToolRLRewardConfig
from agent_tune.rewards.toolrl_format import toolrl_format_ok, toolrl_reasoning, toolrl_system_prompt
from agent_tune.utils.typed_config import OptionError

# the constructor's string choices (its annotations, checked at launch); the tuples follow them
RewardScale = Literal["toolrl", "unit"]
AnswerFormat = Literal["native", "toolrl"]
REWARD_SCALES: tuple[str, ...] = get_args(RewardScale)
ANSWER_FORMATS: tuple[str, ...] = get_args(AnswerFormat)


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
    catalogue = TaskCatalogue(
        splits=toolcall_tasks_module.SPLITS, tasks=toolcall_tasks_module.toolcall_tasks, eval_default=("all", ()),
        suites={"single_turn_python": SINGLE_TURN_CATEGORIES, "non_live": NON_LIVE, "live": LIVE},
    )
    report = BFCL_REPORT

    def __init__(
        self,
        tool_parser: str = "hermes",
        reasoning_parser: str = "none",
        require_reasoning: bool = False,
        reward_scale: RewardScale = "toolrl",
        system_prompt: str | None = None,
        test_id: str | None = None,
        answer_format: AnswerFormat = "native",
        reward: Mapping[str, Any] | ToolRLRewardConfig | None = None,
        shots: Sequence[str] | None = None,
    ) -> None:
        if reward_scale not in REWARD_SCALES:
            raise ValueError(f"toolcall env: reward_scale={reward_scale!r} is not one of {', '.join(REWARD_SCALES)}")
        if answer_format not in ANSWER_FORMATS:
            raise ValueError(f"toolcall env: answer_format={answer_format!r} is not one of {', '.join(ANSWER_FORMATS)}")
        if answer_format == "toolrl" and tool_parser != "toolrl":
            raise ValueError(f"toolcall env: answer_format=toolrl reads calls with tool_parser=toolrl, got "
                             f"{tool_parser!r} (set agent_tune.tool_parser=toolrl)")
        try:
            self.reward_config = ToolRLRewardConfig.parse(reward, "reward")
        except OptionError as exc:  # its problem names the key, in ToolRL's words (reward.<key>=...)
            raise ValueError(f"toolcall env: {exc.problem}") from None
        self.parser = ResponseParser(tool_parser, reasoning_parser)
        self.require_reasoning = require_reasoning
        self.reward_scale = reward_scale
        self.answer_format = answer_format
        self.system_prompt = system_prompt
        self.test_id = test_id
        self.shots = [str(s) for s in (shots if shots is not None else [])]
        try:
            self._shot_messages = single_turn_shot_messages(self.shots, tool_parser)  # built (and checked) once
        except (ValueError, KeyError) as exc:
            raise ValueError(f"toolcall env: shots: {exc}") from None
        self.entry: SingleTurnEntry | None = None
        self._response: Step | None = None  # the episode's one step, once acted on
        self._decoded: list[dict[str, Any]] = []  # its decoded calls as {name, arguments}

    @classmethod
    def check_kwargs(cls, kwargs: Mapping[str, Any]) -> None:
        """Construct the env from ``kwargs`` (cheap): every option is checked there."""
        try:
            cls(**kwargs)
        except TypeError as exc:
            raise ValueError(f"toolcall env: {exc}") from None

    def reset(
        self,
        question: str | None = None,
        tools: Sequence[Mapping[str, Any]] = (),
        ground_truth: Sequence[Mapping[str, Any]] | str = (),
        messages: Sequence[Mapping[str, Any]] | None = None,
        test_id: str | None = None,
        expects_response: bool | None = None,
    ) -> Observation:
        """Start a task: the given question/messages, tools and ground truth, or the BFCL entry ``test_id``
        (given here or to the constructor), whose data replaces them."""
        self.entry = None
        if test_id or self.test_id:
            if (test_id or self.test_id) in self.shots:
                raise ValueError(f"toolcall env: {test_id or self.test_id} is among its own shots")
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
        self.tools = self._with_shot_tools([_as_tool(t) for t in tools], test_id or self.test_id or str(messages))
        self.ground_truth = [_as_call(c) for c in ground_truth]
        self.expects_calls = self.entry.expects_calls if self.entry is not None else bool(self.ground_truth)
        self.expects_response = not self.expects_calls if expects_response is None else bool(expects_response)
        self._response, self._decoded = None, []
        super().reset()
        return self._first_observation(self._with_shots([dict(m) for m in messages]))

    def reference_replies(self) -> list[str] | None:
        """One generation writing the task's ground-truth calls with the configured parser (a BFCL entry: per
        parameter its first accepted value, :func:`~agent_tune.envs.bfcl.single_turn.task.reference_calls`);
        ``None`` for a task that expects no call (BFCL's irrelevance) or ToolRL's answer format (its reasoning
        block has no reference)."""
        if not self.ground_truth or not self.expects_calls or self.answer_format != "native":
            return None
        return [self.parser.tool_parser.format_calls(list(self.ground_truth))]

    def _with_shot_tools(self, tools: list[dict[str, Any]], seed: str) -> list[dict[str, Any]]:
        """The task's tools and the shots' functions (a name the task offers keeps the task's schema), in an
        order seeded by the task (``seed``), so where the task's own function sits carries no information."""
        if not self.shots:
            return tools
        names = {t["function"]["name"] for t in tools}
        extra = [t for t in single_turn_shot_tools(self.shots) if t["function"]["name"] not in names]
        merged = tools + list({t["function"]["name"]: t for t in extra}.values())
        random.Random(seed).shuffle(merged)
        return merged

    def _with_shots(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The task's messages with the shots' turns after its leading system messages (if any)."""
        lead = 0
        while lead < len(messages) and messages[lead].get("role") == "system":
            lead += 1
        return messages[:lead] + [dict(m) for m in self._shot_messages] + messages[lead:]

    def _first_observation(self, messages: list[dict[str, Any]]) -> Observation:
        """The task's messages after the configured system prompt, with the tool schemas for the chat
        template. ToolRL's answer format lists the tools in its system prompt instead, as ToolRL's data does:
        the task's own system message, else ``system_prompt``, else :func:`toolrl_system_prompt`."""
        if self.answer_format == "toolrl":
            if not any(m.get("role") == "system" for m in messages):
                messages = [{"role": "system", "content": self.system_prompt or toolrl_system_prompt(self.tools)},
                            *messages]
            return Observation(messages=messages, tools=None)
        first = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        return Observation(messages=first + messages, tools=self.tools)

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
                ToolResult(undecodable_text(err.index, err.reason), error=True)
            )
        return results

    def act(self, step: Step) -> None:
        """The one generation of the episode: each call block judged (:meth:`_judge_calls`), then the episode
        ends and :meth:`outcome` scores the response."""
        step.results.extend(self._judge_calls(step.parsed))
        unknown = sum(1 for r in step.results if r.error and r.name is not None)
        step.format_errors = len(step.parsed.errors) + unknown
        self._decoded = [{"name": c.name, "arguments": dict(c.arguments)} for c in step.parsed.calls]
        step.info["calls"] = [c for c, r in zip(self._decoded, step.results) if not r.error]  # the offered ones
        self._response = step
        self.status.turns_completed = 1
        step.done = True

    def outcome(self) -> Outcome:
        """ToolRL's reward of the response (BFCL's own rule decides the accuracy of a BFCL entry). A response
        that never finished (token budget) scores as the worst answer: no format, no correctness. (Any higher
        value would pay the policy for rambling past a wrong answer.)"""
        step = self._response
        cut = self.status.stop_reason.by_runner
        if cut:  # cut off by the token budget: its one step, a format error
            self.status.num_steps, self.status.format_errors = 1, 1
        if cut or step is None:
            toolrl = self.reward_scale == "toolrl"
            worst = self.reward_config.reward_range(self.status.global_step)[0] if toolrl else 0.0
            return Outcome(worst, 0.0, 0.0, {"format_ok": 0.0, "decoded_calls": [], "calls": []})
        reasoning, parsed = self.parser.parse(step.raw)
        score, format_ok = self._score(step.raw, reasoning, parsed)
        reward = score.reward if self.reward_scale == "toolrl" else score.unit_reward
        extras = {
            "decoded_calls": self._decoded,  # every decoded call; ``calls``: those naming an offered function
            "calls": step.info["calls"],
            "format_ok": float(format_ok),
            "name_match": score.name_match,
            "param_name_match": score.param_name_match,
            "param_value_match": score.param_value_match,
            "toolrl_reward": score.reward,
            "format_reward": score.format_reward,
            "correctness_reward": score.correctness,
            "length_reward": score.length_reward,
        }
        accuracy = float(score.exact)
        if self.entry is not None:  # BFCL single-turn: accuracy is BFCL's own rule
            verdict = score_response(self.entry, parsed)
            accuracy, extras["ast_error_type"] = float(verdict.valid), verdict.error_type
        return Outcome(reward, accuracy, score.fraction, extras)

    def _score(
        self, raw_response: str, reasoning: str | None, parsed: ParsedResponse
    ) -> tuple[ToolRLScore, bool]:
        """ToolRL's reward for the response in this env's answer format and reward variant, and whether
        the format reward was earned."""
        step, config = self.status.global_step, self.reward_config
        if self.answer_format == "toolrl":
            format_ok = toolrl_format_ok(raw_response, self.expects_calls, self.expects_response)
            score = toolrl_score(parsed.calls, self.ground_truth, format_ok, config, step,
                                 toolrl_reasoning(raw_response), undecodable_calls=bool(parsed.errors))
            return score, format_ok
        right_shape = (not self.is_answer(raw_response)) == self.expects_calls
        format_ok = right_shape and not parsed.errors and (reasoning is not None or not self.require_reasoning)
        return toolrl_score(parsed.calls, self.ground_truth, format_ok, config, step, reasoning), format_ok
