"""Plot per-step training metrics (agent-tune's metrics.jsonl) as a PNG and print the first N steps' means against
the last N steps'.

    python benchmarks/plot_metrics.py outputs/run/checkpoints/metrics.jsonl --out curve.png [--keys reward acc]
        [--window N]

Several files are the stages of one curriculum, in order: they are drawn one after the other on one step axis
(a dashed line at each hand-off, each stage labelled) and each stage is summarised apart.

    python benchmarks/plot_metrics.py RUN/syntax/checkpoints/metrics.jsonl RUN/base/checkpoints/metrics.jsonl \
        --labels syntax base --out curve.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from agent_tune.utils.jsonl import read_jsonl  # noqa: E402


def read_rows(path: Path) -> list[dict]:
    """The steps of one metrics.jsonl, in order; a file without steps is an error naming it."""
    rows = [row for _, row in read_jsonl(path, SystemExit)]
    if not rows:
        raise SystemExit(f"{path}: no steps")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("metrics", type=Path, nargs="+", help="one metrics.jsonl, or one per curriculum stage in order")
    ap.add_argument("--labels", nargs="+", default=None, help="one name per metrics file (default: its run folder)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--keys", nargs="+", default=["reward", "acc", "format_errors"])
    ap.add_argument("--title", default=None, help="figure title (default: the metrics file's folder name)")
    ap.add_argument("--window", type=int, default=None,
                    help="compare the first and last N steps of each file (default: a quarter of its steps)")
    args = ap.parse_args()
    labels = args.labels or [p.parent.parent.name if len(args.metrics) > 1 else p.parent.name for p in args.metrics]
    if len(labels) != len(args.metrics):
        raise SystemExit(f"--labels: {len(labels)} names for {len(args.metrics)} metrics files")
    stages = [read_rows(p) for p in args.metrics]
    keys = [k for k in args.keys if any(k in r for rows in stages for r in rows)]
    fig, axes = plt.subplots(len(keys), 1, figsize=(7, 2.4 * len(keys)), sharex=True, squeeze=False)
    offset = 0
    for label, rows in zip(labels, stages):
        steps = [offset + r["step"] for r in rows]
        for ax, key in zip(axes[:, 0], keys):
            ax.plot(steps, [r.get(key, float("nan")) for r in rows], marker="o",
                    label=label if len(stages) > 1 else None)
            if offset:
                ax.axvline(offset + 0.5, color="grey", linestyle="--", linewidth=1)
        offset = steps[-1]
    for ax, key in zip(axes[:, 0], keys):
        ax.set_ylabel(key)
        ax.grid(alpha=0.3)
    if len(stages) > 1:
        axes[0, 0].legend(loc="best", fontsize="small")
    axes[-1, 0].set_xlabel("GRPO step" + (" (stages one after the other)" if len(stages) > 1 else ""))
    fig.suptitle(args.title or labels[0])
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    for label, rows in zip(labels, stages):
        half = args.window or max(1, len(rows) // 4)
        prefix = f"[{label}] " if len(stages) > 1 else ""
        for key in keys:
            vals = [r[key] for r in rows if key in r]
            if not vals:
                continue
            first, last = sum(vals[:half]) / len(vals[:half]), sum(vals[-half:]) / len(vals[-half:])
            print(f"{prefix}{key}: first {half} steps mean {first:.3f} -> last {half} steps mean {last:.3f}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
