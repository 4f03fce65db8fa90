"""BFCL's reward formulas (agent_tune/rewards/bfcl.py), each with hand-worked values."""

from __future__ import annotations

import pytest

from agent_tune.envs.bfcl.schema import syntax_grade
from agent_tune.parsing import get_tool_parser
from agent_tune.rewards import bfcl as R

CD = {"type": "function", "function": {"name": "cd", "description": "Change directory.", "parameters": {
    "type": "object", "properties": {"folder": {"type": "string"}}, "required": ["folder"]}}}
TOOLS = {"cd": CD}
HERMES = get_tool_parser("hermes")


def grade(text: str) -> float:
    return syntax_grade(HERMES.parse(text), TOOLS)


def test_syntax_grade_ladder() -> None:
    assert grade("I will change the folder.") == 0.0
    assert grade("<tool_call>\n{cd folder}\n</tool_call>") == 0.25  # a block, not JSON
    assert grade('<tool_call>\n{"name": "chdir", "arguments": {"folder": "a"}}\n</tool_call>') == 0.5  # invented name
    assert grade('<tool_call>\n{"name": "cd", "arguments": {"dir": "a"}}\n</tool_call>') == 0.75  # schema broken
    assert grade('<tool_call>\n{"name": "cd", "arguments": {"folder": 3}}\n</tool_call>') == 0.75  # wrong type
    assert grade('<tool_call>\n{"name": "cd", "arguments": {"folder": "a"}}\n</tool_call>') == 1.0


def test_syntax_grade_averages_the_blocks_of_a_generation() -> None:
    text = ('<tool_call>\n{"name": "cd", "arguments": {"folder": "a"}}\n</tool_call>\n'
            '<tool_call>\n{"name": "cd", "arguments": {}\n</tool_call>')  # valid (1.0) + broken JSON (0.25)
    assert grade(text) == pytest.approx((1.0 + 0.25) / 2)


def test_syntax_episode_mean() -> None:
    assert R.syntax([1.0, 0.0, 0.5, 0.25]) == pytest.approx(0.4375)  # 1.75 / 4
    assert R.syntax([]) == 0.0
    assert R.episode_reward("syntax", {"syntax_grades": [0.25, 0.75]}) == pytest.approx(0.5)


def test_progress() -> None:
    # 4 turns, all scoreable, 2 passed, 1 failed, 1 never reached: 2 / 4
    assert R.progress([1.0, 0.0, 1.0], [True] * 4) == pytest.approx(0.5)
    # an unscored turn (None) neither passes nor counts: 1 passed of 2 scoreable
    assert R.progress([1.0, None, 0.0], [True, False, True]) == pytest.approx(0.5)
    # no scoreable turn: 1 once every turn is played, 0 before
    assert R.progress([None, None], [False, False]) == 1.0
    assert R.progress([None], [False, False]) == 0.0


def test_accuracy() -> None:
    assert R.accuracy([1.0, None, 1.0], [True, False, True]) == 1.0
    # failing a turn without ground truth: BFCL ignores it
    assert R.accuracy([1.0, 0.0, 1.0], [True, False, True]) == 1.0
    assert R.accuracy([1.0, 1.0, 0.0], [True, False, True]) == 0.0
    assert R.accuracy([1.0, 1.0], [True, False, True]) == 0.0  # a turn never played
    assert R.accuracy([1.0, 1.0, 1.0], [True, True, True], force_terminated=True) == 0.0
    assert R.accuracy([1.0, 1.0, 1.0], [True, True, True], forced_turns=1) == 0.0


def test_progress_format() -> None:
    assert R.progress_format(0.5, 2) == pytest.approx(0.3)  # 0.5 - 0.1 * 2
    # capped at 5 errors: 0.5 - 0.1 * 5
    assert R.progress_format(0.5, 9, format_penalty=0.1, max_penalized_format_errors=5) == pytest.approx(0.0)
    assert R.progress_format(1.0, 3, format_penalty=0.2, max_penalized_format_errors=2) == pytest.approx(0.6)
    info = {"progress": 0.75, "accuracy": 0.0, "format_errors": 1}
    assert R.episode_reward("progress_format", info) == pytest.approx(0.65)
    assert R.episode_reward("progress", info) == 0.75 and R.episode_reward("accuracy", info) == 0.0
    with pytest.raises(ValueError, match="not one of"):
        R.episode_reward("nope", info)


def test_closes_acted_turn_only_for_a_blockless_answer_after_a_call() -> None:
    answer, call = HERMES.parse("Done."), HERMES.parse('<tool_call>\n{"name": "ls", "arguments": {}}\n</tool_call>')
    broken = HERMES.parse("<tool_call>\nls\n</tool_call>")
    assert R.closes_acted_turn(answer, turn_acted=True)
    assert not R.closes_acted_turn(answer, turn_acted=False)
    assert not R.closes_acted_turn(call, turn_acted=True)
    assert not R.closes_acted_turn(broken, turn_acted=True)


# Several undecodable blocks in one generation: each block earns its own rung, so a generation's grade is
# (sum of its blocks' rungs) / (number of blocks). Counting the broken blocks once per generation would pay
# for them (1 valid + 3 broken: (1.0 + 0.25) / 2 = 0.625 instead of (1.0 + 3 * 0.25) / 4 = 0.4375).
VALID_BLOCK = '<tool_call>\n{"name": "cd", "arguments": {"folder": "a"}}\n</tool_call>'
INVENTED_BLOCK = '<tool_call>\n{"name": "chdir", "arguments": {"folder": "a"}}\n</tool_call>'
SCHEMA_BLOCK = '<tool_call>\n{"name": "cd", "arguments": {"dir": "a"}}\n</tool_call>'
BROKEN_BLOCKS = ['<tool_call>\n{cd folder}\n</tool_call>',  # not JSON
                 '<tool_call>\n{"name": "cd", "arguments": {}\n</tool_call>',  # unbalanced JSON
                 '<tool_call>\n["cd", {"folder": "a"}]\n</tool_call>']  # JSON, not a call object


@pytest.mark.parametrize(
    "blocks, expected",
    [
        ([VALID_BLOCK, *BROKEN_BLOCKS], (1.0 + 3 * 0.25) / 4),  # 0.4375
        ([*BROKEN_BLOCKS[:2], VALID_BLOCK, BROKEN_BLOCKS[2]], (1.0 + 3 * 0.25) / 4),  # order does not matter
        ([VALID_BLOCK, VALID_BLOCK, *BROKEN_BLOCKS[:2]], (2 * 1.0 + 2 * 0.25) / 4),  # 0.625
        ([INVENTED_BLOCK, SCHEMA_BLOCK, *BROKEN_BLOCKS], (0.5 + 0.75 + 3 * 0.25) / 5),  # 0.4
        (BROKEN_BLOCKS, 0.25),  # only broken blocks: each 0.25, mean 0.25
        (BROKEN_BLOCKS[:2], 0.25),
    ],
)
def test_syntax_grade_counts_every_broken_block(blocks: list[str], expected: float) -> None:
    text = "Let me try.\n" + "\n".join(blocks)
    parsed = HERMES.parse(text)
    broken = sum(b in BROKEN_BLOCKS for b in blocks)
    assert len(parsed.errors) == broken and len(parsed.calls) == len(blocks) - broken  # one error per block
    assert grade(text) == pytest.approx(expected)


def test_syntax_grade_of_counts_every_undecodable_block() -> None:
    # the env grades from its checks: (undecodable blocks, per call None / schema errors / [])
    assert R.syntax_grade_of(3, [[]]) == pytest.approx((1.0 + 3 * 0.25) / 4)  # 0.4375, not 0.625
    assert R.syntax_grade_of(2, [[], []]) == pytest.approx((2 * 1.0 + 2 * 0.25) / 4)  # 0.625, not 0.75
    assert R.syntax_grade_of(3, [None, ["argument 'dir' is not a parameter"]]) == pytest.approx(
        (0.5 + 0.75 + 3 * 0.25) / 5)  # 0.4
    assert R.syntax_grade_of(4, []) == 0.25 and R.syntax_grade_of(0, []) == 0.0


def test_syntax_grade_in_the_env_counts_every_broken_block() -> None:
    """The BFCL env's per-generation grade (``step`` -> ``syntax_grades``) follows the same rule."""
    from agent_tune.envs import make_env

    env = make_env("bfcl", test_id="multi_turn_base_0", reward="syntax")
    env.reset()
    valid = '<tool_call>\n{"name": "ls", "arguments": {}}\n</tool_call>'
    step = env.step("\n".join([valid, *BROKEN_BLOCKS]))
    assert step.info["syntax_grade"] == pytest.approx((1.0 + 3 * 0.25) / 4)
    assert env.finalize().info["syntax_grades"] == [pytest.approx(0.4375)]
