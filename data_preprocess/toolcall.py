"""Write verl rows for the single-turn function-calling env ("toolcall").

Sources:

* ``--source bfcl [--categories ...]``: BFCL v4's single-turn entries (default: every Python category),
  split by id with a seed into train/val/test (``agent_tune.envs.bfcl.single_turn_splits``); each row
  names its entry (``extra_info.env.kwargs.test_id``) and the env scores it with BFCL's AST checker.
  ``--shots K``: K worked examples per row (other entries' questions and reference calls, drawn from the
  train split for every split: ``data_preprocess/bfcl_single_turn.py``).
* ``--source rlla FILE``: ToolRL's rlla data, raw JSON (``rlla_rl.json``) or processed parquet
  (``rlla_4k/train.parquet``), read by ``data_preprocess/rlla.py``; split into train/val (``--val-size``).
  The prompt is the dialogue (``input``); ``--keep-instruction`` also keeps ToolRL's system prompt (its
  tool list and output format) before it.
* ``--input FILE`` / ``--synthetic arith``: as below.

From a local jsonl of tasks, each ``{"question": ..., "tools": [...], "ground_truth": [{"name",
"arguments"}, ...]}`` (tools as OpenAI tools or bare function schemas), or a synthetic arithmetic task
(``--synthetic arith``: "What is 17 plus 25?" with add/subtract/multiply tools), the easy tool task the
learning-signal benchmark trains on. The synthetic prompt shows the call format either as ``--shots K``
worked examples (earlier user/assistant turns, default 2) or, with ``--shots 0``, as a hint appended to
the question. A 135M model almost never calls a tool from the hint alone (1 valid call in 128 samples
here) but does with two worked examples (51 in 128), and GRPO can only learn from groups that differ.

    python data_preprocess/toolcall.py --source bfcl --out data/bfcl_single [--categories simple_python] [--shots 2]
    python data_preprocess/toolcall.py --source rlla rlla_rl.json --out data/rlla [--val-size 100]
    python data_preprocess/toolcall.py --input tasks.jsonl --out data/toolcall [--val-size 50]
    python data_preprocess/toolcall.py --synthetic arith --n 256 --out data/arith [--seed 0] [--shots 2]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

from agent_tune.rows import write_rows

try:  # run as a script (python data_preprocess/toolcall.py) or imported as data_preprocess.toolcall
    from data_preprocess import bfcl_single_turn, rlla
except ImportError:  # pragma: no cover - the script's folder is on sys.path, not the repository root
    import bfcl_single_turn  # type: ignore[no-redef]
    import rlla  # type: ignore[no-redef]

AGENT_NAME = "agent_tune"
ENV_NAME = "toolcall"

_OPS = {
    "add": ("plus", lambda a, b: a + b),
    "subtract": ("minus", lambda a, b: a - b),
    "multiply": ("times", lambda a, b: a * b),
}


def arith_tools() -> list[dict[str, Any]]:
    """The three integer tools of the synthetic task."""
    verbs = {"add": "Add two integers.", "subtract": "Subtract b from a.", "multiply": "Multiply two integers."}
    return [
        {"type": "function", "function": {
            "name": name, "description": desc,
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        }}
        for name, desc in verbs.items()
    ]


FORMAT_HINT = (
    ' Answer with one tool call, for example: <tool_call>\n'
    '{"name": "multiply", "arguments": {"a": 3, "b": 4}}\n</tool_call>'
)


# Worked examples for --shots: small operands, so no task's answer is ever shown.
_DEMOS = [("multiply", 3, 4), ("subtract", 10, 7), ("add", 6, 5)]


def _demo_turns(shots: int) -> list[dict[str, str]]:
    if not 0 <= shots <= len(_DEMOS):
        raise ValueError(f"--shots must be between 0 and {len(_DEMOS)}, got {shots}")
    turns = []
    for name, a, b in _DEMOS[:shots]:
        call = json.dumps({"name": name, "arguments": {"a": a, "b": b}})
        turns += [{"role": "user", "content": f"What is {a} {_OPS[name][0]} {b}?"},
                  {"role": "assistant", "content": f"<tool_call>\n{call}\n</tool_call>"}]
    return turns


def arith_tasks(n: int, seed: int, shots: int = 0) -> list[dict[str, Any]]:
    """``n`` tasks 'What is A <op> B?' and the matching ground-truth call. The call format is shown by
    ``shots`` worked examples before the question (``messages``), or by a hint in it when ``shots=0``."""
    rng = random.Random(seed)
    tools = arith_tools()
    demos = _demo_turns(shots)
    out = []
    for _ in range(n):
        name = rng.choice(sorted(_OPS))
        a, b = rng.randint(2, 99), rng.randint(2, 99)
        question = f"What is {a} {_OPS[name][0]} {b}?" + ("" if shots else FORMAT_HINT)
        task = {"question": question, "tools": tools, "ground_truth": [{"name": name, "arguments": {"a": a, "b": b}}]}
        if shots:
            task["messages"] = demos + [{"role": "user", "content": question}]
        out.append(task)
    return out


def make_row(task: dict[str, Any], index: int, data_source: str, split: str = "train") -> dict[str, Any]:
    """One verl row; tools and ground truth are JSON strings (parquet-friendly), decoded by the env."""
    for key in ("question", "tools", "ground_truth"):
        if key not in task:
            raise ValueError(f"task {index}: missing {key!r}")
    gt = json.dumps(task["ground_truth"])
    messages = task.get("messages") or [{"role": "user", "content": task["question"]}]
    extra = {"index": index, "split": split, "question": task["question"], "tools": json.dumps(task["tools"]),
             "ground_truth": gt, "env": {"name": ENV_NAME, "kwargs": None}}
    if task.get("messages"):
        extra["messages"] = json.dumps(messages)  # the env's conversation (earlier turns + the question)
    if task.get("id") is not None:
        extra["task_id"] = str(task["id"])  # where the task came from (e.g. "rlla_rl.json record 12")
    return {
        "data_source": data_source,
        "agent_name": AGENT_NAME,
        "prompt": messages,
        "ability": "tool_use",
        "reward_model": {"style": "rule", "ground_truth": gt},
        "extra_info": extra,
    }


def read_tasks(path: Path) -> list[dict[str, Any]]:
    """Tasks of a jsonl file; a line missing a field fails here, naming the line and the field."""
    tasks = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            task = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{path.name} line {lineno}: not JSON ({exc})") from None
        missing = [k for k in ("question", "tools", "ground_truth") if not isinstance(task, dict) or k not in task]
        if missing and not (isinstance(task, dict) and "messages" in task and missing == ["question"]):
            raise ValueError(f"{path.name} line {lineno}: missing field {missing[0]!r}")
        tasks.append(task)
    return tasks


def split_tasks(tasks: list[dict[str, Any]], val_size: int, seed: int, source: str) -> dict[str, list[dict]]:
    """Rows of a seeded train/val split of ``tasks``."""
    if not 0 <= val_size < len(tasks):
        raise ValueError(f"--val-size {val_size} must be smaller than the {len(tasks)} tasks")
    order = list(range(len(tasks)))
    random.Random(seed).shuffle(order)
    val_ids = set(order[:val_size])
    train = [make_row(t, i, source) for i, t in enumerate(t for k, t in enumerate(tasks) if k not in val_ids)]
    val = [make_row(t, i, source, "val") for i, t in enumerate(t for k, t in enumerate(tasks) if k in val_ids)]
    return {"train": train, "val": val}


def rlla_tasks(path: Path, keep_instruction: bool) -> list[dict[str, Any]]:
    """ToolRL's rlla records as tasks; with ``keep_instruction`` ToolRL's system prompt precedes the dialogue."""
    tasks = rlla.load_rlla(path)
    if keep_instruction:
        for task in tasks:
            task["messages"] = [{"role": "system", "content": task["instruction"]},
                                {"role": "user", "content": task["question"]}]
    return tasks


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--source", nargs="+", metavar="SOURCE",
                     help="bfcl (BFCL single-turn entries) or rlla FILE (ToolRL's rlla json or parquet)")
    src.add_argument("--input", type=Path, help="jsonl of {question, tools, ground_truth}")
    src.add_argument("--synthetic", choices=["arith"], help="generate a synthetic task")
    ap.add_argument("--categories", nargs="+", default=None,
                    help="bfcl: single-turn categories (default: every Python one)")
    ap.add_argument("--keep-instruction", action="store_true",
                    help="rlla: keep ToolRL's system prompt (tool list + output format) before the dialogue")
    ap.add_argument("--n", type=int, default=256, help="synthetic: number of tasks")
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
    if args.shots is not None and not (args.synthetic or (args.source and args.source[0] == "bfcl")):
        ap.error("--shots applies to --synthetic and --source bfcl (rlla and --input tasks bring their own prompts)")
    if args.shots is not None and args.shots < 0:
        ap.error(f"--shots must be >= 0, got {args.shots}")
    if args.categories and not (args.source and args.source[0] == "bfcl"):
        ap.error("--categories applies to --source bfcl")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.source and args.source[0] == "bfcl":
            from agent_tune.envs.bfcl.single_turn import SINGLE_TURN_CATEGORIES

            seed = 42 if args.seed is None else args.seed
            splits = bfcl_single_turn.build_splits(args.categories or SINGLE_TURN_CATEGORIES, seed, args.shots or 0)
        else:
            seed = 0 if args.seed is None else args.seed
            if args.source:
                tasks, source = rlla_tasks(Path(args.source[1]), args.keep_instruction), "toolcall/rlla"
            elif args.input:
                tasks, source = read_tasks(args.input), f"toolcall/{args.input.stem}"
            else:
                shots = 2 if args.shots is None else args.shots
                tasks, source = arith_tasks(args.n + args.val_size, seed, shots), "toolcall/arith"
            splits = split_tasks(tasks, args.val_size, seed, source)
    except (ValueError, FileNotFoundError) as exc:
        raise SystemExit(f"error: {exc}") from None
    for name, rows in splits.items():
        write_rows(args.out, name, rows)
    print(json.dumps({name: len(rows) for name, rows in splits.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
