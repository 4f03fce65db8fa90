"""Where the BFCL env's time goes: its episode's own work, the step template, and the rest, per episode.

``benchmarks/bfcl_env.py`` times agent-tune's BFCL env against bfcl-eval's path on ground-truth replays; this
script times, on the same entries and texts, the parts of agent-tune's episode one by one (CPU time, best of
``--repeats``, all categories together), so the floor of the ratio is known:

* the episode's own work, cumulative: copying the entry's pristine backends, then running every decoded call on
  them, then each call's schema check and BFCL call string, then each turn's score (state and response checks; the
  state check is not walked where the calls are the ground truth's, as in the env); parsing the texts (hermes) is
  timed on its own;
* the step template: a do-nothing :class:`~agent_tune.envs.base.CallToolEnv` (same parser) stepping the same
  texts, its parsing taken off;
* the rest: the full env (``make_env`` + ``reset`` + ``step``) less the two above: the BFCL env's own records
  and bookkeeping (grades, call lists, messages, metrics, the final record).

    python benchmarks/bfcl_env_breakdown.py [--per-category 50] [--repeats 15]

The ``ratio`` column is bfcl-eval's time over each cumulative total: the speed-up the env would have if it did
only that much.
"""

from __future__ import annotations

import argparse
import time
from typing import Any, Callable

from agent_tune.envs.base import CallToolEnv, Observation, Outcome, Step, ToolResult
from agent_tune.envs.bfcl.calls import to_call_string
from agent_tune.envs.bfcl.multi_turn.backend import BFCLBackend
from agent_tune.envs.bfcl.multi_turn.data import SCORED_CATEGORIES, category_test_ids, load_entry, shared_entry
from agent_tune.envs.bfcl.multi_turn.ground_truth import ground_truth_trace, run_key
from agent_tune.envs.bfcl.multi_turn.replay import ground_truth_responses
from agent_tune.envs.bfcl.multi_turn.scoring import turn_error
from agent_tune.envs.bfcl.schema import tool_name, validate_arguments
from agent_tune.parsing import ParsedResponse, ToolCall, get_tool_parser
from agent_tune.parsing.response import ResponseParser

try:  # run as a script: the benchmark's official path is its sibling
    from bfcl_env import official_episode, ours_episode
except ImportError:  # imported as benchmarks.bfcl_env_breakdown
    from benchmarks.bfcl_env import official_episode, ours_episode


class _NullEnv(CallToolEnv):
    """The step template alone: every call answered "ok", an answer ends nothing."""

    def __init__(self) -> None:
        self.parser = ResponseParser("hermes", "none")

    def reset(self) -> Observation:
        super().reset()
        return Observation()

    def call_tool(self, call: ToolCall) -> ToolResult:
        return ToolResult("ok", call.name)

    def on_answer(self, step: Step) -> None:
        pass

    def outcome(self) -> Outcome:
        return Outcome(1.0, 1.0)


def _own_work(level: int, parsed: dict[str, list[ParsedResponse]]) -> Callable[[Any], None]:
    """One replay of the episode's own work on the parsed texts, up to ``level`` (1: copy and calls, 2: + schema
    checks, call strings and whether they are the ground truth's so far, 3: + turn scores, the state check skipped
    where the calls are the ground truth's, as the env does); level 0 copies the backends only."""

    def replay(entry: Any) -> None:
        model = BFCLBackend.for_entry(entry.id)
        if level == 0:
            return
        trace, shared = ground_truth_trace(entry.id), shared_entry(entry.id)
        tools = {tool_name(t): t for t in shared.functions}
        turn, acted, counts = 0, False, {}
        path, num_run, on_path = trace[-1].history, 0, True
        for response in parsed[entry.id]:
            if not response.calls:  # the answer that ends the turn
                gt = trace[turn]
                if level >= 3 and gt.calls:
                    same_calls = on_path and num_run == len(gt.history)
                    turn_error(acted, model, gt.state, counts, gt.required_counts(True), same_calls)
                turn, acted = turn + 1, False
                if turn >= shared.num_turns:
                    return
                tools.update((tool_name(t), t) for t in shared.missed_function.get(turn, []))
                continue
            for call in response.calls:
                if level >= 2:
                    tool = tools.get(call.name)
                    if tool is not None:
                        validate_arguments(tool, call.arguments)
                    call_string = to_call_string(call)
                    on_path = on_path and num_run < len(path) and path[num_run] == run_key(call, call_string)
                    num_run += 1
                result = model.execute(call.name, call.arguments)
                counts[result] = counts.get(result, 0) + 1
            acted = True

    return replay


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-category", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    parser = get_tool_parser("hermes")
    entries = [load_entry(t) for c in SCORED_CATEGORIES for t in category_test_ids(c)[: args.per_category]]
    responses = {e.id: ground_truth_responses(e, parser) for e in entries}
    parsed = {e.id: [parser.parse(r) for r in responses[e.id]] for e in entries}

    def null_env(entry: Any) -> None:
        env = _NullEnv()
        env.reset()
        for text in responses[entry.id]:
            env.step(text)
        env.finalize()

    parts: dict[str, Callable[[Any], Any]] = {
        "bfcl-eval": official_episode,
        "copy": _own_work(0, parsed),
        "copy+calls": _own_work(1, parsed),
        "copy+calls+checks": _own_work(2, parsed),
        "copy+calls+checks+score": _own_work(3, parsed),
        "parse": lambda e: [parser.parse(r) for r in responses[e.id]],
        "template (parse incl.)": null_env,
        "env": lambda e: ours_episode(e, responses[e.id]),
    }
    best = {name: float("inf") for name in parts}
    for _ in range(args.repeats):
        for name, fn in parts.items():
            t0 = time.process_time()
            for entry in entries:
                fn(entry)
            best[name] = min(best[name], time.process_time() - t0)
    us = {name: t / len(entries) * 1e6 for name, t in best.items()}
    own = us["copy+calls+checks+score"] + us["parse"]
    rows = [
        ("copy the pristine backends", us["copy"]),
        ("+ run the calls", us["copy+calls"]),
        ("+ schema checks, call strings", us["copy+calls+checks"]),
        ("+ score the turns", us["copy+calls+checks+score"]),
        ("+ parse the texts = own work", own),
        ("+ step template = floor", own + us["template (parse incl.)"] - us["parse"]),
        ("+ env's records = env", us["env"]),
    ]
    official, env = us["bfcl-eval"], us["env"]
    print(f"{len(entries)} entries, best of {args.repeats} (CPU us per episode); bfcl-eval {official:.1f} us")
    print(f"{'cumulative':<34}{'us':>8}{'of env':>8}{'ratio':>8}")
    for label, value in rows:
        print(f"{label:<34}{value:>8.1f}{100 * value / env:>7.0f}%{official / value:>7.2f}x")


if __name__ == "__main__":
    main()
