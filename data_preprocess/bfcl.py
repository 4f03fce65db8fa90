"""Write verl-ready BFCL multi-turn splits (parquet + jsonl): the ``bfcl`` env's catalogue as rows.

Entries of the four scored categories that share a scenario number (``multi_turn_base_12``,
``multi_turn_miss_func_12``, ...) are variants of one scenario, so the split is drawn over scenario
numbers: no scenario appears in two splits. With 200 scenarios x 4 categories:

    train       400 entries (100 scenarios, all four categories)
    train_base  100 entries (the base entries of the train scenarios: the curriculum's first stages)
    train_hard  300 entries (the train scenarios' miss_func, miss_param and long_context entries:
                train minus train_base, the harder categories of the curriculum's third stage)
    val         100 entries (25 scenarios)
    test        300 entries (75 scenarios)

The tasks are the env's own (:mod:`agent_tune.envs.bfcl.multi_turn.catalogue`; rows as
:mod:`agent_tune.envs.tasks` writes them): ``data_source`` is ``bfcl/<category>``, so validation metrics come out
per category; ``val`` and ``test`` rows set ``eval_mode``, so validation during training scores exactly as the
leaderboard would. ``--shots K`` gives each training row (``train``, ``train_base``) K worked examples of the call
format, shown before the question. This script is ``agent-tune data --env bfcl --split ... --options '{"seed": S,
"shots": K}'`` for every split at once, plus ``splits.json`` (the scenario numbers of each split).

    python data_preprocess/bfcl.py --out data/bfcl [--seed 42] [--shots 2]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from agent_tune.envs.bfcl.multi_turn.splits import SPLITS, scenario_split
from agent_tune.envs.tasks import catalogue_rows
from agent_tune.utils.rows import write_rows


def build_splits(seed: int, shots: int = 0) -> dict[str, list[dict[str, Any]]]:
    """Rows of every split, training rows with ``shots`` worked examples each."""
    return {split: catalogue_rows("bfcl", split, {"seed": seed, "shots": shots}) for split in SPLITS}


def write_splits(out_dir: Path, seed: int, shots: int = 0) -> dict[str, int]:
    out_dir.mkdir(parents=True, exist_ok=True)
    counts = {}
    for split, rows in build_splits(seed, shots).items():
        write_rows(out_dir, split, rows)
        counts[split] = len(rows)
    (out_dir / "splits.json").write_text(
        json.dumps({"seed": seed, "shots": shots, "scenarios": scenario_split(seed), "counts": counts}, indent=1))
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--shots", type=int, default=0, help="worked examples per training row (0: none)")
    args = parser.parse_args(argv)
    counts = write_splits(args.out, args.seed, args.shots)
    print(json.dumps(counts), file=sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
