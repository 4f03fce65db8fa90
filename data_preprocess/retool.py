"""Write verl-ready ReTool rows (parquet + jsonl) from a math dataset: ``agent-tune data --env retool`` with flags.

The source is a local file (``.jsonl``, ``.json`` or ``.parquet``) or, for users with internet, a dataset name
loaded with ``datasets.load_dataset``. The rows are the ``retool`` env's catalogue tasks
(:mod:`agent_tune.envs.retool.tasks`, :mod:`agent_tune.envs.tasks`): each carries the episode's first messages as
``prompt`` and ``extra_info = {index, split, id, category, env: {name: "retool", kwargs}, task: {question,
ground_truth}}``. ``env.kwargs`` holds only what the command line overrides per row (``--max-tool-calls``, ...),
so the trainer config's ``env_kwargs.retool`` applies otherwise; it is null when empty.

    python data_preprocess/retool.py --input data/math.jsonl --out data/retool \\
        [--question-field problem] [--answer-field answer] [--val-size 100] [--seed 42]
    python data_preprocess/retool.py --dataset BytedTsinghua-SIA/DAPO-Math-17k --split train \\
        --question-field prompt --answer-field solution --out data/retool

Answers: ``--answer-marker '####'`` keeps what follows the last marker (GSM8K style); ``--extract-boxed`` keeps
the last ``\\boxed{...}`` of a worked solution. Records whose question or answer is empty are skipped.
"""

from __future__ import annotations

import argparse
import sys

from agent_tune.envs.tasks import catalogue_rows
from agent_tune.utils.rows import write_rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--input", help="local .jsonl / .json / .parquet file")
    src.add_argument("--dataset", help="dataset name for datasets.load_dataset (needs internet)")
    ap.add_argument("--dataset-config", default=None)
    ap.add_argument("--split", default="train", help="split to load with --dataset")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--question-field", default="problem")
    ap.add_argument("--answer-field", default="answer")
    ap.add_argument("--answer-marker", default=None, help="keep the text after the last marker (e.g. '####')")
    ap.add_argument("--extract-boxed", action="store_true",
                    help="the answer field is a solution: keep its last \\boxed{}")
    ap.add_argument("--data-source", default=None, help="category of the rows (default: the input's name)")
    ap.add_argument("--val-size", type=int, default=0)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--max-tool-calls", type=int, default=None, help="per-row env kwarg (overrides the config)")
    ap.add_argument("--max-tool-response-chars", type=int, default=None,
                    help="per-row env kwarg (overrides the config)")
    args = ap.parse_args(argv)
    options = {
        "input": args.input, "dataset": args.dataset, "dataset_split": args.split,
        "dataset_config": args.dataset_config, "question_field": args.question_field,
        "answer_field": args.answer_field, "answer_marker": args.answer_marker, "extract_boxed": args.extract_boxed,
        "val_size": args.val_size, "seed": args.seed, "category": args.data_source,
        "max_tool_calls": args.max_tool_calls, "max_tool_response_chars": args.max_tool_response_chars,
    }
    sizes = []
    try:
        for split in ("train", "val") if args.val_size else ("train",):
            rows = catalogue_rows("retool", split, options)
            write_rows(args.out, split, rows)
            sizes.append(f"{split} {len(rows)}")
    except (ValueError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {', '.join(sizes)} rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
