"""How an episode fails is the contract's: ``Step.fail`` / ``EpisodeStatus.fail`` record the error and the stop
reason (never over the runner's), tell the policy and end the episode; ``tool_errors`` reach the metrics."""

from __future__ import annotations

import pytest

from agent_tune.envs import CallToolEnv, Observation, Outcome, Step, StopReason, ToolResult
from agent_tune.parsing import ToolCall
from agent_tune.parsing.response import ResponseParser
from agent_tune.rollout import ChatRenderer, RolloutLimits, ScriptedPolicy, run_episode
from agent_tune.rollout.episode_metrics import episode_metrics

CALL = '<tool_call>\n{"name": "%s", "arguments": {}}\n</tool_call>'


class Flaky(CallToolEnv):
    """``ok`` answers, ``broken`` fails on its own (a tool error), ``gone`` loses the backend; ``fail_at_reset``
    records a failure before the first step; ``verify`` fails the scoring."""

    def __init__(self, fail_at_reset: bool = False, verify_fails: bool = False) -> None:
        self.parser, self.max_steps = ResponseParser("hermes"), 4
        self.fail_at_reset, self.verify_fails = fail_at_reset, verify_fails
        self.acted = 0

    def reset(self) -> Observation:
        super().reset()
        if self.fail_at_reset:
            self.status.fail(StopReason.ENV_ERROR, "create failed")
        return Observation(messages=[{"role": "user", "content": "go"}])

    def call_tool(self, call: ToolCall) -> ToolResult:
        self.acted += 1
        if call.name == "broken":
            self.status.tool_errors += 1
            return ToolResult("Error: it broke", call.name)
        if call.name == "gone":
            self.status.fail(StopReason.SERVER_ERROR, "connection lost")
            return ToolResult("Error: the server stopped", call.name)
        return ToolResult("fine", call.name)

    def outcome(self) -> Outcome:
        if self.verify_fails:
            self.status.fail(StopReason.TIMEOUT, "no answer in 1 s (verify)")
        return Outcome(1.0, 1.0)


def test_step_fail_records_tells_and_ends() -> None:
    env = Flaky()
    env.reset()
    step = Step("x", env.extract_tool_calls("x"), True, env.status)
    step.fail(StopReason.SERVER_ERROR, "connection lost")
    assert step.done and step.messages == [{"role": "user", "content": "Error: connection lost"}]
    assert env.status.stop_reason is StopReason.SERVER_ERROR and env.status.error == "connection lost"
    other = Step("x", env.extract_tool_calls("x"), True, env.status)
    other.fail(StopReason.TIMEOUT, "later", ToolResult("Error: later", "f"))
    assert other.results == [ToolResult("Error: later", "f")] and not other.messages
    assert env.status.stop_reason is StopReason.SERVER_ERROR  # the first failure's reason stands
    assert env.status.error == "connection lost; later"  # every failure's text is kept


def test_a_failure_during_a_step_ends_the_episode_after_it() -> None:
    env = Flaky()
    env.reset()
    end = env.step(CALL % "gone" + CALL % "ok")
    assert end.done and end.episode.stop_reason is StopReason.SERVER_ERROR
    assert end.info["error"] == "connection lost" and end.episode.error == "connection lost"
    assert env.acted == 2  # the step's calls ran; the episode ended after it


def test_a_failure_at_reset_ends_the_first_step_unacted() -> None:
    env = Flaky(fail_at_reset=True)
    env.reset()
    end = env.step(CALL % "ok")
    assert end.done and env.acted == 0 and end.episode.stop_reason is StopReason.ENV_ERROR
    assert end.info["error"] == "create failed"


def test_a_failed_scoring_replaces_done_but_never_the_runners_reason() -> None:
    env = Flaky(verify_fails=True)
    env.reset()
    end = env.step("the answer")
    assert end.episode.stop_reason is StopReason.TIMEOUT and end.info["error"] == "no answer in 1 s (verify)"
    env.reset()
    env.step(CALL % "ok")
    cut = env.finalize(StopReason.TOKEN_BUDGET)
    assert cut.episode.stop_reason is StopReason.TOKEN_BUDGET and cut.info["error"] == "no answer in 1 s (verify)"


def test_tool_errors_are_in_the_record_when_there_are_some() -> None:
    env = Flaky()
    env.reset()
    env.step(CALL % "broken" + CALL % "broken")
    end = env.step("done")
    assert end.episode.tool_errors == 2 and end.info["tool_errors"] == 2 and end.episode.format_errors == 0
    assert end.episode.error is None and "error" not in end.info
    env.reset()
    clean = env.step("done")
    assert clean.episode.tool_errors == 0 and "tool_errors" not in clean.info  # records of tool-less envs unchanged


async def test_tool_errors_reach_the_episode_metrics(qwen_tok) -> None:
    renderer = ChatRenderer(qwen_tok, template="qwen3_instruct")
    result = await run_episode(Flaky(), ScriptedPolicy(renderer, [CALL % "broken", "done"]), renderer,
                               RolloutLimits(1024, 256), task={})
    assert result.stop_reason is StopReason.DONE and episode_metrics(result)["tool_errors"] == 1.0
    assert result.info["tool_errors"] == 1


@pytest.mark.parametrize("reason", [StopReason.DONE, StopReason.STEP_LIMIT])
def test_a_failure_replaces_the_envs_own_endings(reason: StopReason) -> None:
    env = Flaky()
    env.reset()
    env.status.stop_reason = reason
    env.status.fail(StopReason.SERVER_ERROR, "gone")
    assert env.status.stop_reason is StopReason.SERVER_ERROR
    env.status.fail(None, "a clean-up failed")  # recorded, no reason
    assert env.status.stop_reason is StopReason.SERVER_ERROR and env.status.error == "gone; a clean-up failed"
