"""The ``toolcall`` env's task catalogue, from one of four sources (the ``source`` option).

* ``bfcl`` (default): BFCL v4's single-turn entries of ``categories`` (default: all eleven), split by id with a
  seed (default 42) into ``train`` / ``val`` / ``test`` within each category
  (:mod:`agent_tune.envs.bfcl.single_turn.splits`); ``all`` is every entry. A task's id is its test id, its
  reset kwargs ``{"test_id": ...}``: the env loads the entry and scores it with BFCL's AST checker. ``shots=K``
  gives every task, in every split, K worked examples (other entries' questions answered by their reference
  calls) drawn from the TRAIN split's entries of ``categories``, so no val/test entry's answer is ever shown.
* ``rlla``: ToolRL's rlla data at ``path`` (raw JSON/jsonl or processed parquet, :mod:`agent_tune.envs.toolcall.rlla`);
  ``keep_instruction`` also keeps ToolRL's system prompt (its tool list and output format) before the dialogue.
* ``jsonl``: a local file at ``path`` of ``{"question", "tools", "ground_truth"}`` lines (``messages`` may replace
  ``question``; tools as OpenAI tools or bare function schemas).
* ``arith``: ``n`` synthetic tasks "What is A plus B?" with add / subtract / multiply tools, the easy task the
  learning-signal benchmark trains on; the call format is shown by ``shots`` worked examples (default 2) or,
  with ``shots=0``, a hint in the question. A 135M model almost never calls a tool from the hint alone (1 valid
  call in 128 samples here) but does with two worked examples (51 in 128).

The last three split into ``train`` / ``val`` (``val_size`` tasks drawn with ``seed``, default 0). Their reset
kwargs keep ``tools``, ``ground_truth`` and ``messages`` as JSON text (a parquet column cannot hold schemas of
different shapes); the env decodes them.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Sequence

from agent_tune.envs.catalogue import Task
from agent_tune.utils.jsonl import jsonl_lines

SOURCES = ("bfcl", "rlla", "jsonl", "arith")
SPLITS = ("train", "val", "test", "all")
FILE_SPLITS = ("train", "val")  # of rlla / jsonl / arith

_OPS = {
    "add": ("plus", lambda a, b: a + b),
    "subtract": ("minus", lambda a, b: a - b),
    "multiply": ("times", lambda a, b: a * b),
}
FORMAT_HINT = (
    ' Answer with one tool call, for example: <tool_call>\n'
    '{"name": "multiply", "arguments": {"a": 3, "b": 4}}\n</tool_call>'
)
# Worked examples of the arith source: small operands, so no task's answer is ever shown.
_DEMOS = [("multiply", 3, 4), ("subtract", 10, 7), ("add", 6, 5)]


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


def _demo_turns(shots: int) -> list[dict[str, str]]:
    if not 0 <= shots <= len(_DEMOS):
        raise ValueError(f"toolcall arith: shots must be between 0 and {len(_DEMOS)}, got {shots}")
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


def read_jsonl_tasks(path: Path) -> list[dict[str, Any]]:
    """Tasks of a jsonl file; a line missing a field fails here, naming the line and the field."""
    tasks = []
    for lineno, task in jsonl_lines(Path(path).read_text(encoding="utf-8"), Path(path).name):
        missing = [k for k in ("question", "tools", "ground_truth") if not isinstance(task, dict) or k not in task]
        if missing and not (isinstance(task, dict) and "messages" in task and missing == ["question"]):
            raise ValueError(f"{Path(path).name} line {lineno}: missing field {missing[0]!r}")
        tasks.append(task)
    return tasks


def rlla_tasks(path: Path, keep_instruction: bool) -> list[dict[str, Any]]:
    """ToolRL's rlla records as tasks; with ``keep_instruction`` ToolRL's system prompt precedes the dialogue."""
    from agent_tune.envs.toolcall.rlla import load_rlla

    tasks = load_rlla(path)
    if keep_instruction:
        for task in tasks:
            task["messages"] = [{"role": "system", "content": task["instruction"]},
                                {"role": "user", "content": task["question"]}]
    return tasks


def as_task(task: dict[str, Any], number: int, category: str) -> Task:
    """A file or synthetic task as an env task: reset kwargs with JSON-text tools, ground truth and messages; its
    id is the task's own ``id`` (rlla: its record) or ``<category>:<number>``."""
    gt = json.dumps(task["ground_truth"])
    kwargs: dict[str, Any] = {"question": task.get("question"), "tools": json.dumps(task["tools"]), "ground_truth": gt}
    if task.get("messages"):
        kwargs["messages"] = json.dumps(task["messages"])
    if kwargs["question"] is None:
        del kwargs["question"]
    return Task(str(task.get("id") or f"{category}:{number}"), kwargs, category, {}, gt)


def file_split(tasks: list[dict[str, Any]], split: str, val_size: int, seed: int, category: str) -> list[Task]:
    """The ``train`` or ``val`` part of a seeded split of ``tasks``."""
    if split not in FILE_SPLITS:
        raise ValueError(f"toolcall source {category!r} has the splits {', '.join(FILE_SPLITS)}, not {split!r}")
    if not 0 <= val_size < len(tasks):
        raise ValueError(f"val_size {val_size} must be smaller than the {len(tasks)} tasks")
    order = list(range(len(tasks)))
    random.Random(seed).shuffle(order)
    val = set(order[:val_size])
    return [as_task(t, k, category) for k, t in enumerate(tasks) if (k in val) == (split == "val")]


def bfcl_tasks(split: str, categories: Sequence[str] | None, seed: int, shots: int) -> list[Task]:
    """BFCL's single-turn entries of ``split`` (see the module docstring)."""
    from agent_tune.envs.bfcl.single_turn.entries import SINGLE_TURN_CATEGORIES, load_single_turn, single_turn_ids
    from agent_tune.envs.bfcl.single_turn.shots import choose_single_turn_shots
    from agent_tune.envs.bfcl.single_turn.splits import single_turn_split_ids

    cats = list(categories or SINGLE_TURN_CATEGORIES)
    unknown = [c for c in cats if c not in SINGLE_TURN_CATEGORIES]
    if unknown:
        raise ValueError(f"toolcall bfcl: unknown categories {unknown}; known: {', '.join(SINGLE_TURN_CATEGORIES)}")
    ids = [t for c in cats for t in single_turn_ids(c)] if split == "all" else single_turn_split_ids(split, cats, seed)
    pool = single_turn_split_ids("train", cats, seed) if shots else []
    tasks = []
    for test_id in ids:
        entry = load_single_turn(test_id)
        chosen = choose_single_turn_shots(test_id, pool, shots, seed) if shots else []
        tasks.append(Task(test_id, {"test_id": test_id}, entry.category, {"shots": chosen} if chosen else {},
                          json.dumps(entry.possible_answer)))
    return tasks


def toolcall_tasks(split: str, source: str = "bfcl", path: str | None = None,
                   categories: Sequence[str] | None = None, seed: int | None = None, shots: int | None = None,
                   val_size: int = 16, n: int = 256, keep_instruction: bool = False) -> list[Task]:
    """The tasks of ``split`` from ``source`` (see the module docstring for each source's options)."""
    if source not in SOURCES:
        raise ValueError(f"toolcall: source {source!r} is not one of {', '.join(SOURCES)}")
    if (path is not None) != (source in ("rlla", "jsonl")):
        raise ValueError(f"toolcall: source {source!r} {'needs' if path is None else 'takes no'} path")
    if categories is not None and source != "bfcl":
        raise ValueError("toolcall: categories apply to source 'bfcl'")
    if shots is not None and source not in ("bfcl", "arith"):
        raise ValueError("toolcall: shots apply to sources 'bfcl' and 'arith' (rlla and jsonl tasks bring prompts)")
    if keep_instruction and source != "rlla":
        raise ValueError("toolcall: keep_instruction applies to source 'rlla'")
    if shots is not None and shots < 0:
        raise ValueError(f"toolcall: shots must be >= 0, got {shots}")
    if source == "bfcl":
        return bfcl_tasks(split, categories, 42 if seed is None else seed, shots or 0)
    seed = 0 if seed is None else seed
    if source == "rlla":
        tasks, category = rlla_tasks(Path(str(path)), keep_instruction), "rlla"
    elif source == "jsonl":
        tasks, category = read_jsonl_tasks(Path(str(path))), Path(str(path)).stem
    else:
        tasks, category = arith_tasks(n + val_size, seed, 2 if shots is None else shots), "arith"
    return file_split(tasks, split, val_size, seed, category)
