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

from dataclasses import dataclass, fields
from typing import Any, Mapping

LENGTH_MODES = ("none", "fixed", "scheduled")
SCALES = ("default", "max1", "two_stage", "smooth")
GRANULARITIES = ("default", "finegrained", "intermediate", "coarse")
MATCHINGS = ("toolrl", "optimal")
NO_CALL_TASKS = ("scored", "ignored")
_CHOICES = {"length": LENGTH_MODES, "scale": SCALES, "granularity": GRANULARITIES, "matching": MATCHINGS,
            "no_call_tasks": NO_CALL_TASKS}


@dataclass(frozen=True)
class ToolRLRewardConfig:
    """Which ToolRL reward variant to compute, and its parameters (defaults: ToolRL's own numbers).

    Raises ``ValueError`` naming the key (``reward.<field>``) and the allowed values on a bad value.
    """

    length: str = "none"  # none | fixed | scheduled
    length_target: int = 512  # fixed: words of reasoning that earn the whole length reward
    length_target_start: int = 384  # scheduled: the target at step 0 ...
    length_target_end: int = 640  # ... growing linearly to this at the horizon
    length_schedule_steps: int | None = None  # scheduled: the horizon; None: total_training_steps (ToolRL: 105)
    scale: str = "default"  # default | max1 | two_stage | smooth
    two_stage_step: int = 30  # two_stage: the first step of the second stage
    smooth_schedule_steps: int | None = 150  # smooth: the horizon (ToolRL's constant); None: total_training_steps
    granularity: str = "default"  # default | finegrained | intermediate | coarse
    # toolrl: ToolRL's code's matching (users switching from ToolRL get its numbers) | optimal: order-free, best
    # one-to-one pairing, for tasks whose parallel calls may come in any order (a reordering is not penalised)
    matching: str = "toolrl"
    no_call_tasks: str = "scored"  # scored | ignored
    total_training_steps: int | None = None  # the trainer's, for the schedules' default horizon

    def __post_init__(self) -> None:
        for key, allowed in _CHOICES.items():
            value = getattr(self, key)
            if value not in allowed:
                raise ValueError(f"reward.{key}={value!r} is not one of {', '.join(allowed)}")
        for key in ("length_target", "length_target_start", "length_target_end"):
            _check_int(key, getattr(self, key), minimum=1)
        _check_int("two_stage_step", self.two_stage_step, minimum=0)
        for key in ("length_schedule_steps", "smooth_schedule_steps", "total_training_steps"):
            if getattr(self, key) is not None:
                _check_int(key, getattr(self, key), minimum=1)
        if self.length == "scheduled" and self._horizon(self.length_schedule_steps) is None:
            raise ValueError("reward.length=scheduled needs a horizon: reward.length_schedule_steps, or "
                             "reward.total_training_steps (the configs pass ${trainer.total_training_steps})")
        if self.scale == "smooth" and self._horizon(self.smooth_schedule_steps) is None:
            raise ValueError("reward.scale=smooth needs a horizon: reward.smooth_schedule_steps, or "
                             "reward.total_training_steps (the configs pass ${trainer.total_training_steps})")

    @classmethod
    def from_mapping(cls, value: Mapping[str, Any] | ToolRLRewardConfig | None) -> ToolRLRewardConfig:
        """Build from a config mapping (Hydra's ``reward: {...}``); ``None`` gives the defaults."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise ValueError(f"reward must be a mapping of {', '.join(f.name for f in fields(cls))}, "
                             f"got {type(value).__name__}")
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(value) - set(known))
        if unknown:
            raise ValueError(f"reward.{unknown[0]} is not a reward option; known: {', '.join(known)}")
        return cls(**dict(value))

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


def _check_int(key: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"reward.{key}={value!r} must be an integer >= {minimum}")
