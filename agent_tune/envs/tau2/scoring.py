"""Score a finished tau2 episode with tau2's own evaluator.

``evaluate_simulation(..., evaluation_type=ALL)`` as ``tau2 run`` calls it: the product of the components
in the task's ``reward_basis`` (database state, env assertions, actions, communicated info); a run that
did not end by a stop signal scores 0. NL assertions need an LLM judge: a task whose basis counts them
(``NL_ASSERTION``; none of tau2's shipped tasks does) is judged by tau2's NL-assertion evaluator through the
configured judge endpoint (:mod:`agent_tune.envs.tau2.judge`, ``ALL_WITH_NL_ASSERTIONS``); with no judge
configured such a task scores 0 with the reason recorded (tau2's evaluator refuses it too).
"""

from __future__ import annotations

from typing import Any

from tau2.data_model.simulation import RewardInfo, SimulationRun
from tau2.data_model.tasks import Task
from tau2.evaluator.evaluator import EvaluationType, evaluate_simulation

from agent_tune.envs.tau2.judge import JudgeConfig, Judged, judged, needs_judge


def score_simulation(simulation: SimulationRun, task: Task, domain: str,
                     judge: JudgeConfig | None = None) -> Judged:
    """tau2's ``RewardInfo`` for ``simulation`` (also stored in ``simulation.reward_info``), or ``None`` and
    the error: tau2 raises when a recorded tool result differs from a re-execution (a bug here, never the
    policy's doing, so it is reported, not hidden); a judge that gave no usable verdict after its retries;
    a task that needs a judge when none is configured. ``failures`` lists the judge's failed tries."""
    if needs_judge(task) and judge is not None:
        out = judged(simulation, task, domain, judge)
    elif needs_judge(task) and simulation.termination_reason.value in ("agent_stop", "user_stop"):
        out = Judged(None, f"task {task.id!r} counts NL assertions in its reward (reward_basis has NL_ASSERTION) "
                           "and no judge is configured (env option judge.base_url / judge.model)")
    else:
        try:
            out = Judged(evaluate_simulation(simulation=simulation, task=task, evaluation_type=EvaluationType.ALL,
                                             solo_mode=False, domain=domain))
        except Exception as exc:  # noqa: BLE001 - reported in the episode's info, never crashes the trainer
            out = Judged(None, f"{type(exc).__name__}: {exc}")
    if out.info is not None:
        simulation.reward_info = out.info
    return out


def progress(info: RewardInfo | None) -> float:
    """The fraction of the task's reward components met (``reward_breakdown``: 1.0 or 0.0 each); the reward
    itself when the evaluator gives no breakdown (no criteria, or a premature end)."""
    if info is None:
        return 0.0
    parts = list((info.reward_breakdown or {}).values())
    return float(sum(parts) / len(parts)) if parts else float(info.reward)


def reward_summary(info: RewardInfo | None) -> dict[str, Any]:
    """Flat, loggable numbers of a ``RewardInfo``, one naming scheme keyed by tau2's reward components
    (``RewardType``, lower case: ``db``, ``env_assertion``, ``nl_assertion``, ``action``, ``communicate``):
    ``tau2_reward_<component>`` the component's reward (its breakdown) and ``tau2_met_<component>`` the
    fraction of its checks met."""
    if info is None:
        return {}
    out: dict[str, Any] = {f"tau2_reward_{str(getattr(k, 'value', k)).lower()}": float(v)
                           for k, v in (info.reward_breakdown or {}).items()}
    for name, checks in (("communicate", info.communicate_checks), ("action", info.action_checks),
                         ("env_assertion", info.env_assertions), ("nl_assertion", info.nl_assertions)):
        if checks:
            out[f"tau2_met_{name}"] = sum(1 for c in checks if getattr(c, "met", getattr(c, "action_match", False))
                                          ) / len(checks)
    return out
