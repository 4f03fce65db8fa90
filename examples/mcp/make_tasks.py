"""Write ``examples/mcp/tasks.jsonl``: 50 notes tasks of one or two calls each (40 train, 10 test), seeded.

Kinds: ``add`` (save a note), ``delete``, ``append`` (add text to a note) and ``read`` (say what a note holds:
a call, then an answer). A task's ``setup`` calls put the notes it starts from on the server; ``verify.py``
checks the server's final state (or, for ``read``, the answer). A task's ``solution`` is it played right: the
calls, their results as a real notes server returns them (each task is played once on a server started here)
and the closing answer; ``agent-tune data --env mcp --options '{"path": ..., "shots": K}'`` shows K of them
as worked examples before each question.

    python -m examples.mcp.make_tasks
    python -m examples.mcp.make_tasks --extra-test 40 --out outputs/notes_tasks.jsonl

``--extra-test N`` writes the same 50 tasks and N more test tasks (drawn from another seed, kinds in turn), each
with a question no training task asks, so a test split can be large enough for its interval to mean something
(the file the MCP notes chain evaluates on: examples/chain/mcp_notes.sh).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

from agent_tune.envs.mcp.connection import MCPConnection, ServerSpec

TITLES = ["shopping", "ideas", "travel", "books", "gym", "work", "recipes", "garden", "music", "birthday",
          "movies", "school"]
TEXTS = ["buy milk", "call mom", "pack shoes", "read Dune", "run 5 km", "send the report", "bake bread",
         "water the roses", "learn a song", "order a cake", "watch Alien", "finish homework"]
EXTRA = ["and eggs", "today", "before noon", "on Friday", "with Sam", "again"]
KINDS = ["add"] * 20 + ["delete"] * 10 + ["append"] * 10 + ["read"] * 10


def task(kind: str, rng: random.Random) -> dict:
    title, text = rng.choice(TITLES), rng.choice(TEXTS)
    other = rng.choice([t for t in TITLES if t != title])
    setup = [{"name": "add_note", "arguments": {"title": title, "text": text}},
             {"name": "add_note", "arguments": {"title": other, "text": rng.choice(TEXTS)}}]
    if kind == "add":
        return {"kind": kind, "question": f"Save a note titled '{title}' with the text '{text}'.", "title": title,
                "text": text, "solution": solution("add_note", title=title, text=text)}
    if kind == "delete":
        return {"kind": kind, "question": f"Delete my note titled '{title}'.", "title": title, "setup": setup,
                "solution": solution("delete_note", title=title)}
    if kind == "append":
        extra = rng.choice(EXTRA)
        return {"kind": kind, "question": f"Add '{extra}' to the end of my note '{title}'.", "title": title,
                "text": f"{text} {extra}", "setup": setup, "solution": solution("append_to_note", title=title,
                                                                                text=extra)}
    return {"kind": kind, "question": f"What does my note '{title}' say?", "title": title, "text": text,
            "setup": setup, "solution": solution("read_note", title=title) | {"answer": f"It says: {text}"}}


def solution(name: str, **arguments: str) -> dict:
    """One call and the closing answer (its result is filled in by :func:`play`)."""
    return {"calls": [{"name": name, "arguments": arguments}], "answer": "Done."}


def play(conn: MCPConnection, task: dict) -> None:
    """Play ``task``'s solution on a cleared server and store the results the server returned."""
    conn.call("reset_notes", {})
    for call in task.get("setup", []):
        conn.call(call["name"], call["arguments"])
    results = [conn.call(c["name"], c["arguments"]) for c in task["solution"]["calls"]]
    if any(r.is_error for r in results):
        raise RuntimeError(f"the solution of {task['question']!r} failed: {[r.text for r in results]}")
    task["solution"]["results"] = [r.text for r in results]


def extra_test_tasks(n: int, taken: set[str], seed: int = 1) -> list[dict]:
    """``n`` test tasks whose questions are not in ``taken`` (nor repeated), kinds in turn; fewer if a kind runs
    out of new questions."""
    rng, out, kinds = random.Random(seed), [], ["add", "append", "delete", "read"]
    for i in range(n * 50):
        if len(out) == n:
            break
        record = task(kinds[i % len(kinds)], rng)
        if record["question"] not in taken:
            taken.add(record["question"])
            out.append(record)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m examples.mcp.make_tasks", description=__doc__.split("\n")[0])
    parser.add_argument("--extra-test", type=int, default=0, help="test tasks to add, with new questions")
    parser.add_argument("--out", default=str(Path(__file__).with_name("tasks.jsonl")))
    args = parser.parse_args(argv)
    rng = random.Random(0)
    kinds = list(KINDS)
    rng.shuffle(kinds)
    lines, seen = [], {k: 0 for k in KINDS}
    server = ServerSpec.parse({"command": [sys.executable, "-m", "examples.mcp.notes_server"],
                               "cwd": str(Path(__file__).resolve().parents[2])})
    conn = MCPConnection(server, 60.0, 30.0).open()
    try:
        for i, kind in enumerate(kinds):
            seen[kind] += 1
            split = "test" if seen[kind] % 5 == 0 else "train"  # every fifth task of each kind: every kind in test
            record = {"id": f"notes-{i}", "split": split, "category": kind, **task(kind, rng)}
            play(conn, record)
            lines.append(json.dumps(record))
        taken = {json.loads(line)["question"] for line in lines}
        for i, record in enumerate(extra_test_tasks(args.extra_test, taken)):
            record = {"id": f"notes-test-{i}", "split": "test", "category": record["kind"], **record}
            play(conn, record)
            lines.append(json.dumps(record))
    finally:
        conn.close()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(lines)} tasks in {out}")


if __name__ == "__main__":
    main()
