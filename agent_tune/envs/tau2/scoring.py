"""Score a finished tau2 episode with tau2's own evaluator.

``evaluate_simulation(..., evaluation_type=ALL)`` as ``tau2 run`` calls it: the product of the components
in the task's ``reward_basis`` (database state, env assertions, actions, communicated info); a run that
did not end by a stop signal scores 0. NL assertions need an LLM judge and are in no task's basis; they
are not evaluated here (a task whose basis asks for them raises in tau2's evaluator, which
:func:`score_simulation` reports as reward 0 with the reason).
"""

from __future__ import annotations

from typing import Any

from tau2.data_model.simulation import RewardInfo, SimulationRun
from tau2.data_model.tasks import Task
from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation


def score_simulation(simulation: SimulationRun, task: Task, domain: str) -> tuple[RewardInfo | None, str | None]:
    """tau2's ``RewardInfo`` for ``simulation`` (also stored in ``simulation.reward_info``), or ``None`` and
    the evaluator's error (tau2 raises when a recorded tool result differs from a re-execution: a bug here,
    never the policy's doing, so it is reported, not hidden)."""
    try:
        info = evaluate_simulation(simulation=simulation, task=task, evaluation_type=EvaluationType.ALL,
                                   solo_mode=False, domain=domain)
    except Exception as exc:  # noqa: BLE001 - reported in the episode's info, never crashes the trainer
        return None, f"{type(exc).__name__}: {exc}"
    simulation.reward_info = info
    return info, None


def progress(info: RewardInfo | None) -> float:
    """The fraction of the task's reward components met (``reward_breakdown``: 1.0 or 0.0 each); the reward
    itself when the evaluator gives no breakdown (no criteria, or a premature end)."""
    if info is None:
        return 0.0
    parts = list((info.reward_breakdown or {}).values())
    return float(sum(parts) / len(parts)) if parts else float(info.reward)


def reward_summary(info: RewardInfo | None) -> dict[str, Any]:
    """Flat, loggable numbers of a ``RewardInfo``: the breakdown per component (``tau2_db``...), and the
    checks met (``tau2_communicate_met``, ``tau2_actions_met`` as fractions)."""
    if info is None:
        return {}
    out: dict[str, Any] = {f"tau2_{str(getattr(k, 'value', k)).lower()}": float(v)
                           for k, v in (info.reward_breakdown or {}).items()}
    for name, checks in (("communicate", info.communicate_checks), ("actions", info.action_checks),
                         ("env_assertions", info.env_assertions)):
        if checks:
            out[f"tau2_{name}_met"] = sum(1 for c in checks if getattr(c, "met", getattr(c, "action_match", False))
                                          ) / len(checks)
    return out
