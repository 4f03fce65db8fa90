"""BFCL's per-turn rule (``agent_tune/envs/bfcl/multi_turn/scoring.py``), directly: the response check is a multiset
check (a ground-truth result that occurs twice must be matched by two results of the model), as bfcl-eval's
``response_checker`` (``_is_subsequence_unordered``) applies it; and the ground-truth trace the rule reads, whose turns
share what a turn left unchanged (``ground_truth.py``)."""

from __future__ import annotations

import itertools
from collections import Counter
from types import SimpleNamespace

import pytest
from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_checker as official

from agent_tune.envs.bfcl.multi_turn.data import load_entry
from agent_tune.envs.bfcl.multi_turn.ground_truth import ground_truth_trace
from agent_tune.envs.bfcl.multi_turn.replay import ground_truth_calls, responses_for
from agent_tune.envs.bfcl.multi_turn.scoring import missing_results, score_turn, turn_error
from agent_tune.parsing import get_tool_parser
from tests.envs.bfcl_helpers import official_verdict, play

RESPONSE_MISMATCH = "multi_turn:execution_response_mismatch"


# ---------------------------------------------------------------------- missing_results, by hand
@pytest.mark.parametrize(
    "model, ground_truth, missing",
    [
        (["a"], ["a", "a"], ["a"]),  # a duplicate matched once is still missing once
        ([], ["a", "a"], ["a", "a"]),
        (["a", "a"], ["a", "a"], []),
        (["a", "a", "a"], ["a", "a"], []),  # extra results of the model are fine
        (["a", "b"], ["a", "a", "b"], ["a"]),
        (["b", "a", "b"], ["a", "b", "b", "b"], ["b"]),
        (["a"], ["a", "b"], ["b"]),
        (["x"], [], []),
    ],
)
def test_missing_results_is_a_multiset_difference(model: list[str], ground_truth: list[str],
                                                  missing: list[str]) -> None:
    assert missing_results(Counter(model), Counter(ground_truth)) == missing
    assert missing_results(dict(Counter(model)), dict(Counter(ground_truth))) == missing  # plain dicts too


def test_missing_results_agrees_with_bfcl_evals_response_check_everywhere_small() -> None:
    """Every pair of result lists over 3 texts, up to 4 long (121 x 121 pairs): the same verdict as
    bfcl-eval's ``response_checker`` and the same missing results (as a multiset; bfcl-eval lists them in
    ground-truth order with repeats interleaved, ours groups a text's repeats)."""
    lists = [list(p) for n in range(5) for p in itertools.product(['"a"', '"b"', "None"], repeat=n)]
    duplicated = 0
    for model, gt in itertools.product(lists, lists):
        ours = missing_results(Counter(model), Counter(gt))
        verdict = official.response_checker(model, gt, 0)
        ok, theirs = official._is_subsequence_unordered(gt, model)
        assert (not ours) == verdict["valid"] == ok, (model, gt, ours, theirs)
        assert Counter(ours) == Counter(theirs), (model, gt)
        duplicated += bool(ours) and set(gt) <= set(model)  # a pass under a set rule, a fail under the multiset
    assert duplicated > 1000


# ---------------------------------------------------------------------- score_turn with a stand-in backend
class _Wallet:
    def __init__(self, balance: float) -> None:
        self.balance = balance


def _backend(balance: float) -> SimpleNamespace:
    return SimpleNamespace(instances={"Wallet": _Wallet(balance)})


def test_score_turn_needs_each_duplicate_result_matched_one_for_one() -> None:
    state = {"Wallet": {"balance": 5.0}}
    gt = Counter(['{"balance": 5.0}', '{"balance": 5.0}'])  # the turn's ground truth returned the same text twice
    once = score_turn(0, True, _backend(5.0), state, Counter(['{"balance": 5.0}']), gt)
    assert not once.passed and once.error_type == RESPONSE_MISMATCH
    assert once.details == {"turn": 0, "missing": ['{"balance": 5.0}']}
    assert score_turn(0, True, _backend(5.0), state, Counter(['{"balance": 5.0}'] * 2), gt).passed
    assert score_turn(0, True, _backend(5.0), state, Counter(['{"balance": 5.0}'] * 3 + ["x"]), gt).passed


def test_score_turn_checks_acting_then_state_then_results() -> None:
    state, gt = {"Wallet": {"balance": 5.0}}, Counter(["r", "r"])
    assert score_turn(1, False, _backend(5.0), state, Counter(["r", "r"]), gt).error_type == (
        "multi_turn:empty_turn_model_response")
    wrong_state = score_turn(1, True, _backend(4.0), state, Counter(["r"]), gt)
    assert wrong_state.error_type == "multi_turn:instance_state_mismatch"
    assert wrong_state.details["differences"] == {"Wallet": {"balance": {"model": 4.0, "ground_truth": 5.0}}}



def test_turn_error_is_score_turns_verdict() -> None:
    """The env scores with ``turn_error`` (no details): the same verdict as ``score_turn`` in every case, the state
    check first (a wrong state with results missing too is a state mismatch)."""
    state = {"Wallet": {"balance": 5.0}}
    for acted, balance, results, gt in itertools.product(
        (False, True), (4.0, 5.0), (["r"], ["r", "r"], ["x"], []), (Counter(["r", "r"]), Counter(["r"]), Counter())
    ):
        verdict = score_turn(0, acted, _backend(balance), state, Counter(results), gt)
        error = turn_error(acted, _backend(balance), state, Counter(results), gt)
        assert error == verdict.error_type and (error is None) == verdict.passed
    assert turn_error(True, _backend(4.0), state, Counter(), Counter(["r"])) == "multi_turn:instance_state_mismatch"

# ---------------------------------------------------------------------- a real entry, ours and bfcl-eval's
def test_an_entry_whose_turn_returns_the_same_text_twice() -> None:
    """multi_turn_base_133, turn 0: ``add_to_watchlist`` and ``get_watchlist`` both return the watchlist. A
    model that skips ``get_watchlist`` leaves the same state and one copy of the text: bfcl-eval fails the
    turn (response check), and so do we, in both modes; running the query twice, in two steps, passes."""
    test_id = "multi_turn_base_133"
    entry, trace = load_entry(test_id), ground_truth_trace(test_id)
    assert entry.ground_truth[0] == ["add_to_watchlist(stock='AAPL')", "get_watchlist()"]
    assert len(set(trace[0].results)) == 1 and trace[0].required_counts(True) == Counter({trace[0].results[0]: 2})
    hermes = get_tool_parser("hermes")
    gt = ground_truth_calls(entry)
    assert gt == ground_truth_calls(entry, schema_valid_only=True)  # training mode plays the same calls
    skipped = [[gt[0][:1]], *[[calls] for calls in gt[1:]]]
    split = [[gt[0][:1], gt[0][1:]], *[[calls] for calls in gt[1:]]]
    for eval_mode in (True, False):
        info = play(test_id, responses_for(skipped, hermes), eval_mode=eval_mode)
        assert info["turn_errors"][0] == RESPONSE_MISMATCH and info["accuracy"] == 0.0
        assert not official_verdict(entry, info["decoded_calls"])
        info = play(test_id, responses_for(split, hermes), eval_mode=eval_mode)
        assert info["accuracy"] == 1.0 and official_verdict(entry, info["decoded_calls"])


# ---------------------------------------------------------------------- the trace shares what a turn left unchanged
class _Folder:
    """A folder as bfcl-eval's file system has it: compared by name and contents, with a back-reference."""

    def __init__(self, name: str, parent: "_Folder | None" = None) -> None:
        self.name, self.parent, self.contents = name, parent, {}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Folder) and self.name == other.name and self.contents == other.contents


def _tree(note: str) -> _Folder:
    root = _Folder("/")
    docs = root.contents["docs"] = _Folder("docs", root)
    docs.contents["notes"] = [note, {"tags": ["a", "b"]}]
    src = root.contents["src"] = _Folder("src", root)
    src.contents["main"] = ["long enough to be a real file"]
    return root


def test_a_changed_tree_shares_its_unchanged_parts_with_the_turn_before() -> None:
    from agent_tune.envs.bfcl.multi_turn.ground_truth import _share_unchanged

    before, after = _tree("v1"), _tree("v2")  # one note changed, in docs/
    docs = after.contents["docs"]
    shared = _share_unchanged({"fs": {"root": before, "cwd": "/"}}, {"fs": {"root": after, "cwd": "/"}})["fs"]
    assert shared["root"] is after and shared["root"].contents["docs"] is docs  # changed: the new turn's own ...
    assert shared["root"].contents["src"] is before.contents["src"]  # ... holding the turn before's unchanged folder
    assert docs.contents["notes"][1] is before.contents["docs"].contents["notes"][1]  # and list items alike
    assert docs.parent is after  # a back-reference is left as it is (not walked)
    assert shared["root"] == _tree("v2") and shared["root"] != _tree("v1")  # what the state check sees is unchanged


def test_a_part_equal_to_one_of_another_type_is_not_shared() -> None:
    from agent_tune.envs.bfcl.multi_turn.ground_truth import _share_unchanged

    shared = _share_unchanged({"c": {"flag": 1, "n": 2}}, {"c": {"flag": True, "n": 2}})["c"]
    assert shared["flag"] is True and shared["n"] == 2  # 1 == True, but the turn keeps its own bool


def test_the_trace_of_a_file_system_entry_shares_folders_between_turns() -> None:
    trace = ground_truth_trace("multi_turn_long_context_3")
    roots = [turn.state["GorillaFileSystem"]["root"] for turn in trace]

    def objects(folder, out):
        out.add(id(folder))
        for item in folder.contents.values():
            objects(item, out) if hasattr(item, "contents") else out.add(id(item))
        return out

    first, second = objects(roots[0], set()), objects(roots[1], set())
    assert roots[0] is not roots[1] and len(first & second) >= len(second) // 2  # measured: 32 of 38


# ---------------------------------------------------------------------- a turn on the ground truth's path
STATE_MISMATCH = "multi_turn:instance_state_mismatch"


def test_turn_error_skips_the_state_check_only_given_same_calls() -> None:
    """``same_calls``: the states are the same by construction, so a (deliberately) different state is not walked;
    the other checks still apply, in their order."""
    state = {"Wallet": {"balance": 5.0}}
    assert turn_error(True, _backend(4.0), state, Counter(["r"]), Counter(["r"])) == STATE_MISMATCH
    assert turn_error(True, _backend(4.0), state, Counter(["r"]), Counter(["r"]), same_calls=True) is None
    assert turn_error(True, _backend(4.0), state, Counter(), Counter(["r"]), same_calls=True) == RESPONSE_MISMATCH
    assert turn_error(False, _backend(5.0), state, Counter(["r"]), Counter(), same_calls=True) == (
        "multi_turn:empty_turn_model_response")


def test_run_key_tells_apart_what_a_call_string_alone_would_not() -> None:
    from agent_tune.envs.bfcl.calls import to_call_string
    from agent_tune.envs.bfcl.multi_turn.ground_truth import run_key
    from agent_tune.parsing import ToolCall

    def key(name: str, arguments: dict) -> tuple:
        call = ToolCall(name, arguments)
        return run_key(call, to_call_string(call))

    assert key("f", {"x": 1}) == key("f", {"x": 1})
    assert len({key("f", {"x": v}) for v in (1, 1.0, True, "1", [1], None)}) == 6  # 1 == 1.0 == True, not as calls
    tricky, plain = ToolCall("f", {"x=1,y": 2}), ToolCall("f", {"x": 1, "y": 2})
    assert to_call_string(tricky) == to_call_string(plain)  # the string alone would take one for the other
    assert key("f", tricky.arguments) != key("f", plain.arguments)
    assert key("f", {"a": 1, "b": 2}) != key("f", {"b": 2, "a": 1})  # another order: off the path (checked in full)


def test_the_ground_truths_calls_rerun_on_a_copy_leave_the_traced_state_on_every_entry() -> None:
    """The premise of ``same_calls``, on every turn of every entry (all five categories): the entry's initial backends
    (the copy an episode plays on) after the ground truth's calls so far, rerun from their run keys, have the state the
    trace recorded, by the full check."""
    from agent_tune.envs.bfcl.calls import parse_call_string
    from agent_tune.envs.bfcl.multi_turn.backend import BFCLBackend
    from agent_tune.envs.bfcl.multi_turn.data import ALL_CATEGORIES, category_test_ids
    from agent_tune.envs.bfcl.multi_turn.scoring import state_differences

    turns = 0
    for category in ALL_CATEGORIES:
        for test_id in category_test_ids(category):
            model, done = BFCLBackend.for_entry(test_id), 0
            for turn in ground_truth_trace(test_id):
                for name, keys, call_string in turn.history[done:]:
                    call = parse_call_string(call_string, model.param_names)
                    assert (call.name, tuple(call.arguments)) == (name, keys)
                    model.execute(call.name, call.arguments)
                done = len(turn.history)
                assert not state_differences(model, turn.state), (test_id, turns)
                turns += 1
    assert turns > 4000  # measured: 4,484


def _same_calls_seen(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The ``same_calls`` of every turn the env scores from now on, in order."""
    import agent_tune.envs.bfcl.multi_turn.env as env_module

    seen: list[bool] = []

    def spy(*args: object) -> str | None:
        seen.append(bool(args[5]))
        return turn_error(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(env_module, "turn_error", spy)
    return seen


def test_a_ground_truth_replay_is_on_the_path_at_every_scored_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _same_calls_seen(monkeypatch)
    hermes = get_tool_parser("hermes")
    for test_id in ("multi_turn_base_2", "multi_turn_long_context_3", "multi_turn_miss_param_5"):
        entry = load_entry(test_id)
        for eval_mode in (True, False):
            seen.clear()
            info = play(test_id, responses_for([[t] for t in ground_truth_calls(entry)], hermes), eval_mode=eval_mode)
            assert info["accuracy"] == 1.0 and seen and all(seen), (test_id, eval_mode, seen)


def test_a_call_run_ahead_of_the_ground_truth_is_checked_in_full(monkeypatch: pytest.MonkeyPatch) -> None:
    """multi_turn_base_2: turn 1's ``echo`` already run in turn 0. Every call is the ground truth's, in its order, but
    turn 0 ends with one call more than the ground truth's turn 0: the state check is walked and finds the file
    written (bfcl-eval fails the entry too)."""
    seen = _same_calls_seen(monkeypatch)
    test_id = "multi_turn_base_2"
    entry, hermes = load_entry(test_id), get_tool_parser("hermes")
    gt = ground_truth_calls(entry)
    ahead = [[gt[0] + gt[1]], [], *[[calls] for calls in gt[2:]]]
    for eval_mode in (True, False):
        seen.clear()
        info = play(test_id, responses_for(ahead, hermes), eval_mode=eval_mode)
        assert seen[0] is False and info["turn_errors"][0] == STATE_MISMATCH and info["accuracy"] == 0.0
        assert not official_verdict(entry, info["decoded_calls"])


def test_a_call_off_the_path_leaves_it_for_good(monkeypatch: pytest.MonkeyPatch) -> None:
    """multi_turn_base_2: turn 1's ``echo`` writes another text, then turn 2 is the ground truth's again, at the same
    position in the history. The episode left the path at turn 1 and does not come back to it: turn 2's state check is
    walked and finds the other text (the response check alone would say the diff differs)."""
    from agent_tune.parsing import ToolCall

    seen = _same_calls_seen(monkeypatch)
    test_id = "multi_turn_base_2"
    entry, hermes = load_entry(test_id), get_tool_parser("hermes")
    gt = ground_truth_calls(entry)
    (echo,) = gt[1]
    other = ToolCall(echo.name, {**echo.arguments, "content": "Something else."})
    script = [[gt[0]], [[other]], *[[calls] for calls in gt[2:]]]
    info = play(test_id, responses_for(script, hermes), eval_mode=True)
    assert seen == [True, False, False, False, False]
    assert info["turn_errors"][:3] == [None, STATE_MISMATCH, STATE_MISMATCH]
    assert not official_verdict(entry, info["decoded_calls"])
