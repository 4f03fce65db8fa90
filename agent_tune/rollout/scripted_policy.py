"""A policy that answers with texts you give it: to play an env with :func:`agent_tune.rollout.run_episode` without
a model (a worked example, a test of your env, a replay of recorded answers).

Each reply is tokenized with the renderer and ends with the template's end-of-turn token, as a model that
stops on its own; the log-probs are 0.0. ``replies`` is a list (the i-th generation answers with the i-th text)
or a function of the prompt so far (decoded text) returning the next reply.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from agent_tune.rollout.chat_render import ChatRenderer
from agent_tune.rollout.policy import GenerationOutput


class ScriptedPolicy:
    """Replies with scripted texts, token in, token out; ``prompts`` keeps every prompt it was given (decoded)."""

    def __init__(self, renderer: ChatRenderer, replies: Sequence[str] | Callable[[str], str]) -> None:
        self.renderer = renderer
        self.replies = replies
        self.prompts: list[str] = []

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> GenerationOutput:
        prompt = self.renderer.decode(list(prompt_ids))
        self.prompts.append(prompt)
        if callable(self.replies):
            text = self.replies(prompt)
        elif len(self.prompts) <= len(self.replies):
            text = self.replies[len(self.prompts) - 1]
        else:
            raise IndexError(f"ScriptedPolicy has {len(self.replies)} replies; generation {len(self.prompts)} "
                             "asked for one more")
        ids = self.renderer.encode(text) + [self.renderer.end_of_turn_id]
        max_tokens = sampling_params.get("max_tokens")
        stop = "stop"
        if max_tokens is not None and len(ids) > max_tokens:
            ids, stop = ids[:max_tokens], "length"
        return GenerationOutput(ids, [0.0] * len(ids), stop)
