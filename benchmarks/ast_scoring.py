"""Entries/s: agent-tune's BFCL single-turn AST rule vs bfcl-eval's own checker, on the same answers, in one run.

The answers are those of the agreement test (``tests/envs/test_bfcl_ast_agreement.py``): for every entry of
the 11 Python single-turn categories, the reference answer and its perturbations (``agent_tune/testing/bfcl_perturb``),
already decoded (``[{name: {param: value}}]``, or malformed on purpose). One scored entry is one (test entry,
answer) pair. Both sides start from the decoded answer:

* agent-tune: ``agent_tune.envs.bfcl.single_turn.ast_check.ast_verdict``;
* bfcl-eval: its runner's per-entry step for the category (``_evaluate_single_ast_entry`` -> format check ->
  ``ast_checker``, or ``_evaluate_single_relevance_entry``), imported with scoped SDK stand-ins
  (``agent_tune/testing/bfcl_official_ast``, the one copy of that importer), model ``Qwen_Qwen3-8B-FC``; its handler's
  ``decode_ast`` just returns the decoded answer.

Every verdict is compared too (``valid``, and the error type of an invalid answer): any disagreement, or
bfcl-eval raising, is printed and the exit status is 1. Repeats are interleaved; the best time of each side
per category is kept.

    python benchmarks/ast_scoring.py [--per-category N] [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_tune.envs.bfcl.single_turn.ast_check import ast_verdict  # noqa: E402
from agent_tune.envs.bfcl.single_turn.entries import SINGLE_TURN_CATEGORIES, load_single_turn, single_turn_ids  # noqa: E402
from agent_tune.testing.bfcl_official_ast import official_modules, official_verdict  # noqa: E402
from agent_tune.testing.bfcl_perturb import variants  # noqa: E402

Item = tuple[Any, str, Any]  # (entry, variant label, decoded answer)


def answers(category: str, per_category: int | None) -> list[Item]:
    ids = single_turn_ids(category)[:per_category]
    return [(entry, label, calls) for entry in map(load_single_turn, ids) for label, calls in variants(entry)]


def ours(items: list[Item], category: str) -> list[tuple[bool, str]]:
    out = []
    for entry, _, calls in items:
        v = ast_verdict(entry.functions, calls, entry.possible_answer, category)
        out.append((v.valid, v.error_type))
    return out


def official(items: list[Item], category: str) -> list[tuple[bool, str] | Exception]:
    out: list[tuple[bool, str] | Exception] = []
    for entry, _, calls in items:
        try:
            r = official_verdict(entry.functions, calls, entry.possible_answer, category, entry.test_id)
        except Exception as exc:  # noqa: BLE001 - bfcl-eval raising is a finding, reported below
            out.append(exc)
            continue
        out.append((bool(r["valid"]), r.get("error_type", "")))
    return out


def disagreements(items: list[Item], mine: list, theirs: list) -> list[str]:
    problems = []
    for (entry, label, calls), a, b in zip(items, mine, theirs):
        if isinstance(b, Exception):
            problems.append(f"{entry.test_id} {label}: bfcl-eval raised {b!r}; ours {a}")
        elif a[0] != b[0] or (not a[0] and a[1] != b[1]):
            problems.append(f"{entry.test_id} {label}: ours {a} vs bfcl-eval {b} for {calls!r}")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-category", type=int, default=None, help="first N entries of each category (default all)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    official_modules()  # the one-off import (~3 s) is not timed
    by_cat = {c: answers(c, args.per_category) for c in SINGLE_TURN_CATEGORIES}
    n_entries = {c: len({e.test_id for e, _, _ in items}) for c, items in by_cat.items()}
    print(f"setup (official import, loading, perturbing): {time.perf_counter() - t0:.1f} s")
    best: dict[tuple[str, str], float] = {}
    problems: list[str] = []
    for rep in range(args.repeats):  # interleaved repeats, best of each
        for cat, items in by_cat.items():
            verdicts = {}
            for side, fn in (("official", official), ("ours", ours)):
                t = time.perf_counter()
                verdicts[side] = fn(items, cat)
                best[cat, side] = min(best.get((cat, side), float("inf")), time.perf_counter() - t)
            if rep == 0:
                problems += disagreements(items, verdicts["ours"], verdicts["official"])
                valid = sum(v for v, _ in verdicts["ours"])
                print(f"  {cat}: {n_entries[cat]} entries x variants = {len(items)} answers, "
                      f"{valid} valid, {len(items) - valid} invalid")
    n = sum(len(items) for items in by_cat.values())
    print(f"\nAST scoring of decoded answers, best of {args.repeats} (entries/s; an entry = one test entry + "
          f"one answer)")
    print(f"{'category':<26}{'answers':>9}{'bfcl-eval':>12}{'agent-tune':>12}{'ours/official':>15}")
    for cat, items in by_cat.items():
        o, a = best[cat, "official"], best[cat, "ours"]
        print(f"{cat:<26}{len(items):>9}{len(items) / o:>12.0f}{len(items) / a:>12.0f}{o / a:>14.2f}x")
    o = sum(best[c, "official"] for c in by_cat)
    a = sum(best[c, "ours"] for c in by_cat)
    print(f"{'all':<26}{n:>9}{n / o:>12.0f}{n / a:>12.0f}{o / a:>14.2f}x")
    print(f"agreement: {n - len(problems)}/{n} verdicts ({100 * (n - len(problems)) / n:.2f}%), "
          f"{len(problems)} disagreements")
    for line in problems[:50]:
        print("  " + line)
    if len(problems) > 50:
        print(f"  ... and {len(problems) - 50} more")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
