"""Raw-text (ReTool) SFT rows equal, token for token, the runner's trajectory of the same episode played
against the real ReTool env and sandbox; the synthetic ReTool conversations are what the runner keeps."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from agent_tune.envs.retool.env import INTERPRETER_BLOCK_PATTERN, ReToolToolEnv, interpreter_block
from agent_tune.rollout import ChatRenderer, RolloutLimits, run_episode
from agent_tune.sft.rows import POLICY, BadConversation, assistant_pieces, render_conversation
from agent_tune.tools import ExecutionLimits, LocalSandbox
from data_preprocess import retool_sft_synthetic
from tests.rollout.scripted import Reply, ScriptedPolicy

REPO = Path(__file__).resolve().parents[2]
PATTERN = re.compile(INTERPRETER_BLOCK_PATTERN)
LIMITS = RolloutLimits(max_prompt_length=4096, max_response_length=4096)


@pytest.fixture(scope="module")
def sandbox():
    box = LocalSandbox(limits=ExecutionLimits(cpu_seconds=3, wall_seconds=5), max_concurrency=2)
    yield box
    box.close()


@pytest.fixture(params=["smollm2_tools", "qwen3_instruct"])
def renderer(request, qwen_tok, smol_tok):
    return ChatRenderer(qwen_tok if request.param.startswith("qwen3") else smol_tok, request.param)


def _replies(content: str) -> list[Reply]:
    """The policy's generations of a running ReTool message: each stops after ``</code>`` (the env's stop
    string, no end-of-turn token); the interpreter blocks between them are the env's, not replayed."""
    replies = []
    while "</code>" in content:
        cut = content.index("</code>") + len("</code>")
        replies.append(Reply(content[:cut], end_of_turn=False))
        content = content[content.index("</interpreter>\n", cut) + len("</interpreter>\n"):]
    return replies + [Reply(content)]


@pytest.mark.parametrize("index", [0, 1])  # 0: two programs, 1: one
async def test_retool_sft_row_equals_runner_trajectory(renderer, sandbox, index):
    row = retool_sft_synthetic.build(2, seed=3)[index]
    messages = row["messages"]
    question = messages[1]["content"]
    answer = re.search(r"\\boxed\{(-?\d+)\}", messages[-1]["content"]).group(1)
    env = ReToolToolEnv(sandbox=sandbox)
    policy = ScriptedPolicy(renderer, _replies(messages[-1]["content"]))

    res = await run_episode(env, policy, renderer, LIMITS, task={"question": question, "ground_truth": answer})
    assert res.stop_reason == "done" and res.reward == 1.0
    assert res.messages == messages  # the synthetic conversation is the runner's transcript of the episode
    traj = res.trajectory
    ids, mask = render_conversation(renderer, messages, None, observation_pattern=PATTERN)
    assert ids == traj.all_ids
    assert mask == [0] * len(traj.prompt_ids) + traj.response_mask
    assert [t for t, m in zip(ids, mask) if m] == [t for o in policy.outputs for t in o.token_ids]
    assert len(policy.outputs) == (3 if index == 0 else 2)


def test_without_the_pattern_the_interpreter_output_would_be_trained_on(smol_tok):
    r = ChatRenderer(smol_tok, "smollm2_tools")
    messages = retool_sft_synthetic.build(1)[0]["messages"]
    with_p = render_conversation(r, messages, None, observation_pattern=PATTERN)
    without = render_conversation(r, messages, None)
    assert sum(with_p[1]) < sum(without[1])
    kept = r.decode([t for t, m in zip(*with_p) if m == POLICY])
    assert "<interpreter>" not in kept and "<code>" in kept and "\\boxed{" in kept


def test_pieces_of_a_running_message():
    text = "a<code>x</code>" + interpreter_block("1") + "b"
    assert assistant_pieces(text, PATTERN) == [("a<code>x</code>", 1), (interpreter_block("1"), 0), ("b", 1)]
    assert assistant_pieces("plain", PATTERN) == [("plain", 1)]
    assert assistant_pieces("plain", None) == [("plain", 1)]
    # a block at the very end: nothing of the policy's follows (the end-of-turn token still does)
    assert assistant_pieces("a" + interpreter_block("1"), PATTERN) == [("a", 1), (interpreter_block("1"), 0)]
    # looser ReTool-style blocks are cut too
    assert assistant_pieces("a<interpreter>1</interpreter>b", PATTERN) == [
        ("a", 1), ("<interpreter>1</interpreter>", 0), ("b", 1)]
    with pytest.raises(BadConversation, match="opens with an observation"):
        assistant_pieces(interpreter_block("1") + "b", PATTERN)


def test_the_retool_sft_format_config_holds_the_envs_pattern():
    cfg = yaml.safe_load((REPO / "config" / "sft_format" / "retool.yaml").read_text())
    assert cfg["data"]["observation_pattern"] == INTERPRETER_BLOCK_PATTERN
    block = interpreter_block("line 1\nline 2")
    assert PATTERN.fullmatch(block)


def test_synthetic_problems_are_not_the_conversations():
    convs = {r["messages"][1]["content"] for r in retool_sft_synthetic.build(32)}
    probs = retool_sft_synthetic.problems(16)
    assert len(probs) == 16 and all(p["answer"].lstrip("-").isdigit() for p in probs)
    assert not convs & {p["problem"] for p in probs}
