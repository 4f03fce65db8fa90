"""Reports of one or several results files: a text table, a JSON document and a PNG bar chart.

Every report shows per-category accuracy, pass@k (each with its 95% interval) and the episode statistics; the env of
the file adds its own
lines (:class:`agent_tune.envs.report.EvalReport`'s ``lines``) and, in the chart, the summary scores it reports
under ``summaries`` (BFCL's leaderboard summaries).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from agent_tune.eval.metrics import format_first_and_any, format_interval, report_env, summarize
from agent_tune.eval.store import read_results


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
    summary = summarize(records, wall_time(records), (meta or {}).get("env"), meta)
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


def format_intervals(summary: Mapping[str, Any]) -> list[str]:
    """One line per category and overall: pass@k for every k, percent, with its 95% interval."""
    lines = ["pass@k, percent [95% Wilson interval over entries]:"]
    for name, s in [*summary["categories"].items(), ("all entries", summary["overall"])]:
        ci = s.get("ci95") or {}
        parts = [f"pass@{k} {format_interval(s[f'pass@{k}'], ci.get(f'pass@{k}'))}" for k in summary["k"]
                 if s.get(f"pass@{k}") is not None]
        lines.append(f"  {name}: {'  '.join(parts)} ({s.get('entries')} entries)")
    return lines


def format_table(summary: Mapping[str, Any]) -> str:
    """A plain-text table, one row per category and the overall row, pass@k with its 95% interval, then the env's
    own lines (its report's ``lines``: BFCL's multi-turn overall and leaderboard summaries, tau2's pass^k)."""
    ks = [k for k in summary["k"] if k > 1]
    head = ["category", "entries", "samples", "acc%"] + [f"pass@{k}%" for k in ks] + [
        "progress%", "fmt_err/step", "steps", "turns", "forced", "tokens"]
    rows = [head]

    def row(name: str, s: Mapping[str, Any]) -> list[str]:
        return [name, _fmt(s.get("entries")), _fmt(s.get("samples")), _fmt(s.get("accuracy"), True)] + [
            _fmt(s.get(f"pass@{k}"), True) for k in ks
        ] + [
            _fmt(s.get("progress"), True), f"{s.get('format_error_rate', 0):.3f}", _fmt(s.get("mean_steps")),
            _fmt(s.get("mean_turns")), _fmt(s.get("force_terminated")), _fmt(s.get("tokens_generated")),
        ]

    for cat, s in summary["categories"].items():
        rows.append(row(cat, s))
    ov = summary["overall"]
    rows.append(row("all entries", ov))
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
    cls = report_env(summary.get("env"))
    env_lines = cls.report.lines(summary) if cls is not None else []
    first_any = summary.get("first_and_any_of_k")
    any_lines = [format_first_and_any(first_any)] if first_any and first_any["k"] > 1 else []
    return "\n".join(lines + ["", "; ".join(extra)] + format_intervals(summary) + any_lines + list(env_lines))


def stage_table(summaries: Sequence[Mapping[str, Any]], labels: Sequence[str]) -> str:
    """A Markdown table, one row per results file (a stage of a chain: ``labels``), one column per pass@k the files
    share (k = 1 and the largest), overall and then per category when there are several, each ``value [95%
    interval]`` in percent; the header gives the entries per column."""
    if len(labels) != len(summaries):
        raise ValueError("the stage table needs one label per results file")
    shared = set(summaries[0]["k"]).intersection(*(s["k"] for s in summaries[1:]))
    ks = sorted({1, max(shared)} & shared)
    cats = sorted({c for s in summaries for c in s["categories"]})
    groups = [("all", lambda s: s["overall"])]
    if len(cats) > 1:
        groups += [(c, lambda s, c=c: s["categories"].get(c, {})) for c in cats]
    entries = {name: sorted({str(get(s).get("entries", 0)) for s in summaries}) for name, get in groups}
    head = ["stage"] + [f"{name} pass@{k} (N={'/'.join(entries[name])})" for name, _ in groups for k in ks]
    rows = []
    for label, s in zip(labels, summaries):
        cells = [label]
        for _, get in groups:
            g = get(s)
            for k in ks:
                value = g.get(f"pass@{k}")
                cells.append("-" if value is None else format_interval(value, (g.get("ci95") or {}).get(f"pass@{k}")))
        rows.append(cells)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows]) + "\n"


def write_first_and_any(summary: Mapping[str, Any], path: str | os.PathLike[str]) -> Path:
    """The summary's pass@1 (first sample) / pass@k (any of k) report alone, in the shape of Tau2-RL-Pipeline's
    ``eval_passk.py`` output (``k``, ``metric_note``, ``summary``, ``by_domain``), with the run's settings."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    doc = {**summary["first_and_any_of_k"], "source": summary.get("source"), "settings": summary.get("settings")}
    out.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    return out


def plot_accuracy(
    summaries: Sequence[Mapping[str, Any]], png: str | os.PathLike[str], labels: Sequence[str] | None = None
) -> Path:
    """Bar chart of per-category accuracy and the summary scores the env reports (``summaries``: BFCL's
    leaderboard summaries), one bar per results file, side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(labels) if labels else [Path(s.get("source", f"run{i}")).stem for i, s in enumerate(summaries)]
    cats = sorted({c for s in summaries for c in s["categories"]})
    names = list(dict.fromkeys(n for s in summaries for n in (s.get("summaries") or {})))
    # summary bars in capitals (IRRELEVANCE, the summary, next to irrelevance, the category)
    groups = cats + [n.upper() for n in names]
    n = len(summaries)
    width = 0.8 / max(n, 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.4 * len(groups) * max(1, n) ** 0.5), 4.0))
    for i, s in enumerate(summaries):
        vals = [100 * (s["categories"].get(c, {}).get("accuracy") or 0.0) for c in cats]
        vals += [100 * ((s.get("summaries") or {}).get(name, {}).get("accuracy") or 0.0) for name in names]
        xs = [g + (i - (n - 1) / 2) * width for g in range(len(groups))]
        bars = ax.bar(xs, vals, width, label=labels[i])
        for b, v in zip(bars, vals):
            ax.annotate(f"{v:.1f}", (b.get_x() + b.get_width() / 2, v), ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(groups)), groups, rotation=30 if len(groups) > 6 else 0,
                  ha="right" if len(groups) > 6 else "center", fontsize=8)
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 105)
    envs = sorted({str(s.get("env") or "") for s in summaries} - {""})
    ax.set_title(f"{', '.join(envs) or 'eval'} accuracy")
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
