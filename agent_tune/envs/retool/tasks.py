"""ReTool's task catalogue: math problems from a local file (or, with internet, a Hub dataset) as env tasks.

A record gives a question and a reference answer (``question_field`` / ``answer_field``); answers are cleaned
(``answer_marker``: keep what follows the last marker, GSM8K's ``####``; ``extract_boxed``: keep the last
``\\boxed{...}`` of a worked solution). Records whose question or answer is empty are skipped and counted in the
log. ``val`` draws ``val_size`` of the usable records reproducibly (``seed``); ``train`` is the rest.
"""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path
from typing import Any, Sequence

from agent_tune.envs.catalogue import Task
from agent_tune.rewards.math_answer import extract_boxed
from agent_tune.utils.jsonl import read_jsonl

logger = logging.getLogger(__name__)


def load_records(path: str | Path) -> list[dict[str, Any]]:
    """Records of a local ``.jsonl``, ``.json`` (a list, or ``{"data": [...]}``) or ``.parquet`` file."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path} does not exist")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return [record for _, record in read_jsonl(path)]
    if suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and isinstance(data.get("data"), list):
            data = data["data"]
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of records (or {{'data': [...]}})")
        return data
    if suffix == ".parquet":
        import pandas as pd

        return json.loads(pd.read_parquet(path).to_json(orient="records"))
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


def problems(records: Sequence[dict[str, Any]], question_field: str = "problem", answer_field: str = "answer",
             answer_marker: str | None = None, extract_boxed_answer: bool = False) -> tuple[list[tuple[str, str]], int]:
    """(question, answer) of every usable record, in order, and how many were skipped (empty question or answer).

    Raises:
        KeyError: a record without one of the two fields (naming the fields it has).
    """
    out, skipped = [], 0
    for n, rec in enumerate(records):
        if question_field not in rec or answer_field not in rec:
            raise KeyError(f"record {n} has no field {question_field!r} or {answer_field!r}; its fields: {sorted(rec)}")
        question = str(rec[question_field] or "").strip()
        answer = clean_answer(rec[answer_field], answer_marker, extract_boxed_answer)
        if not question or not answer:
            skipped += 1
            continue
        out.append((question, answer))
    return out, skipped


def split_problems(count: int, val_size: int, seed: int) -> dict[str, list[int]]:
    """Indices of ``train`` and ``val`` (``val_size`` drawn reproducibly from ``seed``), each in record order."""
    if val_size < 0 or (val_size > 0 and val_size >= count):
        raise ValueError(f"val_size {val_size} must be >= 0 and smaller than the {count} usable records")
    order = list(range(count))
    random.Random(seed).shuffle(order)
    val = set(order[:val_size])
    return {"train": [i for i in range(count) if i not in val], "val": sorted(val)}


def retool_tasks(split: str, input: str | None = None, dataset: str | None = None, dataset_split: str = "train",
                 dataset_config: str | None = None, question_field: str = "problem", answer_field: str = "answer",
                 answer_marker: str | None = None, extract_boxed: bool = False, val_size: int = 0, seed: int = 42,
                 category: str | None = None, max_tool_calls: int | None = None,
                 max_tool_response_chars: int | None = None) -> list[Task]:
    """The tasks of ``split`` (``train`` or ``val``) from ``input`` (a local file) or ``dataset`` (a Hub name).

    ``category`` defaults to the file's stem (the dataset's name); ``max_tool_calls`` / ``max_tool_response_chars``
    become each task's env kwargs (over the trainer config's ``env_kwargs.retool``)."""
    if (input is None) == (dataset is None):
        raise ValueError("retool tasks need exactly one source: input (a local .jsonl/.json/.parquet file) or dataset")
    records = load_records(input) if input is not None else load_hub_dataset(str(dataset), dataset_split,
                                                                               dataset_config)
    usable, skipped = problems(records, question_field, answer_field, answer_marker, extract_boxed)
    if skipped:
        logger.info("retool tasks: %d of %d records skipped (empty question or answer)", skipped, len(records))
    if not usable:
        raise ValueError(f"retool tasks: no usable records ({skipped} skipped)")
    category = category or (Path(input).stem if input is not None else str(dataset))
    env_kwargs = {k: v for k, v in (("max_tool_calls", max_tool_calls),
                                    ("max_tool_response_chars", max_tool_response_chars)) if v is not None}
    chosen = split_problems(len(usable), val_size, seed)[split]
    return [Task(f"{category}:{split}:{n}", {"question": usable[i][0], "ground_truth": usable[i][1]}, category,
                 dict(env_kwargs)) for n, i in enumerate(chosen)]
