"""The tau2 env: the contract, scripted episodes (mock, airline, telecom's dual control), endings and limits,
concurrent users in batch_step, isolation of concurrent episodes."""

from __future__ import annotations

import asyncio
import time

import pytest

from agent_tune.envs import check_env, make_env
from agent_tune.envs.base import StopReason
from agent_tune.envs.tau2 import loader
from agent_tune.users import UserReply
from tests.envs.tau2_helpers import FIRST_USER_TURN, comparable, hermes, reference_run, replay_env

MOCK = {"domain": "mock", "task_id": "create_task_1"}
CREATE = hermes("create_task", {"user_id": "user_1", "title": "Important Meeting"})
BAD_HERMES = '<tool_call>\n{"name": "create_task", "arguments": \n</tool_call>'


def scripted(*turns):
    return {"kind": "scripted", "turns": list(turns) or [FIRST_USER_TURN]}


def test_contract_on_mock() -> None:
    check_env(lambda: make_env("tau2", user=scripted(), **MOCK), {}, CREATE, BAD_HERMES)


def test_mock_episode_with_a_scripted_user() -> None:
    env = make_env("tau2", user=scripted("Create a task 'Important Meeting' for user_1."), **MOCK)
    obs = env.reset()
    assert [m["role"] for m in obs.messages] == ["system", "assistant", "user"]
    assert "<policy>" in obs.messages[0]["content"] and obs.messages[1]["content"] == "Hi! How can I help you today?"
    assert {t["function"]["name"] for t in obs.tools} >= {"create_task", "get_users"}
    r = env.step(CREATE)
    assert not r.done and r.observation.messages[0]["role"] == "tool" and '"task_2"' in r.observation.messages[0][
        "content"]
    r = env.step("Your task 'Important Meeting' is created.")
    assert r.done and r.reward == 1.0 and r.info["termination_reason"] == "user_stop"
    assert r.observation.messages == [{"role": "user", "content": "###STOP###"}]
    assert r.info["num_calls"] == 1 and r.info["turns_completed"] == 1 and r.info["num_steps"] == 2
    assert r.info["tau2_reward_db"] == 1.0 and env.simulation.reward_info.reward == 1.0


def test_airline_episode_user_sees_tau2s_user_prompt() -> None:
    env = make_env("tau2", domain="airline", task_id="1", user=scripted("I want to cancel a trip.", "Yes, please."))
    obs = env.reset()
    assert len(obs.tools) == 14 and "airline" in obs.messages[0]["content"].lower()
    seen = env.user.seen[0]
    task = loader.load_task("airline", "1")
    assert seen[0]["role"] == "system" and "<scenario>" in seen[0]["content"]
    assert str(task.user_scenario) in seen[0]["content"] and seen[1] == {"role": "user", "content":
                                                                        "Hi! How can I help you today?"}
    r = env.step(hermes("get_user_details", {"user_id": "raj_sanchez_7340"}))
    assert not r.done and "raj_sanchez_7340" in r.observation.messages[0]["content"]
    r = env.step("Which reservation?")
    assert not r.done and r.observation.messages == [{"role": "user", "content": "Yes, please."}]
    # the user saw the agent's text, never its tool traffic
    assert [m["role"] for m in env.user.seen[1][1:]] == ["user", "assistant", "user"]
    r = env.step("I cannot cancel it.")
    assert r.done and r.info["termination_reason"] == "user_stop" and r.reward == 1.0  # no DB change, nothing owed


def test_agent_stop_and_finalize() -> None:
    env = make_env("tau2", user=scripted(), **MOCK)
    env.reset()
    env.step(CREATE)
    r = env.step("Done. ###STOP###")
    assert r.done and r.info["termination_reason"] == "agent_stop" and r.reward == 1.0
    env.reset()
    r = env.finalize(StopReason.TOKEN_BUDGET)
    assert r.done and r.reward == 0.0 and r.info["termination_reason"] == "max_steps"
    assert r.info["stop_reason"] == "token_budget"


def test_max_steps_and_max_errors_end_like_tau2() -> None:
    for limit, text, reason in ((5, CREATE, "max_steps"), (3, hermes("nope", {}), "too_many_errors")):
        kwargs = {"max_steps": limit} if reason == "max_steps" else {"max_errors": limit}
        env = make_env("tau2", user=scripted(), **MOCK, **kwargs)
        env.reset()
        steps = 0
        while True:
            steps += 1
            r = env.step(text)
            if r.done:
                break
        assert r.info["termination_reason"] == reason and r.reward == 0.0
        ref = reference_run("mock", "create_task_1", [("create_task", {"user_id": "user_1", "title": "x"}) if
                                                      reason == "max_steps" else ("nope", {})] * steps, "bye",
                            **kwargs)
        assert ref.termination_reason.value == reason
        assert len(comparable(ref.messages)) == len(env.simulation.messages)


def test_telecom_dual_control_matches_tau2() -> None:
    """The user runs its own phone tools (requestor user); the agent sees only the user's text."""
    task_id = loader.task_ids("telecom")[0]  # user actions: toggle_airplane_mode, toggle_roaming
    user_turns = ["My mobile data does not work.",
                  {"content": None, "tool_calls": [{"name": "toggle_airplane_mode"}, {"name": "toggle_roaming"}]},
                  "Done, it works now."]
    actions = ["Please turn airplane mode off and roaming on."]
    env, r = replay_env("telecom", task_id, actions, "Glad to help.", user_turns=user_turns)
    assert r.done and r.reward == 1.0 and r.info["tau2_reward_env_assertion"] == 1.0
    requestors = [m.requestor for m in env.simulation.messages if m.role == "tool"]
    assert requestors == ["user", "user"]
    ref = reference_run("telecom", task_id, actions, "Glad to help.", user_turns=user_turns)
    assert comparable(env.simulation.messages) == comparable(ref.messages) and ref.reward_info.reward == 1.0


class _SlowUser:
    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def reply(self, messages, tools):
        await asyncio.sleep(self.delay)
        return UserReply("Thanks.")


def test_batch_step_asks_users_concurrently() -> None:
    envs = [make_env("tau2", user=scripted(), **MOCK) for _ in range(4)]
    for env in envs:
        env.reset()
        env.user = _SlowUser(0.3)
    t0 = time.perf_counter()
    results = type(envs[0]).batch_step(envs, ["How can I help?"] * 4)
    assert time.perf_counter() - t0 < 0.9  # four 0.3 s users in parallel, not 1.2 s in a row
    assert all(r.observation.messages == [{"role": "user", "content": "Thanks."}] for r in results)


async def test_step_inside_a_running_event_loop() -> None:
    env = make_env("tau2", user=scripted(), **MOCK)
    env.reset()
    r = env.step("Hello?")
    assert r.done and r.info["termination_reason"] == "user_stop"


def test_concurrent_episodes_share_no_state() -> None:
    a, b = (make_env("tau2", user=scripted(), **MOCK) for _ in range(2))
    a.reset()
    b.reset()
    a.step(CREATE)
    r = b.step(hermes("get_users", {}))
    assert "task_2" not in r.observation.messages[0]["content"]
    assert a.episode.environment.tools.db is not b.episode.environment.tools.db


def test_bad_config_names_the_option() -> None:
    with pytest.raises(ValueError, match="unknown tau2 domain 'shop'"):
        make_env("tau2", domain="shop", user=scripted())
    with pytest.raises(ValueError, match="`user` is required"):
        make_env("tau2", domain="mock")
    with pytest.raises(ValueError, match="max_steps"):
        make_env("tau2", domain="mock", user=scripted(), max_steps=0)
    with pytest.raises(ValueError, match="has no task '999'"):
        make_env("tau2", domain="mock", task_id="999", user=scripted()).reset()


def test_task_with_a_message_history_starts_where_it_ends() -> None:
    env = make_env("tau2", domain="mock", task_id="update_task_with_message_history",
                   user=scripted("Please mark it completed."))
    obs = env.reset()
    assert [m["role"] for m in obs.messages] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert obs.messages[2]["tool_calls"][0]["function"]["name"] == "create_task"
    env.step(hermes("update_task_status", {"task_id": "task_2", "status": "completed"}))
    r = env.step("Done, task_2 is completed.")
    assert r.done and r.reward == 1.0 and r.info["termination_reason"] == "user_stop"
