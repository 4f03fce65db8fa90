"""The environment contract every tool environment implements, and the step every environment shares.

An environment owns one episode. ``reset(**task)`` starts it and returns the first observation;
``step(raw_response)`` takes the policy's raw text for one generation and returns what the environment
answers. Environments never raise on model output: a malformed call becomes an observation the model can
read and a counted format error.

``step`` is a template, the same for every environment (:meth:`BaseToolEnv.batch_step`)::

    guard        an episode must be running (else EnvStateError)
    parse        parsed = self.extract_tool_calls(raw)     # the configured parser, reasoning stripped once
    limit        the generation that reaches self.max_steps (if set) without answering ends the episode
    act          self.stop(raw)?  -> self.on_answer(step)   # no call to run: the turn (or the episode) ends
                 else             -> self.run_calls(step)   # per call: self.call_tool(call) -> ToolResult
    show         obs = self.format_tool_response(step.results) + step.messages
    count        steps, calls, format errors (of this step, and the episode's total)
    end          on the last step: self.outcome() -> reward, accuracy, progress, the env's extras

A subclass writes ``reset`` (calling :meth:`BaseToolEnv.begin_episode`), ``call_tool`` (or ``run_calls``) and
``outcome``; everything else is inherited and may be overridden. Acting is batched: ``batch_step`` steps many
episodes of one class together and calls the class's :meth:`BaseToolEnv.batch_act` once for all of them, so
an env with a parallel backend (ReTool's sandbox pool, tau2's simulated users) overrides that one hook. The
episode runner sends every step through ``batch_step`` (:mod:`agent_tune.rollout.step_batcher`), off the event
loop, so it may block.

Records: :attr:`StepResult.info` is this step's record (``format_errors`` always counts this step's own
errors; ``calls`` lists the calls that ran, unless the env records its own); the step that ends the episode
also carries the episode's record, :attr:`StepResult.episode` (:class:`EpisodeInfo`: the totals, the outcome
and the env's extras), whose fields its ``info`` shows too, ``format_errors`` excepted.

Training progress: before ``reset`` the runner calls ``set_global_step(step)`` with the trainer's global
step of the policy that plays the episode (verl's ``global_steps``: 0 for the validation before training,
1 for the first training step, the current step for later validations), so rewards that change over
training (ToolRL's schedules) read ``self.global_step``. Outside training (the standalone eval, tests) it
stays ``None``, which step-dependent rewards read as step 0, where their schedules start. The total number
of training steps is configuration, not episode state: an env that needs it takes it as a constructor
kwarg (the configs pass ``${trainer.total_training_steps}``).
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Mapping, Sequence

from agent_tune.errors import EnvError
from agent_tune.parsing.response import ResponseParser
from agent_tune.parsing.types import ParsedResponse, ToolCall

ObservationKind = Literal["messages", "text"]


@dataclass
class Observation:
    """What the environment shows the policy.

    For chat environments ``messages`` holds the *new* chat messages (``{"role", "content"}``) to
    append to the conversation; for raw-text environments (ReTool) ``text`` is appended verbatim
    after the policy's tokens. ``tools`` lists the OpenAI-style tool schemas the policy may call
    at this point (``None`` when the env has no tools).
    """

    messages: list[dict[str, Any]] = field(default_factory=list)
    text: str | None = None
    tools: list[dict[str, Any]] | None = None

    @property
    def is_empty(self) -> bool:
        return not self.messages and not self.text


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one call, as :meth:`BaseToolEnv.format_tool_response` receives it.

    ``content`` is the text the policy reads, ``name`` the function it answers (``None`` for a block
    that could not be decoded), ``error`` whether the call was rejected or could not be decoded: a format
    error (a tool's own failure on a well-formed call, such as a division by zero, is not one).
    """

    content: str
    name: str | None = None
    error: bool = False

    def __init__(self, content: str, name: str | None = None, error: bool = False) -> None:
        # What the generated frozen __init__ does (dataclass keeps a class's own __init__), about 2x faster
        # than its object.__setattr__ per field: one is built per call.
        fields = self.__dict__
        fields["content"] = content
        fields["name"] = name
        fields["error"] = error


@dataclass
class Outcome:
    """What an episode earned, as :meth:`BaseToolEnv.outcome` reports it.

    ``accuracy`` is 1.0 iff the task is solved by the env's own criterion; ``progress`` the fraction of it
    done, in [0, 1] (``None``: the accuracy); ``extras`` the env's own episode keys.
    """

    reward: float
    accuracy: float
    progress: float | None = None
    extras: dict[str, Any] = field(default_factory=dict)


@dataclass
class EpisodeInfo:
    """The record of a finished episode: the totals every env keeps, its outcome and the env's extras.

    ``format_errors`` malformed or rejected call blocks of the whole episode; ``num_steps`` the env steps
    (generations the env consumed); ``num_calls`` the tool calls decoded (run or rejected);
    ``turns_completed`` the user turns the policy finished (a *turn* is always a user turn: one question and
    every generation answering it); ``truncated`` / ``finalize_reason`` when the episode was ended from
    outside (:meth:`BaseToolEnv.finalize`). Reads like a mapping (``info["accuracy"]``) over
    :meth:`as_dict`.
    """

    accuracy: float
    progress: float
    format_errors: int
    num_steps: int
    num_calls: int
    turns_completed: int
    truncated: bool = False
    finalize_reason: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    CORE_KEYS: ClassVar[tuple[str, ...]] = (
        "accuracy", "progress", "format_errors", "num_steps", "num_calls", "turns_completed",
    )

    def as_dict(self) -> dict[str, Any]:
        """The flat record (extras first, so a core key always holds the core value); ``truncated`` and
        ``finalize_reason`` appear only for an episode ended from outside."""
        out = dict(self.extras)
        out.update(accuracy=self.accuracy, progress=self.progress, format_errors=self.format_errors,
                   num_steps=self.num_steps, num_calls=self.num_calls, turns_completed=self.turns_completed)
        if self.truncated:
            out["truncated"] = True
            out["finalize_reason"] = self.finalize_reason
        return out

    def __getitem__(self, key: str) -> Any:
        return self.as_dict()[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.as_dict().get(key, default)


@dataclass
class StepResult:
    """The outcome of one ``step``: the next observation, the reward, whether the episode ended, this step's
    record (``info``) and, on the step that ends the episode, the episode's record (``episode``).

    ``info["format_errors"]`` always counts this step's own errors. On the last step ``info`` also shows the
    episode's fields (``accuracy``, ``num_steps``, the env's extras ...) except ``format_errors``, whose
    episode total is ``episode.format_errors``.
    """

    observation: Observation
    reward: float
    done: bool
    info: dict[str, Any] = field(default_factory=dict)
    episode: EpisodeInfo | None = None


class Step:
    """One step in the making, shared by the template and the env's hooks.

    The template fills ``raw``, ``parsed`` and ``answer`` (``stop(raw)``: no call to run); the hooks add
    ``results`` (shown through ``format_tool_response``), ``messages`` (shown after them: the next question,
    the user's reply), ``format_errors`` (this step's), ``info`` (the env's own step keys), ``reward`` (a step
    reward; 0 for most envs) and set ``done`` to end the episode. (A slotted class: one is built per step.)
    """

    __slots__ = ("raw", "parsed", "answer", "results", "messages", "format_errors", "info", "reward", "done")

    def __init__(self, raw: str, parsed: ParsedResponse, answer: bool) -> None:
        self.raw, self.parsed, self.answer = raw, parsed, answer
        self.results: list[Any] = []
        self.messages: list[dict[str, Any]] = []
        self.format_errors = 0
        self.info: dict[str, Any] = {}
        self.reward = 0.0
        self.done = False

    def __repr__(self) -> str:
        return f"Step(answer={self.answer}, done={self.done}, format_errors={self.format_errors}, info={self.info})"


@dataclass(frozen=True)
class Task:
    """One task of an env's catalogue (:meth:`BaseToolEnv.tasks`).

    ``id`` names it uniquely within the env (results files, resume, pass@k); ``kwargs`` is what ``reset``
    receives; ``category`` groups results in reports (``""``: the env's name); ``env_kwargs`` are constructor
    kwargs the task needs (over the run's own); ``reference`` is the task's expected answer as text, for a
    reader of the rows (``reward_model.ground_truth``; the env scores from its own data).
    """

    id: str
    kwargs: dict[str, Any]
    category: str = ""
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    reference: str = ""


@dataclass(frozen=True)
class SamplerHints:
    """What the sampler must know about an environment.

    ``stop`` strings end a generation (ReTool's ``</code>``); ``include_stop_str_in_output`` keeps
    them in the policy's tokens; ``observation_kind`` says whether observations are chat messages
    rendered through the chat template or raw text appended as is.
    """

    stop: tuple[str, ...] = ()
    include_stop_str_in_output: bool = True
    observation_kind: ObservationKind = "messages"


class EnvStateError(EnvError, RuntimeError):
    """A contract method called out of order (``step`` before ``reset`` or after the episode ended)."""


def undecodable_text(index: int, reason: str) -> str:
    """What the policy reads for a call block that could not be decoded (``index`` counts from 0)."""
    return f"Error: tool call #{index + 1} could not be parsed: {reason}"


class BaseToolEnv(ABC):
    """Base class of all tool environments (one instance = one episode).

    Subclasses set ``description`` (one line, shown by ``agent-tune envs``) and implement ``reset`` (ending
    with :meth:`begin_episode`), ``call_tool`` (or ``run_calls``) and ``outcome``. The inherited
    ``extract_tool_calls`` uses ``self.parser`` (a :class:`ResponseParser`) and ``format_tool_response``
    renders one ``tool`` message per result with ``self.tools``. ``step`` and ``finalize`` raise
    :class:`EnvStateError` when no episode is running. Check a new environment with
    :func:`agent_tune.envs.check_env`.
    """

    description: ClassVar[str] = ""
    sampler_hints: ClassVar[SamplerHints] = SamplerHints()
    # True when ``reset`` waits on something slow (tau2 asks its simulated user for the first message): the
    # runner then calls it in a worker thread, so it does not stall the other episodes on the event loop.
    blocking_reset: ClassVar[bool] = False
    env_name: ClassVar[str | None] = None  # the registered name (set by @register_env)
    global_step: int | None = None  # the trainer step playing this episode; None outside training
    parser: ResponseParser | None = None  # the inherited extract_tool_calls decodes with it
    tools: list[dict[str, Any]] | None = None  # the tool schemas visible now (format_tool_response shows them)
    # The template's step limit (None: none): the generation that reaches it ends the episode unless it answers;
    # its calls are not run (no generation would read their results), as verl's ToolAgentLoop does at its limit.
    max_steps: int | None = None

    # The task catalogue (optional): its split names; ``tasks`` lists a split's tasks. With it, ``agent-tune data``
    # writes the env's training rows and ``agent-tune eval --env NAME`` plays it (agent_tune.envs.tasks).
    splits: ClassVar[tuple[str, ...]] = ()
    # What ``agent-tune eval --env NAME`` plays when no split, category, suite or id is chosen: a split and the
    # categories kept from it (empty: all).
    eval_default: ClassVar[tuple[str, tuple[str, ...]]] = ("test", ())
    # Named sets of categories (``--suite NAME``).
    suites: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    # Constructor kwargs an evaluation always sets, over a task's and the run's (BFCL: the leaderboard's rules).
    eval_kwargs: ClassVar[Mapping[str, Any]] = {}

    # the episode's counts, kept by the template (begin_episode zeroes them)
    running: bool = False
    num_steps: int = 0
    num_calls: int = 0
    format_errors: int = 0
    turns_completed: int = 0
    finalize_reason: str | None = None

    _acts_alone: ClassVar[bool] = True  # batch_act is the default one (set per subclass)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._acts_alone = cls.batch_act.__func__ is BaseToolEnv.batch_act.__func__  # type: ignore[attr-defined]

    @classmethod
    def check_kwargs(cls, kwargs: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` naming the option when constructor ``kwargs`` (a config's ``env_kwargs``
        entry) are invalid, before any episode starts; the launcher calls it at start-up. Default: every key
        is a constructor parameter, and each value fits the constructor's annotation of it
        (:func:`agent_tune.options.check_arguments`: an :class:`~agent_tune.options.OptionError` keyed by the
        parameter, e.g. ``reward``; annotations it cannot check are skipped). An env whose construction is cheap
        constructs itself too, checking the values' ranges."""
        from agent_tune.options import check_arguments

        try:
            inspect.signature(cls.__init__).bind(None, **kwargs)
        except TypeError as exc:
            raise ValueError(f"{cls.__name__}: {exc}") from None
        check_arguments(cls.__init__, kwargs)

    @classmethod
    def tasks(cls, split: str, **options: Any) -> list[Task]:
        """The tasks of ``split`` (one of :attr:`splits`); ``options`` are the catalogue's own (a seed, a source
        file, ...), given on the command line as ``--options JSON``."""
        raise NotImplementedError(f"{cls.__name__} declares no task catalogue (no tasks() classmethod)")

    @classmethod
    def row_prompt(cls, task: Task, env_kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The messages a training row of ``task`` carries as ``prompt`` (what verl's dataset measures for its
        prompt-length filter): by default the first observation of an env built with ``env_kwargs`` and reset
        with the task. An env whose reset is costly (tau2 asks its simulated user) returns what it can show
        without it."""
        env = cls(**env_kwargs)
        try:
            return list(env.reset(**task.kwargs).messages)
        finally:
            env.close()

    # ------------------------------------------------------------------ how results are reported (eval)
    def record_fields(self, sample: int) -> dict[str, Any]:
        """Fields of a finished episode the env adds to its eval record (tau2: its ``SimulationRun``), read
        before the env closes. Default: none."""
        return {}

    @classmethod
    def report(cls, records: Sequence[Mapping[str, Any]], summary: Mapping[str, Any],
               meta: Mapping[str, Any]) -> dict[str, Any]:
        """Sections the env adds to an eval report (merged into the summary; the summary already holds
        per-category accuracy and pass@k). Default: none. BFCL adds the leaderboard's summary scores, tau2
        its pass^k."""
        return {}

    @classmethod
    def format_report(cls, summary: Mapping[str, Any]) -> list[str]:
        """Text lines the env prints under the report's table for its own sections. Default: none."""
        return []

    @classmethod
    def write_results(cls, records: Sequence[Mapping[str, Any]], out_dir: str, meta: Mapping[str, Any],
                      **options: Any) -> list[str]:
        """Write the results in the env's official scorer's own format (BFCL's result files, tau2's Results);
        return the files written. Default: none (the results jsonl is the only output)."""
        return []

    def set_global_step(self, step: int | None) -> None:
        """Record the trainer's global step for the episode about to start (the runner calls it before
        ``reset``; see the module docstring). ``None``: not training."""
        self.global_step = None if step is None else int(step)

    # ------------------------------------------------------------------ what a subclass writes
    @abstractmethod
    def reset(self, **task: Any) -> Observation:
        """Start an episode for ``task`` and return the first observation; calls :meth:`begin_episode`."""

    def call_tool(self, call: ToolCall) -> ToolResult:
        """Run one decoded call (the per-call hook of the inherited :meth:`run_calls`). A result with
        ``error=True`` counts as a format error."""
        raise NotImplementedError(f"{type(self).__name__} implements neither call_tool nor run_calls")

    def outcome(self) -> Outcome:
        """What the finished episode earned (called once, when the episode ends, also from ``finalize``).
        Every env on the inherited step writes it; an env that writes its own ``step`` and ``finalize`` need not."""
        raise NotImplementedError(f"{type(self).__name__} implements no outcome()")

    # ------------------------------------------------------------------ hooks with a default
    def begin_episode(self) -> None:
        """Zero the episode's counts and mark it running (``reset`` calls it)."""
        self.running = True
        self.num_steps = self.num_calls = self.format_errors = self.turns_completed = 0
        self.finalize_reason = None

    def extract_tool_calls(self, raw_response: str) -> ParsedResponse:
        """Decode the tool calls (and the failed call blocks) in ``raw_response``: ``self.parser``, reasoning
        stripped first (it keeps the last response's result, so the template's calls parse once)."""
        if self.parser is None:
            raise NotImplementedError(f"{type(self).__name__} sets no parser and overrides no extract_tool_calls")
        return self.parser.parse(raw_response)[1]

    def format_tool_response(self, results: Sequence[Any]) -> Observation:
        """One ``tool`` message per result, in call order, named after the function when there is one."""
        messages = []
        for r in results:
            msg: dict[str, Any] = {"role": "tool", "content": r.content}
            if r.name is not None:
                msg["name"] = r.name
            messages.append(msg)
        return Observation(messages=messages, tools=self.tools)

    def stop(self, raw_response: str) -> bool:
        """True if ``raw_response`` has no call to run (the policy has finished acting): by default,
        no tool-call block at all, valid or not."""
        return not self.extract_tool_calls(raw_response).has_tool_call_attempt

    def act(self, step: Step) -> None:
        """React to one generation: :meth:`on_answer` if it has no call to run, else :meth:`run_calls`."""
        if step.answer:
            self.on_answer(step)
        else:
            self.run_calls(step)

    def on_answer(self, step: Step) -> None:
        """The policy answered without a call: by default its turn is done and so is the episode."""
        step.format_errors += len(step.parsed.errors)
        self.turns_completed += 1
        step.done = True

    def run_calls(self, step: Step) -> None:
        """Run every decoded call through :meth:`call_tool` and answer every undecodable block with its reason;
        each rejected call and each undecodable block is a format error."""
        for call in step.parsed.calls:
            result = self.call_tool(call)
            step.format_errors += result.error
            step.results.append(result)
        for err in step.parsed.errors:
            step.format_errors += 1
            step.results.append(ToolResult(undecodable_text(err.index, err.reason), error=True))

    @classmethod
    def batch_act(cls, envs: Sequence["BaseToolEnv"], steps: Sequence[Step]) -> None:
        """:meth:`act` for many episodes of this class at once (``envs[i]`` acts on ``steps[i]``). The default
        acts in order; an env with a parallel backend overrides it."""
        for env, step in zip(envs, steps):
            env.act(step)

    def on_finalize(self, reason: str) -> None:
        """The episode is being ended from outside (:meth:`finalize`), before :meth:`outcome` is asked."""

    def close(self) -> None:
        """Release whatever the episode holds. Safe to call twice."""

    # ------------------------------------------------------------------ the template
    def step(self, raw_response: str) -> StepResult:
        """Consume the policy's raw text for one generation; never raises on model output. (``batch_step`` of
        one env, without its bookkeeping.)"""
        step = self._open_step(raw_response)
        if not step.done:
            if self._acts_alone:
                self.act(step)
            else:
                type(self).batch_act((self,), (step,))
        return self._close_step(step)

    @classmethod
    def batch_step(cls, envs: Sequence["BaseToolEnv"], raw_responses: Sequence[str]) -> list[StepResult]:
        """Step many independent episodes at once (``envs[i]`` receives ``raw_responses[i]``): each opens its
        step, the class acts for all of them (:meth:`batch_act`), each closes its step. (Envs that override
        ``step`` itself are stepped through it, one by one.)"""
        if len(envs) != len(raw_responses):
            raise ValueError(f"batch_step got {len(envs)} envs and {len(raw_responses)} responses")
        if any(type(env).step is not BaseToolEnv.step for env in envs):  # an env that writes its own step
            return [env.step(raw) for env, raw in zip(envs, raw_responses)]
        steps = [env._open_step(raw) for env, raw in zip(envs, raw_responses)]
        by_class: dict[type, list[int]] = {}
        for i, (env, step) in enumerate(zip(envs, steps)):
            if not step.done:  # a step at the step limit does not act
                by_class.setdefault(type(env), []).append(i)
        for klass, idx in by_class.items():
            klass.batch_act([envs[i] for i in idx], [steps[i] for i in idx])
        return [env._close_step(step) for env, step in zip(envs, steps)]

    def finalize(self, reason: str = "truncated") -> StepResult:
        """End the episode now (the runner ran out of token budget) and return its final result, scored by
        :meth:`outcome` on what was done so far."""
        self._require_running("finalize")
        self.finalize_reason = reason
        self.on_finalize(reason)
        return self._end(self.format_tool_response([]), 0.0, {}, 0)

    def _require_running(self, method: str) -> None:
        if not self.running:
            raise EnvStateError(f"{self.name_for_errors()}: {method}() with no episode running; call reset() first")

    def name_for_errors(self) -> str:
        """How error messages name this env (``"bfcl env"``): the registered name, else the class name."""
        return f"{self.env_name or type(self).__name__} env"

    def _open_step(self, raw_response: str) -> Step:
        if not self.running:
            self._require_running("step")
        if not isinstance(raw_response, str):
            raise TypeError(f"raw_response must be a str, got {type(raw_response).__name__}")
        self.num_steps += 1
        step = Step(raw_response, self.extract_tool_calls(raw_response), self.stop(raw_response))
        if not step.answer and self.max_steps is not None and self.num_steps >= self.max_steps:
            step.done, step.info["step_limit"] = True, True
        else:
            self.num_calls += len(step.parsed.calls)
        return step

    def _close_step(self, step: Step) -> StepResult:
        self.format_errors += step.format_errors
        observation = self.format_tool_response(step.results)
        if step.messages:
            observation.messages.extend(step.messages)
        info = step.info
        info["format_errors"] = step.format_errors
        if "calls" not in info and step.results:  # the calls that ran (named, not rejected): collapse metrics
            info["calls"] = [r.name for r in step.results if isinstance(r, ToolResult) and r.name and not r.error]
        if not step.done:
            return StepResult(observation, step.reward, False, info)
        return self._end(observation, step.reward, info, step.format_errors)

    def _end(self, observation: Observation, reward: float, info: dict[str, Any], step_errors: int) -> StepResult:
        self.running = False
        outcome = self.outcome()
        episode = EpisodeInfo(
            accuracy=float(outcome.accuracy),
            progress=float(outcome.accuracy if outcome.progress is None else outcome.progress),
            format_errors=self.format_errors, num_steps=self.num_steps, num_calls=self.num_calls,
            turns_completed=self.turns_completed, truncated=self.finalize_reason is not None,
            finalize_reason=self.finalize_reason, extras=dict(outcome.extras),
        )
        merged = episode.as_dict()
        merged.update(info)
        merged["format_errors"] = step_errors
        return StepResult(observation, reward + float(outcome.reward), True, merged, episode)
