"""Write verl rows for the single-turn function-calling env ("toolcall", ToolRL's reward).

From a local jsonl of tasks, each ``{"question": ..., "tools": [...], "ground_truth": [{"name",
"arguments"}, ...]}`` (tools as OpenAI tools or bare function schemas), or a synthetic arithmetic task
(``--synthetic arith``: "What is 17 plus 25?" with add/subtract/multiply tools), the easy tool task the
learning-signal benchmark trains on. The synthetic prompt shows the call format either as ``--shots K``
worked examples (earlier user/assistant turns, default 2) or, with ``--shots 0``, as a hint appended to
the question. A 135M model almost never calls a tool from the hint alone (1 valid call in 128 samples
here) but does with two worked examples (51 in 128), and GRPO can only learn from groups that differ.

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
    return {
        "data_source": data_source,
        "agent_name": AGENT_NAME,
        "prompt": messages,
        "ability": "tool_use",
        "reward_model": {"style": "rule", "ground_truth": gt},
        "extra_info": extra,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--input", type=Path, help="jsonl of {question, tools, ground_truth}")
    src.add_argument("--synthetic", choices=["arith"], help="generate a synthetic task")
    ap.add_argument("--n", type=int, default=256, help="synthetic: number of tasks")
    ap.add_argument("--val-size", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--shots", type=int, default=2, help="synthetic: worked examples before the question (0: a hint)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    if args.input:
        tasks = [json.loads(line) for line in args.input.read_text(encoding="utf-8").splitlines() if line.strip()]
        source = f"toolcall/{args.input.stem}"
    else:
        tasks = arith_tasks(args.n + args.val_size, args.seed, args.shots)
        source = "toolcall/arith"
    if not 0 <= args.val_size < len(tasks):
        raise SystemExit(f"--val-size {args.val_size} must be smaller than the {len(tasks)} tasks")
    order = list(range(len(tasks)))
    random.Random(args.seed).shuffle(order)
    val_ids = set(order[: args.val_size])
    train = [make_row(t, i, source) for i, t in enumerate(t for k, t in enumerate(tasks) if k not in val_ids)]
    val = [make_row(t, i, source, "val") for i, t in enumerate(t for k, t in enumerate(tasks) if k in val_ids)]
    write_rows(args.out, "train", train)
    write_rows(args.out, "val", val)
    print(json.dumps({"train": len(train), "val": len(val)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
