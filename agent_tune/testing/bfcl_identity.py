"""Same outputs before and after a change to the BFCL env: a digest of every scripted episode.

Plays scripted episodes on every multi-turn entry (all five categories): the ground truth and the
fidelity test's perturbations of it (dropped, changed, duplicated, moved, shuffled and foreign calls,
one call per step), plus malformed answers (a broken block, an unknown function, a schema-breaking
argument, a call among text), in eval mode, training mode and training mode with augmentation and
every reward kind. Each episode's observations (messages and tools of reset and of every step),
rewards, done flags and infos are hashed. Write the digests with one version of the code, then
compare with another:

    git archive <old commit> | tar -x -C /tmp/old
    (cd /tmp/old && PYTHONHASHSEED=0 PYTHONPATH=. python -m agent_tune.testing.bfcl_identity --write /tmp/old.json)
    PYTHONHASHSEED=0 PYTHONPATH=. python -m agent_tune.testing.bfcl_identity --compare /tmp/old.json

Each run imports the ``agent_tune`` of the folder it runs in (``python -m`` puts that folder first on ``sys.path``).
A commit older than this module has the same tool as ``benchmarks/bfcl_env_identity.py``
(``python benchmarks/bfcl_env_identity.py --write ...`` there); the digests are the same.

Both runs need the same ``PYTHONHASHSEED`` (the script refuses to run without one): a few of bfcl-eval's
error texts print a set (TravelAPI's "Must be one of {'economy', 'business', 'first'}"), whose order
follows the process's string hashing, so without it 25 of the episodes differ between any two processes,
with the same code.

The perturbations are the fidelity test's (:mod:`agent_tune.testing.bfcl_multi_turn_perturb`).

Used for the speed work of ``benchmarks/bfcl_env.py``: any difference names the episode.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
from pathlib import Path
from typing import Any, Iterator

from agent_tune.envs import make_env
from agent_tune.envs.bfcl.multi_turn.data import ALL_CATEGORIES, category_test_ids, load_entry
from agent_tune.envs.bfcl.multi_turn.replay import TURN_END_TEXT, ground_truth_calls, responses_for
from agent_tune.parsing import ToolCall, get_tool_parser
from agent_tune.testing.bfcl_multi_turn_perturb import perturbations

HERMES = get_tool_parser("hermes")
MODES: dict[str, dict[str, Any]] = {
    "eval": {"eval_mode": True},
    "train": {},
    "train_augment": {"augment": True, "reward": "progress_format"},
    "train_syntax": {"reward": "syntax", "max_steps_per_turn": 2},
    "train_accuracy": {"reward": "accuracy", "max_steps_per_episode": 6, "score_empty_turns": False},
}


def _malformed(turns: list[list[ToolCall]], rng: random.Random) -> Iterator[tuple[str, list[str]]]:
    """Scripts with answers no parser or schema accepts, mixed into the ground truth."""
    good = responses_for([[t] for t in turns], HERMES)
    calls = [c for t in turns for c in t]
    if not calls:
        return
    call = rng.choice(calls)
    broken = '<tool_call>\n{"name": "%s", "arguments": {\n</tool_call>' % call.name
    unknown = HERMES.format_calls([ToolCall("no_such_function", {"x": 1})])
    bad_type = HERMES.format_calls([ToolCall(call.name, {k: [v] for k, v in call.arguments.items()} or {"zz": 1})])
    mixed = "Let me check.\n" + HERMES.format_calls([call]) + "\nand then <tool_call>{oops}</tool_call>"
    for label, text in (("broken_block", broken), ("unknown_function", unknown), ("bad_type", bad_type),
                        ("mixed", mixed)):
        i = rng.randrange(len(good))
        yield label, good[:i] + [text] + good[i:]
    yield "no_calls", [TURN_END_TEXT] * len(turns)


def scripts(test_id: str, rng: random.Random) -> Iterator[tuple[str, list[str]]]:
    """Every scripted answer sequence played on ``test_id``."""
    turns = ground_truth_calls(load_entry(test_id))
    yield "ground_truth", responses_for([[t] for t in turns], HERMES)
    for kind, steps in perturbations(turns, rng):
        yield kind, responses_for(steps, HERMES)
    yield from _malformed(turns, rng)


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr, ensure_ascii=False)


def shown(r: Any) -> list[Any]:
    """What a step result shows, in the form the digests were first written in (before the step template of
    issue 21): the last step's ``info`` with the episode's fields over the step's own, ``format_errors``
    included (the episode total), and without the ``truncated`` / ``finalize_reason`` pair ``finalize`` then
    recorded for every env, nor the ``stop_reason`` every episode record has since (BFCL recorded ``end_reason``
    alone)."""
    info = r.info
    if getattr(r, "episode", None) is not None:
        info = {**info, **r.episode.as_dict()}
        for key in ("truncated", "finalize_reason", "stop_reason"):
            info.pop(key, None)
    return [r.observation.messages, r.observation.tools, r.reward, r.done, info]


def play_digest(test_id: str, responses: list[str], kwargs: dict[str, Any]) -> str:
    """sha256 of everything an episode shows: observations, rewards, done flags and infos."""
    h = hashlib.sha256()
    env = make_env("bfcl", test_id=test_id, **kwargs)
    obs = env.reset()
    h.update(_canon([obs.messages, obs.tools]).encode())
    for text in responses:
        r = env.step(text)
        h.update(_canon(shown(r)).encode())
        if r.done:
            break
    else:
        r = env.finalize()
        h.update(_canon(shown(r)).encode())
    return h.hexdigest()


def digests(per_category: int | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for category in ALL_CATEGORIES:
        rng = random.Random(f"identity-{category}")
        for test_id in category_test_ids(category)[:per_category]:
            for label, responses in scripts(test_id, rng):
                for mode, kwargs in MODES.items():
                    out[f"{test_id}/{label}/{mode}"] = play_digest(test_id, responses, kwargs)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = ap.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", type=Path, help="write the digests here")
    group.add_argument("--compare", type=Path, help="compare with digests written before")
    ap.add_argument("--per-category", type=int, default=None, help="first N entries per category (default: all)")
    args = ap.parse_args()
    if os.environ.get("PYTHONHASHSEED") in (None, "random"):
        sys.exit("set PYTHONHASHSEED (the same value for both runs): some backend error texts print sets")
    now = digests(args.per_category)
    if args.write:
        args.write.write_text(json.dumps(now, indent=0, sort_keys=True))
        print(f"{len(now)} episodes written to {args.write}")
        return
    before = json.loads(args.compare.read_text())
    differ = sorted(k for k in now.keys() & before.keys() if now[k] != before[k])
    missing = sorted(before.keys() ^ now.keys())
    print(f"{len(now)} episodes; {len(differ)} differ; {len(missing)} only on one side")
    for k in (differ + missing)[:20]:
        print("  ", k)
    sys.exit(1 if differ or missing else 0)


if __name__ == "__main__":
    main()
