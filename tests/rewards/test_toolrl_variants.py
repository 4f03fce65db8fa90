"""ToolRL's reward variants (Sections 5.1-5.3), each against values worked out by hand in the comments.

Ground truth used throughout: ``add(a=1, b=2), mul(x=3, y=4)``: ``|G| = 2`` calls with 4 parameters, so the
default ``S_max = 1 + 2 + 4 = 7`` and the intermediate ``S_max = 1 + 2 = 3``.
"""

from __future__ import annotations

import pytest

from agent_tune.parsing import ToolCall
from agent_tune.rewards.toolrl import match_calls, toolrl_score
from agent_tune.rewards.toolrl_config import ToolRLRewardConfig
from agent_tune.rewards.toolrl_format import toolrl_format_ok, toolrl_reasoning

ADD, MUL = ToolCall("add", {"a": 1, "b": 2}), ToolCall("mul", {"x": 3, "y": 4})
GT = [ADD, MUL]
WRONG_VALUE = [ToolCall("add", {"a": 1, "b": 5}), MUL]
WRONG_KEY = [ToolCall("add", {"a": 1, "c": 2}), MUL]
MISSING = [ADD]


def _correct(pred, granularity="default", **cfg) -> float:
    return toolrl_score(pred, GT, True, ToolRLRewardConfig(granularity=granularity, **cfg)).correctness


# ----------------------------------------------------------------------------- granularity (5.3)


def test_default_granularity() -> None:
    # wrong value: S = names 1 + add (keys 1 + values 1) + mul (1 + 2) = 6 -> -3 + 6 * 6/7 = 15/7
    assert _correct(WRONG_VALUE) == pytest.approx(15 / 7)
    # wrong key: add keys J({a,b},{a,c}) = 1/3, values 1 -> S = 1 + 4/3 + 3 = 16/3 -> -3 + 6 * (16/3)/7 = 11/7
    assert _correct(WRONG_KEY) == pytest.approx(11 / 7)
    # missing mul: names J({add,mul},{add}) = 1/2, add 1 + 2 -> S = 3.5 -> -3 + 6 * 3.5/7 = 0
    assert _correct(MISSING) == pytest.approx(0.0)


def test_finegrained_makes_name_and_key_matches_binary() -> None:
    # REFINEDREWARD: wrong key: add keys 0 (sets differ), values 1 -> S = 1 + 1 + 3 = 5 -> -3 + 30/7 = 9/7
    assert _correct(WRONG_KEY, "finegrained") == pytest.approx(9 / 7)
    # missing mul: names 0 (sets differ), add 1 + 2 -> S = 3 -> -3 + 18/7 = -3/7
    assert _correct(MISSING, "finegrained") == pytest.approx(-3 / 7)
    # wrong value: the binary terms are all 1, values are still counted: as default, 15/7
    assert _correct(WRONG_VALUE, "finegrained") == pytest.approx(15 / 7)


def test_intermediate_counts_whole_calls() -> None:
    # INTERMEDIATEREWARD: S_max = 3; wrong value or key: names 1 + mul exact 1 = 2 -> -3 + 6 * 2/3 = 1
    assert _correct(WRONG_VALUE, "intermediate") == pytest.approx(1.0)
    assert _correct(WRONG_KEY, "intermediate") == pytest.approx(1.0)
    # missing mul: names 1/2 + add exact 1 = 1.5 -> -3 + 6 * 1.5/3 = 0
    assert _correct(MISSING, "intermediate") == pytest.approx(0.0)
    assert _correct(GT, "intermediate") == pytest.approx(3.0)


def test_coarse_is_all_or_nothing() -> None:
    # COARSEREWARD: max iff the calls equal the ground truth: ToolRL's code compares ordered lists,
    # matching=optimal takes them in any order
    for matching in ("toolrl", "optimal"):
        assert _correct(WRONG_VALUE, "coarse", matching=matching) == pytest.approx(-3.0)
        assert _correct(GT, "coarse", matching=matching) == pytest.approx(3.0)
        assert _correct(GT + [ADD], "coarse", matching=matching) == pytest.approx(-3.0)
    assert _correct(list(reversed(GT)), "coarse", matching="optimal") == pytest.approx(3.0)
    assert _correct(list(reversed(GT)), "coarse") == pytest.approx(-3.0)


@pytest.mark.parametrize("matching", ["toolrl", "optimal"])
@pytest.mark.parametrize("granularity", ["default", "finegrained", "intermediate", "coarse"])
def test_every_granularity_agrees_at_the_ends(granularity: str, matching: str) -> None:
    assert match_calls(GT, GT, granularity, matching).fraction == pytest.approx(1.0)
    assert match_calls(GT, GT, granularity, matching).exact
    assert match_calls([ToolCall("sub", {})], GT, granularity, matching).fraction == pytest.approx(0.0)
    assert match_calls([], [], granularity, matching).exact


# ----------------------------------------------------------------------------- scale (5.2)


def _total(pred, step, format_ok=True, **cfg):
    return toolrl_score(pred, GT, format_ok, ToolRLRewardConfig(**cfg), step=step)


def test_max1_equal_max() -> None:
    # CORRECTMAX1: correctness in [-1, 1]: -1 + 2 * 6/7 = 5/7; the format reward stays 1
    s = _total(WRONG_VALUE, 0, scale="max1")
    assert s.correctness == pytest.approx(5 / 7) and s.reward == pytest.approx(12 / 7)
    assert (s.min_reward, s.max_reward) == (-1.0, 2.0)


def test_two_stage_switches_at_step_30() -> None:
    # MAX1STEP30MAX3: step 29: correctness [-1, 1] -> 5/7, format 1 -> 12/7
    assert _total(WRONG_VALUE, 29, scale="two_stage").reward == pytest.approx(12 / 7)
    # step 30: correctness [-3, 3] -> 15/7, format max halved -> 0.5 + 15/7 = 37/14
    s = _total(WRONG_VALUE, 30, scale="two_stage")
    assert s.format_reward == 0.5 and s.reward == pytest.approx(37 / 14)
    assert _total(WRONG_VALUE, 30, False, scale="two_stage").format_reward == 0.0
    assert _total(WRONG_VALUE, 10, scale="two_stage", two_stage_step=10).format_reward == 0.5
    assert _total(WRONG_VALUE, None, scale="two_stage").reward == pytest.approx(12 / 7)  # None reads as step 0


def test_smooth_schedule() -> None:
    # SCHEDULEREWARD over 150 steps, p = step / 150
    # step 0: correctness [-2, 2] -> -2 + 4 * 6/7 = 10/7; format [-2, 2]
    s = _total(WRONG_VALUE, 0, scale="smooth")
    assert s.correctness == pytest.approx(10 / 7) and s.format_reward == 2.0
    assert _total(WRONG_VALUE, 0, False, scale="smooth").format_reward == -2.0
    # step 30, p = 0.2: correctness [-2.2, 2.2]; format max 1.8, min -2 + 0.4 = -1.6
    assert _total(GT, 30, scale="smooth").correctness == pytest.approx(2.2)
    assert _total(GT, 30, False, scale="smooth").format_reward == pytest.approx(-1.6)
    assert _total(GT, 30, True, scale="smooth").format_reward == pytest.approx(1.8)
    # step 75, p = 0.5: correctness -2.5 + 5 * 6/7 = 25/14; format min reaches -1, max 1.5
    assert _total(WRONG_VALUE, 75, scale="smooth").correctness == pytest.approx(25 / 14)
    assert _total(WRONG_VALUE, 75, False, scale="smooth").format_reward == pytest.approx(-1.0)
    # step 150 and beyond: correctness [-3, 3], format [-1, 1]
    for step in (150, 400):
        assert _total(GT, step, scale="smooth").reward == pytest.approx(4.0)
        assert _total([], step, False, scale="smooth").reward == pytest.approx(-4.0)
    # the horizon may be the trainer's total steps: 21 of 105 is p = 0.2 again
    s = _total(GT, 21, scale="smooth", smooth_schedule_steps=None, total_training_steps=105)
    assert s.correctness == pytest.approx(2.2)


def test_unit_reward_follows_the_range() -> None:
    # default: (1 + 15/7 + 3) / 7 = 43/49
    assert _total(WRONG_VALUE, 0).unit_reward == pytest.approx(43 / 49)
    # smooth at step 0: range [-4, 4]: (2 + 10/7 + 4) / 8 = 13/14
    assert _total(WRONG_VALUE, 0, scale="smooth").unit_reward == pytest.approx(13 / 14)


# ----------------------------------------------------------------------------- length (5.1)


def _words(n: int) -> str:
    return " ".join(["w"] * n)


def test_fixed_length_reward() -> None:
    cfg = ToolRLRewardConfig(length="fixed")  # WITHLENGTH: target 512 words
    assert cfg.length_reward(_words(100), 0) == pytest.approx(0.2)  # round(100/512 = 0.195, 2)
    assert cfg.length_reward(_words(256), 0) == pytest.approx(0.5)
    assert cfg.length_reward(_words(600), 0) == 1.0  # capped
    assert cfg.length_reward(None, 0) == 0.0  # no reasoning block
    assert ToolRLRewardConfig().length_reward(_words(600), 0) == 0.0  # length=none
    # in the total: format 1 + 15/7 + 0.5, range [-3, 5]
    s = toolrl_score(WRONG_VALUE, GT, True, cfg, 0, reasoning=_words(256))
    assert s.reward == pytest.approx(1 + 15 / 7 + 0.5) and (s.min_reward, s.max_reward) == (-3.0, 5.0)


def test_scheduled_length_reward() -> None:
    # SCHEDULELENGTH: target 384 + (640 - 384) * step / 105
    cfg = ToolRLRewardConfig(length="scheduled", total_training_steps=105)
    assert cfg.length_target_words(0) == 384 and cfg.length_reward(_words(96), 0) == pytest.approx(0.25)
    assert cfg.length_target_words(105) == 640 and cfg.length_reward(_words(96), 105) == pytest.approx(0.15)
    # step 42: target 384 + 256 * 0.4 = 486.4; 100 words -> round(0.2056, 2) = 0.21
    assert cfg.length_reward(_words(100), 42) == pytest.approx(0.21)
    assert cfg.length_target_words(210) == 640  # held after the horizon
    # an explicit horizon wins over the trainer's total
    own = ToolRLRewardConfig(length="scheduled", length_schedule_steps=10, total_training_steps=105)
    assert own.length_target_words(5) == pytest.approx(512)


def test_reasoning_as_toolrl_reads_it() -> None:
    assert toolrl_reasoning("<think> a b  c </think>\n<response>x</response>") == "a b  c"
    assert toolrl_reasoning("<think>x</think> <think> y z </think>") == "y z"  # the last block
    assert toolrl_reasoning("<think> unfinished") is None and toolrl_reasoning("no tags") is None


# ----------------------------------------------------------------------------- matching: toolrl | optimal


def _f(**arguments) -> ToolCall:
    return ToolCall("f", arguments)


# (ground truth, prediction, granularity, correctness under matching=toolrl, under matching=optimal), worked
# by hand from ToolRL's rlla.py (match_score, compute_tool_call_reward) and from the optimal rule.
# toolrl: O = match_score: 1 if the lists are equal, 0 if one is empty, else multiset Jaccard; calls paired
# greedily in ground-truth order (best unused same-name prediction, first on a tie, score > 0).
# optimal: O = set Jaccard; the best one-to-one pairing.
MATCHING_CASES = {
    # duplicated names, GT [f, f], pred [f]; S_max = 1 + 2 + 2 = 5.
    # toolrl: names |{f}| / (2 + 1 - 1) = 1/2, f(a=1) paired (1 + 1) -> S = 2.5 -> -3 + 6 * 2.5/5 = 0
    # optimal: names {f} = {f}: 1 -> S = 3 -> -3 + 6 * 3/5 = 0.6
    "duplicate_names": ([_f(a=1), _f(a=2)], [_f(a=1)], "default", 0.0, 0.6),
    # the same under finegrained: toolrl names [f, f] != [f] -> 0, f(a=1): keys [a] = [a] 1 + value 1 -> S = 2
    # -> -3 + 6 * 2/5 = -0.6; optimal: name sets equal -> S = 3 -> 0.6
    "duplicate_names_finegrained": ([_f(a=1), _f(a=2)], [_f(a=1)], "finegrained", -0.6, 0.6),
    # a duplicated prediction, GT [f(a=1)], pred [f(a=1), f(a=1)]; S_max = 1 + 1 + 1 = 3.
    # toolrl: names 1 / (1 + 2 - 1) = 1/2, pair 1 + 1 -> S = 2.5 -> -3 + 6 * 2.5/3 = 2
    # optimal: names 1 -> S = 3 -> 3 (sets do not see the repeated call)
    "duplicate_prediction": ([_f(a=1)], [_f(a=1), _f(a=1)], "default", 2.0, 3.0),
    # greedy takes the wrong prediction: GT [f(a=1, b=2), f(a=1)], pred [f(a=1, b=5), f(b=2)]; S_max = 6.
    # f(a=1, b=2) against f(a=1, b=5): keys 1 + values 1 = 2; against f(b=2): 1/2 + 1 = 1.5;
    # f(a=1) against f(a=1, b=5): 1/2 + 1 = 1.5; against f(b=2): 0.
    # toolrl: names 1, first GT call takes f(a=1, b=5) (2), f(a=1) is left f(b=2) (0, unpaired) -> S = 3 -> 0
    # optimal: 1.5 + 1.5 -> S = 4 -> -3 + 6 * 4/6 = 1
    "greedy_suboptimal": ([_f(a=1, b=2), _f(a=1)], [_f(a=1, b=5), _f(b=2)], "default", 0.0, 1.0),
    # a tie goes to the first prediction: GT [f(a=1, b=2), f(a=1)], pred [f(a=1), f(b=2)]; S_max = 6.
    # f(a=1, b=2) scores 1/2 + 1 against either; f(a=1) 2 against f(a=1), 0 against f(b=2).
    # toolrl: the first GT call takes f(a=1) (1.5), f(a=1) is left f(b=2) (0) -> S = 2.5 -> -3 + 2.5 = -0.5
    # optimal: 1.5 + 2 -> S = 4.5 -> -3 + 4.5 = 1.5
    "greedy_tie": ([_f(a=1, b=2), _f(a=1)], [_f(a=1), _f(b=2)], "default", -0.5, 1.5),
    # reordered parallel calls, GT [add(a=1, b=2), mul(x=3, y=4)], pred [mul, add]; S_max = 7 (intermediate 3).
    # default: multiset names 1, every call paired with its own -> S = 7 -> 3 under both
    "reordered_default": (GT, [MUL, ADD], "default", 3.0, 3.0),
    # finegrained: toolrl names [add, mul] != [mul, add] -> 0, pairs (1 + 2) * 2 -> S = 6 -> -3 + 36/7 = 15/7;
    # optimal: name sets equal -> S = 7 -> 3
    "reordered_finegrained": (GT, [MUL, ADD], "finegrained", 15 / 7, 3.0),
    # intermediate: ToolRL compares whole calls, found wherever they are: names 1 + 2 calls -> 3 under both
    "reordered_intermediate": (GT, [MUL, ADD], "intermediate", 3.0, 3.0),
    # coarse: toolrl compares the ordered lists -> -3; optimal in any order -> 3
    "reordered_coarse": (GT, [MUL, ADD], "coarse", -3.0, 3.0),
    # intermediate with duplicates, GT [add, add], pred [add]; S_max = 3.
    # toolrl: names 1/2 + 1 call -> 1.5 -> 0; optimal: names 1 + 1 call -> 2 -> -3 + 6 * 2/3 = 1
    "duplicate_names_intermediate": ([ADD, ADD], [ADD], "intermediate", 0.0, 1.0),
    # argument order under finegrained, GT [f(a=1, b=2)], pred [f(b=2, a=3)]; S_max = 4.
    # toolrl: keys [a, b] != [b, a] -> 0, value b -> S = 1 + 0 + 1 = 2 -> 0; optimal: key sets equal -> S = 3 -> 1.5
    "argument_order_finegrained": ([_f(a=1, b=2)], [_f(b=2, a=3)], "finegrained", 0.0, 1.5),
    # ... but the same call in another argument order is ToolRL's exact match (dicts compare unordered) -> 3
    "argument_order_only_finegrained": ([_f(a=1, b=2)], [_f(b=2, a=1)], "finegrained", 3.0, 3.0),
    # default granularity: the key overlap is a multiset Jaccard of unique keys, i.e. the set one -> 1.5 both
    "argument_order_default": ([_f(a=1, b=2)], [_f(b=2, a=3)], "default", 1.5, 1.5),
    # empty lists (no_call_tasks=scored): no call either side -> 3; a missing or an unasked call -> -3
    "empty_both": ([], [], "default", 3.0, 3.0),
    "empty_prediction": ([_f(a=1)], [], "default", -3.0, -3.0),
    "empty_ground_truth": ([], [_f()], "default", -3.0, -3.0),
    # no parameters against one: toolrl match_score([], [a]) = 0 (one list empty), value 0: score 0, unpaired;
    # optimal J({}, {a}) = 0; S = names 1 of S_max = 1 + 1 + 0 = 2 -> 0 both
    "empty_parameters": ([_f()], [_f(a=1)], "default", 0.0, 0.0),
    # exact ordered match with a repeated call: S_max at every granularity
    "exact_ordered": ([_f(a=1), _f(a=1), ADD], [_f(a=1), _f(a=1), ADD], "finegrained", 3.0, 3.0),
}


@pytest.mark.parametrize("case", MATCHING_CASES, ids=str)
def test_matching_toolrl_against_optimal(case: str) -> None:
    gt, pred, granularity, toolrl, optimal = MATCHING_CASES[case]
    for matching, want in (("toolrl", toolrl), ("optimal", optimal)):
        cfg = ToolRLRewardConfig(granularity=granularity, matching=matching)
        assert toolrl_score(pred, gt, True, cfg).correctness == pytest.approx(want), matching


def test_matching_parts_follow_the_rule() -> None:
    # greedy_suboptimal: toolrl pairs one call (keys 1, values 1), optimal two (keys 1/2 + 1/2, values 2)
    gt, pred = [_f(a=1, b=2), _f(a=1)], [_f(a=1, b=5), _f(b=2)]
    t, o = match_calls(pred, gt, matching="toolrl"), match_calls(pred, gt, matching="optimal")
    assert (t.name_match, t.param_name_match, t.param_value_match) == (1.0, 1.0, 1.0)
    assert (o.name_match, o.param_name_match, o.param_value_match) == (1.0, 1.0, 2.0)
    # duplicate names: the name match is the multiset one (1/2) or the set one (1)
    assert match_calls([_f(a=1)], [_f(a=1), _f(a=2)]).name_match == 0.5
    assert match_calls([_f(a=1)], [_f(a=1), _f(a=2)], matching="optimal").name_match == 1.0
    # ToolRL's exact-match short-cut gives every part its maximum: 1 name, 1 key overlap, 2 values, even
    # where finegrained would read the argument order [b, a] as a key mismatch
    s = toolrl_score([_f(b=2, a=1)], [_f(a=1, b=2)], True, ToolRLRewardConfig(granularity="finegrained"))
    assert (s.name_match, s.param_name_match, s.param_value_match, s.max_score) == (1.0, 1.0, 2.0, 4.0)
    # intermediate: the value part counts calls reproduced
    s = toolrl_score(GT, GT, True, ToolRLRewardConfig(granularity="intermediate"))
    assert (s.name_match, s.param_name_match, s.param_value_match, s.max_score) == (1.0, 0.0, 2.0, 3.0)


def test_exact_is_order_free_under_both_matchings() -> None:
    # exact (the env's accuracy) is a metric, the same under both: reordered parallel calls are exact even
    # where toolrl's coarse reward gives them the minimum
    for matching in ("toolrl", "optimal"):
        cfg = ToolRLRewardConfig(granularity="coarse", matching=matching)
        assert toolrl_score([MUL, ADD], GT, True, cfg).exact
        assert not toolrl_score([ADD, ADD], [ADD], True, cfg).exact
    assert toolrl_score([MUL, ADD], GT, True, ToolRLRewardConfig(granularity="coarse")).correctness == -3.0


def test_match_calls_checks_the_matching() -> None:
    with pytest.raises(ValueError, match="reward.matching='greedy' is not one of toolrl, optimal"):
        match_calls(GT, GT, matching="greedy")


# ----------------------------------------------------------------------------- tasks without calls


def test_no_call_tasks_scored_or_ignored() -> None:
    assert toolrl_score([], [], True).reward == pytest.approx(4.0)  # scored: +3 for calling nothing
    assert toolrl_score([ADD], [], True).correctness == pytest.approx(-3.0)
    ignored = ToolRLRewardConfig(no_call_tasks="ignored")  # ToolRL's code: correctness 0, format only
    assert toolrl_score([], [], True, ignored).reward == pytest.approx(1.0)
    assert toolrl_score([ADD], [], False, ignored).reward == pytest.approx(0.0)
    assert toolrl_score(GT, GT, True, ignored).reward == pytest.approx(4.0)


def test_undecodable_calls_get_the_minimum() -> None:
    s = toolrl_score(GT, GT, True, undecodable_calls=True)
    assert s.correctness == pytest.approx(-3.0) and not s.exact and s.fraction == 0.0


# ----------------------------------------------------------------------------- ToolRL's format rule


CALL = '<tool_call>\n{"name": "add", "parameters": {"a": 1, "b": 2}}\n</tool_call>'


@pytest.mark.parametrize(
    ("answer", "calls", "response", "ok"),
    [
        (f"<think> t </think>\n{CALL}", True, False, True),
        (f"\n <think> t </think>\n{CALL}\n", True, False, True),  # stripped first
        (f"<think> t </think>{CALL}", True, False, False),  # no newline after </think>
        (f"{CALL}", True, False, False),  # no reasoning
        (f"<think> t </think>\n{CALL}\n<response> r </response>", True, False, False),  # a response not asked for
        (f"<think> t </think>\n{CALL}\n{CALL}", True, False, False),  # two blocks
        ("<think> t </think>\n<tool_call>{}</tool_call>", True, False, False),  # no newlines inside the block
        ("<think> t </think>\n<response> r </response>", False, True, True),
        ("<think> t </think>\n<response> r </response><response>", False, True, False),
        (f"<think> t </think>\n{CALL}", False, True, False),
        (f"<think> t </think>\n{CALL}\n<response> r </response>", True, True, True),
        (f"<think> t </think>\n<response> r </response>\n{CALL}", True, True, False),  # order
        ("<think> t </think>", False, False, True),
        ("<think> t </think> then text", False, False, False),
    ],
)
def test_toolrl_format_rule(answer: str, calls: bool, response: bool, ok: bool) -> None:
    assert toolrl_format_ok(answer, calls, response) is ok


# ----------------------------------------------------------------------------- configuration


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scale": "big"}, "reward.scale='big' is not one of default, max1, two_stage, smooth"),
        ({"length": "long"}, "reward.length='long' is not one of none, fixed, scheduled"),
        ({"granularity": "refined"}, "reward.granularity='refined' is not one of default, finegrained, intermediate"),
        ({"no_call_tasks": "skip"}, "reward.no_call_tasks='skip' is not one of scored, ignored"),
        ({"matching": "greedy"}, "reward.matching='greedy' is not one of toolrl, optimal"),
        ({"length_target": 0}, "reward.length_target=0 must be an integer >= 1"),
        ({"two_stage_step": True}, "reward.two_stage_step=True must be an integer >= 0"),
        ({"smooth_schedule_steps": 1.5}, "reward.smooth_schedule_steps=1.5 must be an integer >= 1"),
        ({"length": "scheduled"}, "reward.length=scheduled needs a horizon"),
        ({"scale": "smooth", "smooth_schedule_steps": None}, "reward.scale=smooth needs a horizon"),
    ],
)
def test_bad_values_name_the_key_and_the_allowed_values(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError) as info:
        ToolRLRewardConfig(**kwargs)
    assert message in str(info.value)


def test_parse() -> None:
    assert ToolRLRewardConfig.parse(None, "reward") == ToolRLRewardConfig()
    assert ToolRLRewardConfig().matching == "toolrl"  # ToolRL's numbers unless asked otherwise
    assert ToolRLRewardConfig.parse({"matching": "optimal"}, "reward").matching == "optimal"
    cfg = ToolRLRewardConfig.parse({"length": "scheduled", "total_training_steps": 105, "scale": "smooth"}, "reward")
    assert cfg.length == "scheduled" and cfg.scale == "smooth" and ToolRLRewardConfig.parse(cfg, "reward") is cfg
    with pytest.raises(ValueError, match="reward.lenght is not a reward option; known: length, "):
        ToolRLRewardConfig.parse({"lenght": "fixed"}, "reward")
    with pytest.raises(ValueError, match="reward must be a mapping"):
        ToolRLRewardConfig.parse("fixed", "reward")


def test_toolrl_answer_task() -> None:
    from agent_tune.rewards.toolrl_format import toolrl_answer_task

    answer = ('<think> two calls </think>\n<tool_call>\n{"name": "a", "parameters": {"x": 1}}\n'
              '{"name": "b", "parameters": {}}\n</tool_call>\n<response> done </response>')
    calls = [{"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]
    assert toolrl_answer_task(answer) == {"ground_truth": calls, "expects_response": True}
    assert toolrl_answer_task("<think> t </think>\n<response> hi </response>") == {
        "ground_truth": [], "expects_response": True}
    with pytest.raises(ValueError, match="undecodable call"):
        toolrl_answer_task("<think> t </think>\n<tool_call>\n{oops\n</tool_call>")
