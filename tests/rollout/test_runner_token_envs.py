"""Token envs (``observation_kind="tokens"``): the runner uses the env's prompt tokens as they are, hands the env each
generation's tokens as sampled, appends the observation's tokens unchanged, and samples with the stop token ids the
env set at ``reset``; under the time-limit rule a token env's start that runs out is an episode not played and a
step that runs out ends the episode with stop reason ``timeout``, as for chat envs."""

from __future__ import annotations

from typing import Any

import pytest

from agent_tune.envs.base import BaseToolEnv, Observation, Outcome, SamplerHints, Step, StopReason
from agent_tune.envs.time_limits import StartTimeoutError, timeout_text
from agent_tune.parsing import ParsedResponse
from agent_tune.rollout import ChatRenderer, RolloutLimits, run_episode
from agent_tune.rollout.policy import GenerationOutput

PROMPT = [101, 102, 103]
REPLY = [7, 8]


class TokenEcho(BaseToolEnv):
    """Answers each generation with the tokens [900, n] (n: the step), ends after two; stops on token 55."""

    sampler_hints = SamplerHints(observation_kind="tokens")

    def __init__(self) -> None:
        self.actions: list[Any] = []
        self._next: list[int] = []

    def reset(self, **task: Any) -> Observation:
        self.sampler_hints = SamplerHints(observation_kind="tokens", stop_token_ids=(55,))
        super().reset()
        return Observation(token_ids=list(PROMPT))

    def extract_tool_calls(self, raw_response: str) -> ParsedResponse:
        return ParsedResponse(content=raw_response)

    def is_answer(self, raw_response: str) -> bool:
        return False

    def format_tool_response(self, results: Any) -> Observation:
        ids, self._next = self._next, []
        return Observation(token_ids=ids)

    def act(self, step: Step) -> None:
        self.actions.append((step.raw, step.token_ids))
        self._next = [900, self.status.num_steps]
        step.done = self.status.num_steps >= 2

    def outcome(self) -> Outcome:
        return Outcome(1.0, 1.0)


async def test_a_token_env_is_played_with_its_own_tokens(smol_tok) -> None:
    renderer = ChatRenderer(smol_tok, "smollm2_tools")
    seen: list[tuple[list[int], dict]] = []

    class Policy:
        async def generate(self, prompt_ids: list[int], params: dict) -> GenerationOutput:
            seen.append((list(prompt_ids), dict(params)))
            return GenerationOutput(list(REPLY), [0.0, 0.0], "stop")

    env = TokenEcho()
    result = await run_episode(env, Policy(), renderer, RolloutLimits(64, 64), task={})
    traj = result.trajectory
    assert traj.prompt_ids == PROMPT
    assert traj.all_ids == PROMPT + REPLY + [900, 1] + REPLY
    assert traj.response_mask == [1, 1, 0, 0, 1, 1]
    assert [ids for _, ids in env.actions] == [REPLY, REPLY]  # as sampled, besides their text
    assert env.actions[0][0] == renderer.decode(REPLY)
    assert seen[1][0] == PROMPT + REPLY + [900, 1]
    assert 55 in seen[0][1]["stop_token_ids"] and renderer.end_of_turn_id in seen[0][1]["stop_token_ids"]
    assert result.reward == 1.0 and result.stop_reason == "done"
    assert result.messages[0] == {"role": "user", "content": renderer.decode(PROMPT)}


async def test_a_token_env_without_prompt_tokens_is_refused(smol_tok) -> None:
    class NoTokens(TokenEcho):
        def reset(self, **task: Any) -> Observation:
            super().reset()
            return Observation(messages=[{"role": "user", "content": "hi"}])

    with pytest.raises(ValueError, match="must return its prompt as Observation.token_ids"):
        await run_episode(NoTokens(), None, ChatRenderer(smol_tok, "smollm2_tools"), RolloutLimits(64, 64), task={})


class Policy:
    async def generate(self, prompt_ids: list[int], params: dict) -> GenerationOutput:
        return GenerationOutput(list(REPLY), [0.0, 0.0], "stop")


async def test_a_token_env_whose_start_runs_out_is_not_played(smol_tok) -> None:
    class NoStart(TokenEcho):
        sampler_hints = SamplerHints(observation_kind="tokens", blocking_reset=True)  # reset in a thread, as tinker

        def reset(self, **task: Any) -> Observation:
            raise StartTimeoutError(2.0, "token env start")

    renderer = ChatRenderer(smol_tok, "smollm2_tools")
    result = await run_episode(NoStart(), Policy(), renderer, RolloutLimits(64, 64), task={})
    assert result.stop_reason == "timeout" and result.reward == 0.0 and result.num_generations == 0
    assert result.trajectory.num_policy_tokens == 0 and len(result.trajectory.prompt_ids) > 0
    assert result.info["error"] == "no answer in 2 s (token env start)"


async def test_a_token_env_whose_step_runs_out_ends_timed_out(smol_tok) -> None:
    class Stalls(TokenEcho):
        def act(self, step: Step) -> None:
            self.status.stop_reason = StopReason.TIMEOUT
            self.error = timeout_text(1.0, "token env step")
            step.done = True

        def outcome(self) -> Outcome:
            return Outcome(0.0, 0.0, None, {"error": self.error})

    result = await run_episode(Stalls(), Policy(), ChatRenderer(smol_tok, "smollm2_tools"), RolloutLimits(64, 64),
                               task={})
    assert result.stop_reason == "timeout" and result.info["error"] == "no answer in 1 s (token env step)"
    assert result.trajectory.all_ids == PROMPT + REPLY and result.trajectory.response_mask == [1, 1]
