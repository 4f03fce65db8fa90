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

from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from agent_tune.utils.config_checks import reject_unknown_keys

COMPONENTS: tuple[str, ...] = ("action", "communicate", "env_assertion", "db")
KNOWN_DOMAINS: tuple[str, ...] = ("mock", "airline", "retail", "telecom")
PREFIX = "reward_shaping"


def _number(key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{PREFIX}.{key}={value!r} must be a number")
    if value < 0:
        raise ValueError(f"{PREFIX}.{key}={value!r} must be >= 0")
    return float(value)


@dataclass(frozen=True)
class PartialWeights:
    """Weights of the partial-score components (renormalised over those present)."""

    action: float = 0.5
    communicate: float = 0.15
    env_assertion: float = 0.35
    db: float = 0.0

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | PartialWeights, key: str) -> PartialWeights:
        """From a mapping (unknown names and bad numbers fail, naming ``reward_shaping.<key>.<name>``)."""
        if isinstance(raw, PartialWeights):
            return raw
        if not isinstance(raw, Mapping):
            raise ValueError(f"{PREFIX}.{key} must be a mapping of {', '.join(COMPONENTS)}, got {raw!r}")
        unknown = sorted(set(raw) - set(COMPONENTS))
        if unknown:
            raise ValueError(f"{PREFIX}.{key}: unknown component(s) {', '.join(map(str, unknown))} "
                             f"(known: {', '.join(COMPONENTS)})")
        values = {name: _number(f"{key}.{name}", raw[name]) for name in raw}
        weights = cls(**values)
        if sum(weights.as_dict().values()) <= 0:
            raise ValueError(f"{PREFIX}.{key}: the weights must not all be 0")
        return weights

    def as_dict(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in COMPONENTS}


def _default_domain_alpha() -> dict[str, float]:
    return {"retail": 0.8, "airline": 1.0, "telecom": 1.6}


def _default_domain_weights() -> dict[str, PartialWeights]:
    return {"telecom": PartialWeights(action=0.35, communicate=0.35, env_assertion=0.30, db=0.0)}


@dataclass(frozen=True)
class Tau2ShapingConfig:
    """tau2 reward shaping (defaults: the pipeline's, with ``alpha=0``: shaping off until a config sets it).

    Raises ``ValueError`` naming the key on a bad value.
    """

    alpha: float = 0.0  # the pipeline's recipe: 0.25
    domain_adaptive: bool = True  # alpha x domain_alpha[domain] (a domain not listed: x 1.0)
    domain_alpha: Mapping[str, float] = field(default_factory=_default_domain_alpha)
    weights: PartialWeights = field(default_factory=PartialWeights)
    domain_weights: Mapping[str, PartialWeights] = field(default_factory=_default_domain_weights)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any] | Tau2ShapingConfig | None) -> Tau2ShapingConfig:
        """Build from a config mapping (Hydra's ``reward_shaping:`` block); ``None``: the defaults."""
        if raw is None:
            return cls()
        if isinstance(raw, Tau2ShapingConfig):
            return raw
        if not isinstance(raw, Mapping):
            raise ValueError(f"{PREFIX} must be a mapping, got {raw!r}")
        reject_unknown_keys(PREFIX, raw, (f.name for f in fields(cls)))
        kwargs: dict[str, Any] = {}
        if "alpha" in raw:
            kwargs["alpha"] = _number("alpha", raw["alpha"])
        if "domain_adaptive" in raw:
            if not isinstance(raw["domain_adaptive"], bool):
                raise ValueError(f"{PREFIX}.domain_adaptive={raw['domain_adaptive']!r} must be true or false")
            kwargs["domain_adaptive"] = raw["domain_adaptive"]
        if "domain_alpha" in raw:
            kwargs["domain_alpha"] = {d: _number(f"domain_alpha.{d}", v)
                                      for d, v in _domains("domain_alpha", raw["domain_alpha"]).items()}
        if "weights" in raw:
            kwargs["weights"] = PartialWeights.from_mapping(raw["weights"], "weights")
        if "domain_weights" in raw:
            kwargs["domain_weights"] = {d: PartialWeights.from_mapping(v, f"domain_weights.{d}")
                                        for d, v in _domains("domain_weights", raw["domain_weights"]).items()}
        return cls(**kwargs)

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


def _domains(key: str, raw: Any) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise ValueError(f"{PREFIX}.{key} must be a mapping of domain -> value, got {raw!r}")
    unknown = sorted(set(raw) - set(KNOWN_DOMAINS))
    if unknown:
        raise ValueError(f"{PREFIX}.{key}: unknown domain(s) {', '.join(map(str, unknown))} "
                         f"(known: {', '.join(KNOWN_DOMAINS)})")
    return raw


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
