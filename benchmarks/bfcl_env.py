"""Episodes/s: agent-tune's BFCL env vs bfcl-eval's own engine + checker, on the same episodes, in one run.

Both paths replay the ground truth of the same entries. The official path runs bfcl-eval's
inference-time engine (``execute_multi_turn_func_call``, eval of call strings, one global instance
set per model name) for every step and then ``multi_turn_checker`` (which re-executes everything in
fresh instances, plus the ground truth). agent-tune's path plays the episode through ``BFCLEnv`` in
eval mode from the model's *text* (hermes blocks), so it also pays for parsing; it executes each
call once and scores turn by turn.

    python benchmarks/bfcl_env.py [--per-category 50] [--repeats 3]
"""

from __future__ import annotations

import argparse
import itertools
import time

from agent_tune.envs import make_env
from agent_tune.envs.bfcl.data import SCORED_CATEGORIES, category_test_ids, ensure_bfcl_project_root, load_entry
from agent_tune.envs.bfcl.replay import ground_truth_responses
from agent_tune.parsing import get_tool_parser

ensure_bfcl_project_root()
from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils  # noqa: E402
from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import multi_turn_checker  # noqa: E402

_names = itertools.count()


def official_episode(entry) -> bool:
    """bfcl-eval's path: inference-time execution of each step, then its checker."""
    model_name = f"bench_{next(_names)}"
    decoded = []
    for turn in entry.ground_truth:
        steps = [list(turn)] if turn else []
        for step in steps:
            multi_turn_utils.execute_multi_turn_func_call(
                step, entry.initial_config, entry.involved_classes, model_name, entry.id,
                long_context=entry.long_context, is_evaL_run=False,
            )
        decoded.append(steps)
    test_entry = {"id": entry.id, "initial_config": entry.initial_config, "involved_classes": entry.involved_classes}
    valid = multi_turn_checker(decoded, entry.ground_truth, test_entry, entry.category, model_name)["valid"]
    g = vars(multi_turn_utils)
    for key in [k for k in g if k.startswith(model_name)]:  # otherwise instances pile up forever
        del g[key]
    return valid


def ours_episode(entry, responses) -> bool:
    env = make_env("bfcl", test_id=entry.id, eval_mode=True)
    env.reset()
    for text in responses:
        r = env.step(text)
        if r.done:
            return r.info["accuracy"] == 1.0
    return False


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-category", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    parser = get_tool_parser("hermes")
    entries = [load_entry(t) for c in SCORED_CATEGORIES for t in category_test_ids(c)[: args.per_category]]
    responses = {e.id: ground_truth_responses(e, parser) for e in entries}
    best = {"official": float("inf"), "agent_tune": float("inf")}
    for _ in range(args.repeats):  # interleaved repeats, best of each
        t0 = time.perf_counter()
        ok_official = sum(official_episode(e) for e in entries)
        t1 = time.perf_counter()
        ok_ours = sum(ours_episode(e, responses[e.id]) for e in entries)
        t2 = time.perf_counter()
        best["official"] = min(best["official"], t1 - t0)
        best["agent_tune"] = min(best["agent_tune"], t2 - t1)
    n = len(entries)
    print(f"episodes: {n} ({args.per_category} per category, ground truth replay), best of {args.repeats}")
    print(f"  bfcl-eval engine + checker : {n / best['official']:8.1f} episodes/s  ({ok_official}/{n} correct)")
    print(f"  agent-tune BFCLEnv (text)  : {n / best['agent_tune']:8.1f} episodes/s  ({ok_ours}/{n} correct)")
    print(f"  speed-up: {best['official'] / best['agent_tune']:.2f}x")


if __name__ == "__main__":
    main()
