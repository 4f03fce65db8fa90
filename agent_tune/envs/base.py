"""The environment contract every tool environment implements, and the step every environment shares.

An environment owns one episode. ``reset(**task)`` starts it and returns the first observation;
``step(raw_response)`` (``astep`` on an event loop) takes the policy's raw text for one generation and returns
what the environment answers. Environments never raise on model output: a malformed call becomes an
observation the model can read and a counted format error. docs/envs.md shows the contract in one screen.

``step`` is a template, the same for every environment::

    guard        an episode must be running (else EnvStateError)
    parse        parsed = self.extract_tool_calls(raw)     # the configured parser, reasoning stripped once
    limit        the generation that reaches self.max_steps (if set) without answering ends the episode
                 (WholeTextEnv: after act, so the last generation is read); a failure recorded at reset ends it
    act          self.act(step)                             # the env's hook; may be async
                 CallToolEnv: is_answer(raw)? -> on_answer(step), else per decoded call: refuse(call)?, else
                 call_tool(call) (may be async; a backend gone ends the episode)
                 a failure (step.fail / status.fail: why, the stop reason) ends the episode after act
    show         obs = self.format_tool_response(step.results) + step.messages
    count        steps, calls, format errors (of this step, and the episode's total), in self.status
    end          on the last step: self.outcome() -> reward, accuracy, progress, the env's extras

A subclass writes ``reset`` (calling ``super().reset()``), ``act`` and ``outcome``; :class:`CallToolEnv` writes
``act`` from ``call_tool`` (with ``on_answer``, ``refuse``, ``call_schemas`` and ``call_timeout``);
:class:`WholeTextEnv` is the tier for envs that read the whole generation. How an episode fails is the
contract's: :meth:`Step.fail` (or :meth:`EpisodeStatus.fail` outside a step) records the error and the stop reason
(never over the runner's), tells the policy and ends the episode; the record carries ``error`` and
``tool_errors`` (``status.tool_errors``, counted by the env). Concurrency comes from the episode runner: it awaits
:meth:`BaseToolEnv.astep` of many episodes at once; an ``async def act`` is awaited on its event loop, a plain
one runs with its whole step in :func:`env_executor`'s threads, so it may block.

Records: :attr:`StepResult.info` is this step's record (``format_errors`` always counts this step's own
errors; ``calls`` lists the calls that ran, unless the env records its own); the step that ends the episode
also carries the episode's record, :attr:`StepResult.episode` (:class:`EpisodeInfo`: the totals, the outcome,
the :class:`StopReason` and the env's extras), whose fields its ``info`` shows too, ``format_errors`` excepted.

Training progress: before ``reset`` the runner sets ``env.status.global_step`` to the trainer's global step of
the policy that plays the episode (verl's ``global_steps``: 0 for the validation before training, 1 for the
first training step, the current step for later validations), so rewards that change over training (ToolRL's
schedules) read it. Outside training (the standalone eval, tests) it stays ``None``, which step-dependent
rewards read as step 0, where their schedules start. The total number of training steps is configuration, not
episode state: an env that needs it takes it as a constructor kwarg (the configs pass
``${trainer.total_training_steps}``).
"""

from __future__ import annotations

import asyncio
import enum
import inspect
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Awaitable, ClassVar, Literal, Mapping, Sequence

from agent_tune.envs.catalogue import TaskCatalogue
from agent_tune.envs.remote_tools import refusal
from agent_tune.envs.report import EvalReport
from agent_tune.envs.time_limits import DEFAULT_CALL_TIMEOUT, step_time_limit
from agent_tune.errors import BackendGoneError, EnvError
from agent_tune.parsing.response import ResponseParser
from agent_tune.parsing.types import ParsedResponse, ToolCall
from agent_tune.sync import EnvTimeoutError, env_executor, in_thread, on_background_loop, run_sync

ObservationKind = Literal["messages", "text", "tokens"]


class StopReason(str, enum.Enum):
    """How an episode ended: one value on every episode record (``EpisodeInfo.stop_reason``, the eval record's and
    the training sample's ``stop_reason``), logged per training step as the metric family ``stop/<value>`` (the
    share of the step's episodes). The env sets it in ``self.status.stop_reason`` when it ends an episode for a
    reason other than ``DONE``; the runner's reasons reach the env through ``finalize``."""

    DONE = "done"  # the env ended it by its own rule: the task answered, its last turn played
    STEP_LIMIT = "step_limit"  # an env's step limit (max_steps; BFCL's per-turn and per-episode limits; tau2's)
    TOKEN_BUDGET = "token_budget"  # the runner: the response's token budget ran out (the trajectory is truncated)
    GENERATION_LIMIT = "generation_limit"  # the runner: the run's max_generations
    EMPTY_GENERATION = "empty_generation"  # the runner: the policy generated nothing
    ABORTED = "aborted"  # the runner: the sampler aborted the generation
    PROMPT_TOO_LONG = "prompt_too_long"  # the eval: the first prompt does not fit; nothing was played
    SERVER_ERROR = "server_error"  # a backend the env waits on failed (MCP / OpenEnv server, tau2's user)
    TIMEOUT = "timeout"  # a call or the start got no answer within call_timeout / start_timeout (time_limits.py)
    ENV_ERROR = "env_error"  # the env, or the framework it adapts, could not go on (tau2's agent_error, SkyRL)

    @classmethod
    def of(cls, exc: BaseException) -> StopReason:
        """The reason a failure ``exc`` ends an episode with: ``timeout`` for no answer in time (a ``TimeoutError``,
        or a :class:`~agent_tune.errors.BackendGoneError` that timed out), ``server_error`` for a backend gone,
        ``env_error`` for anything else."""
        if isinstance(exc, TimeoutError) or getattr(exc, "timed_out", False):
            return cls.TIMEOUT
        return cls.SERVER_ERROR if isinstance(exc, BackendGoneError) else cls.ENV_ERROR

    @property
    def by_runner(self) -> bool:
        """The runner ended the episode before the env did (``finalize`` scored it)."""
        return self in _RUNNER_REASONS


_RUNNER_REASONS = frozenset({StopReason.TOKEN_BUDGET, StopReason.GENERATION_LIMIT, StopReason.EMPTY_GENERATION,
                             StopReason.ABORTED})
# the endings a failure replaces (EpisodeStatus.fail); the runner's and an earlier failure's stand
_OVERRIDABLE = frozenset({None, StopReason.DONE, StopReason.STEP_LIMIT})


@dataclass(slots=True)  # no __dict__: one is built per step
class Observation:
    """What the environment shows the policy.

    For chat environments ``messages`` holds the *new* chat messages (``{"role", "content"}``) to
    append to the conversation; for raw-text environments (ReTool) ``text`` is appended verbatim
    after the policy's tokens; for token environments (``observation_kind="tokens"``: tinker's envs, which
    render with their own renderer) ``token_ids`` are the tokens themselves, the whole prompt at ``reset``
    and the new tokens after a step, appended as they are. ``tools`` lists the OpenAI-style tool schemas the
    policy may call at this point (``None`` when the env has no tools).
    """

    messages: list[dict[str, Any]] = field(default_factory=list)
    text: str | None = None
    tools: list[dict[str, Any]] | None = None
    token_ids: list[int] | None = None

    @property
    def is_empty(self) -> bool:
        return not self.messages and not self.text and not self.token_ids


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one call, as :meth:`BaseToolEnv.format_tool_response` receives it.

    ``content`` is the text the policy reads, ``name`` the function it answers (``None`` for a block
    that could not be decoded), ``error`` whether the call was rejected or could not be decoded: a format
    error (a tool's own failure on a well-formed call, such as a division by zero, is not one). ``done``: the
    call ended the episode (a server saying done, a ``submit`` tool); :class:`CallToolEnv` then runs none of the
    step's later calls.
    """

    content: str
    name: str | None = None
    error: bool = False
    done: bool = False

    def __init__(self, content: str, name: str | None = None, error: bool = False, done: bool = False) -> None:
        # What the generated frozen __init__ does (dataclass keeps a class's own __init__), about 2x faster
        # than its object.__setattr__ per field: one is built per call.
        fields = self.__dict__
        fields["content"] = content
        fields["name"] = name
        fields["error"] = error
        fields["done"] = done


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
    every generation answering it); ``stop_reason`` how it ended (:class:`StopReason`); ``tool_errors`` the
    well-formed calls whose tool failed on its own (not format errors); ``error`` why the episode failed
    (:meth:`EpisodeStatus.fail`), else ``None``. Reads like a mapping (``info["accuracy"]``) over :meth:`as_dict`.
    """

    accuracy: float
    progress: float
    format_errors: int
    num_steps: int
    num_calls: int
    turns_completed: int
    stop_reason: StopReason = StopReason.DONE
    extras: dict[str, Any] = field(default_factory=dict)
    tool_errors: int = 0
    error: str | None = None

    CORE_KEYS: ClassVar[tuple[str, ...]] = (
        "accuracy", "progress", "format_errors", "num_steps", "num_calls", "turns_completed",
    )

    def as_dict(self) -> dict[str, Any]:
        """The flat record (extras first, so a core key always holds the core value; ``stop_reason`` as its text;
        ``tool_errors`` and ``error`` only when there are some, so the records of envs whose tools cannot fail
        keep their keys)."""
        out = dict(self.extras)
        out["accuracy"] = self.accuracy  # key by key: no keyword dict built for an update (one per episode)
        out["progress"] = self.progress
        out["format_errors"] = self.format_errors
        out["num_steps"] = self.num_steps
        out["num_calls"] = self.num_calls
        out["turns_completed"] = self.turns_completed
        out["stop_reason"] = self.stop_reason.value
        if self.tool_errors:
            out["tool_errors"] = self.tool_errors
        if self.error is not None:
            out["error"] = self.error
        return out

    def __getitem__(self, key: str) -> Any:
        return self.as_dict()[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.as_dict().get(key, default)


@dataclass(slots=True)  # no __dict__: one is built per step
class StepResult:
    """The outcome of one ``step``: the next observation, the reward, whether the episode ended, this step's
    record (``info``) and, on the step that ends the episode, the episode's record (``episode``).

    ``info["format_errors"]`` always counts this step's own errors. On the last step ``info`` also shows the
    episode's fields (``accuracy``, ``num_steps``, the env's extras ...) except ``format_errors``, whose
    episode total is ``episode.format_errors``. ``sampling``: sampling parameters (vLLM's names) the runner
    lays over its own for the next generation only (tau2's pipeline protocol retries a malformed action at
    temperature 0); ``None``: the run's own.
    """

    observation: Observation
    reward: float
    done: bool
    info: dict[str, Any] = field(default_factory=dict)
    episode: EpisodeInfo | None = None
    sampling: dict[str, Any] | None = None


class Step:
    """One step in the making, shared by the template and the env's hooks.

    The template fills ``raw``, ``parsed`` and ``answer`` (``is_answer(raw)``: no call to run); the hooks add
    ``results`` (shown through ``format_tool_response``), ``messages`` (shown after them: the next question,
    the user's reply), ``format_errors`` (this step's), ``info`` (the env's own step keys), ``reward`` (a step
    reward; 0 for most envs), ``sampling`` (sampling parameters for the next generation only, e.g.
    ``{"temperature": 0.0}`` for a retry: :attr:`StepResult.sampling`) and set ``done`` to end the episode;
    :meth:`end_turn` is the policy's answer ending its turn and the episode. ``status`` is the episode's
    :class:`EpisodeStatus`. (A slotted class: one is built per step.)
    """

    __slots__ = ("raw", "parsed", "answer", "status", "results", "messages", "format_errors", "info", "reward",
                 "done", "token_ids", "sampling")

    def __init__(self, raw: str, parsed: ParsedResponse, answer: bool, status: EpisodeStatus,
                 token_ids: list[int] | None = None) -> None:
        self.raw, self.parsed, self.answer, self.status = raw, parsed, answer, status
        self.token_ids = token_ids  # the generation's tokens as sampled (token envs; None: the text only)
        self.results: list[Any] = []
        self.messages: list[dict[str, Any]] = []
        self.format_errors = 0
        self.info: dict[str, Any] = {}
        self.reward = 0.0
        self.done = False
        self.sampling: dict[str, Any] | None = None

    def answer_undecodable(self) -> None:
        """Answer every call block that could not be decoded with its reason, after the results so far; each is a
        format error."""
        for err in self.parsed.errors:
            self.format_errors += 1
            self.results.append(ToolResult(undecodable_text(err.index, err.reason), error=True))

    def fail(self, reason: StopReason, why: str, reply: ToolResult | str | None = None) -> None:
        """End the episode on a failure (a backend gone, a call with no answer in time, the adapted env unable to
        go on): :meth:`EpisodeStatus.fail` records ``why`` and ``reason``, and the policy is told: ``reply``, a
        :class:`ToolResult` answering a call, or the text of a user message (default ``Error: <why>``)."""
        self.status.fail(reason, why)
        if isinstance(reply, ToolResult):
            self.results.append(reply)
        else:
            self.messages.append({"role": "user", "content": f"Error: {why}" if reply is None else reply})
        self.done = True

    def end_turn(self) -> None:
        """The policy answered without a call to run: its turn is done, and so is the episode; a broken call
        block in the answer is a format error."""
        self.format_errors += len(self.parsed.errors)
        self.status.turns_completed += 1
        self.done = True

    def __repr__(self) -> str:
        return f"Step(answer={self.answer}, done={self.done}, format_errors={self.format_errors}, info={self.info})"


@dataclass(slots=True)  # no __dict__: its counts are written at every step
class EpisodeStatus:
    """An episode's running status (``env.status``), kept by the template: whether it is running, its counts so
    far (env steps, decoded calls, format errors, user turns finished: :class:`EpisodeInfo` says what each
    counts), how it ended (``stop_reason``: set by the env when it ends the episode for a reason other than
    :attr:`StopReason.DONE`, by the template at its step limit, by ``finalize``) and the trainer's global
    step playing it (``global_step``: verl's ``global_steps``, 0 for the validation before training; ``None``
    outside training, which step-dependent rewards read as step 0), the tool errors (``tool_errors``: calls
    whose tool failed on its own; the env counts them) and why the episode failed (``error``: :meth:`fail`).
    ``reset`` (the base's, which a subclass's ``reset`` calls) starts a new status; the runner sets
    ``global_step`` before ``reset``."""

    running: bool = False
    num_steps: int = 0
    num_calls: int = 0
    format_errors: int = 0
    turns_completed: int = 0
    stop_reason: StopReason | None = None
    global_step: int | None = None
    tool_errors: int = 0
    error: str | None = None

    def fail(self, reason: StopReason | None, why: str) -> None:
        """Record a failure: ``why`` is added to ``error`` (texts joined by ``; ``), and ``reason`` becomes the stop
        reason unless the runner ended the episode or an earlier failure set one (``None``: the stop reason stays,
        for an error recorded at the end, such as a tool's clean-up failing). A failure recorded while the episode
        runs ends it: at the end of the step that records it (:meth:`Step.fail` ends it at once), or, recorded at
        ``reset``, at the next step, which is not acted on. Safe in :meth:`BaseToolEnv.outcome` (scoring that
        failed)."""
        self.error = why if self.error is None else f"{self.error}; {why}"
        if reason is not None and self.stop_reason in _OVERRIDABLE:
            self.stop_reason = StopReason(reason)


@dataclass(frozen=True)
class SamplerHints:
    """What the runner and its sampler must know about an environment.

    ``stop`` strings end a generation (ReTool's ``</code>``), as do the ``stop_token_ids``;
    ``include_stop_str_in_output`` keeps them in the policy's tokens; ``observation_kind`` says whether
    observations are chat messages rendered through the chat template, raw text appended as is, or token ids
    appended as they are (``"tokens"``: the runner then also hands the env each generation's token ids,
    ``step(raw, token_ids)``). The runner reads the hints after ``reset``, so an env may set its own per episode
    (a tinker env's stop condition). ``blocking_reset`` says that ``reset``
    waits on something slow (tau2 asks its simulated user for the first message, MCP starts a server): the
    runner then calls it in a worker thread of its own, so it does not hold up the other episodes' starts.
    """

    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    include_stop_str_in_output: bool = True
    observation_kind: ObservationKind = "messages"
    blocking_reset: bool = False


class EnvStateError(EnvError, RuntimeError):
    """A contract method called out of order (``step`` before ``reset`` or after the episode ended)."""


class EnvContractError(EnvError, TypeError):
    """An env class written to the contract before agent-tune 0.1.0 (or with a hook renamed since): raised when the
    class is defined, naming the migration (CHANGELOG.md)."""


_CATALOGUE = "declare `catalogue = TaskCatalogue(splits=..., tasks=...)` (agent_tune.envs.catalogue) instead"
_REPORT = "declare `report = EvalReport(...)` (agent_tune.envs.report) instead"
# The env contract's names before 0.1.0, each with its one-line migration (CHANGELOG.md, [0.1.0]).
RETIRED_NAMES: dict[str, str] = {
    "tasks": _CATALOGUE,
    "splits": _CATALOGUE,
    "eval_default": _CATALOGUE,
    "suites": _CATALOGUE,
    "eval_kwargs": _CATALOGUE,
    "row_prompt": _CATALOGUE,
    "record_fields": _REPORT,
    "format_report": _REPORT,
    "write_results": _REPORT,
    "begin_episode": "call `super().reset()` first in `reset` and start the episode's own state there",
    "on_finalize": "read `self.status.stop_reason` in `outcome()` instead",
    "set_global_step": "read `self.status.global_step` (the runner sets it before `reset`) instead",
}
# The hooks renamed since 0.1.0, each with its one-line migration (CHANGELOG.md, [Unreleased]).
RENAMED_HOOKS: dict[str, str] = {
    "stop": "rename it `is_answer(raw)` (same meaning: True when the generation is the policy's answer, with no "
            "call to run)",
}


def check_contract(cls: type) -> None:
    """Raise :class:`EnvContractError` when env class ``cls`` defines a name of the contract before 0.1.0 or a hook
    renamed since."""
    own = vars(cls)
    for name, migration in RETIRED_NAMES.items():
        if name in own:
            raise EnvContractError(f"{cls.__qualname__}.{name}: the env contract changed in agent-tune 0.1.0; "
                                   f"{migration} (CHANGELOG.md, docs/envs.md)")
    for name, migration in RENAMED_HOOKS.items():
        if name in own:
            raise EnvContractError(f"{cls.__qualname__}.{name}: the hook was renamed after agent-tune 0.1.0; "
                                   f"{migration} (CHANGELOG.md, docs/envs.md)")
    for attr, value in own.items():
        code = getattr(getattr(value, "__func__", value), "__code__", None)
        if code is not None and "begin_episode" in code.co_names:  # the old reset called self.begin_episode()
            raise EnvContractError(f"{cls.__qualname__}.{attr} calls begin_episode(), gone since agent-tune 0.1.0; "
                                   f"{RETIRED_NAMES['begin_episode']} (CHANGELOG.md, docs/envs.md)")
    if "report" in own and not isinstance(own["report"], EvalReport):
        raise EnvContractError(f"{cls.__qualname__}.report: the env contract changed in agent-tune 0.1.0; "
                               f"{_REPORT} (CHANGELOG.md, docs/envs.md)")
    if "call_tool" in own and getattr(cls, "act", None) is BaseToolEnv.act:
        # the call-by-call hook on the base class: the template no longer runs it, so the env would not act
        raise EnvContractError(f"{cls.__qualname__}.call_tool: the call-by-call tier is its own class since "
                               "agent-tune 0.1.0; subclass `CallToolEnv` instead of `BaseToolEnv` (CHANGELOG.md, "
                               "docs/envs.md)")


def undecodable_text(index: int, reason: str) -> str:
    """What the policy reads for a call block that could not be decoded (``index`` counts from 0)."""
    return f"Error: tool call #{index + 1} could not be parsed: {reason}"


class BaseToolEnv(ABC):
    """Base class of all tool environments (one instance = one episode at a time).

    A subclass writes ``reset`` (calling ``super().reset()``, which starts the episode's :class:`EpisodeStatus`),
    ``act`` (the acting hook, plain or ``async``) and ``outcome``; :class:`CallToolEnv` is the simpler tier that
    writes ``call_tool`` (and may write ``on_answer``) instead of ``act``. The inherited
    ``extract_tool_calls`` decodes with ``self.parser`` (a :class:`ResponseParser`), ``format_tool_response``
    renders one ``tool`` message per result with ``self.tools``. ``step``, ``astep`` and ``finalize`` raise
    :class:`EnvStateError` when no episode is running. Check a new environment with
    :func:`agent_tune.envs.check_env`.
    """

    description: ClassVar[str] = ""  # one line, shown by ``agent-tune envs``
    sampler_hints: ClassVar[SamplerHints] = SamplerHints()
    # What comes with the env: its tasks (agent-tune data / eval --env NAME) and how its eval results are reported.
    catalogue: ClassVar[TaskCatalogue | None] = None
    report: ClassVar[EvalReport] = EvalReport()

    parser: ResponseParser | None = None  # the inherited extract_tool_calls decodes with it
    tools: list[dict[str, Any]] | None = None  # the tool schemas visible now (format_tool_response shows them)
    # The template's step limit (None: none): the generation that reaches it ends the episode unless it answers;
    # its calls are not run (no generation would read their results), as verl's ToolAgentLoop does at its limit
    # (WholeTextEnv: the generation is acted on first).
    max_steps: int | None = None
    status: EpisodeStatus  # the episode's counts and the trainer step playing it (every instance has its own)

    _registered_as: ClassVar[str | None] = None  # the registered name (set by @register_env)
    _limit_after_act: ClassVar[bool] = False  # the step limit is applied after act (WholeTextEnv), not before
    _async_act: ClassVar[bool] = False  # act is a coroutine function (set per subclass)
    _check_builds: ClassVar[bool] = False  # check_kwargs constructs the env too (cheap: its own checks run there)

    def __new__(cls, *args: Any, **kwargs: Any) -> BaseToolEnv:
        self = super().__new__(cls)
        self.status = EpisodeStatus()
        return self

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        check_contract(cls)
        cls._async_act = inspect.iscoroutinefunction(cls.act)

    @classmethod
    def check_kwargs(cls, kwargs: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` naming the option when constructor ``kwargs`` (a config's ``env_kwargs``
        entry) are invalid, before any episode starts; the launcher calls it at start-up. Default: every key
        is a constructor parameter, and each value fits the constructor's annotation of it
        (:func:`~agent_tune.utils.typed_config.check_arguments`: an :class:`~agent_tune.utils.typed_config.OptionError`
        keyed by the
        parameter, e.g. ``reward``; annotations it cannot check are skipped). An env whose construction is cheap
        constructs itself too, checking the values' ranges (``_check_builds = True`` on the class)."""
        from agent_tune.utils.typed_config import check_arguments

        try:
            inspect.signature(cls.__init__).bind(None, **kwargs)
        except TypeError as exc:
            raise ValueError(f"{cls.__name__}: {exc}") from None
        check_arguments(cls.__init__, kwargs)
        if cls._check_builds:
            cls(**kwargs)

    # ------------------------------------------------------------------ what a subclass writes
    @abstractmethod
    def reset(self, **task: Any) -> Observation:
        """Start an episode for ``task`` and return the first observation. A subclass's ``reset`` calls
        ``super().reset()``, which starts a new :class:`EpisodeStatus` (the trainer's step kept)."""
        self.status = EpisodeStatus(running=True, global_step=self.status.global_step)
        return Observation()

    @abstractmethod
    def act(self, step: Step) -> Awaitable[None] | None:
        """React to one generation (``step.parsed``: its decoded calls; ``step.answer``: it has none to run): fill
        ``step.results`` / ``step.messages``, count ``step.format_errors``, set ``step.done`` to end the episode
        (``step.end_turn()`` for an answer that ends it). ``async def`` allowed: the runner awaits it on its
        event loop, so many episodes' steps wait on their backends at once; a plain ``def`` runs in a worker
        thread (:func:`env_executor`), so it may block."""

    def outcome(self) -> Outcome:
        """What the finished episode earned, called once when it ends; ``self.status.stop_reason`` says how
        (``.by_runner``: ended from outside, by ``finalize``)."""
        raise NotImplementedError(f"{type(self).__name__} implements no outcome()")

    # ------------------------------------------------------------------ hooks with a default
    def extract_tool_calls(self, raw_response: str) -> ParsedResponse:
        """Decode the tool calls (and the failed call blocks) in ``raw_response``: ``self.parser``, reasoning
        stripped first (it keeps the last response's result, so the template's calls parse once)."""
        if self.parser is None:
            raise NotImplementedError(f"{type(self).__name__} sets no parser and overrides no extract_tool_calls")
        return self.parser.parse(raw_response)[1]

    def format_tool_response(self, results: Sequence[Any]) -> Observation:
        """One ``tool`` message per result, in call order, named after the function when there is one."""
        messages: list[dict[str, Any]] = []
        for r in results:  # a loop, not a comprehension: no frame (one or two results per step)
            messages.append({"role": "tool", "content": r.content, "name": r.name} if r.name is not None
                            else {"role": "tool", "content": r.content})
        return Observation(messages, None, self.tools)

    def is_answer(self, raw_response: str) -> bool:
        """True if ``raw_response`` is the policy's answer: it has no call to run (the policy has finished acting;
        :attr:`Step.answer`, :meth:`CallToolEnv.on_answer`). By default, no tool-call block at all, valid or not."""
        return not self.extract_tool_calls(raw_response).has_tool_call_attempt

    def close(self) -> None:
        """Release whatever the episode holds. Safe to call twice."""

    def reference_replies(self) -> list[str] | None:
        """The assistant texts a correct policy writes in the episode just reset, one per generation, in order
        (tool calls written as ``self.parser`` reads them), or ``None`` when the env knows no reference for the
        task (the default). ``agent-tune sft-data --format reference`` plays them through the episode runner and
        keeps the episodes the env scores a success as SFT rows (:mod:`agent_tune.sft.reference`)."""
        return None

    # ------------------------------------------------------------------ the template
    def step(self, raw_response: str, token_ids: list[int] | None = None) -> StepResult:
        """Consume the policy's raw text for one generation; never raises on model output. An ``async`` acting
        hook is run to completion here (on a fresh event loop; from inside a running loop, in a helper thread):
        async callers use :meth:`astep`. ``token_ids``: the generation's tokens as sampled, which the runner
        hands token envs (``observation_kind="tokens"``); ``step.token_ids`` in the acting hook."""
        step = self._open_step(raw_response, token_ids)
        if not step.done:
            if self._async_act:
                run_sync(self.act(step))  # type: ignore[arg-type]
            else:
                self.act(step)
            if not step.done and (self._limit_after_act or self.status.error is not None):
                self._after_act(step)
        return self._close_step(step)

    async def astep(self, raw_response: str, token_ids: list[int] | None = None) -> StepResult:
        """:meth:`step` for the event loop (the episode runner's): an ``async`` acting hook is awaited here, so
        many episodes' steps run concurrently; a plain one runs with the whole step in a worker thread
        (:func:`env_executor`), so it may block. The step that ends the episode is scored in the worker too."""
        if not self._async_act:  # an env that overrides step(raw) alone gets no token ids (only token envs take them)
            args = (raw_response,) if token_ids is None else (raw_response, token_ids)
            return await in_thread(self.step, *args, pool=env_executor())
        step = self._open_step(raw_response, token_ids)
        if not step.done:
            await self.act(step)  # type: ignore[misc]
            if not step.done and (self._limit_after_act or self.status.error is not None):
                self._after_act(step)
        if step.done:  # outcome() may block (a verifier, tau2's evaluator)
            return await in_thread(self._close_step, step, pool=env_executor())
        return self._close_step(step)

    @classmethod
    def batch_step(cls, envs: Sequence[BaseToolEnv], raw_responses: Sequence[str]) -> list[StepResult]:
        """Step many independent episodes (``envs[i]`` receives ``raw_responses[i]``), concurrently: their
        :meth:`astep` s gathered on one event loop. The runner steps each episode on its own; this is the same
        for a caller that holds a batch."""
        if len(envs) != len(raw_responses):
            raise ValueError(f"batch_step got {len(envs)} envs and {len(raw_responses)} responses")

        async def all_steps() -> list[StepResult]:
            return list(await asyncio.gather(*(env.astep(raw) for env, raw in zip(envs, raw_responses))))

        return run_sync(all_steps())

    def finalize(self, reason: StopReason = StopReason.TOKEN_BUDGET) -> StepResult:
        """End the episode now (the runner stopped it: ``reason.by_runner``) and return its final result, scored
        by :meth:`outcome` on what was done so far (``self.status.stop_reason`` is ``reason`` there)."""
        self._require_running("finalize")
        self.status.stop_reason = StopReason(reason)
        return self._end(self.format_tool_response([]), 0.0, {}, 0)

    def _require_running(self, method: str) -> None:
        if not self.status.running:
            raise EnvStateError(f"{self._name()}: {method}() with no episode running; call reset() first")

    def _name(self) -> str:
        """How error messages name this env (``"bfcl env"``): the registered name, else the class name."""
        return f"{self._registered_as or type(self).__name__} env"

    def _open_step(self, raw_response: str, token_ids: list[int] | None = None) -> Step:
        status = self.status
        if not status.running:
            self._require_running("step")
        if not isinstance(raw_response, str):
            raise TypeError(f"raw_response must be a str, got {type(raw_response).__name__}")
        status.num_steps += 1
        parsed = self.extract_tool_calls(raw_response)
        step = Step(raw_response, parsed, self.is_answer(raw_response), status, token_ids)
        if status.error is not None:  # a failure recorded at reset (EpisodeStatus.fail): ended, not acted on
            step.done = True
        elif (not step.answer and not self._limit_after_act and self.max_steps is not None
              and status.num_steps >= self.max_steps):
            step.done, status.stop_reason = True, StopReason.STEP_LIMIT
        else:
            status.num_calls += len(step.parsed.calls)
        return step

    def _after_act(self, step: Step) -> None:
        """The endings the template applies after ``act``: a failure recorded during the step, then (the whole-text
        tier) the step limit."""
        if step.done:
            return
        if self.status.error is not None:
            step.done = True
        elif self._limit_after_act and self.max_steps is not None and self.status.num_steps >= self.max_steps:
            step.done, self.status.stop_reason = True, StopReason.STEP_LIMIT

    def _close_step(self, step: Step) -> StepResult:
        self.status.format_errors += step.format_errors
        observation = self.format_tool_response(step.results)
        if step.messages:
            observation.messages.extend(step.messages)
        info = step.info
        info["format_errors"] = step.format_errors
        if "calls" not in info and step.results:  # the calls that ran (named, not rejected): collapse metrics
            info["calls"] = [r.name for r in step.results if isinstance(r, ToolResult) and r.name and not r.error]
        if not step.done:
            return StepResult(observation, step.reward, False, info, None, step.sampling)
        return self._end(observation, step.reward, info, step.format_errors)

    def _end(self, observation: Observation, reward: float, info: dict[str, Any], step_errors: int) -> StepResult:
        status = self.status
        status.running = False
        if status.stop_reason is None:
            status.stop_reason = StopReason.DONE
        outcome = self.outcome()
        episode = EpisodeInfo(  # the fields in order (accuracy, progress, format_errors, num_steps, num_calls,
            # turns_completed, stop_reason, extras, tool_errors, error), positionally: one per episode
            float(outcome.accuracy), float(outcome.accuracy if outcome.progress is None else outcome.progress),
            status.format_errors, status.num_steps, status.num_calls, status.turns_completed, status.stop_reason,
            dict(outcome.extras), status.tool_errors, status.error,
        )
        merged = episode.as_dict()
        merged.update(info)
        merged["format_errors"] = step_errors
        return StepResult(observation, reward + float(outcome.reward), True, merged, episode)


class CallToolEnv(BaseToolEnv):
    """The tier for envs that answer call by call (the calculator, a remote tool server): write ``call_tool`` (one
    decoded call in, a :class:`ToolResult` out; plain or ``async``) and, if an answer should not simply end the
    episode, ``on_answer``. Its ``act`` takes the step's decoded calls in order:

    * ``refuse(call)`` first (default: checked against ``call_schemas`` when the env gives them: an unknown tool,
      or arguments its schema rejects); a refused call is answered with why, a format error, and not run;
    * then ``call_tool(call)``; a result with ``error=True`` is a format error, one with ``done=True`` ends the turn
      and the episode (:meth:`Step.end_turn`; the later calls are not run, counted in ``info["calls_not_run"]``);
    * a ``call_tool`` that raises :class:`~agent_tune.errors.BackendGoneError` (or the time-limit rule's
      :class:`~agent_tune.sync.EnvTimeoutError`) ends the episode through :meth:`Step.fail` (stop reason
      ``StopReason.of(exc)``); the later calls are not run;
    * every block that could not be decoded is answered with its reason (a format error).

    An ``async def call_tool`` runs on the process's background event loop (:func:`agent_tune.sync.background_loop`,
    where remote connections live), the step's calls bounded as a whole by
    :func:`~agent_tune.envs.time_limits.step_time_limit` of ``call_timeout`` (a backstop: each call has its own
    bound in the env's transport); a plain one runs in a worker thread with the whole step (the env bounds what
    it waits on). An env that keeps its own record of a step (a transcript) writes ``act`` around the tier's:
    ``await super().act(step)`` when ``call_tool`` is async, ``super().act(step)`` when it is plain."""

    # tool name -> the JSON schema of its arguments (``None``: every call reaches ``call_tool``)
    call_schemas: Mapping[str, Mapping[str, Any]] | None = None
    call_timeout: float = DEFAULT_CALL_TIMEOUT  # seconds for one call: an async step is bounded from it

    _async_calls: ClassVar[bool] = False  # call_tool is a coroutine function (set per subclass)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._async_calls = inspect.iscoroutinefunction(cls.call_tool)
        cls._async_act = cls._async_act or cls._async_calls  # act then returns the coroutine of the calls

    @abstractmethod
    def call_tool(self, call: ToolCall) -> ToolResult | Awaitable[ToolResult]:
        """Run one decoded call (``async def`` allowed); raise :class:`~agent_tune.errors.BackendGoneError` when
        the backend is gone (``timed_out``: no answer in time)."""

    def refuse(self, call: ToolCall) -> str | None:
        """Why ``call`` is answered without running it (the text the policy reads; a format error), or ``None``:
        by default, a tool not in ``call_schemas`` or arguments its schema rejects (nothing without schemas)."""
        return None if self.call_schemas is None else refusal(call, self.call_schemas)

    def on_answer(self, step: Step) -> None:
        """The policy answered without a call: by default its turn is done and so is the episode."""
        step.end_turn()

    def _refused(self, step: Step, call: ToolCall) -> bool:
        """Whether :meth:`refuse` refuses ``call``; a refusal is the call's result and a format error."""
        refused = self.refuse(call)
        if refused is None:
            return False
        step.format_errors += 1
        step.results.append(ToolResult(refused, call.name, error=True))
        return True

    def act(self, step: Step) -> Awaitable[None] | None:
        if self._async_calls:
            return self._act_async(step)
        if step.answer:
            self.on_answer(step)
            return None
        calls = step.parsed.calls
        for i, call in enumerate(calls):
            if self._refused(step, call):
                continue
            try:
                result = self.call_tool(call)
            except (BackendGoneError, EnvTimeoutError) as exc:
                _backend_gone(step, call, exc)
                return None
            if _answered(step, result, len(calls) - i - 1):
                return None
        step.answer_undecodable()
        return None

    async def _act_async(self, step: Step) -> None:
        if step.answer:
            self.on_answer(step)
            return
        seconds = step_time_limit(self.call_timeout, len(step.parsed.calls))
        try:  # a backstop: each call has its own bound
            await on_background_loop(self._acalls(step), seconds, f"{self._name()} step")
        except EnvTimeoutError as exc:
            if not step.done:
                step.fail(StopReason.TIMEOUT, str(exc))
            return
        if not step.done:
            step.answer_undecodable()

    async def _acalls(self, step: Step) -> None:
        """The step's calls, in order, on the background loop (:meth:`act`'s rules)."""
        calls = step.parsed.calls
        for i, call in enumerate(calls):
            if self._refused(step, call):
                continue
            try:
                result = await self.call_tool(call)  # type: ignore[misc]
            except (BackendGoneError, EnvTimeoutError) as exc:
                _backend_gone(step, call, exc)
                return
            if _answered(step, result, len(calls) - i - 1):
                return


def _answered(step: Step, result: ToolResult, rest: int) -> bool:
    """Add a call's result to ``step``; True when it ended the episode (``done``: the ``rest`` calls not run)."""
    step.format_errors += result.error
    step.results.append(result)
    if not result.done:
        return False
    if rest:
        step.info["calls_not_run"] = rest
    step.end_turn()
    return True


def _backend_gone(step: Step, call: ToolCall, exc: BaseException) -> None:
    """End the episode on a backend gone (or a call with no answer in time) while running ``call``."""
    why, reason = str(exc), StopReason.of(exc)
    reply = f"Error: {why}" if reason is StopReason.TIMEOUT else f"Error: the environment server stopped ({why})"
    step.fail(reason, why, ToolResult(reply, call.name))


class WholeTextEnv(BaseToolEnv):
    """The tier for envs that act on the whole generation (another framework's env that parses its own text, a
    game): no tool parsing (``extract_tool_calls`` gives the whole text as ``content``; an env with tools may still
    parse), every generation reaches ``act`` (``is_answer`` is never true), and ``max_steps`` is applied *after*
    ``act``: the generation that reaches it is always read, and ends the episode (``step_limit``) unless ``act``
    ended it first."""

    _limit_after_act = True

    def extract_tool_calls(self, raw_response: str) -> ParsedResponse:
        return ParsedResponse(content=raw_response)

    def is_answer(self, raw_response: str) -> bool:
        return False
