"""Write synthetic ReTool conversations for the SFT cold start, and math problems for the GRPO phase after it.

Each conversation is a ReTool episode as the rollout keeps it: the env's system prompt and the question
(:func:`agent_tune.envs.retool.env.retool_prompt`), then one running assistant message in which the policy
writes a program between ``<code>`` and ``</code>``, the env's ``<interpreter>`` block follows with the
program's output (:func:`agent_tune.envs.retool.env.interpreter_block`, the exact text the env appends), and
the policy answers in ``\\boxed{}``; every third conversation runs a second program (a check). The
questions are small arithmetic problems whose outputs are computed here (no sandbox needed), so the
conversations are offline and reproducible: the data of the CPU proof of ``examples/run_retool_sft_grpo.sh``,
not a data set to learn mathematics from. The SFT configs for ReTool (``agent_tune_sft_retool*``) cut the
interpreter blocks out of the loss (``data.observation_pattern``).

    python data_preprocess/retool_sft_synthetic.py --out data/retool_sft [--n 32] [--problems 16] [--seed 0]

writes ``<out>/train.parquet`` and ``<out>/train.jsonl`` (the conversations; messages as JSON strings) and
``<out>/math.jsonl`` (``problem`` and ``answer`` per line, other problems than the conversations'), the input
of ``data_preprocess/retool.py`` for the GRPO rows.
"""

from __future__ import annotations

import argparse
import json
import operator
import random
import sys
from pathlib import Path
from typing import Any, Callable

from agent_tune.envs.retool.env import interpreter_block, retool_prompt
from data_preprocess.sft_synthetic import write

OPS: list[tuple[str, Callable[[int, int], int]]] = [("+", operator.add), ("-", operator.sub), ("*", operator.mul)]


def problem(rng: random.Random) -> tuple[str, str, int]:
    """``(question, python expression, value)`` of one arithmetic problem ``a op b op c``."""
    a, b, c = rng.randint(2, 99), rng.randint(2, 99), rng.randint(2, 99)
    (s1, f1), (s2, f2) = rng.choice(OPS), rng.choice(OPS)
    expr = f"({a} {s1} {b}) {s2} {c}"
    value = f2(f1(a, b), c)
    return f"Compute {expr}.", expr, value


def conversation(index: int, rng: random.Random) -> dict[str, Any]:
    """One ReTool conversation row: ``id``, ``messages`` (system, user, one assistant message), ``tools`` (none)."""
    question, expr, value = problem(rng)
    text = "I will compute it with Python.\n<code>\nprint(" + expr + ")\n</code>"
    text += interpreter_block(str(value))
    if index % 3 == 0:
        text += "Let me check the result.\n<code>\nprint(" + expr + f" == {value})\n</code>"
        text += interpreter_block("True")
    text += f"The result is {value}, so the answer is \\boxed{{{value}}}."
    messages = retool_prompt(question) + [{"role": "assistant", "content": text}]
    return {"id": f"retool-synth-{index}", "messages": messages, "tools": []}


def build(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` conversations, reproducible from ``seed``."""
    rng = random.Random(seed)
    return [conversation(i, rng) for i in range(n)]


def problems(n: int, seed: int = 0) -> list[dict[str, str]]:
    """``n`` problems ``{"problem", "answer"}`` for the GRPO rows, drawn apart from the conversations'."""
    rng = random.Random(f"grpo-{seed}")
    out = []
    for _ in range(n):
        question, _, value = problem(rng)
        out.append({"problem": question, "answer": str(value)})
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--n", type=int, default=32, help="number of conversations")
    parser.add_argument("--problems", type=int, default=16, help="number of problems in math.jsonl")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    path = write(build(args.n, args.seed), args.out)
    with open(Path(args.out) / "math.jsonl", "w", encoding="utf-8") as f:
        for row in problems(args.problems, args.seed):
            f.write(json.dumps(row) + "\n")
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
