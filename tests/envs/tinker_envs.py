"""Environments written with tinker-cookbook's own classes, for tests/envs/test_tinker_env.py: a multi-step guessing
``Env`` and its ``EnvGroupBuilder``, a ``ProblemEnv`` (tinker's single-step Q&A base) grouped by tinker's
``ProblemGroupBuilder``, and an ``RLDatasetBuilder`` (chz) of those problems. Each renders with a tinker renderer
over Qwen3's vocabulary (``tokenizer_dir``: agent_tune.models.qwen_vocab's folder)."""

from __future__ import annotations

import asyncio
import functools
import re
from dataclasses import dataclass
from typing import Sequence

import chz
import tinker
from tinker_cookbook import renderers
from tinker_cookbook.rl.problem_env import ProblemEnv, ProblemGroupBuilder
from tinker_cookbook.rl.types import Env, EnvGroupBuilder, RLDataset, RLDatasetBuilder, StepResult


@functools.lru_cache(maxsize=None)
def renderer_for(tokenizer_dir: str, name: str) -> renderers.Renderer:
    from agent_tune.models.qwen_vocab import load_qwen3_tokenizer

    return renderers.get_renderer(name, load_qwen3_tokenizer(tokenizer_dir))


class GuessEnv(Env):
    """Guess an integer: "Higher." / "Lower." until right (reward 1, metric correct) or ``max_turns``. An answer
    without a number or without the stop token is malformed (metric format 0). "hang" waits 30 s, "crash" raises."""

    def __init__(self, renderer: renderers.Renderer, secret: int, max_turns: int = 6) -> None:
        self.renderer, self.secret, self.max_turns, self.turns = renderer, secret, max_turns, 0
        self.convo: list[renderers.Message] = [
            {"role": "system", "content": "You guess numbers. Answer with one integer."},
            {"role": "user", "content": "Guess my number between 1 and 10."},
        ]

    async def initial_observation(self):
        return self.renderer.build_generation_prompt(self.convo), self.renderer.get_stop_sequences()

    async def step(self, action, *, extra=None) -> StepResult:
        message, termination = self.renderer.parse_response(action)
        text = renderers.get_text_content(message)
        if text.strip() == "hang":
            await asyncio.sleep(30)
        if text.strip() == "crash":
            raise RuntimeError("the guess machine broke")
        self.turns += 1
        numbers = re.findall(r"-?\d+", text)
        stop = self.renderer.get_stop_sequences()
        if not termination.is_stop_sequence or not numbers:
            reply, metrics = "Answer with one integer.", {"format": 0.0}
        elif int(numbers[-1]) == self.secret:
            return StepResult(reward=1.0, episode_done=True, next_observation=tinker.ModelInput.empty(),
                              next_stop_condition=stop, metrics={"format": 1.0, "correct": 1.0})
        else:
            reply, metrics = ("Higher." if int(numbers[-1]) < self.secret else "Lower."), {"format": 1.0}
        if self.turns >= self.max_turns:
            return StepResult(reward=0.0, episode_done=True, next_observation=tinker.ModelInput.empty(),
                              next_stop_condition=stop, metrics={**metrics, "correct": 0.0})
        self.convo += [message, {"role": "user", "content": reply}]
        return StepResult(reward=0.0, episode_done=False, next_observation=self.renderer.build_generation_prompt(
            self.convo), next_stop_condition=stop, metrics=metrics)


@dataclass(frozen=True)
class GuessGroupBuilder(EnvGroupBuilder):
    secret: int
    tokenizer_dir: str
    renderer_name: str = "qwen3_instruct"
    group_size: int = 2
    start_delay: float = 0.0  # seconds make_envs waits (a slow start)

    async def make_envs(self) -> Sequence[Env]:
        if self.start_delay:
            await asyncio.sleep(self.start_delay)
        renderer = renderer_for(self.tokenizer_dir, self.renderer_name)
        return [GuessEnv(renderer, self.secret) for _ in range(self.group_size)]

    def logging_tags(self) -> list[str]:
        return ["guess"]


class AddEnv(ProblemEnv):
    """What is a + b? Right iff the sum appears in the answer; well-formed iff it has a digit."""

    def __init__(self, renderer: renderers.Renderer, a: int, b: int) -> None:
        super().__init__(renderer)
        self.a, self.b = a, b

    def get_question(self) -> str:
        return f"What is {self.a} + {self.b}?"

    def check_answer(self, sample_str: str) -> bool:
        return str(self.a + self.b) in re.findall(r"-?\d+", sample_str)

    def check_format(self, sample_str: str) -> bool:
        return bool(re.search(r"\d", sample_str))

    def get_reference_answer(self) -> str:
        return str(self.a + self.b)


def add_builder(a: int, b: int, tokenizer_dir: str) -> ProblemGroupBuilder:
    """tinker's own group builder of AddEnv problems (as its math recipes build theirs)."""
    renderer = renderer_for(tokenizer_dir, "qwen3_instruct")
    return ProblemGroupBuilder(env_thunk=functools.partial(AddEnv, renderer, a, b), num_envs=4, dataset_name="add")


class AddDataset(RLDataset):
    def __init__(self, problems: list[tuple[int, int]], tokenizer_dir: str, batch_size: int) -> None:
        self.problems, self.tokenizer_dir, self.batch_size = problems, tokenizer_dir, batch_size

    def get_batch(self, index: int) -> Sequence[EnvGroupBuilder]:
        chunk = self.problems[index * self.batch_size:(index + 1) * self.batch_size]
        return [add_builder(a, b, self.tokenizer_dir) for a, b in chunk]

    def __len__(self) -> int:
        return len(self.problems) // self.batch_size


@chz.chz
class AddDatasetBuilder(RLDatasetBuilder):
    tokenizer_dir: str
    batch_size: int = 2

    async def __call__(self) -> tuple[RLDataset, RLDataset | None]:
        train = [(a, a + 1) for a in range(1, 5)]
        return (AddDataset(train, self.tokenizer_dir, self.batch_size),
                AddDataset([(10, 20), (30, 40)], self.tokenizer_dir, self.batch_size))
