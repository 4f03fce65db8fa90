"""``bfcl evaluate``'s scores beside agent-tune's verdicts, per category (``examples/eval/bfcl_official.sh``).

``bfcl evaluate --score-dir DIR`` writes ``DIR/<registry name>/<group>/BFCL_v4_<category>_score.json``, whose
first line is ``{"accuracy", "correct_count", "total_count"}``. The result files it scored hold sample 0 of each
entry (:mod:`agent_tune.envs.bfcl.result_files`), so agent-tune's side is sample 0's accuracy too.

    python -m agent_tune.envs.bfcl.official_scores RESULTS.jsonl SCORE_DIR
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

from agent_tune.envs.bfcl.result_files import VERSION_PREFIX

SCORE_SUFFIX = "_score.json"


def official_scores(score_dir: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """category -> the header of its score file (accuracy, correct_count, total_count)."""
    out = {}
    for path in sorted(Path(score_dir).glob(f"*/*/{VERSION_PREFIX}_*{SCORE_SUFFIX}")):
        category = path.name[len(VERSION_PREFIX) + 1 : -len(SCORE_SUFFIX)]
        with path.open(encoding="utf-8") as f:
            out[category] = json.loads(f.readline())
    return out


def our_scores(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """category -> agent-tune's correct and total counts over sample 0 of each entry."""
    verdicts: dict[str, list[bool]] = defaultdict(list)
    for r in records:
        if int(r.get("sample", 0)) == 0:
            verdicts[str(r["category"])].append(float(r.get("accuracy") or 0.0) == 1.0)
    return {c: {"correct_count": sum(v), "total_count": len(v), "accuracy": sum(v) / len(v)}
            for c, v in verdicts.items()}


def _cell(score: dict[str, Any] | None) -> str:
    if score is None:
        return "-"
    return f"{score.get('correct_count')}/{score.get('total_count')} ({float(score.get('accuracy', 0.0)):.3f})"


def comparison(official: dict[str, dict[str, Any]], ours: dict[str, dict[str, Any]]) -> list[str]:
    """The table's lines: each category the official tool scored, its counts and ours, and whether they agree."""
    lines = [f"{'category':<32} {'bfcl evaluate':>18} {'agent-tune':>18}  agree"]
    for category, theirs in sorted(official.items()):
        mine = ours.get(category)
        same = mine is not None and (mine["correct_count"], mine["total_count"]) == (
            theirs.get("correct_count"), theirs.get("total_count"))
        lines.append(f"{category:<32} {_cell(theirs):>18} {_cell(mine):>18}  {'yes' if same else 'NO'}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    """Print the comparison; exit 1 when the score folder holds no score file."""
    from agent_tune.eval.store import read_results

    p = argparse.ArgumentParser(prog="python -m agent_tune.envs.bfcl.official_scores", description=__doc__)
    p.add_argument("results", help="the results jsonl of agent-tune eval")
    p.add_argument("score_dir", help="the --score-dir of bfcl evaluate")
    args = p.parse_args(argv)
    official = official_scores(args.score_dir)
    if not official:
        print(f"error: no {VERSION_PREFIX}_*{SCORE_SUFFIX} under {args.score_dir}", file=sys.stderr)
        return 1
    _, records = read_results(args.results)
    print("\n".join(comparison(official, our_scores(records))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
