"""Shaped training reward for tau2-bench: tau2's task reward + alpha x a partial score.

The scheme is Tau2-RL-Pipeline's (jbarnes850, its ``tau2_rl_pipeline/reward.py`` and the partial score
of its ``env.py``; the earlier ``slime-tau2-warmup/tau2_reward_shaping.py`` is the same idea with other
weights). tau2's reward is all-or-nothing (the product of the task's reward-basis components), which gives
GRPO no signal while a policy solves nothing; the partial score credits the parts of a task done right:

* the components, each a fraction in [0, 1], taken from tau2's ``RewardInfo`` of the episode:
  ``action`` (gold actions matched, ``action_checks[].action_match``), ``communicate`` (information the
  user had to be told, ``communicate_checks[].met``), ``env_assertion`` (``env_assertions[].met``) and
  ``db`` (``db_check.db_match``, 1 or 0);
* a component enters only when tau2 produced it for the task (a task with no gold actions has no
  ``action`` part), and the weights are renormalised over the components present: partial =
  sum(w_c * s_c) / sum(w_c). No component (tau2 scored nothing: a premature end, no criteria, the user
  failed): partial = 0;
* the weights (the pipeline's defaults): action 0.5, communicate 0.15, env_assertion 0.35, db 0.0; the
  pipeline's "telecom communication boost" replaces them in telecom by action 0.35, communicate 0.35,
  env_assertion 0.30, db 0.0 (``domain_weights``);
* alpha: ``alpha`` (0.25 in the pipeline's recipe) times a per-domain multiplier when ``domain_adaptive``
  (retail 0.8, airline 1.0, telecom 1.6: telecom's dual control makes the final state harder to reach).

The shaped reward is ``tau2_reward + alpha_domain * partial``; tau2's own reward stays the episode's
accuracy. The pipeline reads these numbers from environment variables; here they are
:class:`Tau2ShapingConfig`, checked when built (a bad value names its key, ``reward_shaping.<field>``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from pydantic import Field, model_validator

from agent_tune.utils.typed_config import ConfigModel, OptionError

KNOWN_DOMAINS: tuple[str, ...] = ("mock", "airline", "retail", "telecom")


class PartialWeights(ConfigModel):
    """Weights of the partial-score components (renormalised over those present), each >= 0, not all 0."""

    action: float = 0.5
    communicate: float = 0.15
    env_assertion: float = 0.35
    db: float = 0.0

    @model_validator(mode="after")
    def _in_range(self) -> PartialWeights:
        for name, weight in self.as_dict().items():
            if weight < 0:
                raise OptionError(name, f"{weight!r} must be >= 0")
        if sum(self.as_dict().values()) <= 0:
            raise OptionError("", "the weights must not all be 0")
        return self

    def as_dict(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in COMPONENTS}


COMPONENTS: tuple[str, ...] = tuple(PartialWeights.model_fields)


def _default_domain_alpha() -> dict[str, float]:
    return {"retail": 0.8, "airline": 1.0, "telecom": 1.6}


def _default_domain_weights() -> dict[str, PartialWeights]:
    return {"telecom": PartialWeights(action=0.35, communicate=0.35, env_assertion=0.30, db=0.0)}


class Tau2ShapingConfig(ConfigModel):
    """tau2 reward shaping, the env's ``reward_shaping`` block (defaults: the pipeline's, with ``alpha=0``:
    shaping off until a config sets it). :meth:`parse` it at ``reward_shaping``; a bad value names its key."""

    unknown_key_problem = "unknown key(s) {key} (known: {known})"

    alpha: float = 0.0  # the pipeline's recipe: 0.25
    domain_adaptive: bool = True  # alpha x domain_alpha[domain] (a domain not listed: x 1.0)
    domain_alpha: dict[str, float] = Field(default_factory=_default_domain_alpha)
    weights: PartialWeights = Field(default_factory=PartialWeights)
    domain_weights: dict[str, PartialWeights] = Field(default_factory=_default_domain_weights)

    @model_validator(mode="after")
    def _in_range(self) -> Tau2ShapingConfig:
        if self.alpha < 0:
            raise OptionError("alpha", f"{self.alpha!r} must be >= 0")
        for key in ("domain_alpha", "domain_weights"):
            unknown = sorted(set(getattr(self, key)) - set(KNOWN_DOMAINS))
            if unknown:
                raise OptionError(key, f"unknown domain(s) {', '.join(unknown)} (known: {', '.join(KNOWN_DOMAINS)})")
        for domain, alpha in self.domain_alpha.items():
            if alpha < 0:
                raise OptionError(f"domain_alpha.{domain}", f"{alpha!r} must be >= 0")
        return self

    @property
    def enabled(self) -> bool:
        return self.alpha > 0

    def alpha_for(self, domain: str | None) -> float:
        """alpha for an episode of ``domain`` (times the domain's multiplier when ``domain_adaptive``)."""
        if not self.domain_adaptive or not domain:
            return self.alpha
        return self.alpha * float(self.domain_alpha.get(domain, 1.0))

    def weights_for(self, domain: str | None) -> PartialWeights:
        return self.domain_weights.get(domain or "", self.weights)


def _as_dict(reward_info: Any) -> dict[str, Any]:
    if reward_info is None:
        return {}
    if isinstance(reward_info, Mapping):
        return dict(reward_info)
    dump = getattr(reward_info, "model_dump", None)  # tau2's RewardInfo (pydantic)
    return dump(mode="json") if callable(dump) else {}


def partial_components(reward_info: Any) -> dict[str, float]:
    """The components tau2 produced for an episode (``RewardInfo`` or its JSON), each a fraction met."""
    info = _as_dict(reward_info)
    out: dict[str, float] = {}
    for name, key, flag in (("action", "action_checks", "action_match"), ("communicate", "communicate_checks", "met"),
                            ("env_assertion", "env_assertions", "met")):
        checks = info.get(key) or []
        if checks:
            out[name] = sum(1 for c in checks if (c or {}).get(flag)) / len(checks)
    db = info.get("db_check")
    if isinstance(db, Mapping) and "db_match" in db:
        out["db"] = 1.0 if db.get("db_match") else 0.0
    return out


def partial_score(reward_info: Any, weights: PartialWeights) -> float:
    """The weighted mean of the components present, weights renormalised over them (0 when none)."""
    parts = partial_components(reward_info)
    w = weights.as_dict()
    total = sum(w[name] for name in parts)
    if not parts or total <= 0:
        return 0.0
    return sum(w[name] * score for name, score in parts.items()) / total


@dataclass(frozen=True)
class ShapedReward:
    """One episode's shaped reward and its parts."""

    reward: float  # task_reward + alpha * partial
    task_reward: float  # tau2's
    partial: float
    alpha: float
    components: dict[str, float]


def shape_reward(task_reward: float, reward_info: Any, domain: str | None, config: Tau2ShapingConfig) -> ShapedReward:
    """tau2's ``task_reward`` plus ``config``'s alpha for ``domain`` times the partial score of
    ``reward_info`` (tau2's ``RewardInfo`` of the episode, or ``None`` when it was not scored)."""
    components = partial_components(reward_info)
    partial = partial_score(reward_info, config.weights_for(domain))
    alpha = config.alpha_for(domain)
    return ShapedReward(float(task_reward) + alpha * partial, float(task_reward), partial, alpha, components)
