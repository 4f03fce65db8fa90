"""The openenv env against real OpenEnv servers built here with OpenEnv's own classes (its ``Environment`` and
``MCPEnvironment`` bases, its ``create_fastapi_app``), served on loopback by uvicorn in a thread: the contract in
both modes, rewards equal to the served env's, token exactness through the runner, and each bad-input outcome
(a rejected action, a server that hangs, a server that goes away, a server that is not there)."""

from __future__ import annotations

import contextlib
import json
import random
import socket
import threading
import time
from typing import Any, Callable, Iterator, Optional

import pytest

pytest.importorskip("openenv.core", reason="openenv-core (and fastmcp) are not installed")

import uvicorn  # noqa: E402
from fastmcp import FastMCP  # noqa: E402
from openenv.core import Action, Environment, MCPEnvironment, Observation, State, create_fastapi_app  # noqa: E402
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation  # noqa: E402
from pydantic import Field  # noqa: E402

from agent_tune.envs import check_env  # noqa: E402
from agent_tune.envs.openenv.env import OpenEnvEnv  # noqa: E402
from agent_tune.errors import BackendGoneError  # noqa: E402

# ---------------------------------------------------------------------------------------------- the served envs
# What each served episode computed, by its episode_id (the server builds one env per WebSocket session).
SERVED_REWARDS: dict[str, list[float]] = {}
RELEASE = threading.Event()  # a hung step waits on it (set when the test module ends)


class GuessAction(Action):
    message: str = Field(min_length=1, max_length=32, description="a whole number")


class GuessObservation(Observation):
    feedback: str = ""
    attempts: int = 0


class GuessEnvironment(Environment):
    """Guess a number in 1..100: "higher"/"lower" (-0.1 each), 1.0 and done when right. "crash" raises, "hang"
    blocks (until RELEASE), and so does a reset with ``hang_reset``."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(step_count=0)
        self.target = 0

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, target: Optional[int] = None,
              **kwargs: Any) -> GuessObservation:
        if kwargs.get("hang_reset"):
            RELEASE.wait(60)
        self.target = target if target is not None else random.Random(seed).randint(1, 100)
        self._state = State(episode_id=episode_id or f"guess-{id(self)}", step_count=0)
        SERVED_REWARDS[self._state.episode_id] = []
        return GuessObservation(feedback="I picked a number from 1 to 100. Guess it.", reward=None)

    def step(self, action: GuessAction, timeout_s: Optional[float] = None, **kwargs: Any) -> GuessObservation:
        if action.message == "crash":
            raise RuntimeError("the guess machine broke")
        if action.message == "hang":
            RELEASE.wait(60)
        self._state.step_count += 1
        try:
            guess = int(action.message.strip())
        except ValueError:
            reward, done, feedback = -0.5, False, "Say a whole number."
        else:
            done = guess == self.target
            reward = 1.0 if done else -0.1
            feedback = "Right!" if done else ("Higher." if guess < self.target else "Lower.")
        SERVED_REWARDS[self._state.episode_id].append(reward)
        return GuessObservation(feedback=feedback, attempts=self._state.step_count, reward=reward, done=done)

    @property
    def state(self) -> State:
        return self._state


class TaskObservation(Observation):
    question: str = ""


class ArithmeticEnvironment(MCPEnvironment):
    """MCP tools ``add`` (reward 0.1 a call), ``divide`` and ``submit`` (1.0 if right, ends the episode)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        mcp = FastMCP("arithmetic")

        @mcp.tool()
        def add(a: int, b: int) -> int:
            """Add two integers."""
            return a + b

        @mcp.tool()
        def divide(a: float, b: float) -> float:
            """Divide a by b."""
            return a / b

        @mcp.tool()
        def submit(answer: int) -> str:
            """Submit the final answer."""
            self.answer = answer
            return "submitted"

        super().__init__(mcp)
        self._state = State(step_count=0)
        self.answer: int | None = None
        self.target = 0

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, a: int = 2, b: int = 3,
              **kwargs: Any) -> TaskObservation:
        self.target, self.answer = a + b, None
        self._state = State(episode_id=episode_id or f"arith-{id(self)}", step_count=0)
        SERVED_REWARDS[self._state.episode_id] = []
        return TaskObservation(question=f"What is {a} + {b}? Use the tools, then submit.")

    def _step_impl(self, action: Action, timeout_s: Optional[float] = None, **kwargs: Any) -> Observation:
        return Observation()

    async def step_async(self, action: Action, timeout_s: Optional[float] = None, **kwargs: Any) -> Observation:
        obs = await super().step_async(action, timeout_s, **kwargs)
        if isinstance(action, CallToolAction) and obs.error is None:
            obs.reward = 0.1 if action.tool_name == "add" else 0.0
            if action.tool_name == "submit":
                obs.reward, obs.done = float(self.answer == self.target), True
            SERVED_REWARDS[self._state.episode_id].append(obs.reward)
        return obs

    @property
    def state(self) -> State:
        return self._state


@contextlib.contextmanager
def served(app: Any) -> Iterator[tuple[str, Callable[[], None]]]:
    """``app`` under uvicorn on a free loopback port, in a thread: its URL and a ``stop()`` (stops the server and
    joins its thread; called on exit too)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=f"openenv-test-{port}", daemon=True)
    thread.start()

    def stop() -> None:
        server.should_exit = True
        thread.join(15)
        assert not thread.is_alive(), "the OpenEnv test server did not stop"

    try:
        deadline = time.monotonic() + 60
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the OpenEnv test server did not start"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", stop
    finally:
        stop()
        sock.close()


@pytest.fixture(scope="module")
def guess_url() -> Iterator[str]:
    RELEASE.clear()
    app = create_fastapi_app(GuessEnvironment, GuessAction, GuessObservation, max_concurrent_envs=16)
    with served(app) as (url, _):
        try:
            yield url
        finally:
            RELEASE.set()  # a hung step returns, so the server can stop


@pytest.fixture(scope="module")
def tools_url() -> Iterator[str]:
    app = create_fastapi_app(ArithmeticEnvironment, CallToolAction, CallToolObservation, max_concurrent_envs=16)
    with served(app) as (url, _):
        yield url


def call(name: str, **arguments: Any) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def guess_env(url: str, **kwargs: Any) -> OpenEnvEnv:
    return OpenEnvEnv(base_url=url, observation_field="feedback", **kwargs)


# ---------------------------------------------------------------------------------------------- the contract
def test_contract_text_and_tools(guess_url: str, tools_url: str) -> None:
    check_env(lambda: guess_env(guess_url), {"target": 42}, "50", "x" * 40)  # 40 chars: over the action's max
    check_env(lambda: OpenEnvEnv(base_url=tools_url, mode="tools"), {"a": 1, "b": 2}, call("add", a=1, b=2),
              "<tool_call>\n{oops\n</tool_call>")


def test_check_kwargs_asks_the_server(guess_url: str) -> None:
    OpenEnvEnv.check_kwargs({"base_url": guess_url, "observation_field": "feedback"})
    with pytest.raises(ValueError, match=r"action_field 'text' is not a field of the action .*\(its fields: .*message"):
        OpenEnvEnv.check_kwargs({"base_url": guess_url, "action_field": "text"})
    with pytest.raises(ValueError, match="base_url must be an http"):
        OpenEnvEnv.check_kwargs({"base_url": "127.0.0.1:1"})
    with pytest.raises(ValueError, match="mode"):
        OpenEnvEnv.check_kwargs({"base_url": guess_url, "mode": "gym"})


# ---------------------------------------------------------------------------------------------- rewards
def test_text_episode_rewards_are_the_served_envs(guess_url: str) -> None:
    env = guess_env(guess_url, success_reward=0.25, reasoning_parser="qwen3")
    try:
        obs = env.reset(target=42, episode_id="rewards-text", question="Play a game.")
        greeting = "I picked a number from 1 to 100. Guess it."
        assert obs.messages == [{"role": "user", "content": f"Play a game.\n\n{greeting}"}]
        assert obs.tools is None
        steps = [env.step(text) for text in ("50", "<think>lower, so 25</think>25", "soon")]
        assert [s.observation.messages[0]["content"] for s in steps] == ["Lower.", "Higher.", "Say a whole number."]
        assert [s.reward for s in steps] == [0.0, 0.0, 0.0] and not any(s.done for s in steps)
        assert [s.info["openenv_reward"] for s in steps] == [-0.1, -0.1, -0.5]
        end = env.step("42")
    finally:
        env.close()
    served = SERVED_REWARDS["rewards-text"]
    assert served == [-0.1, -0.1, -0.5, 1.0]
    assert end.done and end.reward == pytest.approx(sum(served)) and end.info["openenv_done"] is True
    assert end.info["accuracy"] == 1.0 and end.info["num_calls"] == 4 and end.info["turns_completed"] == 4
    assert end.episode.format_errors == 0 and end.info["calls"] == ["message"]


def test_tools_episode_rewards_are_the_served_envs(tools_url: str) -> None:
    env = OpenEnvEnv(base_url=tools_url, mode="tools", observation_field="question")
    try:
        obs = env.reset(a=20, b=22, episode_id="rewards-tools")
        assert obs.messages[-1]["content"] == "What is 20 + 22? Use the tools, then submit."
        assert sorted(t["function"]["name"] for t in obs.tools) == ["add", "divide", "submit"]
        first = env.step(call("add", a=20, b=22) + call("add", a=1, b=1))
        assert [m["content"] for m in first.observation.messages] == ["42", "2"] and not first.done
        assert first.info["calls"] == ["add", "add"] and first.info["format_errors"] == 0
        end = env.step(call("submit", answer=42) + call("add", a=0, b=0))  # done at submit: the add is not run
    finally:
        env.close()
    served = SERVED_REWARDS["rewards-tools"]
    assert served == [0.1, 0.1, 1.0]
    assert end.done and end.reward == pytest.approx(sum(served)) and end.info["accuracy"] == 1.0
    assert end.info["calls_not_run"] == 1 and end.info["openenv_done"] is True and end.episode.tool_errors == 0


def test_a_wrong_answer_scores_what_the_server_gave(tools_url: str) -> None:
    env = OpenEnvEnv(base_url=tools_url, mode="tools")
    try:
        env.reset(a=1, b=1, episode_id="wrong-tools")
        end = env.step(call("submit", answer=3))
    finally:
        env.close()
    assert SERVED_REWARDS["wrong-tools"] == [0.0]
    assert end.done and end.reward == 0.0 and end.info["accuracy"] == 0.0


# ---------------------------------------------------------------------------------------------- token exactness
@pytest.mark.parametrize("mode", ["text", "tools"])
async def test_an_episode_is_token_exact_through_the_runner(qwen_tok, guess_url: str, tools_url: str,
                                                            mode: str) -> None:
    from agent_tune.rollout import ChatRenderer, RolloutLimits, ScriptedPolicy, run_episode

    renderer = ChatRenderer(qwen_tok, template="qwen3_instruct")
    if mode == "text":
        env, task, replies = guess_env(guess_url), {"target": 7, "episode_id": "runner-text"}, ["50", "5", "7"]
        expected = -0.1 - 0.1 + 1.0
    else:
        env, task = OpenEnvEnv(base_url=tools_url, mode="tools"), {"a": 3, "b": 4, "episode_id": "runner-tools"}
        replies, expected = [call("add", a=3, b=4), call("submit", answer=7)], 0.1 + 1.0
    try:
        result = await run_episode(env, ScriptedPolicy(renderer, replies), renderer, RolloutLimits(8192, 2048),
                                   task=task, debug_drift=True)
    finally:
        env.close()
    traj = result.trajectory
    assert result.stop_reason == "done" and result.drift.ok, str(result.drift)
    assert result.reward == pytest.approx(expected) == pytest.approx(sum(SERVED_REWARDS[task["episode_id"]]))
    assert len(traj.response_ids) == len(traj.response_mask) == len(traj.response_logprobs)
    assert sum(traj.response_mask) == traj.num_policy_tokens and 0 < traj.num_policy_tokens < len(traj)


# ---------------------------------------------------------------------------------------------- bad input
def test_rejected_actions_are_counted_and_the_episode_goes_on(guess_url: str) -> None:
    env = guess_env(guess_url)
    try:
        env.reset(target=3, episode_id="rejected")
        too_long = env.step("I think the number is probably 50 or so")
        assert too_long.info["format_errors"] == 1 and too_long.info["rejected"] == "VALIDATION_ERROR"
        assert not too_long.done and "message: String should have at most 32 characters" in \
            too_long.observation.messages[0]["content"]
        crash = env.step("crash")
        assert crash.info["format_errors"] == 1 and crash.info["rejected"] == "EXECUTION_ERROR" and not crash.done
        assert "the guess machine broke" in crash.observation.messages[0]["content"]
        end = env.step("3")  # the session survived both
        assert end.done and end.reward == 1.0 and end.episode.format_errors == 2 and end.info["num_calls"] == 3
    finally:
        env.close()
    assert SERVED_REWARDS["rejected"] == [1.0]


def test_bad_calls_are_counted_and_a_tool_failure_is_not_a_format_error(tools_url: str) -> None:
    env = OpenEnvEnv(base_url=tools_url, mode="tools")
    try:
        env.reset(episode_id="bad-calls")
        bad = env.step(call("no_such_tool") + call("add", a="x", b=1) + "<tool_call>\n{oops\n</tool_call>")
        texts = [m["content"] for m in bad.observation.messages]
        assert bad.info["format_errors"] == 3 and not bad.done
        assert "unknown tool 'no_such_tool'" in texts[0] and "rejected by its schema at a" in texts[1]
        assert "could not be parsed" in texts[2]
        failed = env.step(call("divide", a=1, b=0))
        assert failed.info["format_errors"] == 0 and failed.observation.messages[0]["content"].startswith("Error:")
        assert "division by zero" in failed.observation.messages[0]["content"]
        end = env.step("I give up.")  # an answer without a call ends a tools episode
        assert end.done and end.info["tool_errors"] == 1 and end.episode.format_errors == 3
        assert end.info["openenv_done"] is False and end.info["turns_completed"] == 1
    finally:
        env.close()
    assert SERVED_REWARDS["bad-calls"] == []  # nothing refused reached the env's step


def test_the_step_limit_ends_a_text_episode(guess_url: str) -> None:
    env = guess_env(guess_url, max_steps=2)
    try:
        env.reset(target=99, episode_id="limit")
        assert not env.step("1").done
        end = env.step("2")
    finally:
        env.close()
    assert end.done and end.info["stop_reason"] == "step_limit" and end.info["openenv_done"] is False
    assert SERVED_REWARDS["limit"] == [-0.1, -0.1] and end.reward == pytest.approx(-0.2)


def test_the_last_allowed_text_action_is_taken_and_can_win(guess_url: str) -> None:
    """Text mode is the whole-text tier: the step limit is applied after the action, so the right last guess wins."""
    env = guess_env(guess_url, max_steps=2)
    try:
        assert type(env).__name__ == "OpenEnvTextEnv" and isinstance(env, OpenEnvEnv)
        env.reset(target=7, episode_id="last")
        assert not env.step("3").done
        end = env.step("7")
    finally:
        env.close()
    assert end.done and end.info["stop_reason"] == "done" and end.info["openenv_done"] is True
    assert SERVED_REWARDS["last"] == [-0.1, 1.0] and end.reward == pytest.approx(0.9)


def test_a_server_that_hangs_ends_the_episode_within_the_timeout(guess_url: str) -> None:
    env = guess_env(guess_url, call_timeout=1.0)
    try:
        env.reset(target=5, episode_id="hang")
        env.step("4")
        t0 = time.monotonic()
        hung = env.step("hang")
        elapsed = time.monotonic() - t0
        assert hung.done and hung.info["error"] == "no answer in 1 s (openenv step)" and hung.info["accuracy"] == 0.0
        assert hung.info["stop_reason"] == "timeout" and hung.episode.format_errors == 0
        assert hung.reward == pytest.approx(-0.1) and elapsed < 6.0
        env.reset(target=5, episode_id="after-hang")  # a new session, on a new connection
        assert env.step("5").reward == 1.0
    finally:
        env.close()


def test_a_server_that_goes_away_ends_the_episode_and_fails_the_start_up_check() -> None:
    app = create_fastapi_app(GuessEnvironment, GuessAction, GuessObservation, max_concurrent_envs=4)
    env = None
    with served(app) as (url, stop):
        env = guess_env(url, start_timeout=2.0, call_timeout=5.0)
        env.reset(target=8, episode_id="gone")
        assert env.step("9").observation.messages[0]["content"] == "Lower."
        stop()  # mid-episode: uvicorn closes the session's WebSocket and the port
        t0 = time.monotonic()
        gone = env.step("8")
        assert time.monotonic() - t0 < 8.0
    assert gone.done and gone.info["error"].startswith("connection lost") and gone.reward == pytest.approx(-0.1)
    assert gone.info["accuracy"] == 0.0 and "the environment server stopped" in gone.observation.messages[0]["content"]
    with pytest.raises(BackendGoneError, match=f"OpenEnv server at {url} did not start an episode"):
        env.reset(target=1)
    env.close()
    with pytest.raises(ValueError, match=f"no OpenEnv server answers at {url}"):
        OpenEnvEnv.check_kwargs({"base_url": url, "start_timeout": 2.0})


def test_a_server_serving_one_session_fails_the_second_episode_clearly() -> None:
    """OpenEnv serves one WebSocket session at a time unless max_concurrent_envs says more; each episode holds one:
    the second concurrent episode's reset names the cause and the fix."""
    app = create_fastapi_app(GuessEnvironment, GuessAction, GuessObservation)  # OpenEnv's default: 1 session
    with served(app) as (url, _):
        first, second = guess_env(url), guess_env(url)
        try:
            first.reset(target=3, episode_id="one-session")
            with pytest.raises(BackendGoneError, match="refused another session .*max_concurrent_envs"):
                second.reset(target=4)
            first.close()  # the session is free again
            second.reset(target=4, episode_id="one-session-2")
            assert second.step("4").reward == 1.0
        finally:
            first.close()
            second.close()


def test_a_start_with_no_answer_in_start_timeout_is_a_start_timeout(guess_url: str) -> None:
    from agent_tune.envs.time_limits import StartTimeoutError

    env = guess_env(guess_url, start_timeout=1.0)
    t0 = time.monotonic()
    try:
        with pytest.raises(StartTimeoutError, match=r"no answer in 1 s \(openenv server .* start\)"):
            env.reset(target=5, hang_reset=True)
    finally:
        env.close()
    assert time.monotonic() - t0 < 8.0


def test_batch_step_runs_episodes_together(guess_url: str) -> None:
    envs = [guess_env(guess_url) for _ in range(3)]
    try:
        for i, env in enumerate(envs):
            env.reset(target=10 + i, episode_id=f"batch-{i}")
        results = OpenEnvEnv.batch_step(envs, ["10", "x" * 40, "20"])
    finally:
        for env in envs:
            env.close()
    assert [r.done for r in results] == [True, False, False]
    assert [r.info["format_errors"] for r in results] == [0, 1, 0]
    assert results[0].reward == 1.0 and results[2].observation.messages[0]["content"] == "Lower."
    assert [SERVED_REWARDS[f"batch-{i}"] for i in range(3)] == [[1.0], [], [-0.1]]
