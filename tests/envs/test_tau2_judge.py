"""tau2's NL-assertion judge through a configured OpenAI-compatible endpoint (a scripted loopback server here).

No shipped tau2 task counts its NL assertions in the reward, so the tests register a task set in tau2's own
registry holding mock's ``create_task_1`` with ``NL_ASSERTION`` added to its reward basis, and play it with a
scripted user: the task is solved on the database side, so the judge's verdict decides the reward.
"""

from __future__ import annotations

import json

import pytest

from agent_tune.envs import get_env_class, make_env
from agent_tune.envs.tau2 import loader
from agent_tune.envs.tau2.judge import JudgeConfig, configured_judge
from tests.envs.tau2_helpers import hermes
from tests.users.fake_openai import FakeOpenAI, completion, free_port_url

TASK_SET = "agent_tune_test_mock_nl"
TASK_ID = "create_task_1"
ASSERTION = "The agent confirmed the task was created successfully"
USER = {"kind": "scripted", "turns": ["Create a task 'Important Meeting' for user_1."]}


@pytest.fixture(autouse=True)
def nl_task_set():
    """``TASK_SET``: mock's create_task_1, its reward counting its NL assertion (removed afterwards)."""
    from tau2.data_model.tasks import RewardType

    task = loader.load_task("mock", TASK_ID)
    task.evaluation_criteria.reward_basis = [*task.evaluation_criteria.reward_basis, RewardType.NL_ASSERTION]
    loader.registry.register_tasks(lambda split=None: [task.model_copy(deep=True)], TASK_SET)
    loader._tasks.cache_clear()
    yield
    loader.registry._tasks.pop(TASK_SET, None)
    loader._tasks.cache_clear()


def verdict(*met: bool) -> dict:
    """A judge answer in tau2's format: one verdict per entry of ``met``."""
    results = [{"expectedOutcome": ASSERTION, "reasoning": "read the conversation", "metExpectation": m} for m in met]
    return completion(json.dumps({"results": results}))


def judge_config(server: FakeOpenAI, **extra) -> dict:
    return {"base_url": server.base_url, "model": server.model, "backoff_s": 0.0, "timeout_s": 10, **extra}


def play(task_set: str = TASK_SET, **kwargs):
    """The gold play: create the task, tell the user, the scripted user stops."""
    env = make_env("tau2", domain="mock", task_id=TASK_ID, task_set=task_set, user=USER, **kwargs)
    env.reset()
    r = env.step(hermes("create_task", {"user_id": "user_1", "title": "Important Meeting"}))
    assert not r.done
    r = env.step("Your task 'Important Meeting' was created successfully.")
    assert r.done and r.info["termination_reason"] == "user_stop"
    return env, r


@pytest.mark.parametrize("met", [True, False])
def test_the_judges_verdict_is_the_reward(met: bool) -> None:
    with FakeOpenAI(model="judge-model") as server:
        server.queue.append(verdict(met))
        env, r = play(judge=judge_config(server, temperature=0.2))
    assert r.reward == r.info["accuracy"] == float(met)
    assert r.info["tau2_reward_nl_assertion"] == float(met) and r.info["tau2_reward_db"] == 1.0
    assert r.info["tau2_met_nl_assertion"] == float(met) and "judge_failures" not in r.info
    assert env.simulation.reward_info.nl_assertions[0].met is met
    (request,) = server.requests  # tau2's prompt, sent to the configured model with its temperature
    assert request["model"] == "judge-model" and request["temperature"] == 0.2
    assert ASSERTION in request["messages"][1]["content"] and "Important Meeting" in request["messages"][1]["content"]


def test_bad_judge_output_is_retried_and_recorded() -> None:
    with FakeOpenAI(model="judge-model") as server:
        server.queue.extend([completion("I think it went well!"), verdict(), verdict(True)])
        _, r = play(judge=judge_config(server, max_retries=2))
        assert r.reward == 1.0 and len(server.requests) == 3
        assert len(r.info["judge_failures"]) == 2 and "JSONDecodeError" in r.info["judge_failures"][0]
        assert "0 verdicts for 1 NL assertions" in r.info["judge_failures"][1]

        server.queue.clear()
        server.default = completion("{not json")
        _, r = play(judge=judge_config(server, max_retries=1))  # never a usable verdict: reward 0, no exception
        assert r.reward == 0.0 and len(r.info["judge_failures"]) == 2
        assert r.info["evaluator_error"].startswith(f"NL-assertion judge at {server.base_url} failed 2 times")

        server.default = 500  # the endpoint errors: the same
        _, r = play(judge=judge_config(server, max_retries=0))
        assert r.reward == 0.0 and "failed 1 times" in r.info["evaluator_error"]


def test_without_a_judge_nothing_is_asked() -> None:
    _, r = play()  # a task that needs a judge, none configured: 0 with the reason
    assert r.reward == 0.0 and "no judge is configured" in r.info["evaluator_error"]
    with FakeOpenAI(model="judge-model") as server:  # a judge configured, a task that does not count NL assertions
        _, r = play(task_set="mock", judge=judge_config(server))
        assert r.reward == 1.0 and server.requests == [] and "evaluator_error" not in r.info
    _, r = play(task_set="mock", judge={"base_url": None, "model": None})  # base_url null: no judge
    assert r.reward == 1.0


def test_judge_config_is_checked_at_start_up(monkeypatch: pytest.MonkeyPatch) -> None:
    tau2 = get_env_class("tau2")
    kwargs = {"domain": "mock", "task_id": TASK_ID, "user": USER}
    url = free_port_url()
    with pytest.raises(ValueError, match=f"NL-assertion judge at {url} is unreachable"):
        tau2.check_kwargs({**kwargs, "judge": {"base_url": url, "model": "judge-model"}})
    with FakeOpenAI(model="judge-model") as server:
        tau2.check_kwargs({**kwargs, "judge": judge_config(server)})
        with pytest.raises(ValueError, match="judge at .* does not serve model 'other'"):
            tau2.check_kwargs({**kwargs, "judge": {"base_url": server.base_url, "model": "other"}})
    with pytest.raises(ValueError, match="judge.model is required"):
        tau2.check_kwargs({**kwargs, "judge": {"base_url": url}})
    with pytest.raises(ValueError, match="judge: unknown key"):
        JudgeConfig.parse({"base_url": url, "model": "m", "temprature": 0.1}, "judge")
    monkeypatch.delenv("AT_TEST_JUDGE_KEY", raising=False)
    with pytest.raises(ValueError, match="AT_TEST_JUDGE_KEY"):
        JudgeConfig.parse({"base_url": url, "model": "m", "api_key_env": "AT_TEST_JUDGE_KEY"}, "judge")
    assert configured_judge(None) is None and configured_judge({}) is None
