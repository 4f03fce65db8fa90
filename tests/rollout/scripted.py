"""A scripted policy and a scripted environment for the rollout tests (test doubles only)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from agent_tune.envs.base import BaseToolEnv, Observation, Outcome, SamplerHints, StepResult
from agent_tune.parsing.types import ParsedResponse
from agent_tune.rollout.chat_render import ChatRenderer
from agent_tune.rollout.policy import GenerationOutput


@dataclass
class Reply:
    """One scripted generation: ``text`` tokenized; ``end_of_turn`` appends the template's end-of-turn
    token (a natural stop); ``honor_max_tokens`` cuts to ``max_tokens`` like a real sampler."""

    text: str
    end_of_turn: bool = True
    honor_max_tokens: bool = True
    stop_reason: str = "stop"


class ScriptedPolicy:
    """Returns predetermined replies as tokens with distinct fake log-probs; records every call."""

    def __init__(self, renderer: ChatRenderer, replies: Sequence[Reply | str]):
        self.renderer = renderer
        self.replies = [r if isinstance(r, Reply) else Reply(r) for r in replies]
        self.calls: list[tuple[list[int], dict[str, Any]]] = []
        self.outputs: list[GenerationOutput] = []
        self._lp = 0

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> GenerationOutput:
        self.calls.append((list(prompt_ids), dict(sampling_params)))
        reply = self.replies[len(self.calls) - 1]
        ids = self.renderer.encode(reply.text)
        if reply.end_of_turn:
            ids.append(self.renderer.end_of_turn_id)
        reason = reply.stop_reason
        if reply.honor_max_tokens and len(ids) > sampling_params["max_tokens"]:
            ids = ids[: sampling_params["max_tokens"]]
            reason = "length"
        lps = []
        for _ in ids:
            self._lp += 1
            lps.append(-self._lp / 1000.0)
        out = GenerationOutput(ids, lps, reason)
        self.outputs.append(out)
        return out


class ScriptedEnv(BaseToolEnv):
    """A chat env playing a fixed script: ``initial`` at reset, then ``steps[i]`` for the i-th response."""

    description = "scripted env for tests"

    def __init__(self, initial: Observation, steps: Sequence[StepResult], finalize_reward: float = 0.0,
                 hints: SamplerHints | None = None):
        self.initial = initial
        self.steps = list(steps)
        self.received: list[str] = []
        self.finalized: list[str] = []
        self.finalize_reward = finalize_reward
        if hints is not None:
            self.sampler_hints = hints

    def reset(self, **task: Any) -> Observation:
        self.task = task
        super().reset()
        return self.initial

    def outcome(self) -> Outcome:
        """What the inherited ``finalize`` scores an unfinished script: nothing."""
        return Outcome(0.0, 0.0)

    def act(self, step: Any) -> None:  # the scripted step() below replaces the template
        raise AssertionError("ScriptedEnv plays its script in step()")

    def step(self, raw_response: str) -> StepResult:
        self.received.append(raw_response)
        return self.steps[len(self.received) - 1]

    def extract_tool_calls(self, raw_response: str) -> ParsedResponse:
        return ParsedResponse(content=raw_response)

    def format_tool_response(self, results: Sequence[Any]) -> Observation:
        return Observation(messages=[{"role": "tool", "content": str(r)} for r in results])



class FinalizingEnv(ScriptedEnv):
    """A ScriptedEnv with ``finalize(reason)``, scoring an unfinished episode with ``finalize_reward``."""

    def finalize(self, reason: str = "truncated") -> StepResult:
        self.finalized.append(reason)
        return StepResult(Observation(), float(self.finalize_reward or 0.0), True, {"end_reason": reason})


def tool_msgs(*contents: str) -> list[dict[str, Any]]:
    return [{"role": "tool", "content": c} for c in contents]


def user_msg(content: str) -> dict[str, Any]:
    return {"role": "user", "content": content}


def step(messages: list[dict[str, Any]] | None = None, text: str | None = None, reward: float = 0.0,
         done: bool = False, tools: list[dict[str, Any]] | None = None, **info: Any) -> StepResult:
    return StepResult(Observation(messages=messages or [], text=text, tools=tools), reward, done, info)


def fn(name: str, desc: str, props: dict[str, Any], required: Sequence[str] = ()) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": desc,
            "parameters": {"type": "object", "properties": props, "required": list(required)}}}


TOOLS = [
    fn("ls", "List the files of the current directory. Hidden ones only with a.",
       {"a": {"type": "boolean", "description": "show all"}}),
    fn("cd", "Change directory.", {"folder": {"type": "string", "description": "target"}}, ["folder"]),
    fn("mkdir", "Make a directory.",
       {"dir_name": {"type": "string"}, "mode": {"type": "integer", "default": 755}}, ["dir_name"]),
]
NEW_TOOL = fn("touch", "Create an empty file.", {"file_name": {"type": "string"}}, ["file_name"])
