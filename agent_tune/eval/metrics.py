"""Scores of an evaluation: pass@k and per-category accuracy, plus the env's own sections.

A *record* is one finished episode (one sample of one entry) as stored in the results jsonl (see
:mod:`agent_tune.eval.store`). Accuracy per category is pass@1: the mean over entries of the fraction of
their samples the env counts correct (with one sample per entry, correct / entries, as BFCL's leaderboard
computes it over the entries evaluated); pass@k is the unbiased estimator. :func:`first_and_any_of_k` is the
other reading of k samples (Tau2-RL-Pipeline's): the first sample's success, any success among k. The env that
played the entries may add sections of its own
(:meth:`agent_tune.envs.base.BaseToolEnv.report`: BFCL's leaderboard summaries and multi-turn overall,
tau2's pass^k), merged one level deep into the summary.

Every pass@k (and the accuracy) comes with a 95% interval (:func:`wilson_interval`, under ``ci95``): the Wilson
score interval of the mean of the per-entry values with N = the number of entries. A per-entry value in [0, 1]
(a fraction of samples correct, an unbiased pass@k) has variance at most p(1 - p), the variance of a 0/1 value
of the same mean, so the interval is conservative for fractional values; unlike the normal approximation it stays
sensible at 0 and 1 (0 of 10 entries: [0, 27.8%]). It measures the spread over entries (another draw of tasks),
not over samples of the same tasks.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any, Iterable, Mapping, Sequence

Z95 = 1.959963984540054  # the two-sided 95% quantile of the standard normal


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k estimator (Chen et al., 2021): ``1 - C(n-c, k) / C(n, k)``.

    ``n`` samples of which ``c`` are correct; computed as a stable product, never with big binomials.
    """
    if not (isinstance(n, int) and isinstance(c, int) and isinstance(k, int)):
        raise TypeError("pass_at_k takes integers n, c, k")
    if n < 1 or k < 1 or not 0 <= c <= n:
        raise ValueError(f"pass_at_k needs n >= 1, k >= 1 and 0 <= c <= n; got n={n}, c={c}, k={k}")
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per entry, got {n}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def wilson_interval(p: float, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a mean ``p`` in [0, 1] over ``n`` entries (95% by default):
    ``(p + z²/2n ± z·sqrt(p(1-p)/n + z²/4n²)) / (1 + z²/n)``, clipped to [0, 1]."""
    if n < 1:
        raise ValueError(f"wilson_interval needs n >= 1 entries, got {n}")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"wilson_interval needs a mean in [0, 1], got {p}")
    z2 = z * z
    denom = 1.0 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1.0 - p) / n + z2 / (4 * n * n))
    return max(0.0, center - half), min(1.0, center + half)


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _group_stats(records: Sequence[Mapping[str, Any]], k_values: Sequence[int]) -> dict[str, Any]:
    """Statistics over a set of records (all samples of some entries)."""
    by_entry: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        by_entry[r["test_id"]].append(r)
    entries = len(by_entry)
    out: dict[str, Any] = {"entries": entries, "samples": len(records)}
    if not entries:
        return out
    out["accuracy"] = _mean([sum(float(r["accuracy"]) for r in rs) / len(rs) for rs in by_entry.values()])
    min_n = min(len(rs) for rs in by_entry.values())
    for k in k_values:
        if k <= min_n:
            out[f"pass@{k}"] = _mean(
                [pass_at_k(len(rs), sum(1 for r in rs if float(r["accuracy"]) == 1.0), k) for rs in by_entry.values()]
            )
    out["ci95"] = {key: list(wilson_interval(min(1.0, max(0.0, out[key])), entries))
                   for key in ("accuracy", *(f"pass@{k}" for k in k_values)) if key in out}
    steps = sum(int(r.get("num_steps", 0)) for r in records)
    fmt = sum(int(r.get("format_errors", 0)) for r in records)
    out.update(
        {
            "progress": _mean([float(r.get("progress", 0.0)) for r in records]),
            "format_errors": fmt,
            "format_error_rate": fmt / steps if steps else 0.0,
            "episodes_with_format_errors": _mean([float(int(r.get("format_errors", 0)) > 0) for r in records]),
            "mean_steps": _mean([float(r.get("num_steps", 0)) for r in records]),
            "mean_turns": _mean([float(r.get("turns_completed", 0)) for r in records]),
            "force_terminated": sum(1 for r in records if r.get("force_terminated")),
            "truncated": sum(1 for r in records if r.get("truncated")),
            "tokens_generated": sum(int(r.get("tokens_generated", 0)) for r in records),
        }
    )
    return out


ANY_OF_K_NOTE = "pass@1 = the first sample's success; pass@k = any success among the k samples (not pass^k)"


def _first_and_any(records: Sequence[Mapping[str, Any]], k: int) -> dict[str, Any]:
    by_entry: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        by_entry[r["test_id"]].append(r)
    total = len(by_entry)
    first = [float(min(rs, key=lambda r: int(r.get("sample", 0)))["accuracy"]) >= 1.0 for rs in by_entry.values()]
    any_ = [any(float(r["accuracy"]) >= 1.0 for r in rs) for rs in by_entry.values()]
    out: dict[str, Any] = {"total": total, "pass_at_1": sum(first) / total if total else 0.0,
                           f"pass_at_{k}": sum(any_) / total if total else 0.0}
    if total:
        out["ci95"] = {key: list(wilson_interval(out[key], total)) for key in ("pass_at_1", f"pass_at_{k}")}
    return out


def first_and_any_of_k(records: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The pass@k report of sampling k times per entry without an estimator (Tau2-RL-Pipeline's
    ``eval_passk.py`` shape): overall (``summary``) and per category (``by_domain``: tau2's categories are its
    domains), ``pass_at_1`` the share of entries whose first sample (``sample`` 0) succeeded, ``pass_at_<k>``
    the share with any success among their samples; success is accuracy 1 (tau2: reward 1). Each has its 95%
    Wilson interval over the entries under ``ci95``."""
    records = list(records)
    k = max(Counter(r["test_id"] for r in records).values(), default=0)
    by_cat: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        by_cat[str(r["category"])].append(r)
    return {"k": k, "metric_note": ANY_OF_K_NOTE, "summary": _first_and_any(records, k),
            "by_domain": {cat: _first_and_any(rs, k) for cat, rs in sorted(by_cat.items())}}


def mixed_ids(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """The entries (in first-seen order) whose samples are neither all right nor all wrong (``accuracy`` 1.0 is
    right, as pass@k counts): the tasks on which a GRPO group of this model's samples has a gradient."""
    right: dict[str, list[bool]] = {}
    for r in records:
        right.setdefault(str(r["test_id"]), []).append(float(r["accuracy"]) == 1.0)
    return [tid for tid, rs in right.items() if any(rs) and not all(rs)]


def format_interval(value: float, interval: Sequence[float] | None) -> str:
    """``12.5 [4.3, 31.0]``: a share and its interval, in percent."""
    text = f"{100 * value:.1f}"
    return text + (f" [{100 * interval[0]:.1f}, {100 * interval[1]:.1f}]" if interval else "")


def format_first_and_any(report: Mapping[str, Any]) -> str:
    """One line per category and overall: pass@1 (first sample) and pass@k (any of k), percent, with their 95%
    intervals."""
    k = report["k"]
    lines = [f"pass@1 (first sample) / pass@{k} (any of {k}), percent [95% Wilson interval over entries]:"]
    for name, s in [*report["by_domain"].items(), ("all entries", report["summary"])]:
        ci = s.get("ci95") or {}
        lines.append(f"  {name}: {format_interval(s['pass_at_1'], ci.get('pass_at_1'))} / "
                     f"{format_interval(s[f'pass_at_{k}'], ci.get(f'pass_at_{k}'))} ({s['total']} entries)")
    return "\n".join(lines)


def k_values_for(n: int) -> list[int]:
    """The k reported for ``n`` samples per entry: 1, then powers of two below n, then n."""
    ks = [1]
    k = 2
    while k < n:
        ks.append(k)
        k *= 2
    if n > 1:
        ks.append(n)
    return ks


def summarize(records: Iterable[Mapping[str, Any]], wall_time_s: float | None = None, env: str | None = None,
              meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The report of one results file: per category (in name order), overall, and the sections of ``env``'s
    ``report`` hook (the env of the records; ``None`` or ``"rows"``: none), given the file's ``meta``."""
    records = list(records)
    by_cat: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        by_cat[r["category"]].append(r)
    n_per_entry = max(Counter(r["test_id"] for r in records).values(), default=0)
    ks = k_values_for(n_per_entry) if n_per_entry else [1]
    categories = {cat: _group_stats(by_cat[cat], ks) for cat in sorted(by_cat)}
    overall = _group_stats(records, ks)
    if wall_time_s is not None:
        overall["wall_time_s"] = wall_time_s
        overall["entries_per_s"] = overall["entries"] / wall_time_s if wall_time_s > 0 else None
    summary: dict[str, Any] = {"env": env, "samples_per_entry": n_per_entry, "k": ks, "categories": categories,
                               "overall": overall, "first_and_any_of_k": first_and_any_of_k(records)}
    cls = report_env(env)
    if cls is not None and records:
        for key, section in cls.report.sections(records, summary, dict(meta or {})).items():
            if isinstance(section, Mapping) and isinstance(summary.get(key), dict):
                summary[key].update(section)
            else:
                summary[key] = section
    return summary


def report_env(env: str | None) -> Any:
    """The env class whose report hooks apply to a results file of ``env`` (None for training rows or none)."""
    if not env or env == "rows":
        return None
    from agent_tune.envs.registry import get_env_class

    return get_env_class(env)
