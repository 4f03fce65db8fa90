"""``agent-tune plot``: per-step training metrics (agent-tune's metrics.jsonl) as a PNG, printing the first N steps'
means against the last N steps'; or, with ``--table``, chosen keys of verl's step log as one line a step.

    agent-tune plot outputs/run/checkpoints/metrics.jsonl --out curve.png [--keys reward acc] [--window N]

Several files are the stages of one curriculum, in order: they are drawn one after the other on one step axis
(a dashed line at each hand-off, each stage labelled) and each stage is summarised apart.

    agent-tune plot RUN/syntax/checkpoints/metrics.jsonl RUN/base/checkpoints/metrics.jsonl \\
        --labels syntax base --out curve.png

``--table`` prints chosen keys of verl's per-step metrics log (``verl_metrics.jsonl``, verl's ``file`` logger),
one line a step, instead of drawing:

    agent-tune plot --table outputs/run/checkpoints/verl_metrics.jsonl --keys critic/vf_loss actor/pg_loss
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path
from typing import Iterable, Sequence

from agent_tune.errors import AgentTuneError, ConfigError, DataError, exit_code
from agent_tune.utils.cli_args import HelpFormatter
from agent_tune.utils.jsonl import read_jsonl

PLOT_KEYS = ["reward", "acc", "format_errors"]


def read_rows(path: Path) -> list[dict]:
    """The steps of one metrics file, in order. Raises :class:`DataError` naming the file: missing, not JSON
    lines, or without steps."""
    if path.is_dir():
        inside = next((path / n for n in ("metrics.jsonl", "checkpoints/metrics.jsonl") if (path / n).is_file()), None)
        hint = f"did you mean {inside}?" if inside else "give the metrics.jsonl inside a run folder"
        raise DataError(f"{path}: a folder, not a metrics file; {hint}")
    if not path.is_file():
        raise DataError(f"{path}: no such file (a training run writes metrics.jsonl and verl_metrics.jsonl in its "
                        "run folder, trainer.default_local_dir)")
    try:
        rows = [row for _, row in read_jsonl(path, DataError)]
    except UnicodeDecodeError:
        raise DataError(f"{path}: not a text file (a metrics file holds one JSON object a line)") from None
    if not rows or not all(isinstance(row, dict) and "step" in row for row in rows):
        raise DataError(f"{path}: no steps (a metrics file holds one JSON object with a 'step' a line)")
    return rows


def check_keys(wanted: Sequence[str], present: Iterable[str], where: str) -> None:
    """Raise :class:`ConfigError` for a key of ``wanted`` that no step of ``where`` has: the closest one it has, or
    the keys it has."""
    present = sorted(set(present))
    for key in wanted:
        if key in present:
            continue
        close = difflib.get_close_matches(key, present, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}?" if close else f"its keys: {' '.join(present)}"
        raise ConfigError(f"--keys {key}: no step of {where} has it; {hint}")


def step_lines(rows: Sequence[dict], keys: Sequence[str]) -> list[str]:
    """``step N: key=value, ...`` for each row of verl's log (``{"step", "data"}``); keys a step lacks are left out."""
    lines = []
    for row in rows:
        data = row.get("data", {})
        values = ", ".join(f"{key}={data[key]:.4g}" for key in keys if isinstance(data.get(key), (int, float)))
        lines.append(f"step {row.get('step')}: {values}")
    return lines


def print_table(metrics: Path, keys: Sequence[str]) -> None:
    """Read verl's step log and print its steps; a key no step has is an error (:func:`check_keys`)."""
    rows = read_rows(metrics)
    check_keys(keys, (key for row in rows for key in row.get("data", {})), str(metrics))
    print("\n".join(step_lines(rows, keys)))


def plot(metrics: Sequence[Path], out: Path, keys: Sequence[str], labels: Sequence[str] | None = None,
         title: str | None = None, window: int | None = None) -> None:
    """Draw ``keys`` of each metrics file (the stages of one run, in order) into ``out`` and print each stage's
    first ``window`` steps' means against its last ``window`` steps'. A key that no file has is an error when asked
    for (``keys`` not the defaults), else left out; :class:`DataError` / :class:`ConfigError` name the file or key."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = labels or [p.parent.parent.name if len(metrics) > 1 else p.parent.name for p in metrics]
    if len(labels) != len(metrics):
        raise ConfigError(f"--labels: {len(labels)} names for {len(metrics)} metrics files")
    stages = [read_rows(p) for p in metrics]
    present = {k for rows in stages for r in rows for k in r}
    where = ", ".join(str(p) for p in metrics)
    if list(keys) != PLOT_KEYS:
        check_keys(keys, present, where)
    keys = [k for k in keys if k in present]
    if not keys:
        raise DataError(f"{where}: none of {' '.join(PLOT_KEYS)}; choose --keys from: {' '.join(sorted(present))}")
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
    fig.suptitle(title or labels[0])
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    for label, rows in zip(labels, stages):
        half = window or max(1, len(rows) // 4)
        prefix = f"[{label}] " if len(stages) > 1 else ""
        for key in keys:
            vals = [r[key] for r in rows if key in r]
            if not vals:
                continue
            first, last = sum(vals[:half]) / len(vals[:half]), sum(vals[-half:]) / len(vals[-half:])
            print(f"{prefix}{key}: first {half} steps mean {first:.3f} -> last {half} steps mean {last:.3f}")
    print(f"wrote {out}")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="agent-tune plot", description=__doc__, formatter_class=HelpFormatter)
    ap.add_argument("metrics", type=Path, nargs="+",
                    help="one metrics.jsonl, or one per curriculum stage in order (--table: one verl_metrics.jsonl)")
    ap.add_argument("--table", action="store_true",
                    help="print --keys of verl's step log (verl_metrics.jsonl), one line a step, instead of drawing")
    ap.add_argument("--labels", nargs="+", default=None, help="one name per metrics file (default: its run folder)")
    ap.add_argument("--out", type=Path, default=None, help="the PNG to write (required unless --table)")
    ap.add_argument("--keys", nargs="+", default=None, help=f"default when drawing: {' '.join(PLOT_KEYS)}")
    ap.add_argument("--title", default=None, help="figure title (default: the metrics file's folder name)")
    ap.add_argument("--window", type=int, default=None,
                    help="compare the first and last N steps of each file (default: a quarter of its steps)")
    args = ap.parse_args(argv)
    if args.table and (len(args.metrics) != 1 or not args.keys):
        ap.error("--table takes one verl_metrics.jsonl and --keys")
    if not args.table and args.out is None:
        ap.error("the following arguments are required: --out")
    try:
        if args.table:
            print_table(args.metrics[0], args.keys)
        else:
            plot(args.metrics, args.out, args.keys or PLOT_KEYS, args.labels, args.title, args.window)
    except AgentTuneError as exc:  # one line naming the file or key, no traceback
        print(f"agent-tune plot: error: {exc}", file=sys.stderr)
        return exit_code(exc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
