"""ToolRL's reward variants as typed configuration (Qian et al., 2025, arXiv 2504.13958, Section 5).

ToolRL switches its variants with environment variables read inside its reward module; here each is a
field of :class:`ToolRLRewardConfig`, validated when built, and every step-dependent formula is a method
of it taking the trainer's global step (``None`` outside training: read as step 0, where ToolRL's
reward starts). The variants, each with ToolRL's variable:

* ``length`` (Section 5.1): ``none``; ``fixed`` (``WITHLENGTH``); ``scheduled`` (``WITHLENGTH`` +
  ``SCHEDULELENGTH``);
* ``scale`` (Section 5.2): ``default`` (Section 3.3); ``max1`` (``CORRECTMAX1``); ``two_stage``
  (``MAX1STEP30MAX3``); ``smooth`` (``SCHEDULEREWARD``);
* ``granularity`` (Section 5.3): ``default`` (Section 3.3); ``finegrained`` (``REFINEDREWARD``);
  ``intermediate`` (``INTERMEDIATEREWARD``); ``coarse`` (``COARSEREWARD``): the matching itself lives in
  :func:`agent_tune.rewards.toolrl.match_calls`;
* ``matching``: how the calls are matched at any granularity: ``toolrl`` (default: ToolRL's code,
  ``match_score`` and ``compute_tool_call_reward`` in its ``rlla.py``: duplicate tool names count, calls
  paired greedily in ground-truth order, ordered lists in the finegrained and coarse variants) or
  ``optimal`` (order-free: name sets, the best one-to-one pairing, so reordered parallel calls are not
  penalised); see :mod:`agent_tune.rewards.toolrl`;
* ``no_call_tasks``: how a task whose answer calls no tool is scored: ``scored`` (agent-tune's default:
  the correctness maximum when the policy calls nothing too, the minimum otherwise) or ``ignored``
  (ToolRL's code: correctness 0 there, only the format reward speaks).

The schedules' horizon is ``total_training_steps`` (the trainer's, passed by the config as
``${trainer.total_training_steps}``) unless a ``*_schedule_steps`` field names one.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import ValidationError, ValidatorFunctionWrapHandler, model_validator

from agent_tune.utils.typed_config import ConfigModel, OptionError

LengthMode = Literal["none", "fixed", "scheduled"]
Scale = Literal["default", "max1", "two_stage", "smooth"]
Granularity = Literal["default", "finegrained", "intermediate", "coarse"]
Matching = Literal["toolrl", "optimal"]
NoCallTasks = Literal["scored", "ignored"]
GRANULARITIES: tuple[str, ...] = get_args(Granularity)  # match_calls checks its arguments against these
MATCHINGS: tuple[str, ...] = get_args(Matching)

# the least value of each integer option
_LEAST = {"length_target": 1, "length_target_start": 1, "length_target_end": 1, "length_schedule_steps": 1,
          "two_stage_step": 0, "smooth_schedule_steps": 1, "total_training_steps": 1}


class ToolRLRewardConfig(ConfigModel):
    """Which ToolRL reward variant to compute, and its parameters (defaults: ToolRL's own numbers); the toolcall
    env's ``reward`` option.

    A bad value is an :class:`OptionError` whose problem is worded as ToolRL's config has always worded it,
    naming the key (``reward.<field>=<value> ...``) and the allowed values.
    """

    unknown_key_problem = "reward.{key} is not a reward option; known: {known}"

    length: LengthMode = "none"
    length_target: int = 512  # fixed: words of reasoning that earn the whole length reward
    length_target_start: int = 384  # scheduled: the target at step 0 ...
    length_target_end: int = 640  # ... growing linearly to this at the horizon
    length_schedule_steps: int | None = None  # scheduled: the horizon; None: total_training_steps (ToolRL: 105)
    scale: Scale = "default"
    two_stage_step: int = 30  # two_stage: the first step of the second stage
    smooth_schedule_steps: int | None = 150  # smooth: the horizon (ToolRL's constant); None: total_training_steps
    granularity: Granularity = "default"
    # toolrl: ToolRL's code's matching (users switching from ToolRL get its numbers) | optimal: order-free, best
    # one-to-one pairing, for tasks whose parallel calls may come in any order (a reordering is not penalised)
    matching: Matching = "toolrl"
    no_call_tasks: NoCallTasks = "scored"
    total_training_steps: int | None = None  # the trainer's, for the schedules' default horizon

    @model_validator(mode="wrap")
    @classmethod
    def _in_toolrl_words(cls, data: Any, handler: ValidatorFunctionWrapHandler) -> ToolRLRewardConfig:
        """A refused choice, a non-integer or a non-mapping worded as ToolRL's config has always worded them."""
        try:
            return handler(data)
        except ValidationError as exc:
            reworded = _toolrl_problem(exc.errors(include_url=False)[0])
            if reworded is None:
                raise
            raise reworded from None

    @model_validator(mode="after")
    def _in_range(self) -> ToolRLRewardConfig:
        for key, least in _LEAST.items():
            value = getattr(self, key)
            if value is not None and value < least:
                raise OptionError(key, f"reward.{key}={value!r} must be an integer >= {least}")
        for key, mode, steps in (("length", "scheduled", "length_schedule_steps"),
                                 ("scale", "smooth", "smooth_schedule_steps")):
            if getattr(self, key) == mode and self._horizon(getattr(self, steps)) is None:
                raise OptionError(key, f"reward.{key}={mode} needs a horizon: reward.{steps}, or "
                                       "reward.total_training_steps (the configs pass ${trainer.total_training_steps})")
        return self

    # ------------------------------------------------------------------ the formulas, one each

    def correctness_range(self, step: int | None) -> tuple[float, float]:
        """``(min, max)`` of the correctness reward at ``step`` (Section 5.2, reward scale).

        ``default``: (-3, 3) (Section 3.3). ``max1`` (CORRECTMAX1, "equal max"): (-1, 1), the format
        reward's size. ``two_stage`` (MAX1STEP30MAX3): (-1, 1) before ``two_stage_step``, (-3, 3) from it
        on. ``smooth`` (SCHEDULEREWARD): (-(2 + p), 2 + p) with ``p`` the schedule's progress, so from
        (-2, 2) to (-3, 3).
        """
        if self.scale == "max1":
            return -1.0, 1.0
        if self.scale == "two_stage":
            return (-1.0, 1.0) if _step(step) < self.two_stage_step else (-3.0, 3.0)
        if self.scale == "smooth":
            p = self._progress(step, self.smooth_schedule_steps)
            return -(2.0 + p), 2.0 + p
        return -3.0, 3.0

    def format_range(self, step: int | None) -> tuple[float, float]:
        """``(min, max)`` of the format reward at ``step`` (Section 5.2: the scale variants move it too).

        ``default``, ``max1``: (0, 1) (Section 3.3). ``two_stage``: (0, 1) before ``two_stage_step``,
        (0, 0.5) from it on. ``smooth``: max ``2 - p`` (2 down to 1), min ``min(-1, -2 + 2p)`` (-2 up to -1,
        reached half-way): ToolRL's schedule makes a broken format cost up to 2 early on.
        """
        if self.scale == "two_stage" and _step(step) >= self.two_stage_step:
            return 0.0, 0.5
        if self.scale == "smooth":
            p = self._progress(step, self.smooth_schedule_steps)
            return min(-1.0, -2.0 + 2.0 * p), 2.0 - p
        return 0.0, 1.0

    def length_target_words(self, step: int | None) -> float:
        """Reasoning words that earn the whole length reward (Section 5.1).

        ``fixed`` (WITHLENGTH): ``length_target`` (512). ``scheduled`` (SCHEDULELENGTH): linear in the
        step from ``length_target_start`` (384) to ``length_target_end`` (640) over the horizon, held there
        after it (ToolRL's run ends at its horizon: 105 steps).
        """
        if self.length == "scheduled":
            p = self._progress(step, self.length_schedule_steps)
            return self.length_target_start + (self.length_target_end - self.length_target_start) * p
        return float(self.length_target)

    def length_reward(self, reasoning: str | None, step: int | None) -> float:
        """The length reward in [0, 1] (Section 5.1): ``min(1, round(words / target, 2))``, words counted by
        whitespace in the reasoning block; 0 without a reasoning block, and always 0 for ``length=none``."""
        if self.length == "none" or reasoning is None:
            return 0.0
        return min(1.0, round(len(reasoning.split()) / self.length_target_words(step), 2))

    def length_range(self) -> tuple[float, float]:
        """``(min, max)`` of the length reward."""
        return 0.0, (0.0 if self.length == "none" else 1.0)

    def reward_range(self, step: int | None) -> tuple[float, float]:
        """``(min, max)`` of the whole reward (format + correctness + length) at ``step``."""
        parts = (self.format_range(step), self.correctness_range(step), self.length_range())
        return sum(p[0] for p in parts), sum(p[1] for p in parts)

    # ------------------------------------------------------------------ helpers

    def _horizon(self, steps: int | None) -> int | None:
        return steps if steps is not None else self.total_training_steps

    def _progress(self, step: int | None, steps: int | None) -> float:
        """``step / horizon``, clipped to [0, 1]."""
        horizon = self._horizon(steps)
        assert horizon is not None  # checked at construction for the modes that read it
        return min(1.0, _step(step) / horizon)


def _step(step: int | None) -> int:
    """The trainer step a schedule reads: ``None`` (outside training) and negative steps read as 0."""
    return max(0, int(step)) if step is not None else 0


def _toolrl_problem(error: Any) -> OptionError | None:
    """pydantic's ``error`` of a reward config in ToolRL's words (``None``: the mechanism's own are right)."""
    kind, loc, value = error["type"], error["loc"], error.get("input")
    fields = ToolRLRewardConfig.model_fields
    if not loc:
        if kind in ("model_type", "model_attributes_type", "dict_type"):
            return OptionError("", f"reward must be a mapping of {', '.join(fields)}, got {type(value).__name__}")
        return None
    key = str(loc[0])
    if kind == "literal_error" and key in fields:
        return OptionError(key, f"reward.{key}={value!r} is not one of {', '.join(get_args(fields[key].annotation))}")
    if key in _LEAST and kind.startswith("int_"):
        return OptionError(key, f"reward.{key}={value!r} must be an integer >= {_LEAST[key]}")
    return None
