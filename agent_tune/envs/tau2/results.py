"""tau2-bench's reports in ``agent-tune eval``: its metrics (tau2's own code) and tau2's results format.

The ``tau2`` env's report (:data:`TAU2_REPORT`) is made of these. A record's category is its task's domain.
Each finished episode's record carries
tau2's ``SimulationRun`` as JSON (``tau2_simulation``: messages, termination, tau2's ``RewardInfo``, ``trial`` =
the sample), so the results jsonl stays the one incremental, resumable store; from it:

* :func:`build_results` makes tau2's ``Results`` per domain (``info``: trials, limits, the user and agent
  models; ``tasks``; ``simulations``), and :func:`write_tau2_results` saves them as
  ``<dir>/<domain>.json``: tau2's own tooling loads them (``Results.load``) and re-scores them
  (``tau2.scripts.evaluate_trajectories``); tau2's ``view_simulations`` shows them;
* :func:`tau2_metrics` is tau2's ``compute_metrics`` on those ``Results``: average reward and pass^k
  (tau2's ``pass_hat_k``, Yao et al. 2024: the chance that k trials of a task all succeed), per domain.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from agent_tune.envs.report import EvalReport


def episode_fields(env: Any, sample: int) -> dict[str, Any]:
    """What a tau2 record adds: tau2's ``SimulationRun`` of the episode (``trial`` = the sample) as JSON, its
    termination, and the user's failure if any."""
    fields = _simulation_fields(env, sample)
    episode = getattr(env, "episode", None)
    if episode is not None and episode.error_reason is not None and episode.termination.value == "user_error":
        fields["error"] = episode.error_reason
    return fields


def _simulation_fields(env: Any, sample: int) -> dict[str, Any]:
    sim = getattr(env, "simulation", None)
    if sim is None:
        return {}
    sim = sim.model_copy()
    sim.trial = sample
    if sim.reward_info is None:  # the evaluator failed (reported in the info): tau2's files need a reward
        from tau2.data_model.simulation import RewardInfo

        sim.reward_info = RewardInfo(reward=0.0, info={"note": "not scored"})
    return {"termination_reason": sim.termination_reason.value, "tau2_simulation": sim.model_dump(mode="json")}


def build_results(records: Iterable[Mapping[str, Any]], domain: str, meta: Mapping[str, Any] | None = None):
    """tau2's ``Results`` of ``domain``'s records (those with a ``tau2_simulation``)."""
    from tau2.data_model.simulation import AgentInfo, Info, Results, SimulationRun, UserInfo
    from tau2.run import get_environment_info
    from tau2.user.user_simulator import get_global_user_sim_guidelines

    from agent_tune.envs.tau2 import loader
    from agent_tune.envs.tau2.episode import DEFAULT_MAX_ERRORS, default_max_steps

    meta = dict(meta or {})
    env_kwargs = dict(meta.get("env_kwargs") or {})
    user = dict(env_kwargs.get("user") or {})
    sims = [SimulationRun.model_validate(r["tau2_simulation"]) for r in records
            if r.get("tau2_simulation") and r.get("category") == domain]
    task_ids = list(dict.fromkeys(s.task_id for s in sims))
    info = Info(
        git_commit="agent-tune",
        num_trials=int(meta.get("n") or max((s.trial or 0) + 1 for s in sims) if sims else 1),
        max_steps=int(env_kwargs.get("max_steps") or default_max_steps(env_kwargs.get("protocol", "native"))),
        max_errors=int(env_kwargs.get("max_errors", DEFAULT_MAX_ERRORS)),
        user_info=UserInfo(implementation=f"agent_tune_{user.get('kind', 'llm')}_user", llm=user.get("model"),
                           llm_args={k: user[k] for k in ("base_url", "temperature", "max_tokens") if k in user},
                           global_simulation_guidelines=get_global_user_sim_guidelines()),
        agent_info=AgentInfo(implementation="agent_tune", llm=meta.get("model"),
                             llm_args={k: meta[k] for k in ("base_url", "mode", "template", "tool_parser",
                                                            "temperature", "top_p", "top_k", "max_tokens")
                                       if k in meta}),
        environment_info=get_environment_info(domain, include_tool_info=False),
        seed=meta.get("seed"),
    )
    tasks = [loader.load_task(domain, t) for t in task_ids]
    return Results(info=info, tasks=tasks, simulations=sims)


def domains_of(records: Iterable[Mapping[str, Any]]) -> list[str]:
    return list(dict.fromkeys(str(r["category"]) for r in records if r.get("tau2_simulation")))


def write_tau2_results(records: Sequence[Mapping[str, Any]], out_dir: str | Path,
                       meta: Mapping[str, Any] | None = None) -> list[Path]:
    """``<out_dir>/<domain>.json`` in tau2's results format, one per domain present."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for domain in domains_of(records):
        path = out / f"{domain}.json"
        build_results(records, domain, meta).save(path)
        paths.append(path)
    return paths


def tau2_metrics(records: Sequence[Mapping[str, Any]], meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Per domain, tau2's ``compute_metrics``: ``avg_reward`` and ``pass^k`` for k = 1 .. trials per task."""
    from tau2.metrics.agent_metrics import compute_metrics

    out: dict[str, Any] = {}
    for domain in domains_of(records):
        metrics = compute_metrics(build_results(records, domain, meta))
        out[domain] = {"avg_reward": float(metrics.avg_reward),
                       **{f"pass^{k}": float(v) for k, v in sorted(metrics.pass_hat_ks.items())}}
    return out


def format_tau2_metrics(metrics: Mapping[str, Mapping[str, float]]) -> str:
    """One line per domain: tau2's average reward and pass^k (percent)."""
    lines = ["tau2's metrics (tau2.metrics.agent_metrics.compute_metrics):"]
    for domain, m in metrics.items():
        parts = [f"avg_reward {100 * m['avg_reward']:.1f}"] + [f"{k} {100 * v:.1f}" for k, v in m.items()
                                                                 if k.startswith("pass^")]
        lines.append(f"  {domain}: " + "  ".join(parts))
    return "\n".join(lines)


def _sections(records: Sequence[Mapping[str, Any]], summary: Mapping[str, Any],
              meta: Mapping[str, Any]) -> dict[str, Any]:
    """tau2's own metrics per domain: average reward and pass^k (``compute_metrics``)."""
    return {"tau2": tau2_metrics(records, meta)}


def _lines(summary: Mapping[str, Any]) -> list[str]:
    return [format_tau2_metrics(summary["tau2"])] if summary.get("tau2") else []


def _write_results(records: Sequence[Mapping[str, Any]], out_dir: str, meta: Mapping[str, Any],
                   **options: Any) -> list[str]:
    """``<out_dir>/<domain>.json`` in tau2's Results format (``python -m tau2.scripts.evaluate_trajectories FILE``
    re-scores them)."""
    if options:
        raise ValueError(f"tau2 results take no options, got {', '.join(options)}")
    return [str(p) for p in write_tau2_results(records, out_dir, meta)]


TAU2_REPORT = EvalReport(record_fields=episode_fields, sections=_sections, lines=_lines, write_results=_write_results)
