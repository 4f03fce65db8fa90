"""Write verl-ready ReTool rows (parquet + jsonl) from a math dataset.

The source is a local file (``.jsonl``, ``.json`` or ``.parquet``) or, for users with internet, a
dataset name loaded with ``datasets.load_dataset``. Each row carries the episode's first messages as
``prompt``, ``agent_name``, ``data_source``, ``reward_model = {style: rule, ground_truth}`` and
``extra_info = {env: {name: "retool", kwargs}, index, question, ground_truth}``; the agent loop builds the
environment from ``extra_info.env`` and resets it with ``question`` and ``ground_truth``.
``env.kwargs`` holds only what the command line overrides per row (``--max-tool-calls``, ...), so the
trainer config's ``env_kwargs.retool`` applies otherwise; it is null when empty.

    python data_preprocess/retool.py --input data/math.jsonl --out data/retool \\
        [--question-field problem] [--answer-field answer] [--val-size 100] [--seed 42]
    python data_preprocess/retool.py --dataset BytedTsinghua-SIA/DAPO-Math-17k --split train \\
        --question-field prompt --answer-field solution --out data/retool

Answers: ``--answer-marker '####'`` keeps what follows the last marker (GSM8K style);
``--extract-boxed`` keeps the last ``\\boxed{...}`` of a worked solution. Rows whose question or answer
is empty are skipped and counted.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from agent_tune.envs.retool import DEFAULT_SYSTEM_PROMPT, retool_prompt
from agent_tune.rewards.math_answer import extract_boxed
from agent_tune.rows import write_rows

AGENT_NAME = "agent_tune"
ENV_NAME = "retool"


def load_records(path: Path) -> list[dict[str, Any]]:
    """Records of a local ``.jsonl``, ``.json`` (a list, or ``{"data": [...]}``) or ``.parquet`` file."""
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        out = []
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"{path}:{n}: not valid JSON: {exc}") from exc
        return out
    if suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and isinstance(data.get("data"), list):
            data = data["data"]
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of records (or {{'data': [...]}})")
        return data
    if suffix == ".parquet":
        return pd.read_parquet(path).to_dict(orient="records")
    raise ValueError(f"{path}: unsupported file type {suffix!r} (use .jsonl, .json or .parquet)")


def load_hub_dataset(name: str, split: str, config: str | None = None) -> list[dict[str, Any]]:
    """Records of a dataset from the Hugging Face Hub (needs internet; not used in tests)."""
    from datasets import load_dataset

    return [dict(r) for r in load_dataset(name, config, split=split)]


def clean_answer(raw: Any, answer_marker: str | None = None, extract_boxed_answer: bool = False) -> str:
    """The bare reference answer from a dataset's answer field."""
    text = "" if raw is None else str(raw)
    if answer_marker and answer_marker in text:
        text = text.rsplit(answer_marker, 1)[1]
    if extract_boxed_answer:
        text = extract_boxed(text) or ""
    return text.strip()


def make_row(
    question: str,
    ground_truth: str,
    index: int,
    data_source: str,
    env_kwargs: dict[str, Any] | None = None,
    system_prompt: str | None = DEFAULT_SYSTEM_PROMPT,
    user_template: str = "{question}",
) -> dict[str, Any]:
    """One verl row for a math problem."""
    return {
        "data_source": data_source,
        "agent_name": AGENT_NAME,
        "prompt": retool_prompt(question, system_prompt, user_template),
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": ground_truth},
        "extra_info": {
            "index": index,
            "question": question,
            "ground_truth": ground_truth,
            # null when the row overrides nothing (parquet cannot store an empty struct); read as {}
            "env": {"name": ENV_NAME, "kwargs": dict(env_kwargs) if env_kwargs else None},
        },
    }


def build_rows(
    records: Iterable[dict[str, Any]],
    data_source: str,
    question_field: str = "problem",
    answer_field: str = "answer",
    answer_marker: str | None = None,
    extract_boxed_answer: bool = False,
    env_kwargs: dict[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """Rows for every usable record, and how many were skipped (empty question or answer)."""
    rows, skipped = [], 0
    for n, rec in enumerate(records):
        if question_field not in rec or answer_field not in rec:
            raise KeyError(
                f"record {n} has no field {question_field!r} or {answer_field!r}; its fields: {sorted(rec)}"
            )
        question = str(rec[question_field] or "").strip()
        answer = clean_answer(rec[answer_field], answer_marker, extract_boxed_answer)
        if not question or not answer:
            skipped += 1
            continue
        rows.append(make_row(question, answer, len(rows), data_source, env_kwargs))
    return rows, skipped


def split_rows(rows: list[dict[str, Any]], val_size: int, seed: int) -> dict[str, list[dict[str, Any]]]:
    """``train`` (and ``val`` of ``val_size`` rows drawn reproducibly); indices renumbered per split."""
    if val_size < 0 or (val_size > 0 and val_size >= len(rows)):
        raise ValueError(f"val_size {val_size} must be >= 0 and smaller than the {len(rows)} rows")
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    val_ids = set(order[:val_size])
    splits = {"train": [r for i, r in enumerate(rows) if i not in val_ids]}
    if val_size:
        splits["val"] = [r for i, r in enumerate(rows) if i in val_ids]
    for name, split_rows_ in splits.items():
        for i, row in enumerate(split_rows_):
            row["extra_info"]["index"] = i
            row["extra_info"]["split"] = name
    return splits


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--input", type=Path, help="local .jsonl / .json / .parquet file")
    src.add_argument("--dataset", help="dataset name for datasets.load_dataset (needs internet)")
    ap.add_argument("--dataset-config", default=None)
    ap.add_argument("--split", default="train", help="split to load with --dataset")
    ap.add_argument("--out", type=Path, required=True, help="output directory")
    ap.add_argument("--question-field", default="problem")
    ap.add_argument("--answer-field", default="answer")
    ap.add_argument("--answer-marker", default=None, help="keep the text after the last marker (e.g. '####')")
    ap.add_argument("--extract-boxed", action="store_true",
                    help="the answer field is a solution: keep its last \\boxed{}")
    ap.add_argument("--data-source", default=None, help="data_source of the rows (default: retool/<input name>)")
    ap.add_argument("--val-size", type=int, default=0)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--max-tool-calls", type=int, default=None, help="per-row env kwarg (overrides the config)")
    ap.add_argument("--max-tool-response-chars", type=int, default=None,
                    help="per-row env kwarg (overrides the config)")
    args = ap.parse_args(argv)

    if args.input is not None:
        if not args.input.is_file():
            ap.error(f"--input {args.input} does not exist")
        records = load_records(args.input)
        data_source = args.data_source or f"retool/{args.input.stem}"
    else:
        records = load_hub_dataset(args.dataset, args.split, args.dataset_config)
        data_source = args.data_source or args.dataset
    env_kwargs = {
        k: v
        for k, v in (("max_tool_calls", args.max_tool_calls), ("max_tool_response_chars", args.max_tool_response_chars))
        if v is not None
    }
    rows, skipped = build_rows(
        records, data_source, args.question_field, args.answer_field, args.answer_marker, args.extract_boxed, env_kwargs
    )
    if not rows:
        print(f"no usable rows ({skipped} skipped)", file=sys.stderr)
        return 1
    splits = split_rows(rows, args.val_size, args.seed)
    for name, split in splits.items():
        write_rows(args.out, name, split)
    sizes = ", ".join(f"{k} {len(v)}" for k, v in splits.items())
    print(f"wrote {sizes} rows to {args.out} ({skipped} skipped)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
