"""Reports of one or several results files: a text table, a JSON document and a PNG bar chart."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from agent_tune.envs.bfcl.data import SCORED_CATEGORIES
from agent_tune.envs.bfcl.single_turn import SINGLE_TURN_CATEGORIES
from agent_tune.eval.leaderboard import OVERALL_WEIGHTS
from agent_tune.eval.metrics import summarize
from agent_tune.eval.store import read_results

SHORT_NAMES = {
    "multi_turn_base": "base",
    "multi_turn_miss_func": "miss_func",
    "multi_turn_miss_param": "miss_param",
    "multi_turn_long_context": "long_context",
    "multi_turn_composite": "composite",
}
# The leaderboard summaries a single-turn report shows (agent_tune.eval.leaderboard), in table order.
SINGLE_TURN_SUMMARIES = ("simple", "non_live", "live", "irrelevance", "relevance")


def wall_time(records: Sequence[Mapping[str, Any]]) -> float | None:
    """Wall time spent producing ``records``: per run (``run_id``), last finish minus the run's start,
    summed over runs (a resumed file counts each run's own time, killed runs included)."""
    spans: dict[str, tuple[float, float]] = {}
    for r in records:
        rid, start, end = r.get("run_id"), r.get("run_started"), r.get("finished_at")
        if rid is None or start is None or end is None:
            continue
        s, e = spans.get(rid, (float(start), float(end)))
        spans[rid] = (min(s, float(start)), max(e, float(end)))
    if not spans:
        return None
    return sum(e - s for s, e in spans.values())


def report_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Summary of one results file, with its header's settings."""
    meta, records = read_results(path)
    if not records:
        raise ValueError(f"{path} holds no finished episodes")
    summary = summarize(records, wall_time(records))
    summary["source"] = str(path)
    summary["settings"] = meta or {}
    return summary


def _fmt(x: Any, pct: bool = False) -> str:
    if x is None:
        return "-"
    if pct:
        return f"{100 * x:.1f}"
    if isinstance(x, float):
        return f"{x:.2f}"
    return str(x)


def format_table(summary: Mapping[str, Any]) -> str:
    """A plain-text table: one row per category, then the multi-turn overall row and/or the single-turn
    leaderboard summaries (``*``: not every category of the summary ran)."""
    ks = [k for k in summary["k"] if k > 1]
    head = ["category", "entries", "samples", "acc%"] + [f"pass@{k}%" for k in ks] + [
        "progress%", "fmt_err/step", "steps", "turns", "forced", "tokens"]
    rows = [head]

    def row(name: str, s: Mapping[str, Any], acc_key: str = "accuracy", pk: str = "pass@") -> list[str]:
        return [name, _fmt(s.get("entries")), _fmt(s.get("samples")), _fmt(s.get(acc_key), True)] + [
            _fmt(s.get(f"{pk}{k}"), True) for k in ks
        ] + [
            _fmt(s.get("progress"), True), f"{s.get('format_error_rate', 0):.3f}", _fmt(s.get("mean_steps")),
            _fmt(s.get("mean_turns")), _fmt(s.get("force_terminated")), _fmt(s.get("tokens_generated")),
        ]

    def summary_row(name: str, s: Mapping[str, Any]) -> list[str]:
        label = name if s.get("complete") else f"{name}*"
        return [label, _fmt(s.get("entries")), "-", _fmt(s.get("accuracy"), True)] + [
            _fmt(s.get(f"pass@{k}"), True) for k in ks] + ["-"] * 6

    for cat, s in summary["categories"].items():
        rows.append(row(SHORT_NAMES.get(cat, cat), s))
    ov = summary["overall"]
    summaries = summary.get("summaries") or {}
    single = [n for n in SINGLE_TURN_SUMMARIES if n in summaries]
    if ov["categories"]:
        label = "OVERALL" if ov.get("complete_leaderboard") else f"overall({len(ov['categories'])}/4)"
        rows.append(row(label, ov, "multi_turn_accuracy", "multi_turn_pass@"))
    if single:
        rows.append(row("all entries", ov))
        rows += [summary_row(n, summaries[n]) for n in single + ["overall"]]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    lines.insert(1, "-" * len(lines[0]))
    extra = []
    if ov.get("wall_time_s") is not None:
        rate = ov.get("entries_per_s")
        extra.append(f"wall time {ov['wall_time_s']:.1f} s" + (f" ({rate:.3f} entries/s)" if rate else ""))
    extra.append(f"episodes with format errors {100 * (ov.get('episodes_with_format_errors') or 0):.1f}%")
    if ov.get("truncated"):
        extra.append(f"{ov['truncated']} episodes truncated (token budget)")
    if ov["categories"] and not ov.get("complete_leaderboard"):
        extra.append("overall = unweighted mean of the categories present (leaderboard needs all four)")
    notes = []
    if single:
        used = summaries["overall"]["categories"]
        weights = "/".join(f"{OVERALL_WEIGHTS[n]:g}" for n in used)
        notes.append(f"overall = {' + '.join(used)} weighted {weights} (the leaderboard's weights, agentic "
                     "not run); non_live = unweighted mean of simple, multiple, parallel, parallel_multiple; "
                     "live = entry-weighted mean")
        if any(not summaries[n].get("complete") for n in single):
            notes.append("* = mean over the categories that ran (the leaderboard counts a missing one as 0)")
    return "\n".join(lines + ["", "; ".join(extra)] + notes)


def _summary_bars(summary: Mapping[str, Any]) -> list[str]:
    """The leaderboard summaries a single-turn report has (none for a multi-turn-only report)."""
    if not any(c in SINGLE_TURN_CATEGORIES for c in summary["categories"]):
        return []
    return list(summary.get("summaries") or {})


def plot_accuracy(
    summaries: Sequence[Mapping[str, Any]], png: str | os.PathLike[str], labels: Sequence[str] | None = None
) -> Path:
    """Bar chart of per-category accuracy and the summaries (multi-turn overall, the single-turn
    leaderboard summaries), one bar per results file, side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(labels) if labels else [Path(s.get("source", f"run{i}")).stem for i, s in enumerate(summaries)]
    order = tuple(SCORED_CATEGORIES) + tuple(SINGLE_TURN_CATEGORIES)
    cats = [c for c in order if any(c in s["categories"] for s in summaries)]
    cats += sorted({c for s in summaries for c in s["categories"]} - set(cats))
    multi = any(s["overall"].get("categories") for s in summaries)
    single = [n for n in SINGLE_TURN_SUMMARIES[1:] + ("overall",) if any(n in _summary_bars(s) for s in summaries)]
    # summary bars in capitals (IRRELEVANCE, the summary, next to irrelevance, the category)
    groups = [SHORT_NAMES.get(c, c) for c in cats] + (["multi-turn overall"] if multi else []) + [
        n.upper() for n in single]
    n = len(summaries)
    width = 0.8 / max(n, 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.4 * len(groups) * max(1, n) ** 0.5), 4.0))
    for i, s in enumerate(summaries):
        vals = [100 * (s["categories"].get(c, {}).get("accuracy") or 0.0) for c in cats]
        if multi:
            vals.append(100 * (s["overall"].get("multi_turn_accuracy") or 0.0))
        vals += [100 * ((s.get("summaries") or {}).get(n, {}).get("accuracy") or 0.0) for n in single]
        xs = [g + (i - (n - 1) / 2) * width for g in range(len(groups))]
        bars = ax.bar(xs, vals, width, label=labels[i])
        for b, v in zip(bars, vals):
            ax.annotate(f"{v:.1f}", (b.get_x() + b.get_width() / 2, v), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(groups)), groups, rotation=30 if len(groups) > 6 else 0,
                  ha="right" if len(groups) > 6 else "center", fontsize=8)
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 105)
    ax.set_title("BFCL v4 multi-turn accuracy" if not single else "BFCL v4 accuracy")
    if n > 1 or labels[0]:
        ax.legend(fontsize=8)
    fig.tight_layout()
    out = Path(png)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def write_json(summaries: Sequence[Mapping[str, Any]], path: str | os.PathLike[str]) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    doc: Any = summaries[0] if len(summaries) == 1 else {"reports": list(summaries)}
    out.write_text(json.dumps(doc, indent=1, default=str) + "\n")
    return out
