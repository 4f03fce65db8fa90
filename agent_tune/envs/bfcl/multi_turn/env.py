"""The BFCL multi-turn environment ("bfcl", :class:`BFCLToolEnv`).

One instance plays one entry of BFCL v4 multi-turn (base, miss_func, miss_param, long_context, and
the unscored composite) against the executable backends bfcl-eval ships, and scores it with
BFCL's own rule (``scoring.py``).

Protocol, per user turn: the policy answers; if the answer holds tool calls they run and their
results come back as ``tool`` messages, and the policy answers again; an answer with no tool call
(:meth:`BFCLToolEnv.is_answer`) ends the turn, which is then scored, and the next user question (or the
announcement of held-back functions, in miss_func) is shown. A step is the contract's template
(:class:`~agent_tune.envs.base.BaseToolEnv`): ``extract_tool_calls`` (reasoning stripped, then the tool-call
parser), this env's :meth:`BFCLToolEnv.act` (the calls run on the episode's backend, or are rejected in
training mode; an answer ends the turn), ``format_tool_response`` (one ``tool`` message per result), and on
the last step :meth:`BFCLToolEnv.outcome` (BFCL's verdict and the configured reward).

Two modes:

* ``eval_mode=True`` reproduces the leaderboard: a call is dispatched to any public method of the
  involved classes exactly as bfcl-eval's engine would (errors come back as its error text), an
  answer whose call blocks are all malformed ends the turn (BFCL drops them silently), turns with
  empty ground truth are not scored, and more than ``max_steps_per_turn`` tool steps in one turn
  fails the whole entry (force termination).
* training mode (default) is strict: a call must name a tool visible now and its arguments must
  satisfy the schema, otherwise nothing runs and the model is told why (a format error); a malformed
  block is reported back and the turn goes on; a turn that runs out of steps scores 0 and the
  episode moves on to the next question; turns with empty ground truth are scored too (they pass iff
  the model made no call: the right behaviour when the request cannot be served) unless
  ``score_empty_turns=False``. The reward is configurable (``progress`` by default; every formula lives
  in :mod:`agent_tune.rewards.bfcl`, ``syntax`` being stage 1's graded call format). With
  ``augment=True`` (Environment Tuning's actionable augmentation) a failed or rejected call's
  observation ends with a hint saying what would fix it (:mod:`agent_tune.envs.bfcl.multi_turn.hints`); scoring
  never sees hints.

``max_turns=N`` (training) plays the entry's first N user turns only: the episode ends (``done``, BFCL's
``completed``) after the N-th, and is scored as an entry of those turns (their ground truth, the same per-turn
rule; accuracy and progress over them). A shorter episode by construction: stage 1 on CPU, whose response
budget holds about two turns of a small model.

Precedence (one rule for every option): a row's own kwargs override the config's ``env_kwargs.bfcl``, which
override the defaults; and ``eval_mode=True`` fixes the leaderboard's rules, so the options that only shape
training (``augment``, ``score_empty_turns``, ``reward``, ``format_penalty``, ``max_penalized_format_errors``,
``max_turns``) have no effect in eval mode whatever their value (a config that augments its training rows keeps its
validation rows, ``eval_mode=True`` in their kwargs, scored as BFCL scores them).

``shots`` (test ids of other scenarios, chosen by ``data_preprocess/bfcl.py --shots K``) puts worked
examples of the call format before the first question (:mod:`agent_tune.envs.bfcl.multi_turn.shots`). Every step
records the generation's syntax grade (``syntax_grade``; None for the answer that closes a turn after its
calls ran); the final info lists the graded ones (``syntax_grades``).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Sequence

from agent_tune.envs.base import (
    BaseToolEnv,
    Observation,
    Outcome,
    Step,
    StopReason,
    ToolResult,
    undecodable_text,
)
from agent_tune.envs.bfcl.calls import to_call_string
from agent_tune.envs.bfcl.multi_turn.backend import BFCLBackend
from agent_tune.envs.bfcl.multi_turn.catalogue import ALL_SPLIT, CATALOGUE_SPLITS, multi_turn_tasks
from agent_tune.envs.bfcl.multi_turn.data import SCORED_CATEGORIES, BFCLEntry, ensure_bfcl_project_root, shared_entry
from agent_tune.envs.bfcl.multi_turn.ground_truth import ground_truth_trace, run_key
from agent_tune.envs.bfcl.multi_turn.hints import HintBuilder, with_hint
from agent_tune.envs.bfcl.multi_turn.scoring import turn_error
from agent_tune.envs.bfcl.multi_turn.shots import shot_messages
from agent_tune.envs.bfcl.reports import BFCL_REPORT
from agent_tune.envs.bfcl.schema import tool_name, validate_arguments
from agent_tune.envs.catalogue import TaskCatalogue
from agent_tune.envs.registry import register_env
from agent_tune.parsing import ToolCall
from agent_tune.parsing.response import ResponseParser
from agent_tune.rewards import bfcl as rewards

# bfcl-eval's user message when held-back functions become available (FC mode).
ADDITIONAL_FUNCTION_PROMPT = "I have updated some more functions you can choose from. What about now?"

REWARD_KINDS = rewards.REWARD_KINDS


@lru_cache(maxsize=256)
def _announcement(test_id: str, turn: int) -> str:
    """The user message announcing the functions held back until ``turn`` (miss_func), rendered once."""
    new_tools = shared_entry(test_id).missed_function[turn]
    listing = "\n".join(json.dumps(t, ensure_ascii=False) for t in new_tools)
    return f"{listing}\n{ADDITIONAL_FUNCTION_PROMPT}"


@lru_cache(maxsize=256)
def _initial_tools(test_id: str) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """Name -> tool visible when ``test_id`` starts, and the list of those tools (what observations show): shared
    read-only, an episode builds new ones when a turn adds tools."""
    tools = {tool_name(t): t for t in shared_entry(test_id).functions}
    return tools, list(tools.values())


@lru_cache(maxsize=256)
def _required_turns(test_id: str) -> tuple[bool, ...]:
    """Per turn, whether its ground truth has calls: BFCL's verdict looks only at those turns."""
    return tuple(bool(calls) for calls in shared_entry(test_id).ground_truth)


@register_env("bfcl")
class BFCLToolEnv(BaseToolEnv):
    """BFCL v4 multi-turn function calling, executed on bfcl-eval's backends and scored like the leaderboard."""

    description = "BFCL v4 multi-turn function calling on bfcl-eval's executable backends, scored as BFCL scores it"
    catalogue = TaskCatalogue(
        splits=CATALOGUE_SPLITS, tasks=multi_turn_tasks, eval_default=(ALL_SPLIT, SCORED_CATEGORIES),
        suites={"multi_turn": SCORED_CATEGORIES}, eval_kwargs={"eval_mode": True},  # the leaderboard's rules
    )
    report = BFCL_REPORT
    _check_builds = True  # check_kwargs constructs the env (cheap: nothing loads before reset)

    def __init__(
        self,
        test_id: str | None = None,
        eval_mode: bool = False,
        tool_parser: str = "hermes",
        reasoning_parser: str = "none",
        max_steps_per_turn: int = 20,
        max_steps_per_episode: int | None = None,
        reward: rewards.RewardKind = "progress",
        format_penalty: float = 0.1,
        max_penalized_format_errors: int = 5,
        score_empty_turns: bool | None = None,
        system_prompt: str | None = None,
        augment: bool = False,
        shots: Sequence[str] | None = None,
        max_turns: int | None = None,
    ) -> None:
        if reward not in REWARD_KINDS:
            raise ValueError(f"bfcl env: reward={reward!r} is not one of {', '.join(REWARD_KINDS)}")
        if max_steps_per_turn < 1:
            raise ValueError(f"bfcl env: max_steps_per_turn must be >= 1, got {max_steps_per_turn}")
        if max_steps_per_episode is not None and max_steps_per_episode < 1:
            raise ValueError(f"bfcl env: max_steps_per_episode must be >= 1 or None, got {max_steps_per_episode}")
        if max_turns is not None and max_turns < 1:
            raise ValueError(f"bfcl env: max_turns must be >= 1 or None, got {max_turns}")
        ensure_bfcl_project_root()
        self.test_id = test_id
        self.eval_mode = eval_mode
        self.parser = ResponseParser(tool_parser, reasoning_parser)
        self.shots = [str(s) for s in shots] if shots is not None else []
        self._shot_messages = shot_messages(self.shots, tool_parser) if self.shots else []  # built (and checked) once
        self.max_steps_per_turn = max_steps_per_turn
        self.max_steps_per_episode = max_steps_per_episode
        self.reward_kind = reward
        self.format_penalty = format_penalty
        self.max_penalized_format_errors = max_penalized_format_errors
        # eval mode: BFCL does not score empty turns (the precedence rule of the module docstring)
        self.score_empty_turns = False if eval_mode else score_empty_turns is not False
        self.system_prompt = system_prompt
        self.augment = augment and not eval_mode
        self.max_turns = None if eval_mode else max_turns  # eval mode plays the whole entry (the leaderboard's)
        self.entry: BFCLEntry | None = None

    # ------------------------------------------------------------------ episode start
    def reset(self, test_id: str | None = None) -> Observation:
        """Start the episode of ``test_id`` (given here or to the constructor)."""
        test_id = test_id or self.test_id
        if not test_id:
            raise ValueError("bfcl env: reset() needs a test_id (e.g. 'multi_turn_base_12')")
        self.test_id = test_id
        entry = shared_entry(test_id)  # read-only, shared with the entry's other episodes
        self.entry = entry
        # the turns this episode plays: the entry's, or their first max_turns
        self._num_turns = entry.num_turns if self.max_turns is None else min(self.max_turns, entry.num_turns)
        self._model = BFCLBackend.for_entry(test_id)
        self._gt = ground_truth_trace(test_id)
        # Shared read-only until a turn adds held-back tools (_turn_messages builds new ones then): the tools by name,
        # and what every observation shows (never changed in place: observations hold it, and the entry's other
        # episodes).
        self._tools: dict[str, dict[str, Any]]
        self.tools: list[dict[str, Any]]
        self._tools, self.tools = _initial_tools(test_id)
        self._hints = HintBuilder(self._model, self._tools) if self.augment else None
        self._turn = 0
        self._steps_in_turn = 0
        self._turn_acted = False
        self._syntax_grades: list[float] = []
        self._all_model_results: dict[str, int] = {}  # every result text of the model's calls, counted
        self._turn_scores: list[float | None] = []
        self._turn_errors: list[str | None] = []
        self._decoded: list[list[list[str]]] = [[]]
        # The calls run on the backend so far, and whether they are the ground truth's first ones, in order
        # (run_key): a turn ending with the ground truth's history has its state by construction (turn_error).
        self._num_run = 0
        self._on_gt_path = True
        self._force_terminated = False
        self._forced_turns = 0
        self._end_reason = "completed"
        super().reset()
        messages: list[dict[str, Any]] = []
        if self.system_prompt:
            messages.append({"role": "system", "content": self.system_prompt})
        if self._shot_messages:
            messages.extend(dict(m) for m in self._shot_messages)
        messages.extend(self._turn_messages(0))
        return Observation(messages, None, self.tools)

    def _turn_messages(self, turn: int) -> list[dict[str, Any]]:
        assert self.entry is not None
        new_tools = self.entry.missed_function.get(turn)
        if new_tools:
            self._tools = dict(self._tools)  # the shared initial map is never written to
            for tool in new_tools:
                self._tools[tool_name(tool)] = tool
            self.tools = list(self._tools.values())
            if self._hints is not None:
                self._hints.tools = self._tools
            return [{"role": "user", "content": _announcement(self.entry.id, turn)}]
        return list(map(dict, self.entry.question[turn]))  # fresh copies (= [dict(m) for m in ...], no frame)

    # ------------------------------------------------------------------ parsing
    def is_answer(self, raw_response: str) -> bool:
        """True if the answer ends the user turn: no decodable call in eval mode (BFCL drops malformed
        blocks silently), no call block at all in training mode (a malformed block is answered)."""
        parsed = self.parser.parse(raw_response)[1]  # = extract_tool_calls (the parser keeps it)
        return not parsed.calls if self.eval_mode else not (parsed.calls or parsed.errors)  # = has_tool_call_attempt

    def _check_call(self, call: ToolCall) -> list[str] | None:
        """The schema errors of a call's arguments against the tool visible now; None if no such tool."""
        tool = self._tools.get(call.name)
        return None if tool is None else validate_arguments(tool, call.arguments)

    def _reject_reason(self, call: ToolCall, errors: list[str] | None) -> str | None:
        """Why training mode refuses ``call`` (given its :meth:`_check_call`), or None if it may run."""
        if errors is None:
            return f"unknown function '{call.name}'. Available functions: {', '.join(self._tools)}"
        return "; ".join(errors) if errors else None

    # ------------------------------------------------------------------ stepping
    def act(self, step: Step) -> None:
        """One generation: grade its call format; an answer (:meth:`stop`) ends the user turn, otherwise its
        calls run (:meth:`_run_calls`) within the turn's and the episode's step limits."""
        undecodable = len(step.parsed.errors)
        step.format_errors = undecodable
        grade: float | None
        if step.answer:  # the policy has finished this user turn (no decoded call: stop)
            if undecodable:  # eval mode: broken blocks alone
                grade = rewards.syntax_grade_of(undecodable, [])
            else:  # no call block: rewards.syntax_grade_of(0, []), and rewards.closes_acted_turn is the turn's
                grade = None if self._turn_acted else rewards.GRADE_NO_CALL  # None: the text that answers the user
            if grade is not None:
                self._syntax_grades.append(grade)
            step.info = {"syntax_grade": grade}
            self._end_turn(step, False)
            return

        self._steps_in_turn += 1
        executed, rejected, checks = self._run_calls(step)
        grade = rewards.syntax_grade_of(undecodable, checks)  # = schema.syntax_grade (checked before each call ran)
        self._syntax_grades.append(grade)
        step.format_errors += rejected
        if executed:
            self._turn_acted = True
            self._decoded[self._turn].append(executed)
        step.info = info = {"calls": executed, "syntax_grade": grade}

        if self._steps_in_turn > self.max_steps_per_turn:
            if self.eval_mode:  # BFCL's force termination: the entry fails
                self._force_terminated = True
                self._finish(step, "force_terminated")
                return
            self._end_turn(step, True)
            return
        if self.max_steps_per_episode is not None and self.status.num_steps >= self.max_steps_per_episode:
            self._finish(step, "max_steps_per_episode")
            return
        info["turn"] = self._turn

    def _run_calls(self, step: Step) -> tuple[list[str], int, list[list[str] | None]]:
        """Check and run the decoded calls on the backend, their results into ``step.results`` in call order:
        (BFCL call strings run, calls rejected, each call's :meth:`_check_call`).

        Training mode is strict: a call to an invisible function or with schema-breaking arguments
        does not run, and the model is told why; an undecodable block is answered too. Eval mode runs
        every decoded call as bfcl-eval's engine does and drops undecodable blocks silently.
        """
        parsed, results = step.parsed, step.results
        executed: list[str] = []
        checks: list[list[str] | None] = []
        rejected = 0
        tools = self._tools
        execute = self._model.execute
        counts = self._all_model_results  # scoring sees the backend's own text, never a hint
        hints = self._hints
        path = self._gt[-1].history  # the last turn's history: every call the ground truth runs, in order
        for call in parsed.calls:
            tool = tools.get(call.name)  # = self._check_call(call), inlined: one per call of every step
            errors = None if tool is None else validate_arguments(tool, call.arguments)
            checks.append(errors)
            if errors is None or errors:  # = _reject_reason(call, errors) is not None
                rejected += 1
                if not self.eval_mode:
                    reason = self._reject_reason(call, errors)
                    text = f"Error: {reason}"
                    if hints is not None:
                        text = with_hint(text, hints.for_rejected_call(call.name, call.arguments, [reason]))
                    results.append(ToolResult(text, call.name, error=True))
                    continue
            result = execute(call.name, call.arguments)
            counts[result] = counts.get(result, 0) + 1
            call_string = to_call_string(call)
            executed.append(call_string)
            if self._on_gt_path:
                n = self._num_run
                self._on_gt_path = n < len(path) and path[n] == run_key(call, call_string)
            self._num_run += 1
            if hints is not None:
                result = with_hint(result, hints.for_result(call.name, call.arguments, result))
            results.append(ToolResult(result, call.name))
        if not self.eval_mode:
            for err in parsed.errors:
                results.append(ToolResult(undecodable_text(err.index, err.reason), error=True))
        return executed, rejected, checks

    def _end_turn(self, step: Step, forced: bool) -> None:
        """Score the current turn, then show the next question or finish the episode."""
        assert self.entry is not None
        turn = self._turn
        gt = self._gt[turn]
        score: float | None  # the turn's verdict (None: not scored) and its error type (scoring.turn_error)
        error: str | None
        self._forced_turns += forced
        if gt.calls:
            if forced:
                score, error = 0.0, "agent_tune:turn_step_limit"
            else:
                # In training mode only the results a schema-respecting policy can reproduce are
                # required (about 90 entries' ground truth breaks the documented schema).
                required = gt.required_counts(self.eval_mode)
                same_calls = self._on_gt_path and self._num_run == len(gt.history)
                error = turn_error(self._turn_acted, self._model, gt.state, self._all_model_results, required,
                                   same_calls)
                score = 1.0 if error is None else 0.0
        elif self.score_empty_turns:
            error = "agent_tune:acted_on_empty_turn" if self._turn_acted else None
            score = 1.0 if not self._turn_acted and not forced else 0.0
        else:
            score = error = None
        self._turn_scores.append(score)
        self._turn_errors.append(error)
        self.status.turns_completed = len(self._turn_scores)

        self._turn += 1
        self._steps_in_turn = 0
        self._turn_acted = False
        if self._turn >= self._num_turns:
            self._finish(step, "completed")
            return
        if self.max_steps_per_episode is not None and self.status.num_steps >= self.max_steps_per_episode:
            self._finish(step, "max_steps_per_episode")
            return
        self._decoded.append([])
        step.messages.extend(self._turn_messages(self._turn))  # after the tool messages, with the new tools
        info = step.info  # this step's own, a dict of its own: added to in place
        info["turn"] = self._turn
        info["turn_ended"] = turn

    # ------------------------------------------------------------------ results
    def _finish(self, step: Step, reason: str) -> None:
        """End the episode; ``reason`` is BFCL's own word (its result files read it), the step limits are the
        vocabulary's :attr:`StopReason.STEP_LIMIT`."""
        self._end_reason = reason
        if reason != "completed":
            self.status.stop_reason = StopReason.STEP_LIMIT
        step.done = True

    def outcome(self) -> Outcome:
        """BFCL's verdict (``accuracy``), ``progress``, and the reward: the accuracy in eval mode, the configured
        kind (:func:`agent_tune.rewards.bfcl.episode_reward`) in training. Ended from outside (the token budget),
        unfinished turns count as failed."""
        if self.status.stop_reason.by_runner:
            self._end_reason = self.status.stop_reason.value
        accuracy, progress = self._accuracy_progress()
        # the record's own keys (the template's record holds the core ones), without copies: the episode is over,
        # so its lists are handed to the record as they are (nothing appends to them again; reset starts new ones)
        extras = self._own_keys(copy=False)
        extras["end_reason"] = self._end_reason
        if self.eval_mode:
            reward = accuracy
        else:
            info = {**extras, "accuracy": accuracy, "progress": progress, "format_errors": self.status.format_errors}
            reward = rewards.episode_reward(self.reward_kind, info, self.format_penalty,
                                            self.max_penalized_format_errors)
        return Outcome(reward, accuracy, progress, extras)

    def metrics(self) -> dict[str, Any]:
        """Episode metrics so far: turn scores, accuracy, progress, format errors, steps.

        ``accuracy`` is 1.0 iff BFCL would count the entry correct: every turn played, every scored
        turn passed, no force termination. ``progress`` is passed / scoreable turns of the entry
        (turns never reached count as failed). With ``max_turns`` both are over the turns the episode plays
        (``num_turns``).
        """
        accuracy, progress = self._accuracy_progress()
        status = self.status
        return {**self._own_keys(copy=True), "accuracy": accuracy, "progress": progress,
                "format_errors": status.format_errors, "num_steps": status.num_steps, "num_calls": status.num_calls,
                "turns_completed": status.turns_completed}

    def _accuracy_progress(self) -> tuple[float, float]:
        """The episode's ``accuracy`` and ``progress`` so far (:meth:`metrics`)."""
        assert self.entry is not None
        required = _required_turns(self.entry.id)[: self._num_turns]
        scores = self._turn_scores
        # the scoreable turns, = [r or self.score_empty_turns for r in required] (score_empty_turns: a bool)
        scoreable = (True,) * len(required) if self.score_empty_turns else required
        return (rewards.accuracy(scores, required, self._force_terminated, self._forced_turns),
                rewards.progress(scores, scoreable))

    def _own_keys(self, copy: bool) -> dict[str, Any]:
        """The episode record's BFCL keys (:meth:`metrics` less the core ones); ``copy=False`` shares the episode's
        own lists instead of copying them."""
        assert self.entry is not None
        decoded = self._decoded
        return {
            "test_id": self.entry.id,
            "category": self.entry.category,
            "turn_scores": list(self._turn_scores) if copy else self._turn_scores,
            "turn_errors": list(self._turn_errors) if copy else self._turn_errors,
            "num_turns": self._num_turns,
            "force_terminated": self._force_terminated,
            "forced_turns": self._forced_turns,
            "decoded_calls": [list(map(list, turn)) for turn in decoded] if copy else decoded,
            "syntax_grades": list(self._syntax_grades) if copy else self._syntax_grades,
        }

