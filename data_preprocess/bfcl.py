"""Write verl-ready BFCL multi-turn splits (parquet + jsonl).

Entries of the four scored categories that share a scenario number (``multi_turn_base_12``,
``multi_turn_miss_func_12``, ...) are variants of one scenario, so the split is drawn over scenario
numbers: no scenario appears in two splits. With 200 scenarios x 4 categories:

    train       400 entries (100 scenarios, all four categories)
    train_base  100 entries (the base entries of the train scenarios: the curriculum's first stages)
    train_hard  300 entries (the train scenarios' miss_func, miss_param and long_context entries:
                train minus train_base, the harder categories of the curriculum's third stage)
    val         100 entries (25 scenarios)
    test        300 entries (75 scenarios)

Each row carries the first user turn as ``prompt``, ``agent_name``, ``data_source``
(``bfcl/<category>``, so validation metrics come out per category), ``reward_model`` and
``extra_info.env = {name: "bfcl", kwargs: {test_id, ...}}`` from which the agent loop builds the
environment. Rows of ``val`` and ``test`` set ``eval_mode: true``: validation during training
scores exactly as the leaderboard would.

``--shots K`` gives each training row (``train``, ``train_base``) K worked examples of the call format
(``agent_tune.envs.bfcl.shots``): first turns of other train scenarios played by their ground truth,
chosen per row from the seed, written into the env kwargs (``shots``) and shown before the question in
``prompt``. Validation and test rows never get shots (they stay the leaderboard's prompts).

    python data_preprocess/bfcl.py --out data/bfcl [--seed 42] [--shots 2]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from agent_tune.envs.bfcl.data import load_entry
from agent_tune.envs.bfcl.shots import choose_shots, shot_messages
from agent_tune.envs.bfcl.splits import SPLITS, scenario_split, split_test_ids
from agent_tune.rows import write_rows

EVAL_SPLITS = ("val", "test")
SHOT_SPLITS = ("train", "train_base")
SHOT_POOL_SPLIT = "train_base"  # shots come from the base entries of the train scenarios
AGENT_NAME = "agent_tune"
# The parser that writes the shots' calls in ``prompt``; the env writes them with its configured parser.
SHOT_TOOL_PARSER = "hermes"


def make_row(test_id: str, index: int, env_kwargs: dict[str, Any] | None = None,
             split: str = "train") -> dict[str, Any]:
    """One verl row for a BFCL entry (``split`` is recorded so training metrics can leave validation out).

    ``env_kwargs["shots"]`` (test ids) puts those worked examples before the question in ``prompt``,
    as the env shows them."""
    entry = load_entry(test_id)
    shots = list((env_kwargs or {}).get("shots") or [])
    return {
        "data_source": f"bfcl/{entry.category}",
        "agent_name": AGENT_NAME,
        "prompt": shot_messages(shots, SHOT_TOOL_PARSER) + entry.question[0],
        "ability": "tool_use",
        "reward_model": {"style": "rule", "ground_truth": json.dumps(entry.ground_truth)},
        "extra_info": {
            "index": index,
            "split": split,
            "test_id": test_id,
            "category": entry.category,
            "env": {"name": "bfcl", "kwargs": {"test_id": test_id, **(env_kwargs or {})}},
        },
    }


def row_env_kwargs(test_id: str, split: str, seed: int, shots: int, pool: list[str]) -> dict[str, Any] | None:
    """Env kwargs of a row: eval mode for val/test, ``shots`` (drawn from ``pool``) for training rows."""
    if split in EVAL_SPLITS:
        return {"eval_mode": True}
    if shots and split in SHOT_SPLITS:
        return {"shots": choose_shots(test_id, shots, pool, seed)}
    return None


def build_splits(seed: int, shots: int = 0) -> dict[str, list[dict[str, Any]]]:
    """Rows of every split (``agent_tune.envs.bfcl.splits`` draws them), training rows with ``shots``
    worked examples each."""
    pool = split_test_ids(SHOT_POOL_SPLIT, seed)
    splits: dict[str, list[dict[str, Any]]] = {}
    for split in SPLITS:
        splits[split] = [make_row(t, i, row_env_kwargs(t, split, seed, shots, pool), split)
                         for i, t in enumerate(split_test_ids(split, seed))]
    return splits


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
