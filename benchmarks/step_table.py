"""Print chosen keys of verl's per-step metrics log (``verl_metrics.jsonl``, verl's ``file`` logger), one line a step.

    python benchmarks/step_table.py outputs/run/checkpoints/verl_metrics.jsonl --keys critic/vf_loss actor/pg_loss
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Sequence


def step_lines(rows: Sequence[dict], keys: Sequence[str]) -> list[str]:
    """``step N: key=value, ...`` for each row of the log (``{"step", "data"}``); keys a step lacks are left out."""
    lines = []
    for row in rows:
        data = row.get("data", {})
        values = ", ".join(f"{key}={data[key]:.4g}" for key in keys if isinstance(data.get(key), (int, float)))
        lines.append(f"step {row.get('step')}: {values}")
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    """Read the log and print its steps."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("metrics", type=Path)
    ap.add_argument("--keys", nargs="+", required=True)
    args = ap.parse_args(argv)
    rows = [json.loads(line) for line in args.metrics.read_text().splitlines() if line.strip()]
    print("\n".join(step_lines(rows, args.keys)))


if __name__ == "__main__":
    main()
