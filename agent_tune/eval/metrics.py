"""Scores of an evaluation: pass@k, per-category accuracy and the leaderboard's summaries.

A *record* is one finished episode (one sample of one entry) as stored in the results jsonl (see
:mod:`agent_tune.eval.store`). Accuracy per category is pass@1: the mean over entries of the fraction of
their samples that BFCL counts correct (with one sample per entry, correct / entries, as the leaderboard
computes it over the entries evaluated). Multi-turn overall is the unweighted mean of the four scored
categories, as the leaderboard computes it; the single-turn summaries (non-live, live, irrelevance,
relevance, overall) follow :mod:`agent_tune.eval.leaderboard`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Iterable, Mapping, Sequence

from agent_tune.envs.bfcl.data import SCORED_CATEGORIES
from agent_tune.envs.bfcl.single_turn import SINGLE_TURN_CATEGORIES
from agent_tune.eval.leaderboard import leaderboard_summaries


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


def summarize(records: Iterable[Mapping[str, Any]], wall_time_s: float | None = None) -> dict[str, Any]:
    """The report of one results file: per category, multi-turn overall, the leaderboard's summaries, totals.

    ``overall.multi_turn_accuracy`` is the unweighted mean of the scored multi-turn categories present; it
    equals the leaderboard's number only when all four are present (``overall.categories`` says which
    were). ``summaries`` holds the leaderboard's summary scores computable from the categories present
    (accuracy and pass@k each), see :func:`~agent_tune.eval.leaderboard.leaderboard_summaries`.
    """
    records = list(records)
    by_cat: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        by_cat[r["category"]].append(r)
    n_per_entry = max(Counter(r["test_id"] for r in records).values(), default=0)
    ks = k_values_for(n_per_entry) if n_per_entry else [1]
    categories = {cat: _group_stats(by_cat[cat], ks) for cat in sorted(by_cat, key=_category_order)}
    scored = [c for c in SCORED_CATEGORIES if c in categories]
    overall = _group_stats(records, ks)
    overall["categories"] = scored
    overall["multi_turn_accuracy"] = _mean([categories[c]["accuracy"] for c in scored]) if scored else None
    for k in ks:
        key = f"pass@{k}"
        if scored and all(key in categories[c] for c in scored):
            overall[f"multi_turn_{key}"] = _mean([categories[c][key] for c in scored])
    overall["complete_leaderboard"] = len(scored) == len(SCORED_CATEGORIES)
    if wall_time_s is not None:
        overall["wall_time_s"] = wall_time_s
        overall["entries_per_s"] = overall["entries"] / wall_time_s if wall_time_s > 0 else None
    return {"samples_per_entry": n_per_entry, "k": ks, "categories": categories, "overall": overall,
            "summaries": summaries_of(categories, ks)}


def summaries_of(categories: Mapping[str, Mapping[str, Any]], ks: Sequence[int]) -> dict[str, dict[str, Any]]:
    """The leaderboard's summaries of ``categories``, for accuracy and each pass@k, merged per summary."""
    out = leaderboard_summaries(categories, "accuracy")
    for k in ks:
        key = f"pass@{k}"
        with_key = {c: s for c, s in categories.items() if key in s}
        if len(with_key) == len(categories):
            for name, summary in leaderboard_summaries(with_key, key).items():
                out[name][key] = summary[key]
    return out


_ORDER = tuple(SCORED_CATEGORIES) + tuple(SINGLE_TURN_CATEGORIES)


def _category_order(cat: str) -> tuple[int, str]:
    return (_ORDER.index(cat) if cat in _ORDER else len(_ORDER), cat)
