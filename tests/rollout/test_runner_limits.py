"""Truncation, turn limits, aborts, raw-text observations and sampling parameters."""

from __future__ import annotations

import pytest

from agent_tune.envs.base import Observation, SamplerHints
from agent_tune.rollout import ChatRenderer, PromptTooLongError, RolloutLimits, run_episode
from tests.rollout.scripted import (
    TOOLS,
    FinalizingEnv,
    Reply,
    ScriptedEnv,
    ScriptedPolicy,
    step,
    tool_msgs,
    user_msg,
)

CALL = '<tool_call>\n{"name": "ls", "arguments": {"a": true}}\n</tool_call>'
LONG = "word " * 200


@pytest.fixture
def renderer(qwen_tok):
    return ChatRenderer(qwen_tok, "qwen3_instruct")


def _initial():
    return Observation(messages=[user_msg("List the files.")], tools=TOOLS)


def _aligned(traj, limit):
    assert len(traj.response_ids) == len(traj.response_mask) == len(traj.response_logprobs) <= limit


@pytest.mark.parametrize("honor", [True, False], ids=["sampler-honors-max_tokens", "sampler-overshoots"])
async def test_generation_reaching_the_budget_ends_the_episode(renderer, honor):
    policy = ScriptedPolicy(renderer, [CALL, Reply(LONG, honor_max_tokens=honor)])
    env = FinalizingEnv(_initial(), [step(tool_msgs("a"))], finalize_reward=0.25)
    limit = 120
    res = await run_episode(env, policy, renderer, RolloutLimits(4096, limit), debug_drift=True)
    traj = res.trajectory
    assert res.stop_reason == "token_budget" and res.truncated and traj.truncated
    # the transcript holds the unfinished text; the trajectory is a prefix of its re-render
    assert res.messages[-1]["role"] == "assistant" and LONG.startswith(res.messages[-1]["content"])
    assert res.drift.ok, str(res.drift)
    assert len(traj) == limit  # cut exactly at the limit
    _aligned(traj, limit)
    assert traj.response_mask[-1] == 1 and traj.response_ids[-1] != renderer.end_of_turn_id
    assert res.finish_reasons[-1] == "length"
    assert env.received == [CALL]  # the unfinished text never reached the env
    assert env.finalized == ["token_budget"] and res.reward == 0.25 and res.info["stop_reason"] == "token_budget"
    # the last generation was asked for exactly the budget left
    assert policy.calls[1][1]["max_tokens"] == limit - (len(policy.calls[1][0]) - len(traj.prompt_ids))
    # policy tokens up to the cut are kept with their log-probs
    n_first = len(policy.outputs[0].token_ids)
    assert traj.response_logprobs[:n_first] == policy.outputs[0].log_probs


async def test_observation_that_does_not_fit_is_not_appended(renderer):
    policy = ScriptedPolicy(renderer, [CALL, "never"])
    env = FinalizingEnv(_initial(), [step(tool_msgs("x " * 500))], finalize_reward=0.0)
    res = await run_episode(env, policy, renderer, RolloutLimits(4096, 200), debug_drift=True)
    traj = res.trajectory
    assert res.drift.ok, str(res.drift)
    assert res.stop_reason == "token_budget" and len(policy.calls) == 1
    assert traj.response_ids == policy.outputs[0].token_ids  # ends on the policy's end-of-turn token
    assert all(traj.response_mask)
    assert env.finalized == ["token_budget"]


async def test_max_generations_with_the_default_finalize(renderer):
    policy = ScriptedPolicy(renderer, [CALL, CALL, CALL])
    env = ScriptedEnv(_initial(), [step(tool_msgs("a"), reward=0.1, turn=0), step(tool_msgs("b"), reward=0.2, turn=1)])
    res = await run_episode(env, policy, renderer, RolloutLimits(4096, 4096, max_generations=2))
    assert res.stop_reason == "generation_limit" and res.num_generations == 2
    assert res.reward == pytest.approx(0.3)  # step rewards summed; BaseToolEnv.finalize adds 0
    assert res.info["stop_reason"] == "generation_limit"
    # the trajectory ends with the env's last observation and the next generation prompt
    assert renderer.decode(res.trajectory.response_ids).endswith("<|im_start|>assistant\n")


async def test_abort_finalizes(renderer):
    policy = ScriptedPolicy(renderer, [Reply("partial", end_of_turn=False, stop_reason="aborted")])
    env = FinalizingEnv(_initial(), [], finalize_reward=0.5)
    res = await run_episode(env, policy, renderer, RolloutLimits(4096, 4096))
    assert res.stop_reason == "aborted" and res.finish_reasons == ["abort"]
    assert env.received == [] and env.finalized == ["aborted"] and res.reward == 0.5


async def test_prompt_too_long(renderer):
    policy = ScriptedPolicy(renderer, [])
    with pytest.raises(PromptTooLongError, match="max_prompt_length is 50"):
        await run_episode(ScriptedEnv(_initial(), []), policy, renderer, RolloutLimits(50, 100))


async def test_verl_completed_at_max_tokens_counts_as_length(renderer):
    """verl reports "completed" for both stops; the runner recognises the length stop by the count."""
    policy = ScriptedPolicy(renderer, [Reply(LONG, stop_reason="completed", honor_max_tokens=False)])
    env = ScriptedEnv(_initial(), [step(reward=1.0, done=True)])
    res = await run_episode(env, policy, renderer, RolloutLimits(4096, 4096), {"max_tokens": 30})
    assert res.finish_reasons == ["length"] and len(res.trajectory) == 30  # overshoot cut to max_tokens
    assert res.stop_reason == "done" and env.received == [renderer.decode(res.trajectory.response_ids)]


async def test_per_turn_cap_closes_the_turn_and_steps_the_env(renderer):
    policy = ScriptedPolicy(renderer, [Reply(LONG), "ok"])
    env = ScriptedEnv(_initial(), [step([user_msg("go on")]), step(reward=1.0, done=True)])
    res = await run_episode(env, policy, renderer, RolloutLimits(4096, 4096), {"max_tokens": 30}, debug_drift=True)
    traj = res.trajectory
    assert res.finish_reasons == ["length", "stop"] and res.stop_reason == "done"
    assert traj.response_mask[30] == 0 and traj.response_ids[30] == renderer.end_of_turn_id
    assert len(env.received[0]) < len(LONG)
    assert res.drift.ok, str(res.drift)
    assert all(params["max_tokens"] == 30 for _, params in policy.calls)


class TextEnv(ScriptedEnv):
    sampler_hints = SamplerHints(stop=("</code>",), include_stop_str_in_output=True, observation_kind="text")


async def test_raw_text_observations_are_appended_verbatim(renderer):
    code = "Let me compute.\n<code>\nprint(6 * 7)\n</code>"
    interp = "\n<interpreter>\n42\n</interpreter>\n"
    policy = ScriptedPolicy(renderer, [Reply(code, end_of_turn=False), "The answer is 42."])
    env = TextEnv(Observation(messages=[user_msg("6*7?")]), [step(text=interp), step(reward=1.0, done=True)])
    res = await run_episode(env, policy, renderer, RolloutLimits(4096, 4096), {"stop": ["STOP"]})
    traj = res.trajectory
    n1 = len(policy.outputs[0].token_ids)
    n_obs = len(renderer.encode(interp))
    assert traj.response_ids[n1:n1 + n_obs] == renderer.encode(interp)  # nothing added around it
    assert traj.response_mask == [1] * n1 + [0] * n_obs + [1] * len(policy.outputs[1].token_ids)
    params = policy.calls[0][1]
    assert params["stop"] == ["STOP", "</code>"] and params["include_stop_str_in_output"] is True
    assert res.messages[-1] == {"role": "assistant", "content": code + interp + "The answer is 42."}
    assert env.received == [code, "The answer is 42."]
    assert res.generations == [code, "The answer is 42."]  # the policy's text alone, not the observation
    assert res.prompt_messages == 1


async def test_prompt_examples_are_marked_as_prompt_not_generations(renderer):
    """A prompt carrying a worked example (an assistant call and its tool result before the question): the
    result marks where the prompt ends, and ``generations`` holds only what the policy wrote."""
    example = [user_msg("List the files of /tmp."), {"role": "assistant", "content": CALL}, *tool_msgs("a")]
    initial = Observation(messages=[*example, user_msg("List the files.")], tools=TOOLS)
    policy = ScriptedPolicy(renderer, [CALL, "Done."])
    env = ScriptedEnv(initial, [step(tool_msgs("b")), step(reward=1.0, done=True)])
    res = await run_episode(env, policy, renderer, RolloutLimits(4096, 4096))
    assert res.prompt_messages == len(initial.messages)
    assert res.messages[:res.prompt_messages] == initial.messages
    assert res.generations == [CALL, "Done."]
    generated = [m["content"] for m in res.messages[res.prompt_messages:] if m["role"] == "assistant"]
    assert generated == res.generations


async def test_empty_observation_gives_the_policy_another_turn(renderer):
    policy = ScriptedPolicy(renderer, ["thinking aloud", "final"])
    env = ScriptedEnv(_initial(), [step([]), step(reward=1.0, done=True)])
    res = await run_episode(env, policy, renderer, RolloutLimits(4096, 4096), debug_drift=True)
    assert res.stop_reason == "done" and res.drift.ok, str(res.drift)


class _NeverStarts(ScriptedEnv):
    """An env whose backend does not start in time: reset raises StartTimeoutError (the time-limit rule)."""

    sampler_hints = SamplerHints(blocking_reset=True)

    def reset(self, **task):
        from agent_tune.envs.time_limits import StartTimeoutError

        raise StartTimeoutError(2.0, "test server start")


async def test_a_start_with_no_answer_in_time_is_counted_not_raised(renderer):
    """The runner records an episode whose reset ran out of start_timeout as not played (stop reason timeout): the
    training metrics, the eval record and the dump record all take it, so a batch goes on."""
    from agent_tune.eval.evaluate import build_record
    from agent_tune.rollout.dump import episode_record
    from agent_tune.rollout.episode_metrics import episode_metrics

    result = await run_episode(_NeverStarts(_initial(), []), ScriptedPolicy(renderer, [CALL]), renderer,
                               RolloutLimits(64, 32))
    assert result.stop_reason == "timeout" and result.num_generations == 0 and result.reward == 0.0
    assert result.trajectory.response_ids == [] and 0 < len(result.trajectory.prompt_ids) <= 64
    assert result.info["error"] == "no answer in 2 s (test server start)" and result.episode.stop_reason == "timeout"
    assert episode_metrics(result)["acc"] == 0.0 and not episode_metrics(result)["truncated"]
    record = build_record("t1", 0, result, "cat", decode=renderer.decode)
    assert record["stop_reason"] == "timeout" and record["info"]["error"] == "no answer in 2 s (test server start)"
    assert episode_record(result, renderer.decode)["stop_reason"] == "timeout"
