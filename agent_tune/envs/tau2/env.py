"""The tau2-bench environment ("tau2", :class:`Tau2ToolEnv`): a customer-service agent, a simulated user.

One instance plays one task of a tau2 domain (``mock``, ``airline``, ``retail``, ``telecom``) on its own
tau2 ``Environment`` (its own database: concurrent episodes share nothing). The policy is tau2's agent: its
system prompt is tau2's agent prompt with the domain policy (``LLMAgent.system_prompt``), its tools the
domain's tools (JSON schema, tau2's ``openai_schema``). The conversation starts as tau2's does: the agent's
greeting, then the user's first message (the user speaks from tau2's user-simulator prompt built from the
task's user scenario, :mod:`agent_tune.users`).

Each step: the policy's text -> ``extract_tool_calls`` (reasoning stripped, the configured parser) -> tau2's
``AssistantMessage``. With tool calls, they run on the environment and the results come back as ``tool``
messages; without, the text goes to the user and the user's answer comes back as a ``user`` message (in
telecom the user may first run its own phone tools, as tau2's dual control has it). The turn logic, the
endings and the limits (``max_steps``, ``max_errors``) are tau2's orchestrator's
(:mod:`agent_tune.envs.tau2.episode`). At the end the episode is tau2's ``SimulationRun`` (kept as
``env.simulation``), scored by tau2's ``evaluate_simulation``: ``info["accuracy"]`` is tau2's reward
(:mod:`agent_tune.envs.tau2.scoring`), and so is the env's reward unless ``reward_shaping`` sets an alpha
> 0: then the reward is tau2's plus alpha x the partial score of tau2's checks
(:mod:`agent_tune.rewards.tau2_shaping`, Tau2-RL-Pipeline's scheme; ``info["tau2_partial_score"]``).
A task whose reward basis counts NL assertions is judged by tau2's NL-assertion evaluator through the
``judge`` endpoint when one is configured (:mod:`agent_tune.envs.tau2.judge`), else scores 0 with the reason.

Never raises on model output: a call block that cannot be decoded is answered with an error message
(counted as a format error and a tau2 error; nothing runs, nothing is recorded); a call to an unknown tool
or with missing/unexpected parameters runs on tau2 (which answers with its error text) and counts a format
error. A user that cannot answer after its retries ends the episode (tau2's ``user_error``, stop reason
``server_error``, the reason in ``info["error"]``, reward 0). The time-limit rule
(:mod:`agent_tune.envs.time_limits`): a user reply with no answer within ``call_timeout`` (default: every try the
user's endpoint options allow, :func:`user_reply_bound`; a user class by path: 60 s) ends the episode the same way
with stop reason ``timeout``; the user's first message (at ``reset``) with none within ``start_timeout`` (the same
default): ``reset``
raises ``StartTimeoutError``, counted by the runner. The NL-assertion judge's requests are bounded by its own
``judge.timeout_s`` per try. The acting hook awaits the user, so the runner's
concurrent episodes ask their users at once.

A task is ``reset(domain=..., task_id=...)`` (or both given to the constructor); ``task_set`` picks another
tau2 task set of the domain (``telecom_full``).

``protocol`` picks how the policy talks: ``native`` (the default, above: tau2's own agent prompt, the tools
through the chat template, the configured tool-call parser) or ``pipeline``, Tau2-RL-Pipeline's protocol, which
its published checkpoints speak (:mod:`agent_tune.envs.tau2.pipeline`): a system prompt of its shape (in
agent-tune's words; ``prompt_template`` takes a file with other words), exactly one
``<tool_call>`` per generation (stopping at ``</tool_call>``), ``respond`` / ``done`` pseudo-tools, tool results
and the user's replies as user messages; a malformed action is answered with its FORMAT ERROR message and
retried once at temperature 0 (``StepResult.sampling``), a second one ends the episode as a parse error (tau2's
``agent_error``, stop reason ``env_error``, ``info["error"]`` says why). The conversation on tau2's side, its
limits and its scoring are the same for both.
"""

from __future__ import annotations

from typing import Any, Literal, Mapping, get_args

from agent_tune.envs.base import (
    BaseToolEnv,
    Observation,
    Outcome,
    SamplerHints,
    Step,
    StopReason,
    ToolResult,
    undecodable_text,
)
from agent_tune.envs.catalogue import TaskCatalogue
from agent_tune.envs.registry import register_env
from agent_tune.envs.tau2 import catalogue as tau2_catalogue
from agent_tune.envs.tau2 import loader, pipeline
from agent_tune.envs.tau2.episode import DEFAULT_MAX_ERRORS, USER, Tau2Episode, default_max_steps
from agent_tune.envs.tau2.judge import JudgeConfig, configured_judge
from agent_tune.envs.tau2.messages import (
    assistant_message,
    call_problem,
    history_messages,
    tool_schemas,
    user_message,
)
from agent_tune.envs.tau2.results import TAU2_REPORT
from agent_tune.envs.tau2.scoring import progress, reward_summary, score_simulation
from agent_tune.envs.time_limits import DEFAULT_CALL_TIMEOUT, StartTimeoutError, check_timeout
from agent_tune.parsing.response import ResponseParser
from agent_tune.parsing.types import ParsedResponse, ToolCall, ToolCallError
from agent_tune.rewards.tau2_shaping import Tau2ShapingConfig, shape_reward
from agent_tune.users import LLMUser, User, UserConfig, make_user, run_sync
from agent_tune.utils.typed_config import OptionError

# tau2's termination reasons in the vocabulary (a failed simulated user is a failed backend; an agent message tau2
# cannot process, an env that cannot go on)
TAU2_STOP = {"agent_stop": StopReason.DONE, "user_stop": StopReason.DONE, "max_steps": StopReason.STEP_LIMIT,
             "too_many_errors": StopReason.STEP_LIMIT, "user_error": StopReason.SERVER_ERROR,
             "agent_error": StopReason.ENV_ERROR}

Protocol = Literal["native", "pipeline"]
PROTOCOLS: tuple[str, ...] = get_args(Protocol)


def user_reply_bound(config: UserConfig) -> float:
    """The default ``call_timeout`` of a user reply: for an LLM user, every try its endpoint options allow
    (``timeout_s`` each, ``max_retries`` retries, the backoff between them) and 5 s; else the rule's default."""
    if config.kind != "llm":
        return DEFAULT_CALL_TIMEOUT
    tries = config.max_retries + 1
    return config.timeout_s * tries + config.backoff_s * (2 ** config.max_retries - 1) + 5.0


@register_env("tau2")
class Tau2ToolEnv(BaseToolEnv):
    """tau2-bench: tools on tau2's environment, a simulated user, tau2's evaluator as the reward."""

    description = ("tau2-bench customer service (airline, retail, telecom, mock) with a simulated user, tau2's reward; "
                   "protocol native (tau2's) or pipeline (Tau2-RL-Pipeline's)")
    sampler_hints = SamplerHints(blocking_reset=True)  # reset waits for the user's first message
    catalogue = TaskCatalogue(splits=tau2_catalogue.SPLITS, tasks=tau2_catalogue.tau2_tasks,
                              eval_default=("test", tau2_catalogue.DEFAULT_DOMAINS),
                              row_prompt=tau2_catalogue.row_prompt)
    report = TAU2_REPORT

    def __init__(
        self,
        domain: str | None = None,
        task_id: str | int | None = None,
        user: Mapping[str, Any] | UserConfig | None = None,
        task_set: str | None = None,
        max_steps: int | None = None,
        max_errors: int = DEFAULT_MAX_ERRORS,
        tool_parser: str = "hermes",
        reasoning_parser: str = "none",
        reward_shaping: Mapping[str, Any] | Tau2ShapingConfig | None = None,
        judge: Mapping[str, Any] | JudgeConfig | None = None,
        call_timeout: float | None = None,
        start_timeout: float | None = None,
        protocol: Protocol = "native",
        prompt_template: str | None = None,
    ) -> None:
        if protocol not in PROTOCOLS:
            raise ValueError(f"tau2 env: protocol must be one of {', '.join(PROTOCOLS)}, got {protocol!r}")
        if prompt_template is not None and protocol != "pipeline":
            raise ValueError("tau2 env: prompt_template is the pipeline protocol's (protocol='pipeline')")
        try:
            self.prompt_template = pipeline.load_template(prompt_template)
        except ValueError as exc:
            raise ValueError(f"tau2 env: {exc}") from None
        if max_steps is None:  # the protocol's own: tau2's CLI (200), the pipeline's (100)
            max_steps = default_max_steps(protocol)
        if domain is not None:
            try:
                loader.check_domain(domain)
            except ValueError as exc:
                raise ValueError(f"tau2 env: {exc}") from None
        if int(max_steps) < 1:
            raise ValueError(f"tau2 env: max_steps must be >= 1, got {max_steps}")
        if int(max_errors) < 1:
            raise ValueError(f"tau2 env: max_errors must be >= 1, got {max_errors}")
        if user is None:
            raise ValueError("tau2 env: `user` is required (user.kind=llm with base_url and model, kind=scripted, or "
                             "a user class by path)")
        try:
            self.user_config = UserConfig.parse(user, "user")
            self.shaping = Tau2ShapingConfig.parse(reward_shaping, "reward_shaping")
            self.judge = configured_judge(judge, "judge")
        except OptionError as exc:
            raise ValueError(f"tau2 env: {exc.key}: {exc.problem}") from None
        self.call_timeout = user_reply_bound(self.user_config) if call_timeout is None else \
            check_timeout("call_timeout", call_timeout)
        self.start_timeout = user_reply_bound(self.user_config) if start_timeout is None else \
            check_timeout("start_timeout", start_timeout)
        self.domain = domain
        self.task_id = None if task_id is None else str(task_id)
        self.task_set = task_set
        self.protocol = protocol
        # tau2's step limit (the orchestrator's count); the pipeline keeps no generation limit of its own beyond
        # it (its loop of max_steps actions never outlasts tau2's max_steps steps), so the template's is off
        self.tau2_max_steps = int(max_steps)
        self.max_steps = None if protocol == "pipeline" else int(max_steps)
        self.max_errors = int(max_errors)
        self.parser = ResponseParser(tool_parser, reasoning_parser)
        if protocol == "pipeline":  # an instance's hints: the runner reads env.sampler_hints
            self.sampler_hints = SamplerHints(stop=(pipeline.STOP_STRING,), include_stop_str_in_output=True,
                                              blocking_reset=True)
        self._action: pipeline.Action | None = None  # the pipeline's parsed action of the current step
        self._action_error: str | None = None
        self._retrying = False  # the pipeline's retry after a malformed action is under way
        self.format_retries = 0
        self.episode: Tau2Episode | None = None
        self.simulation = None  # tau2's SimulationRun of the last finished episode

    @classmethod
    def check_kwargs(cls, kwargs: Mapping[str, Any]) -> None:
        """Construct the env from ``kwargs`` (every option checked) and, for an LLM user, check that its
        endpoint answers and serves the model (:meth:`LLMUser.health_check`; the message names the URL); so
        must the NL-assertion judge's when one is configured (:meth:`JudgeConfig.health_check`)."""
        try:
            env = cls(**kwargs)
        except TypeError as exc:
            raise ValueError(f"tau2 env: {exc}") from None
        if env.user_config.kind == "llm":
            LLMUser(env.user_config).health_check()
        if env.judge is not None:
            try:
                env.judge.health_check()
            except ValueError as exc:
                raise ValueError(f"tau2 env: {exc}") from None

    # ------------------------------------------------------------------ episode start
    def reset(self, domain: str | None = None, task_id: str | int | None = None,
              task_set: str | None = None) -> Observation:
        """Start task ``task_id`` of ``domain`` (here or from the constructor): the agent's greeting and the
        user's first message."""
        domain = domain or self.domain
        task_id = task_id if task_id is not None else self.task_id
        if not domain or task_id is None:
            raise ValueError("tau2 env: reset() needs a domain and a task_id (e.g. domain='airline', task_id='0')")
        task = loader.load_task(task_set or self.task_set or domain, task_id)
        self.episode = episode = Tau2Episode(domain, task, loader.new_environment(domain), self.tau2_max_steps,
                                             self.max_errors)
        self.user: User = make_user(self.user_config)
        self.tools = tool_schemas(episode.environment.get_tools())
        self._tool_index = {t["function"]["name"]: t for t in self.tools}
        self.simulation = None
        self._retrying, self.format_retries = False, 0
        super().reset()
        if self.protocol == "pipeline":
            return self._pipeline_reset(episode)
        messages = [{"role": "system", "content": episode.agent_system_prompt},
                    *history_messages(episode.trajectory)]
        if episode.to_role == USER and not episode.done:
            messages.extend(user_message(m) for m in run_sync(episode.user_acts(self.user, self.start_timeout)))
            if episode.timed_out:  # the time-limit rule: the runner counts the episode as not played
                raise StartTimeoutError(self.start_timeout, "tau2 user's first message")
        return Observation(messages=messages, tools=self.tools)

    def _pipeline_reset(self, episode: Tau2Episode) -> Observation:
        """The pipeline's start: its system prompt (tau2's policy, the domain's tools and the gym's ``done``),
        then what the agent received before its first turn, as the gym shows it (the user's first message).
        The tools are in the prompt's text: none go to the chat template."""
        from tau2.agent.base import is_valid_agent_history_message

        prompt = pipeline.system_prompt(episode.domain, episode.environment.get_policy(),
                                        [*self.tools, pipeline.done_tool_schema()], self.prompt_template)
        if episode.to_role == USER and not episode.done:
            run_sync(episode.user_acts(self.user))
        # an episode already over shows nothing (the gym's reset returns an empty observation then)
        seen = "" if episode.done else pipeline.observation_text(
            [m for m in episode.trajectory if is_valid_agent_history_message(m)])
        self.tools = None
        return Observation(messages=[{"role": "system", "content": prompt},
                                     *pipeline.followup_messages(seen, pipeline.RESET_CALL, after_tool=False)])

    # ------------------------------------------------------------------ stepping
    def extract_tool_calls(self, raw_response: str) -> ParsedResponse:
        """Native: the configured parser. Pipeline: the generation's one action (reasoning stripped first when a
        reasoning parser is configured), a tool call as the response's call, a malformed action as its error."""
        if self.protocol != "pipeline":
            return super().extract_tool_calls(raw_response)
        text = self.parser.reasoning_parser.parse(raw_response)[1]
        try:
            self._action, self._action_error = pipeline.parse_action(text), None
        except pipeline.ActionError as exc:
            self._action, self._action_error = None, str(exc)
            return ParsedResponse(content=text, errors=[ToolCallError(0, text, str(exc))])
        action = self._action
        if action.name in (pipeline.RESPOND, pipeline.DONE):
            return ParsedResponse(content=text)
        return ParsedResponse(content="", calls=[ToolCall(action.name, dict(action.arguments), text)])

    def is_answer(self, raw_response: str) -> bool:
        """Native: no call block. Pipeline: never (every generation is an action, ``respond`` included)."""
        return False if self.protocol == "pipeline" else super().is_answer(raw_response)

    async def act(self, step: Step) -> None:
        """The policy's message on the episode: its calls run on tau2's environment (a call to an unknown tool
        or with wrong parameters runs too, answered with tau2's error text, and is a format error); an
        undecodable block is answered and recorded as a tau2 error; a text message goes to the user, whose
        reply is awaited (concurrent episodes' users answer concurrently); a step whose episode tau2 ended
        ends the env's episode."""
        episode = self.episode
        assert episode is not None
        if self.protocol == "pipeline":
            await self._pipeline_acts(step, episode)
            return
        if not episode.done:  # else the user ended the conversation before the policy spoke (its first message)
            self._agent_acts(step, episode)
        if self._user_turn():
            step.messages.extend(await self._user_step())
        if episode.done:
            step.done = True
        else:
            step.info["tau2_steps"] = episode.step_count

    def _agent_acts(self, step: Step, episode: Tau2Episode) -> None:
        parsed = step.parsed
        message = assistant_message(parsed, episode.new_call_id)
        problems = [call_problem(c.name, c.arguments, self._tool_index) for c in parsed.calls]
        step.format_errors = len(parsed.errors) + sum(p is not None for p in problems)
        results = episode.agent_acts(message, undecodable=len(parsed.errors))
        step.results.extend(ToolResult(r.content if r.content is not None else "", c.name, error=p is not None)
                            for r, c, p in zip(results, parsed.calls, problems))
        step.results.extend(ToolResult(undecodable_text(e.index, e.reason), error=True) for e in parsed.errors)
        if not message.is_tool_call() and not parsed.errors and message.has_text_content():
            self.status.turns_completed += 1
        step.info["call_problems"] = [p for p in problems if p]

    async def _pipeline_acts(self, step: Step, episode: Tau2Episode) -> None:
        """One pipeline action: a malformed one is answered with FORMAT ERROR and retried once at temperature 0
        (then the episode ends as a parse error); a well-formed one goes to tau2 as the gym sends it, and what
        tau2 answers comes back as the pipeline's user messages."""
        if episode.done:  # the user ended the conversation before the policy spoke
            step.done = True
            return
        action = self._action
        if action is None:
            step.format_errors = 1
            step.info["action_error"] = self._action_error
            if self._retrying:
                episode.fail(f"parse error: {self._action_error}")
                step.done = True
            else:
                self._retrying = True
                self.format_retries += 1
                step.messages.append({"role": "user", "content": pipeline.FORMAT_ERROR})
                step.sampling = dict(pipeline.RETRY_SAMPLING)
            return
        self._retrying = False
        message = pipeline.tau2_message(action)
        problems = [call_problem(c.name, c.arguments, self._tool_index) for c in message.tool_calls or ()]
        step.format_errors = sum(p is not None for p in problems)
        step.info["call_problems"] = [p for p in problems if p]
        step.info["calls"] = [c.name for c, p in zip(message.tool_calls or (), problems) if p is None]
        received: list[Any] = episode.agent_acts(message)
        if not message.is_tool_call() and not episode.done:
            self.status.turns_completed += 1
            received = await episode.user_acts(self.user)
        if episode.done:
            step.done = True
            return
        step.info["tau2_steps"] = episode.step_count
        step.messages.extend(pipeline.followup_messages(pipeline.observation_text(received), action.call,
                                                        after_tool=action.name != pipeline.RESPOND))

    def _user_turn(self) -> bool:
        return self.episode is not None and not self.episode.done and self.episode.to_role == USER

    async def _user_step(self) -> list[dict[str, Any]]:
        assert self.episode is not None
        return [user_message(m) for m in await self.episode.user_acts(self.user, self.call_timeout)]

    # ------------------------------------------------------------------ results
    def outcome(self) -> Outcome:
        """tau2's evaluation of the finished simulation (kept as ``self.simulation``): its reward is the
        accuracy, and the reward unless shaping is on."""
        if self.status.stop_reason.by_runner:  # ended from outside (token budget): tau2's max_steps ending
            assert self.episode is not None
            self.episode.cut()
        else:
            assert self.episode is not None
            self.status.stop_reason = StopReason.TIMEOUT if self.episode.timed_out else \
                TAU2_STOP[self.episode.termination.value]
        episode = self.episode
        assert episode is not None
        self.simulation = episode.simulation()
        scored = score_simulation(self.simulation, episode.task, episode.domain, self.judge)
        reward_info, eval_error = scored.info, scored.error
        task_reward = float(reward_info.reward) if reward_info is not None else 0.0
        shaped = shape_reward(task_reward, reward_info, episode.domain, self.shaping)
        extras = {
            "domain": episode.domain,
            "task_id": episode.task.id,
            "termination_reason": episode.termination.value,
            "tau2_reward": task_reward,
            "tau2_partial_score": shaped.partial,
            "tau2_shaping_alpha": shaped.alpha if self.shaping.enabled else 0.0,
            "tau2_steps": episode.step_count,
            "tau2_errors": episode.num_errors,
            **reward_summary(reward_info),
        }
        if self.protocol == "pipeline":
            extras["format_retries"] = self.format_retries
        if episode.error_reason is not None:  # recorded; the ending is tau2's own (TAU2_STOP)
            self.status.fail(None, episode.error_reason)
        if eval_error is not None:
            extras["evaluator_error"] = eval_error
        if scored.failures:  # the judge's failed tries (retried; the last one decided when all failed)
            extras["judge_failures"] = scored.failures
        reward = shaped.reward if self.shaping.enabled else task_reward
        return Outcome(reward, task_reward, progress(reward_info), extras)

    def close(self) -> None:
        """Drop the episode (its environment and database). Safe twice."""
        self.episode = None
        self.status.running = False
