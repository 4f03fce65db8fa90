"""``max_turns``: a training episode plays the entry's first N user turns and is scored as an entry of those turns,
as bfcl-eval's checker scores the same prefix of the ground truth; eval mode always plays the whole entry."""

from __future__ import annotations

import dataclasses
import random

import pytest

from agent_tune.envs import make_env
from agent_tune.envs.bfcl.calls import syntax_error_text
from agent_tune.envs.bfcl.multi_turn.data import BFCLEntry, category_test_ids, load_entry
from agent_tune.envs.bfcl.multi_turn.env import BFCLToolEnv
from agent_tune.envs.bfcl.multi_turn.replay import ground_truth_calls, ground_truth_responses, responses_for
from agent_tune.parsing import get_tool_parser
from agent_tune.testing.bfcl_multi_turn_perturb import perturbations

from .bfcl_helpers import official_verdict, play

HERMES = get_tool_parser("hermes")


def _prefix(entry: BFCLEntry, turns: int) -> BFCLEntry:
    """The entry cut to its first ``turns`` user turns (questions, ground truth, held-back functions)."""
    return dataclasses.replace(
        entry, question=entry.question[:turns], ground_truth=entry.ground_truth[:turns],
        missed_function={t: f for t, f in entry.missed_function.items() if t < turns},
    )


def _comparable(entry: BFCLEntry) -> bool:
    """Training mode applies BFCL's rule exactly where its strictness cannot matter (the fidelity test's rule)."""
    gt = ground_truth_calls(entry)
    return gt == ground_truth_calls(entry, schema_valid_only=True) and not any(
        syntax_error_text(c) for turn in entry.ground_truth for c in turn
    )


@pytest.mark.parametrize("turns", [1, 2])
def test_prefix_episode_scores_as_the_official_checker_scores_the_prefix(turns: int) -> None:
    rng = random.Random(f"max-turns-{turns}")
    verdicts = {True: 0, False: 0}
    disagreements = []
    entries = [load_entry(t) for t in category_test_ids("multi_turn_base")[:40]]
    entries = [e for e in entries if _comparable(e) and e.num_turns > turns]
    assert len(entries) >= 20
    for entry in entries:
        prefix_calls = ground_truth_calls(entry)[:turns]
        # the ground truth of the first turns: the episode ends by itself after them, every turn passed
        info = play(entry.id, responses_for([[t] for t in prefix_calls], HERMES), max_turns=turns)
        assert info["end_reason"] == "completed" and info["num_turns"] == turns
        assert len(info["turn_scores"]) == len(info["decoded_calls"]) == turns
        assert info["accuracy"] == info["progress"] == 1.0
        assert official_verdict(_prefix(entry, turns), info["decoded_calls"])
        for kind, steps in perturbations(prefix_calls, rng):
            info = play(entry.id, responses_for(steps, HERMES), max_turns=turns)
            official = official_verdict(_prefix(entry, turns), info["decoded_calls"])
            verdicts[official] += 1
            if (info["accuracy"] == 1.0) != official:
                disagreements.append((entry.id, kind, info["turn_errors"]))
    assert not disagreements, disagreements[:5]
    assert verdicts[True] > 10 and verdicts[False] > 50, verdicts


def test_default_and_eval_mode_play_the_whole_entry() -> None:
    entry = load_entry("multi_turn_base_0")
    responses = ground_truth_responses(entry, HERMES)
    whole = play(entry.id, responses)
    assert whole["num_turns"] == entry.num_turns == len(whole["turn_scores"]) > 2
    # eval mode is the leaderboard: max_turns has no effect there
    leaderboard = play(entry.id, responses, eval_mode=True, max_turns=1)
    assert leaderboard["num_turns"] == len(leaderboard["decoded_calls"]) == entry.num_turns
    assert leaderboard["accuracy"] == 1.0
    # more turns than the entry has: the whole entry
    assert play(entry.id, responses, max_turns=99)["num_turns"] == entry.num_turns


def test_a_turn_left_unanswered_fails_the_prefix() -> None:
    env = make_env("bfcl", test_id="multi_turn_base_0", max_turns=1)
    env.reset()
    result = env.step("I cannot do that.")  # no call on a turn whose ground truth has calls
    assert result.done and result.info["turn_scores"] == [0.0] and result.info["accuracy"] == 0.0


def test_bad_max_turns_fails_naming_the_key() -> None:
    with pytest.raises(ValueError, match="max_turns"):
        make_env("bfcl", test_id="multi_turn_base_0", max_turns=0)
    with pytest.raises(ValueError, match="max_turns"):
        BFCLToolEnv.check_kwargs({"max_turns": "two"})
    BFCLToolEnv.check_kwargs({"max_turns": 2})
