"""Write verl rows for the single-turn function-calling env ("toolcall"): its catalogue as rows.

Sources (:mod:`agent_tune.envs.toolcall.tasks` says what each gives):

* ``--source bfcl [--categories ...]``: BFCL v4's single-turn entries (default: every category), split by id
  with a seed into train/val/test; ``--shots K``: K worked examples per row from the train split.
* ``--source rlla FILE``: ToolRL's rlla data, raw JSON (``rlla_rl.json``) or processed parquet
  (``rlla_4k/train.parquet``), split into train/val (``--val-size``); ``--keep-instruction`` also keeps
  ToolRL's system prompt (its tool list and output format) before the dialogue.
* ``--input FILE``: a local jsonl of ``{"question", "tools", "ground_truth"}`` tasks, split into train/val.
* ``--synthetic arith``: ``--n`` + ``--val-size`` arithmetic tasks, the call format shown by ``--shots K``
  worked examples (default 2) or, with ``--shots 0``, a hint in the question.

This script is ``agent-tune data --env toolcall --split ... --options JSON`` for every split of the source.

    python data_preprocess/toolcall.py --source bfcl --out data/bfcl_single [--categories simple_python] [--shots 2]
    python data_preprocess/toolcall.py --source rlla rlla_rl.json --out data/rlla [--val-size 100]
    python data_preprocess/toolcall.py --input tasks.jsonl --out data/toolcall [--val-size 50]
    python data_preprocess/toolcall.py --synthetic arith --n 256 --out data/arith [--seed 0] [--shots 2]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from agent_tune.envs.tasks import catalogue_rows
from agent_tune.envs.toolcall.tasks import FILE_SPLITS
from agent_tune.utils.rows import write_rows

BFCL_SPLITS = ("train", "val", "test")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--source", nargs="+", metavar="SOURCE",
                     help="bfcl (BFCL single-turn entries) or rlla FILE (ToolRL's rlla json or parquet)")
    src.add_argument("--input", type=Path, help="jsonl of {question, tools, ground_truth}")
    src.add_argument("--synthetic", choices=["arith"], help="generate a synthetic task")
    ap.add_argument("--categories", nargs="+", default=None,
                    help="bfcl: single-turn categories (default: every one)")
    ap.add_argument("--keep-instruction", action="store_true",
                    help="rlla: keep ToolRL's system prompt (tool list + output format) before the dialogue")
    ap.add_argument("--n", type=int, default=256, help="synthetic: number of training tasks")
    ap.add_argument("--val-size", type=int, default=16, help="rlla/input/synthetic: validation rows")
    ap.add_argument("--seed", type=int, default=None,
                    help="split seed (default: 42 for bfcl, as data_preprocess/bfcl.py; 0 otherwise)")
    ap.add_argument("--shots", type=int, default=None,
                    help="synthetic: worked examples before the question (default 2; 0: a hint); bfcl: worked "
                         "examples from other train entries before each row's question (default 0)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    if args.source:
        kind, files = args.source[0], args.source[1:]
        if kind not in ("bfcl", "rlla"):
            ap.error(f"--source {kind}: choose bfcl or rlla FILE")
        if (kind == "rlla") != bool(files) or len(files) > 1:
            ap.error("--source rlla takes one FILE; --source bfcl takes none")
    return args


def options_of(args: argparse.Namespace) -> dict[str, Any]:
    """The catalogue options (``ToolCallToolEnv.tasks``) the flags ask for; the catalogue checks them."""
    if args.source:
        opts: dict[str, Any] = {"source": args.source[0]}
        if args.source[1:]:
            opts["path"] = args.source[1]
    else:
        opts = {"source": "jsonl", "path": str(args.input)} if args.input else {"source": "arith", "n": args.n}
    for key in ("categories", "seed", "shots"):
        if getattr(args, key) is not None:
            opts[key] = getattr(args, key)
    if args.keep_instruction:
        opts["keep_instruction"] = True
    if opts["source"] != "bfcl":
        opts["val_size"] = args.val_size
    return opts


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    options = options_of(args)
    try:
        splits = {split: catalogue_rows("toolcall", split, options)
                  for split in (BFCL_SPLITS if options["source"] == "bfcl" else FILE_SPLITS)}
    except (ValueError, FileNotFoundError) as exc:
        raise SystemExit(f"error: {exc}") from None
    for name, rows in splits.items():
        write_rows(args.out, name, rows)
    print(json.dumps({name: len(rows) for name, rows in splits.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
