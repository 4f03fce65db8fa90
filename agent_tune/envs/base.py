"""The environment contract every tool environment implements.

An environment owns one episode. ``reset(**task)`` starts it and returns the first observation;
``step(raw_response)`` takes the policy's raw text for one generation and returns what the
environment answers. Environments never raise on model output: a malformed call becomes an
observation the model can read and a counted format error.

Every ``step`` is the same three moves, each a method of the contract:

    parsed  = self.extract_tool_calls(raw_response)     # text -> calls (the configured parser)
    results = <run the calls>                           # the env's own tools / backend
    obs     = self.format_tool_response(results)        # results -> what the policy reads next

and ``stop(raw_response)`` says whether the policy has finished acting (no call to run), which is
where a turn ends. ``batch_step`` steps many episodes of one env class together: the episode runner
sends every step through it (:mod:`agent_tune.rollout.step_batcher`), off the event loop, so an env
with a parallel backend (ReTool's sandbox pool) runs concurrent episodes' tools in parallel.

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
from typing import Any, ClassVar, Literal, Mapping, Sequence, TypedDict

from agent_tune.parsing.types import ParsedResponse

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


@dataclass
class StepResult:
    """The outcome of one ``step``: the next observation, the reward, whether the episode ended,
    and a dict of diagnostics (final metrics such as ``accuracy`` appear when ``done``).

    ``info["format_errors"]`` counts the errors of this step alone while the episode goes on, and the
    episode's total in the step that ends it (:class:`EpisodeInfo`)."""

    observation: Observation
    reward: float
    done: bool
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one call, as :meth:`BaseToolEnv.format_tool_response` receives it.

    ``content`` is the text the policy reads, ``name`` the function it answers (``None`` for a block
    that could not be decoded), ``error`` whether the call failed or was rejected.
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


class EpisodeInfo(TypedDict, total=False):
    """The ``info`` of the step that ends an episode (or of ``finalize``): the keys every env fills.

    ``accuracy`` 1.0 iff the task is solved by the env's own criterion; ``progress`` the fraction of
    it done, in [0, 1]; ``format_errors`` malformed or rejected call blocks; ``num_steps`` the env
    steps (generations the env consumed); ``num_calls`` the tool calls decoded (run or rejected);
    ``turns_completed`` the user turns the policy finished (a *turn* is always a user turn: one
    question and every generation answering it); ``truncated`` / ``finalize_reason`` when the episode
    was ended from outside (:meth:`BaseToolEnv.finalize`). Environments add their own keys.
    """

    accuracy: float
    progress: float
    format_errors: int
    num_steps: int
    num_calls: int
    turns_completed: int
    truncated: bool
    finalize_reason: str


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


class EnvStateError(RuntimeError):
    """A contract method called out of order (``step`` before ``reset`` or after the episode ended)."""


class BaseToolEnv(ABC):
    """Base class of all tool environments (one instance = one episode).

    Subclasses set ``description`` (one line, shown by ``agent-tune envs``) and implement ``reset``,
    ``step`` (as ``extract_tool_calls`` -> run -> ``format_tool_response``), ``extract_tool_calls`` and
    ``format_tool_response``; they may override ``stop``, ``batch_step``, ``finalize`` and ``close``.
    ``step`` and ``finalize`` raise :class:`EnvStateError` when no episode is running. Check a new
    environment with :func:`agent_tune.envs.check_env`.
    """

    description: ClassVar[str] = ""
    sampler_hints: ClassVar[SamplerHints] = SamplerHints()
    # True when ``reset`` waits on something slow (tau2 asks its simulated user for the first message): the
    # runner then calls it in a worker thread, so it does not stall the other episodes on the event loop.
    blocking_reset: ClassVar[bool] = False
    global_step: int | None = None  # the trainer step playing this episode; None outside training

    @classmethod
    def check_kwargs(cls, kwargs: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` naming the option when constructor ``kwargs`` (a config's ``env_kwargs``
        entry) are invalid, before any episode starts; the launcher calls it at start-up. Default: every key
        is a constructor parameter (an env whose construction is cheap constructs itself, checking values too)."""
        try:
            inspect.signature(cls.__init__).bind(None, **kwargs)
        except TypeError as exc:
            raise ValueError(f"{cls.__name__}: {exc}") from None

    def set_global_step(self, step: int | None) -> None:
        """Record the trainer's global step for the episode about to start (the runner calls it before
        ``reset``; see the module docstring). ``None``: not training."""
        self.global_step = None if step is None else int(step)

    @abstractmethod
    def reset(self, **task: Any) -> Observation:
        """Start an episode for ``task`` and return the first observation."""

    @abstractmethod
    def step(self, raw_response: str) -> StepResult:
        """Consume the policy's raw text for one generation; never raises on model output."""

    @abstractmethod
    def extract_tool_calls(self, raw_response: str) -> ParsedResponse:
        """Decode the tool calls (and the failed call blocks) in ``raw_response``."""

    @abstractmethod
    def format_tool_response(self, results: Sequence[Any]) -> Observation:
        """Turn tool results into the observation shown to the policy."""

    def stop(self, raw_response: str) -> bool:
        """True if ``raw_response`` has no call to run (the policy has finished acting): by default,
        no tool-call block at all, valid or not."""
        return not self.extract_tool_calls(raw_response).has_tool_call_attempt

    @classmethod
    def batch_step(cls, envs: Sequence["BaseToolEnv"], raw_responses: Sequence[str]) -> list[StepResult]:
        """Step many independent episodes at once (``envs[i]`` receives ``raw_responses[i]``).

        The default steps them in order; environments with a parallel backend override it. The
        episode runner calls this (through :class:`agent_tune.rollout.step_batcher.StepBatcher`) in a
        worker thread, so it may block.
        """
        if len(envs) != len(raw_responses):
            raise ValueError(f"batch_step got {len(envs)} envs and {len(raw_responses)} responses")
        return [env.step(r) for env, r in zip(envs, raw_responses)]

    def finalize(self, reason: str = "truncated") -> StepResult:
        """End the episode now (the runner ran out of token budget) and return its final result.

        Environments with partial credit override this to score what was done so far; the default
        ends with reward 0.
        """
        return StepResult(Observation(), 0.0, True, {"truncated": True, "finalize_reason": reason})

    def close(self) -> None:
        """Release whatever the episode holds. Safe to call twice."""
