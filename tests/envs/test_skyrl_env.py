"""The skyrl adapter (``agent_tune/envs/skyrl/env.py``) against skyrl-gym's own envs (no mock of skyrl-gym): the same
actions earn through the adapter what the SkyRL env itself returns (gsm8k, gsm8k_multi_turn, text2sql on a small
sqlite database), the episodes are token-exact through the runner, SkyRL dataset rows round-trip through the
catalogue, and an env that fails on the policy's text is a counted format error, never a crash."""

from __future__ import annotations

import copy
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

skyrl_gym = pytest.importorskip("skyrl_gym")

from omegaconf import OmegaConf  # noqa: E402
from skyrl_gym.envs.base_text_env import BaseTextEnvStepOutput  # noqa: E402
from skyrl_gym.envs.gsm8k.env import GSM8kEnv  # noqa: E402
from skyrl_gym.envs.sql.env import SQLEnv  # noqa: E402

from agent_tune.envs import EnvCheckError, check_env, make_env  # noqa: E402
from agent_tune.envs.checker import NO_MALFORMED  # noqa: E402
from agent_tune.envs.skyrl.env import SkyRLGymEnv  # noqa: E402
from agent_tune.envs.tasks import catalogue_rows, row_env, row_task  # noqa: E402

PATH = "agent_tune.envs.skyrl.env:SkyRLGymEnv"
GOLD = "SELECT name FROM singer WHERE age > 30"
QUESTION = [{"role": "system", "content": "Answer with SQL: think in <think>, query with <sql>, end with <solution>."},
            {"role": "user", "content": "Which singers are older than 30?"}]
SQL_TASK = {"prompt": QUESTION, "db_id": "concert", "data": "spider", "reward_spec": {"ground_truth": GOLD}}
QUERY = "<think>How many singers are there?</think>\n<sql>SELECT count(*) FROM singer</sql>"
RIGHT = f"<think>Filter on age.</think>\n<solution>{GOLD}</solution>"
WRONG = "<think>Filter on age.</think>\n<solution>SELECT name FROM singer WHERE age < 30</solution>"


class StrictSQLEnv(SQLEnv):
    """skyrl-gym's text2sql env that raises on a response with neither an <sql> nor a <solution> block (SQLEnv
    answers such a response with a hint; a user's own env may raise instead)."""

    def step(self, action: str) -> BaseTextEnvStepOutput:
        if "<sql>" not in action and "<solution>" not in action:
            raise ValueError("no <sql> or <solution> block")
        return super().step(action)


class StrictGSM8kEnv(GSM8kEnv):
    """skyrl-gym's gsm8k env that raises on an answer without a '#### N' line (gsm8k scores it 0); the conformance
    test (tests/envs/test_conformance.py) plays the "skyrl" env with it."""

    def step(self, action: str) -> BaseTextEnvStepOutput:
        if "####" not in action:
            raise ValueError("no '#### ANSWER' line")
        return super().step(action)


class BrokenOutputEnv(SQLEnv):
    """An env whose step answers with something that is not a step output."""

    def step(self, action: str) -> Any:
        return "not a step output"


RELEASE = threading.Event()  # set at the end of the timeout tests: the abandoned threads return


class BlockingGSM8kEnv(GSM8kEnv):
    """skyrl-gym's gsm8k env whose step blocks (a dead service) on an answer saying BLOCK, and whose init blocks on
    a prompt saying BLOCK, until the test releases them."""

    def init(self, prompt: Any) -> Any:
        if "BLOCK" in str(prompt):
            RELEASE.wait(60)
        return super().init(prompt)

    def step(self, action: str) -> BaseTextEnvStepOutput:
        if "BLOCK" in action:
            RELEASE.wait(60)
        return super().step(action)


@pytest.fixture
def db_root(tmp_path: Path) -> str:
    """A spider-layout folder (``<root>/spider/database/concert/concert.sqlite``) with one table."""
    folder = tmp_path / "spider" / "database" / "concert"
    folder.mkdir(parents=True)
    conn = sqlite3.connect(folder / "concert.sqlite")
    conn.execute("CREATE TABLE singer (name TEXT, age INTEGER)")
    conn.executemany("INSERT INTO singer VALUES (?, ?)", [("Ann", 35), ("Bob", 25), ("Cy", 41)])
    conn.commit()
    conn.close()
    return str(tmp_path)


def skyrl_plays(env_id: str, config: dict[str, Any], task: dict[str, Any], actions: list[str]) -> list[dict]:
    """What skyrl-gym's env itself returns for ``actions`` (built as SkyRL's generator builds it)."""
    extras = {k: copy.deepcopy(v) for k, v in task.items() if k != "prompt"}
    env = skyrl_gym.make(env_id, env_config=OmegaConf.create(config), extras=extras)
    prompt = task["prompt"] if isinstance(task["prompt"], list) else [{"role": "user", "content": task["prompt"]}]
    env.init(copy.deepcopy(prompt))
    outs = []
    for action in actions:
        outs.append(env.step(action))
        if outs[-1]["done"]:
            break
    env.close()
    return outs


def adapter_plays(env: SkyRLGymEnv, task: dict[str, Any], actions: list[str]) -> list:
    env.reset(**copy.deepcopy(task))
    results = []
    for action in actions:
        results.append(env.step(action))
        if results[-1].done:
            break
    env.close()
    return results


def test_env_keeps_the_contract(db_root: str) -> None:
    strict = f"{__name__}:StrictSQLEnv"
    check_env(lambda: make_env(PATH, env_class=strict, env_config={"db_path": db_root}), SQL_TASK, QUERY,
              "I do not know SQL.")
    check_env(lambda: make_env(PATH, env_class=f"{__name__}:StrictGSM8kEnv"),
              {"prompt": "What is 2 + 3?", "reward_spec": {"ground_truth": "5"}}, "2 + 3 = 5\n#### 5", "five")
    # skyrl-gym's own SQLEnv answers the same text with a hint: the adapter invents no format error; the check says
    # what to pass for an env with no response that counts one, and then skips that rule, saying so
    with pytest.raises(EnvCheckError, match="format error .*malformed_response=None"):
        check_env(lambda: make_env(PATH, env="text2sql", env_config={"db_path": db_root}), SQL_TASK, QUERY,
                  "I do not know SQL.")
    report = check_env(lambda: make_env(PATH, env="text2sql", env_config={"db_path": db_root}), SQL_TASK, QUERY,
                       None)
    assert report.skipped == [NO_MALFORMED] and "rule 4" in report.skipped[0]
    assert check_env(lambda: make_env(PATH, env="gsm8k"), {"prompt": "What is 2 + 3?", "reward_spec": {
        "ground_truth": "5"}}, "#### 5", None).skipped == [NO_MALFORMED]


@pytest.mark.parametrize("final, reward", [(RIGHT, 1.0), (WRONG, 0.0), ("<solution>no think block</solution>", -1.0)])
def test_text2sql_episode_earns_what_skyrl_returns(db_root: str, final: str, reward: float) -> None:
    actions = [QUERY, final]
    own = skyrl_plays("text2sql", {"db_path": db_root}, SQL_TASK, actions)
    results = adapter_plays(SkyRLGymEnv(env="text2sql", env_config={"db_path": db_root}), SQL_TASK, actions)
    assert [r["reward"] for r in own] == [0.0, reward]
    assert [r.done for r in results] == [o["done"] for o in own] == [False, True]
    assert results[0].observation.messages == own[0]["observations"] and "<observation>" in own[0]["observations"][0][
        "content"]
    assert [r.info["skyrl_reward"] for r in results] == [o["reward"] for o in own]
    end = results[-1]
    assert end.reward == reward and end.episode.accuracy == float(reward >= 1.0)
    assert end.episode.num_calls == 1 and end.episode.format_errors == 0 and end.info["skyrl_rewards"] == [0.0, reward]


@pytest.mark.parametrize("answer, reward", [("6 * 7 = 42.\n#### 42", 1.0), ("6 * 7 = 43.\n#### 43", 0.0),
                                            ("It is forty-two.", 0.0)])
def test_gsm8k_single_turn_earns_what_skyrl_returns(answer: str, reward: float) -> None:
    task = {"prompt": "What is 6 * 7?", "reward_spec": {"method": "rule", "ground_truth": "42"}}
    own = skyrl_plays("gsm8k", {}, task, [answer])
    env = SkyRLGymEnv(env="gsm8k")
    assert env.reset(**task).messages == [{"role": "user", "content": "What is 6 * 7?"}]
    end = env.step(answer)
    assert own[0]["reward"] == reward and own[0]["done"]
    assert end.done and end.reward == reward and end.episode.accuracy == reward and end.episode.turns_completed == 1


def test_multi_turn_rewards_sum_over_the_turns() -> None:
    task = {"prompt": [{"role": "user", "content": "What is 6 * 7? End with '#### ANSWER'."}],
            "reward_spec": {"ground_truth": "42"}, "extra_info": {}}
    actions = ["Let me think.", "6 * 7 = 41\n#### 41", "6 * 7 = 42\n#### 42"]
    own = skyrl_plays("gsm8k_multi_turn", {}, {**task, "max_turns": 3}, actions)
    results = adapter_plays(SkyRLGymEnv(env="gsm8k_multi_turn", max_steps=3), task, actions)
    assert [r.done for r in results] == [o["done"] for o in own] == [False, False, True]
    for result, o in zip(results, own):
        assert result.observation.messages == o["observations"] and result.info["skyrl_reward"] == o["reward"]
    assert own[0]["observations"][0]["role"] == "user" and 0 < own[1]["reward"] < 1
    assert results[-1].reward == pytest.approx(sum(o["reward"] for o in own))
    assert results[-1].episode.accuracy == 1.0 and results[-1].episode.num_steps == 3


def test_step_limit_ends_an_episode_the_skyrl_env_would_go_on_with() -> None:
    env = SkyRLGymEnv(env="gsm8k_multi_turn", max_steps=2)
    # an explicit max_turns overrides the one max_steps passes: skyrl's env would allow 5 turns
    env.reset(prompt="What is 6 * 7?", reward_spec={"ground_truth": "42"}, extra_info={}, max_turns=5)
    assert env.skyrl_env.max_turns == 5
    assert not env.step("#### 41").done
    end = env.step("#### 40")
    assert end.done and end.info["stop_reason"] == "step_limit" and end.info["skyrl_done"] is False
    assert end.episode.accuracy == 0.0 and end.reward == pytest.approx(2 * 0.2 / 5)
    env.reset(prompt="What is 6 * 7?", reward_spec={"ground_truth": "42"}, extra_info={})
    assert env.skyrl_env.max_turns == 2  # max_steps reaches the skyrl env as max_turns, as SkyRL's generator does


async def test_an_episode_is_token_exact_through_the_runner(qwen_tok, db_root: str) -> None:
    """Observations are rendered by the chat template from skyrl's messages: the whole conversation re-rendered
    equals the trajectory (drift check), and the policy read the SQL result as skyrl's env wrote it."""
    from agent_tune.rollout import ChatRenderer, RolloutLimits, ScriptedPolicy, run_episode

    renderer = ChatRenderer(qwen_tok, template="qwen3_instruct")
    policy = ScriptedPolicy(renderer, [QUERY, RIGHT])
    env = SkyRLGymEnv(env="text2sql", env_config={"db_path": db_root})
    try:
        result = await run_episode(env, policy, renderer, RolloutLimits(8192, 2048), task=SQL_TASK, debug_drift=True)
    finally:
        env.close()
    traj = result.trajectory
    assert result.reward == 1.0 and result.stop_reason == "done" and result.drift.ok, str(result.drift)
    own = skyrl_plays("text2sql", {"db_path": db_root}, SQL_TASK, [QUERY, RIGHT])
    assert result.messages[3] == own[0]["observations"][0] and own[0]["observations"][0]["content"] in policy.prompts[1]
    assert len(traj.response_ids) == len(traj.response_mask) == len(traj.response_logprobs)
    assert sum(traj.response_mask) == traj.num_policy_tokens and 0 < traj.num_policy_tokens < len(traj)


def skyrl_rows(db_root: str) -> list[dict[str, Any]]:
    """Rows in SkyRL's dataset format, of two envs (as SkyRL's gsm8k / text2sql preprocessing writes them; one
    dataset holds the same columns in every row: the gsm8k rows have no database)."""
    rows = []
    for i, (q, a) in enumerate([("What is 6 * 7?", "42"), ("What is 2 + 3?", "5"), ("What is 9 - 4?", "5")]):
        rows.append({"data_source": "openai/gsm8k", "prompt": [{"role": "user", "content": q}], "env_class": "gsm8k",
                     "db_id": None, "data": None, "reward_spec": {"method": "rule", "ground_truth": a},
                     "extra_info": {"split": "test" if i == 2 else "train", "index": i, "question": q}})
    rows.append({"data_source": "spider", "prompt": QUESTION, "env_class": "text2sql", "db_id": "concert",
                 "data": "spider", "reward_spec": {"method": "rule", "ground_truth": GOLD},
                 "extra_info": {"split": "train", "index": 0, "question": QUESTION[-1]["content"]}})
    return rows


def test_catalogue_rows_round_trip_through_parquet(db_root: str, tmp_path: Path) -> None:
    import datasets
    import pandas as pd

    from agent_tune.utils.rows import prompt_messages, write_rows

    source = tmp_path / "skyrl.parquet"
    datasets.Dataset.from_list(skyrl_rows(db_root)).to_parquet(str(source))  # as SkyRL's scripts write it
    run_kwargs = {"env_config": {"db_path": db_root}}
    rows = catalogue_rows(PATH, "train", {"path": str(source)}, run_kwargs)
    assert [r["extra_info"]["id"] for r in rows] == ["skyrl:1", "skyrl:2", "skyrl:4"]
    assert [r["extra_info"]["category"] for r in rows] == ["gsm8k", "gsm8k", "text2sql"]
    assert [r["reward_model"]["ground_truth"] for r in rows] == ["42", "5", GOLD]
    write_rows(tmp_path / "rows", "train", rows)
    read = pd.read_parquet(tmp_path / "rows" / "train.parquet").to_dict("records")
    answers = {"gsm8k": ["#### 42", "#### 5"], "text2sql": [RIGHT]}
    for row in read:
        extra = row["extra_info"]
        env = SkyRLGymEnv(**{**run_kwargs, **dict(row_env(extra)[1])})
        obs = env.reset(**row_task(extra))
        assert obs.messages == prompt_messages(row["prompt"])
        end = env.step(answers[env.env_id].pop(0))
        assert end.done and end.reward == 1.0, (env.env_id, end.info)
        env.close()
    test_rows = catalogue_rows(PATH, "test", {"path": {"test": str(source)}}, run_kwargs)
    assert len(test_rows) == 4  # one file per split: every row of it
    assert [t.id for t in SkyRLGymEnv.catalogue.tasks("test", str(source))] == ["skyrl:3"]
    assert {t.env_kwargs.get("env") for t in SkyRLGymEnv.catalogue.tasks("train", str(source), row_env=False)} == {None}


def test_catalogue_reads_jsonl_and_says_when_a_split_is_missing(db_root: str, tmp_path: Path) -> None:
    source = tmp_path / "rows.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in skyrl_rows(db_root)), encoding="utf-8")
    tasks = SkyRLGymEnv.catalogue.tasks("train", str(source))
    assert [t.env_kwargs for t in tasks] == [{"env": "gsm8k"}, {"env": "gsm8k"}, {"env": "text2sql"}]
    env = SkyRLGymEnv(env="gsm8k")
    assert env.reset(**tasks[0].kwargs).messages == [{"role": "user", "content": "What is 6 * 7?"}]
    only_train = tmp_path / "train.jsonl"
    only_train.write_text(json.dumps(skyrl_rows(db_root)[0]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="extra_info.split == 'test'"):
        SkyRLGymEnv.catalogue.tasks("test", str(only_train))


@pytest.mark.parametrize("env_class, error", [("StrictSQLEnv", "ValueError: no <sql> or <solution> block"),
                                              ("BrokenOutputEnv", "TypeError: step() returned str")])
def test_an_env_failing_on_the_policys_text_is_a_counted_format_error(db_root: str, env_class: str,
                                                                     error: str) -> None:
    env = SkyRLGymEnv(env_class=f"{__name__}:{env_class}", env_config={"db_path": db_root})
    env.reset(**copy.deepcopy(SQL_TASK))
    end = env.step("Sure! The answer is Ann and Cy.")
    assert end.done and end.info["format_errors"] == 1 and end.episode.format_errors == 1
    assert end.info["error"].startswith(error) and end.reward == 0.0 and end.episode.accuracy == 0.0
    assert end.observation.messages[-1]["role"] == "user" and error in end.observation.messages[-1]["content"]


async def test_a_failing_env_does_not_break_the_runner(qwen_tok, db_root: str) -> None:
    from agent_tune.rollout import ChatRenderer, RolloutLimits, ScriptedPolicy, run_episode

    renderer = ChatRenderer(qwen_tok, template="qwen3_instruct")
    env = SkyRLGymEnv(env_class=f"{__name__}:StrictSQLEnv", env_config={"db_path": db_root})
    result = await run_episode(env, ScriptedPolicy(renderer, [QUERY, "no idea"]), renderer, RolloutLimits(8192, 2048),
                               task=SQL_TASK, debug_drift=True)
    env.close()
    assert result.stop_reason == "env_error" and result.num_generations == 2 and result.drift.ok
    assert result.info["format_errors"] == 1 and result.episode.format_errors == 1 and result.reward == 0.0


def test_batch_step_steps_each_env_with_its_own_text() -> None:
    envs = [SkyRLGymEnv(env="gsm8k") for _ in range(5)]
    for env in envs:
        env.reset(prompt="What is 6 * 7?", reward_spec={"ground_truth": "42"})
    answers = ["#### 42", "#### 41", "#### 42", "none", "#### 42"]
    results = SkyRLGymEnv.batch_step(envs, answers)
    assert [r.reward for r in results] == [1.0, 0.0, 1.0, 0.0, 1.0]


def test_bad_options_and_tasks_fail_naming_the_cause(db_root: str) -> None:
    with pytest.raises(ValueError, match="registered: .*gsm8k"):
        SkyRLGymEnv(env="no_such_env")
    with pytest.raises(ValueError, match="one of env"):
        SkyRLGymEnv(env="gsm8k", env_class=f"{__name__}:StrictSQLEnv")
    with pytest.raises(ValueError, match="not a skyrl_gym.Env"):
        SkyRLGymEnv(env_class=f"{__name__}:skyrl_rows")
    with pytest.raises(ValueError, match="max_steps"):
        SkyRLGymEnv.check_kwargs({"env": "gsm8k", "max_steps": 0})
    # a run's kwargs without env (the rows name it) pass the start-up check; their values are still checked
    SkyRLGymEnv.check_kwargs({"env_config": {"db_path": db_root}, "max_steps": 3})
    with pytest.raises(ValueError, match="stop"):
        SkyRLGymEnv.check_kwargs({"stop": "</sql>"})
    with pytest.raises(ValueError, match="not a registered"):
        SkyRLGymEnv.check_kwargs({"env": "gsm8"})
    with pytest.raises(ValueError, match="'gsm8k': cannot start the task .*reward_spec"):
        SkyRLGymEnv(env="gsm8k").reset(prompt="What is 6 * 7?")
    with pytest.raises(ValueError, match="env_class 'text2sql' is not this env's 'gsm8k'"):
        SkyRLGymEnv(env="gsm8k").reset(row={"prompt": "q", "env_class": "text2sql"})
    env = SkyRLGymEnv(env="text2sql", env_config={"db_path": db_root}, stop=["</sql>", "</solution>"])
    assert env.sampler_hints.stop == ("</sql>", "</solution>")



async def test_a_blocked_step_ends_its_episode_on_time_and_the_batch_goes_on(qwen_tok) -> None:
    """The time-limit rule (agent_tune/envs/time_limits.py): a SkyRL env whose step blocks ends its episode with stop
    reason timeout within call_timeout, its thread abandoned; the other episodes of the batch finish meanwhile, and
    an episode whose start blocks is counted by the runner (timeout, nothing played)."""
    import asyncio

    from agent_tune.rollout import ChatRenderer, RolloutLimits, ScriptedPolicy, run_episode
    from agent_tune.rollout.episode_metrics import stop_shares

    renderer = ChatRenderer(qwen_tok, template="qwen3_instruct")
    task = {"prompt": "What is 6 * 7?", "reward_spec": {"ground_truth": "42"}}
    blocked_start = {"prompt": "BLOCK: what is 6 * 7?", "reward_spec": {"ground_truth": "42"}}
    plays = [("BLOCK #### 42", task)] + [("#### 42", task)] * 6 + [("#### 42", blocked_start)]
    envs = [SkyRLGymEnv(env_class=f"{__name__}:BlockingGSM8kEnv", call_timeout=1.0, start_timeout=1.0) for _ in plays]
    started = time.monotonic()
    try:
        results = await asyncio.wait_for(asyncio.gather(*(
            run_episode(env, ScriptedPolicy(renderer, [answer]), renderer, RolloutLimits(1024, 256), task=t)
            for env, (answer, t) in zip(envs, plays))), 30)
        elapsed = time.monotonic() - started
        for env in envs:
            env.close()  # the abandoned env is dropped, not closed: closing never waits on its thread
    finally:
        RELEASE.set()
    blocked, finished, not_started = results[0], results[1:-1], results[-1]
    assert elapsed < 10, elapsed  # two 1 s limits waited at once, not a hung batch
    assert blocked.stop_reason == "timeout" and blocked.reward == 0.0
    assert blocked.info["error"] == f"no answer in 1 s (skyrl env {__name__}:BlockingGSM8kEnv step)"
    assert blocked.episode.format_errors == 0 and blocked.num_generations == 1
    assert all(r.stop_reason == "done" and r.reward == 1.0 for r in finished)
    assert not_started.stop_reason == "timeout" and not_started.num_generations == 0
    assert not_started.trajectory.response_ids == [] and not_started.reward == 0.0
    assert not_started.info["error"].endswith("start)") and not_started.episode.stop_reason == "timeout"
    shares = stop_shares([r.stop_reason.value for r in results])
    assert shares["stop/timeout"] == pytest.approx(2 / 8) and shares["stop/done"] == pytest.approx(6 / 8)


def test_time_limits_are_options_checked_by_name() -> None:
    with pytest.raises(ValueError, match="call_timeout"):
        SkyRLGymEnv.check_kwargs({"env": "gsm8k", "call_timeout": 0})
    with pytest.raises(ValueError, match="start_timeout"):
        SkyRLGymEnv(env="gsm8k", start_timeout=-1.0)
    env = SkyRLGymEnv(env="gsm8k", call_timeout=5)
    assert (env.limits.call_timeout, env.limits.start_timeout) == (5.0, 60.0)
