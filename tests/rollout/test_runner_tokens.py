"""The runner's trajectory against full re-renders, with SmolLM2's and Qwen3's real tokenizers."""

from __future__ import annotations

import pytest

from agent_tune.envs.base import Observation
from agent_tune.rollout import ChatRenderer, RolloutLimits, check_drift, run_episode
from tests.rollout.scripted import NEW_TOOL, TOOLS, Reply, ScriptedEnv, ScriptedPolicy, step, tool_msgs, user_msg

CALL_LS = '<tool_call>\n{"name": "ls", "arguments": {"a": true}}\n</tool_call>'
CALL_CD = '<tool_call>\n{"name": "cd", "arguments": {"folder": "docs"}}\n</tool_call>'
CALL_MK = '<tool_call>\n{"name": "mkdir", "arguments": {"dir_name": "tmp 2024"}}\n</tool_call>'
CALL_TOUCH = '<tool_call>\n{"name": "touch", "arguments": {"file_name": "notes.txt"}}\n</tool_call>'

LIMITS = RolloutLimits(max_prompt_length=4096, max_response_length=4096)


def _conversation():
    """Two user turns: consecutive tool results (2, then 3), a miss_func-style announcement of a new tool
    in a user message with a longer tool list, and a final answer."""
    initial = Observation(
        messages=[{"role": "system", "content": "You manage files."},
                  user_msg("List everything, then go to docs and make tmp.")],
        tools=TOOLS,
    )
    replies = [
        CALL_LS,
        "I will do both.\n" + CALL_CD + "\n" + CALL_MK,
        "Done: listed, moved and created the folder.",
        CALL_TOUCH,
        "Created notes.txt.",
    ]
    steps = [
        step(tool_msgs('{"current_directory_content": ["docs", ".git"]}', "ok")),
        step(tool_msgs('{"current_working_directory": "docs"}', "None", "Error during execution: exists")),
        step([user_msg("I have updated some more functions you can choose from. What about now? Create notes.txt.")],
             tools=TOOLS + [NEW_TOOL]),
        step(tool_msgs("{}")),
        step(reward=1.0, done=True, accuracy=1.0),
    ]
    return initial, replies, steps


@pytest.fixture(params=["qwen3_instruct", "smollm2_tools"])
def renderer(request, qwen_tok, smol_tok):
    """Templates that keep history as written, each with its model's real tokenizer."""
    tok = qwen_tok if request.param.startswith("qwen3") else smol_tok
    return ChatRenderer(tok, request.param)


async def test_trajectory_equals_full_rerender(renderer):
    initial, replies, steps = _conversation()
    env = ScriptedEnv(initial, steps)
    policy = ScriptedPolicy(renderer, replies)
    res = await run_episode(env, policy, renderer, LIMITS, {"temperature": 1.0}, debug_drift=True)

    assert res.stop_reason == "done" and res.reward == 1.0 and res.info == {"accuracy": 1.0, "stop_reason": "done"}
    assert res.num_generations == 5 and res.finish_reasons == ["stop"] * 5
    assert env.received == replies  # the env got exactly the policy's text, no end-of-turn token
    assert res.tools == TOOLS + [NEW_TOOL]

    traj = res.trajectory
    full = renderer.render_full(res.messages, TOOLS)
    # token-exact: the trajectory is the full render, less the template's "\n" after the final <|im_end|>
    assert traj.all_ids == full[: len(traj.all_ids)]
    assert renderer.decode(full[len(traj.all_ids):]) == "\n"
    assert res.drift is not None and res.drift.ok, str(res.drift)
    # the prompt is exactly the initial render; the system prompt is never rendered again
    assert traj.prompt_ids == renderer.render_prompt(initial.messages, TOOLS)
    sys_start = renderer.encode("<|im_start|>system")
    assert _count_subseq(traj.response_ids, sys_start) == 0
    # consecutive tool results share one user turn: 2 tool groups + 1 in turn 2 + 1 new user turn
    assert _count_subseq(traj.response_ids, renderer.encode("<|im_start|>user")) == 4

    # mask covers exactly the policy's tokens, with their log-probs; env tokens have log-prob 0
    policy_ids = [t for o in policy.outputs for t in o.token_ids]
    policy_lps = [x for o in policy.outputs for x in o.log_probs]
    assert [t for t, m in zip(traj.response_ids, traj.response_mask) if m] == policy_ids
    assert [x for x, m in zip(traj.response_logprobs, traj.response_mask) if m] == policy_lps
    assert all(x == 0.0 for x, m in zip(traj.response_logprobs, traj.response_mask) if not m)
    assert len(traj.policy_spans()) == 5
    # each span ends with the end-of-turn token; the env segment after it starts with the template's "\n"
    for start, end in traj.policy_spans():
        assert traj.response_ids[end - 1] == renderer.end_of_turn_id
        if end < len(traj):
            assert renderer.decode(traj.response_ids[end:end + 1]).startswith("\n")
    # every generation continued the trajectory so far, and max_tokens was the budget left
    for prompt, params in policy.calls:
        assert traj.all_ids[: len(prompt)] == prompt
        assert params["max_tokens"] == LIMITS.max_response_length - (len(prompt) - len(traj.prompt_ids))
        assert renderer.end_of_turn_id in params["stop_token_ids"] and params["temperature"] == 1.0


async def test_stop_without_end_of_turn_is_closed_by_env_token(renderer):
    """A chat turn stopped by a stop string (no <|im_end|> sampled): the runner closes it with mask 0."""
    initial, replies, steps = _conversation()
    script = [Reply(replies[0], end_of_turn=False)] + replies[1:]
    env = ScriptedEnv(initial, steps)
    policy = ScriptedPolicy(renderer, script)
    res = await run_episode(env, policy, renderer, LIMITS, debug_drift=True)
    traj = res.trajectory
    n0 = len(policy.outputs[0].token_ids)
    assert traj.response_ids[n0] == renderer.end_of_turn_id and traj.response_mask[n0] == 0
    assert res.drift.ok, str(res.drift)
    assert env.received[0] == replies[0]


async def test_drift_check_reports_first_difference(renderer):
    initial, replies, steps = _conversation()
    res = await run_episode(ScriptedEnv(initial, steps), ScriptedPolicy(renderer, replies), renderer, LIMITS)
    msgs = [dict(m) for m in res.messages]
    msgs[2]["content"] = msgs[2]["content"].replace('"a": true', '"a": false')  # first assistant message
    report = check_drift(renderer, res.trajectory.all_ids, msgs, TOOLS)
    assert not report.ok
    first_policy = len(res.trajectory.prompt_ids)
    assert first_policy < report.position < first_policy + len(renderer.encode(CALL_LS))
    assert "true" in report.trajectory_window and "false" in report.rendered_window


def _count_subseq(seq, sub):
    return sum(1 for i in range(len(seq) - len(sub) + 1) if seq[i:i + len(sub)] == sub)
