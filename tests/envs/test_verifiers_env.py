"""The verifiers adapter (``agent_tune/envs/verifiers/env.py``) against environments built here with verifiers' own
classes (no mock of verifiers): a ``ToolEnv`` with two Python tools and a ``MultiTurnEnv`` guessing game, each with a
``datasets.Dataset`` and a weighted ``Rubric``. An episode earns what verifiers' rubric gives the same completion,
episodes are token-exact through the runner, the environment's dataset rows round-trip through the catalogue, and
bad input (an undecodable call, an unknown tool, a tool that raises, an env_response that raises) is counted, never
a crash."""

from __future__ import annotations

import asyncio
import builtins
import json
import re
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

vf = pytest.importorskip("verifiers")
if not hasattr(vf, "MultiTurnEnv"):  # verifiers 0.4.0 dropped the classic API the adapter plays
    pytest.skip(f"verifiers {vf.__version__} has no MultiTurnEnv (the adapter needs <= 0.3.1)", allow_module_level=True)

from datasets import Dataset  # noqa: E402

import agent_tune.envs.verifiers.env as verifiers_env  # noqa: E402
from agent_tune.envs import check_env, make_env  # noqa: E402
from agent_tune.envs.base import StopReason  # noqa: E402
from agent_tune.envs.tasks import catalogue_rows, row_env, row_task  # noqa: E402
from agent_tune.envs.verifiers.env import VerifiersEnv  # noqa: E402

PATH = "agent_tune.envs.verifiers.env:VerifiersEnv"
TOOLS = f"{__name__}:load_tool_env"
GUESS = f"{__name__}:load_guess_env"
SYSTEM = "Use the tools, then answer with the number."


def call(name: str, **arguments: Any) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


ADD = call("add", a=2, b=3)
BROKEN = "<tool_call>\n{oops\n</tool_call>"


# ---------------------------------------------------------------- environments built with verifiers' classes
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first integer
        b: the second integer
    """
    return a + b


def divide(a: float, b: float) -> float:
    """Divide a by b.

    Args:
        a: the dividend
        b: the divisor
    """
    return a / b


def correct(completion: Any, answer: str) -> float:
    """1.0 when the last assistant message states the answer."""
    replies = [m for m in completion if m.role == "assistant"]
    return float(bool(replies) and answer in (replies[-1].content or ""))


def used_a_tool(completion: Any) -> float:
    return float(any(m.role == "assistant" and m.tool_calls for m in completion))


def tool_rubric() -> Any:
    return vf.Rubric(funcs=[correct, used_a_tool], weights=[1.0, 0.5])


def load_tool_env(max_turns: int = 4, stop_errors: list[str] | None = None) -> Any:
    train = Dataset.from_list([{"question": "What is 2 + 3?", "answer": "5"},
                               {"question": "What is 7 + 8?", "answer": "15"}])
    test = Dataset.from_list([{"question": "What is 1 + 1?", "answer": "2"}])
    errors = [getattr(builtins, name) for name in stop_errors or []]
    return vf.ToolEnv(tools=[add, divide], dataset=train, eval_dataset=test, system_prompt=SYSTEM,
                      rubric=tool_rubric(), max_turns=max_turns, stop_errors=errors, pass_threshold=1.0)


def load_environment(**env_args: Any) -> Any:
    """This module as an installed environment package would be: ``vf.load_environment(id)`` calls it."""
    return load_tool_env(**env_args)


class GuessEnv(vf.MultiTurnEnv):
    """Guess the secret number (the row's answer): the env answers "higher" / "lower" and ends on the right guess
    (``final_env_response``); a reply without a ``GUESS: N`` line makes its env_response raise."""

    async def setup_state(self, state: Any) -> Any:
        state["secret"] = int(state["answer"])
        return state

    async def env_response(self, messages: Any, state: Any, **kwargs: Any) -> Any:
        found = re.search(r"GUESS:\s*(-?\d+)", messages[-1].content or "")
        if found is None:
            raise ValueError("no 'GUESS: N' line")
        guess = int(found.group(1))
        if guess == state["secret"]:
            state["final_env_response"] = [vf.UserMessage(content="Correct!")]
            return state["final_env_response"]
        return [vf.UserMessage(content="higher" if guess < state["secret"] else "lower")]


def solved(completion: Any) -> float:
    return float(any(m.role == "user" and m.content == "Correct!" for m in completion))


def few_guesses(completion: Any) -> float:
    return 1.0 / max(1, sum(m.role == "assistant" for m in completion))


def guess_rubric() -> Any:
    return vf.Rubric(funcs=[solved, few_guesses], weights=[1.0, 0.5])


def load_guess_env(max_turns: int = 5) -> Any:
    rows = [{"question": "Guess my number between 1 and 9. Reply 'GUESS: N'.", "answer": "7"}]
    return GuessEnv(dataset=Dataset.from_list(rows), rubric=guess_rubric(), max_turns=max_turns, pass_threshold=1.0)


class RestartingGuessEnv(GuessEnv):
    """Shows only the env's reply as the next prompt (a non-linear conversation the runner cannot follow)."""

    async def get_prompt_messages(self, state: Any) -> Any:
        messages = await super().get_prompt_messages(state)
        return messages if not state["trajectory"] else messages[-1:]


def load_restarting_env() -> Any:
    return RestartingGuessEnv(dataset=Dataset.from_list([{"question": "Guess.", "answer": "7"}]),
                              rubric=guess_rubric())


class SlowGuessEnv(GuessEnv):
    """A guess env whose backend stops answering: setup_state for the answer "slow", env_response for GUESS: 0."""

    async def setup_state(self, state: Any) -> Any:
        if state["answer"] == "slow":
            await asyncio.sleep(30)
        return await super().setup_state(state)

    async def env_response(self, messages: Any, state: Any, **kwargs: Any) -> Any:
        if "GUESS: 0" in (messages[-1].content or ""):
            await asyncio.sleep(30)
        return await super().env_response(messages, state, **kwargs)


def load_slow_env() -> Any:
    return SlowGuessEnv(dataset=Dataset.from_list([{"question": "Guess.", "answer": "7"}]), rubric=guess_rubric())


def score(rubric: Any, prompt: list[Any], completion: list[Any], answer: str) -> float:
    """What verifiers' rubric itself gives ``completion`` (verifiers messages), scored as verifiers scores a rollout."""
    from verifiers.utils.message_utils import normalize_messages

    state = vf.State(input={"prompt": normalize_messages(prompt), "answer": answer, "example_id": 0})
    state["completion"], state["trajectory"] = completion, []
    asyncio.run(rubric.score_rollout(state))
    return state["reward"]


def tool_call(i: str, name: str, **arguments: Any) -> Any:
    return vf.ToolCall(id=i, name=name, arguments=json.dumps(arguments))


QUESTION = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "What is 2 + 3?"}]
TASK = {"prompt": QUESTION, "answer": "5"}
# (replies, the completion a verifiers rollout of an OpenAI-style model would hold for them)
SCRIPTS = {
    "tool then answer": ([ADD, "2 + 3 = 5. The answer is 5."], [
        vf.AssistantMessage(content="", tool_calls=[tool_call("c0", "add", a=2, b=3)]),
        vf.ToolMessage(tool_call_id="c0", content="5"),
        vf.AssistantMessage(content="2 + 3 = 5. The answer is 5.")]),
    "answer alone": (["The answer is 5."], [vf.AssistantMessage(content="The answer is 5.")]),
    "tool then wrong": ([call("add", a=2, b=2), "The answer is 4."], [
        vf.AssistantMessage(content="", tool_calls=[tool_call("c0", "add", a=2, b=2)]),
        vf.ToolMessage(tool_call_id="c0", content="4"),
        vf.AssistantMessage(content="The answer is 4.")]),
}


# ---------------------------------------------------------------- the contract
def test_check_env_passes_for_a_tool_env_and_a_text_env() -> None:
    check_env(lambda: make_env(PATH, environment=TOOLS), TASK, ADD, BROKEN)
    check_env(lambda: make_env(PATH, environment=GUESS), {"prompt": "Guess. Reply 'GUESS: N'.", "answer": "7"},
              "GUESS: 3", "I have no idea")


def test_an_environment_id_loads_through_verifiers_load_environment() -> None:
    env = VerifiersEnv(environment=__name__, env_args={"max_turns": 2})  # an env id: vf.load_environment(id, ...)
    assert env.vf_env.env_id == __name__ and env.vf_env.env_args == {"max_turns": 2} and env.vf_env.max_turns == 2
    env.reset(**TASK)
    assert env.step("The answer is 5.").reward == 1.0


def test_bad_options_and_non_environments_are_named() -> None:
    with pytest.raises(ValueError, match="not a vf.MultiTurnEnv"):
        VerifiersEnv(environment=f"{__name__}:tool_rubric")
    with pytest.raises(ValueError, match="cannot build"):
        VerifiersEnv(environment=f"{__name__}:no_such_loader")
    with pytest.raises(ValueError, match="nonsense"):
        VerifiersEnv.check_kwargs({"environment": TOOLS, "nonsense": 1})
    with pytest.raises(ValueError, match="max_steps"):
        VerifiersEnv(environment=TOOLS, max_steps=0)


# ---------------------------------------------------------------- the reward is verifiers' rubric
@pytest.mark.parametrize("script", sorted(SCRIPTS))
def test_a_tool_episode_earns_what_the_rubric_gives_the_same_completion(script: str) -> None:
    replies, completion = SCRIPTS[script]
    env = VerifiersEnv(environment=TOOLS)
    obs = env.reset(**TASK)
    assert obs.messages == QUESTION and [t["function"]["name"] for t in obs.tools] == ["add", "divide"]
    assert obs.tools[0]["function"]["parameters"]["properties"]["a"]["type"] == "integer"
    for reply in replies:
        result = env.step(reply)
    env.close()
    expected = score(tool_rubric(), QUESTION, completion, "5")
    assert result.done and result.reward == pytest.approx(expected)
    assert result.info["verifiers_stop"] == "no_tools_called" and result.episode.format_errors == 0
    assert result.info["verifiers_metrics"]["correct"] == correct(completion, "5")
    assert result.episode.accuracy == float(expected >= 1.0)  # the env's pass_threshold is 1.0


def test_the_completion_verifiers_scores_is_the_conversation_played() -> None:
    env = VerifiersEnv(environment=TOOLS)
    env.reset(**TASK)
    middle = env.step("Let me add.\n" + ADD)
    assert middle.observation.messages == [{"role": "tool", "tool_call_id": "call_1_0", "content": "5"}]
    assert middle.info["calls"] == ["add"] and not middle.done
    state = env.state
    env.step("The answer is 5.")
    first = state["completion"][0]
    assert first.content == "Let me add." and first.tool_calls[0].name == "add"
    assert json.loads(first.tool_calls[0].arguments) == {"a": 2, "b": 3}
    assert [m.role for m in state["completion"]] == ["assistant", "tool", "assistant"]


def test_a_text_episode_earns_what_the_rubric_gives_the_same_completion() -> None:
    env = VerifiersEnv(environment=GUESS)
    prompt = "Guess my number between 1 and 9. Reply 'GUESS: N'."
    obs = env.reset(question=prompt, answer="7")  # formatted by the env's own dataset formatting
    assert obs.messages == [{"role": "user", "content": prompt}] and obs.tools is None
    first = env.step("GUESS: 3")
    assert first.observation.messages == [{"role": "user", "content": "higher"}] and not first.done
    end = env.step("Then GUESS: 7")
    completion = [vf.AssistantMessage(content="GUESS: 3"), vf.UserMessage(content="higher"),
                  vf.AssistantMessage(content="Then GUESS: 7"), vf.UserMessage(content="Correct!")]
    assert end.done and end.reward == pytest.approx(score(guess_rubric(), obs.messages, completion, "7")) == 1.25
    assert end.observation.messages == [{"role": "user", "content": "Correct!"}]
    assert end.info["verifiers_stop"] == "has_final_env_response" and end.episode.accuracy == 1.0
    assert end.episode.turns_completed == 1


def test_max_turns_and_max_steps_end_the_episode() -> None:
    env = VerifiersEnv(environment=GUESS)
    env.reset(prompt="Guess.", answer="7")
    results = [env.step(f"GUESS: {n}") for n in (1, 2, 3, 4, 5)]
    assert [r.done for r in results] == [False] * 4 + [True]
    assert results[-1].info["verifiers_stop"] == "max_turns_reached" and results[-1].reward == pytest.approx(0.1)
    env = VerifiersEnv(environment=GUESS, max_steps=2)
    env.reset(prompt="Guess.", answer="7")
    assert not env.step("GUESS: 1").done
    end = env.step("GUESS: 2")
    # scored on both guesses
    assert end.done and end.info["stop_reason"] == "step_limit" and end.reward == pytest.approx(0.25)


def test_accuracy_reads_a_named_metric() -> None:
    env = VerifiersEnv(environment=TOOLS, accuracy_metric="used_a_tool")
    env.reset(**TASK)
    end = env.step("The answer is 5.")
    assert end.reward == 1.0 and end.episode.accuracy == 0.0  # right, but the named metric says no tool was used
    env.reset(**TASK)
    env.step(ADD)
    end = env.step("The answer is 6.")
    assert end.reward == 0.5 and end.episode.accuracy == 1.0


def test_an_episode_ended_from_outside_is_scored_on_what_was_done() -> None:
    env = VerifiersEnv(environment=TOOLS)
    env.reset(**TASK)
    env.step(ADD)
    end = env.finalize(StopReason.TOKEN_BUDGET)
    assert end.done and end.info["stop_reason"] == "token_budget" and end.reward == 0.5  # used a tool, never answered


# ---------------------------------------------------------------- through the runner, token-exact
@pytest.mark.parametrize("environment, task, replies, reward", [
    (TOOLS, TASK, [ADD, "2 + 3 = 5. The answer is 5."], 1.5),
    (GUESS, {"prompt": "Guess. Reply 'GUESS: N'.", "answer": "7"}, ["GUESS: 3", "GUESS: 7"], 1.25),
])
async def test_an_episode_is_token_exact_through_the_runner(qwen_tok, environment: str, task: dict[str, Any],
                                                            replies: list[str], reward: float) -> None:
    from agent_tune.rollout import ChatRenderer, RolloutLimits, ScriptedPolicy, run_episode

    renderer = ChatRenderer(qwen_tok, template="qwen3_instruct")
    policy = ScriptedPolicy(renderer, replies)
    env = VerifiersEnv(environment=environment)
    try:
        result = await run_episode(env, policy, renderer, RolloutLimits(8192, 2048), task=task, debug_drift=True)
    finally:
        env.close()
    traj = result.trajectory
    assert result.reward == pytest.approx(reward) and result.stop_reason == "done", result.info
    assert result.drift.ok, str(result.drift)
    answer = "<tool_response>\n5\n</tool_response>" if environment == TOOLS else "higher"
    assert answer in policy.prompts[1]  # the policy read verifiers' env_response, rendered by the template
    assert len(traj.response_ids) == len(traj.response_mask) == len(traj.response_logprobs)
    assert sum(traj.response_mask) == traj.num_policy_tokens and 0 < traj.num_policy_tokens < len(traj)


async def test_a_failing_env_does_not_break_the_runner(qwen_tok) -> None:
    from agent_tune.rollout import ChatRenderer, RolloutLimits, ScriptedPolicy, run_episode

    renderer = ChatRenderer(qwen_tok, template="qwen3_instruct")
    env = VerifiersEnv(environment=GUESS)
    result = await run_episode(env, ScriptedPolicy(renderer, ["GUESS: 3", "no idea"]), renderer,
                               RolloutLimits(8192, 2048), task={"prompt": "Guess.", "answer": "7"}, debug_drift=True)
    env.close()
    assert result.stop_reason == "env_error" and result.num_generations == 2 and result.drift.ok
    assert result.episode.format_errors == 1 and result.info["error"] == "ValueError: no 'GUESS: N' line"
    assert result.reward == 0.0  # the failed rollout is not scored


# ---------------------------------------------------------------- the catalogue
def test_catalogue_rows_round_trip_through_parquet(tmp_path: Path) -> None:
    import pandas as pd

    from agent_tune.utils.rows import write_rows

    rows = catalogue_rows(PATH, "train", {"environment": TOOLS})
    assert [r["extra_info"]["id"] for r in rows] == ["train:0", "train:1"]
    assert [r["reward_model"]["ground_truth"] for r in rows] == ["5", "15"]
    assert rows[1]["prompt"] == [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "What is 7 + 8?"}]
    write_rows(tmp_path / "rows", "train", rows)
    read = pd.read_parquet(tmp_path / "rows" / "train.parquet").to_dict("records")
    answers = iter([(call("add", a=2, b=3), "5"), (call("add", a=7, b=8), "15")])
    for row in read:
        extra = row["extra_info"]
        name, kwargs = row_env(extra)
        assert name == PATH
        env = VerifiersEnv(**kwargs)
        obs = env.reset(**row_task(extra))
        assert obs.messages == [{k: v for k, v in m.items() if v is not None} for m in row["prompt"]]
        first, number = next(answers)
        assert env.step(first).observation.messages[0]["content"] == number
        end = env.step(f"The answer is {number}.")
        assert end.done and end.reward == 1.5, end.info
        env.close()
    test = VerifiersEnv.catalogue.tasks("test", TOOLS)
    assert [(t.id, t.reference) for t in test] == [("test:0", "2")]
    assert test[0].kwargs["prompt"][-1] == {"role": "user", "content": "What is 1 + 1?"}
    with_args = VerifiersEnv.catalogue.tasks("train", TOOLS, {"max_turns": 2})
    assert json.loads(with_args[0].env_kwargs["env_args"]) == {"max_turns": 2}
    assert VerifiersEnv(**with_args[0].env_kwargs).vf_env.max_turns == 2


# ---------------------------------------------------------------- bad input, counted
def test_bad_calls_are_counted_and_answered_by_verifiers() -> None:
    env = VerifiersEnv(environment=TOOLS)
    env.reset(**TASK)
    mixed = env.step("\n".join([call("divide", a=2, b=0), call("nope"), BROKEN]))
    assert not mixed.done and mixed.info["format_errors"] == 2  # the unknown tool and the undecodable block
    assert mixed.info["unknown_tools"] == ["nope"] and mixed.info["calls"] == ["divide"]
    assert mixed.info["tool_errors"] == ["divide: ZeroDivisionError: division by zero"]  # not a format error
    assert [m["content"] for m in mixed.observation.messages] == ["division by zero", "'nope'"]  # ToolEnv's words
    assert env.state["trajectory"][-1]["completion"][0].content == BROKEN  # left in the content, as vLLM leaves it
    only_broken = env.step(BROKEN)  # no call to run: a ToolEnv's no_tools_called ends the episode
    assert only_broken.done and only_broken.info["format_errors"] == 1 and only_broken.reward == 0.5
    assert only_broken.episode.format_errors == 3 and only_broken.info["tool_errors"] == 1


def test_a_tool_error_in_stop_errors_ends_the_episode_as_verifiers_does() -> None:
    env = VerifiersEnv(environment=TOOLS, env_args={"stop_errors": ["ZeroDivisionError"]})
    env.reset(**TASK)
    end = env.step(call("divide", a=1, b=0))
    assert end.done and end.info["verifiers_stop"] == "has_error" and end.info["format_errors"] == 1
    assert end.info["error"].startswith("ToolCallError") and end.episode.turns_completed == 0
    assert end.reward == 0.5  # scored as verifiers scores an errored rollout


@pytest.mark.parametrize("environment, error", [
    (GUESS, "ValueError: no 'GUESS: N' line"),
    (f"{__name__}:load_restarting_env", "ValueError: get_prompt_messages did not continue the conversation"),
])
def test_an_env_response_that_fails_is_a_counted_format_error(environment: str, error: str) -> None:
    env = VerifiersEnv(environment=environment)
    env.reset(prompt="Guess.", answer="7")
    end = env.step("I have no idea" if environment == GUESS else "GUESS: 3")
    assert end.done and end.info["format_errors"] == 1 and end.episode.format_errors == 1
    assert end.info["error"].startswith(error) and end.reward == 0.0 and end.episode.accuracy == 0.0
    assert end.info["verifiers_metrics"] == {}  # a failed rollout is not scored, as in verifiers' own loop
    assert end.observation.messages[-1]["role"] == "user" and error in end.observation.messages[-1]["content"]


def test_batch_step_steps_each_env_with_its_own_text() -> None:
    envs = [VerifiersEnv(environment=TOOLS) for _ in range(3)]
    for env in envs:
        env.reset(**TASK)
    results = VerifiersEnv.batch_step(envs, [ADD, "The answer is 5.", call("nope")])
    assert [r.done for r in results] == [False, True, False]
    assert results[0].observation.messages[0]["content"] == "5" and results[1].reward == 1.0
    assert results[2].info["unknown_tools"] == ["nope"]
    assert envs[0].state["trajectory"][-1]["completion"][0].tool_calls[0].name == "add"
    assert envs[2].state["trajectory"][-1]["completion"][0].tool_calls[0].name == "nope"
    guessing = [VerifiersEnv(environment=GUESS) for _ in range(2)]
    for env in guessing:
        env.reset(prompt="Guess.", answer="7")
    ok, failed = VerifiersEnv.batch_step(guessing, ["GUESS: 3", "no idea"])  # one env failing fails no other
    assert not ok.done and ok.observation.messages == [{"role": "user", "content": "higher"}]
    assert failed.done and failed.info["error"] == "ValueError: no 'GUESS: N' line"


def test_an_env_built_off_the_main_thread_leaves_the_signal_handlers_alone() -> None:
    before = signal.getsignal(signal.SIGTERM)
    built: list[Any] = []
    thread = threading.Thread(target=lambda: built.append(verifiers_env.load_environment(TOOLS, {"max_turns": 3})))
    thread.start()
    thread.join()
    assert built and built[0].max_turns == 3 and signal.getsignal(signal.SIGTERM) is before


def test_a_step_or_start_with_no_answer_in_time_follows_the_time_limit_rule() -> None:
    """call_timeout ends a step verifiers does not finish (stop reason timeout, not a format error, the other
    episode of the batch unaffected); start_timeout bounds setup_state (StartTimeoutError, counted by the runner)."""
    from agent_tune.envs.time_limits import StartTimeoutError

    slow, quick = (VerifiersEnv(environment=f"{__name__}:load_slow_env", call_timeout=1.0, start_timeout=1.0)
                   for _ in range(2))
    slow.reset(prompt="Guess.", answer="7")
    quick.reset(prompt="Guess.", answer="7")
    t0 = time.monotonic()
    hung, done = VerifiersEnv.batch_step([slow, quick], ["GUESS: 0", "GUESS: 7"])
    assert time.monotonic() - t0 < 6.0
    assert hung.done and hung.info["stop_reason"] == "timeout" and hung.episode.format_errors == 0
    assert hung.info["error"] == "no answer in 1 s (verifiers step)" and hung.reward == 0.0
    assert done.done and done.info["stop_reason"] == "done" and done.episode.accuracy == 1.0
    t0 = time.monotonic()
    with pytest.raises(StartTimeoutError, match=r"no answer in 1 s \(verifiers env .*setup_state\)"):
        slow.reset(prompt="Guess.", answer="slow")
    assert time.monotonic() - t0 < 6.0
