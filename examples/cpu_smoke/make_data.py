"""A tiny single-turn arithmetic dataset in verl's parquet format, for the CPU smoke run.

Rows: ``data_source`` (``agent_tune/arith``), ``prompt`` (chat messages), ``ability``, ``reward_model``
(``{"style": "rule", "ground_truth": "<number>"}``) and ``extra_info``. They use verl's default
single-turn agent loop; :mod:`reward` scores them.

    python examples/cpu_smoke/make_data.py OUT_DIR   # writes OUT_DIR/train.parquet and OUT_DIR/val.parquet
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

DATA_SOURCE = "agent_tune/arith"


def make_rows(n: int, seed: int, split: str) -> list[dict]:
    """``n`` questions 'What is a + b?' with small operands; deterministic for a seed."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        a, b = rng.randint(1, 20), rng.randint(1, 20)
        rows.append(
            {
                "data_source": DATA_SOURCE,
                "prompt": [{"role": "user", "content": f"What is {a} + {b}? Answer with the number only."}],
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": str(a + b)},
                "extra_info": {"split": split, "index": i},
            }
        )
    return rows


def write_dataset(out_dir: str | Path, n_train: int = 8, n_val: int = 4, seed: int = 0) -> dict[str, Path]:
    """Write ``train.parquet`` and ``val.parquet`` under ``out_dir``; return their paths."""
    import pandas as pd

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for split, n, split_seed in (("train", n_train, seed), ("val", n_val, seed + 1)):
        path = out / f"{split}.parquet"
        pd.DataFrame(make_rows(n, split_seed, split)).to_parquet(path)
        paths[split] = path
    return paths


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--n-train", type=int, default=8)
    parser.add_argument("--n-val", type=int, default=4)
    args = parser.parse_args()
    for split, path in write_dataset(args.out_dir, args.n_train, args.n_val).items():
        print(split, path)
