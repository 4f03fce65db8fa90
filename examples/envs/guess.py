"""A stateful environment that acts on the whole generation: guess the number, told "higher" or "lower".

The whole-text tier of the contract (:class:`~agent_tune.envs.WholeTextEnv`), beside the call-by-call one of
:mod:`examples.envs.calculator`: no tools, no ``call_tool``; the env writes the acting hook itself. Each generation
is one guess (the last integer in the text); the env answers as the user ("Higher." / "Lower."), and the episode
ends on the right number (reward 1, less 0.1 per extra guess) or after ``max_steps`` guesses (the tier's step
limit, applied after the guess is read: stop reason ``step_limit``, reward 0). A generation without a
number is a format error, answered so the policy can read what went wrong. ``act`` could as well be
``async def`` (an env that waits on a server): the runner would await it on its event loop. docs/envs.md ("Tier 2")
walks through it.

    from agent_tune.envs import make_env
    env = make_env("examples.envs.guess:GuessEnv")
"""

from __future__ import annotations

import random
import re

from agent_tune.envs import Observation, Outcome, Step, Task, TaskCatalogue, WholeTextEnv, register_env

_INTEGER = re.compile(r"-?\d+")


def guess_tasks(split: str, size: int = 32, low: int = 1, high: int = 100, seed: int = 0) -> list[Task]:
    """``size`` secret numbers in ``[low, high]`` per split, drawn from ``seed`` and the split's name."""
    rng = random.Random(f"{split}-{seed}")
    return [Task(f"{split}-{i}", {"secret": rng.randint(low, high), "low": low, "high": high}, "guess")
            for i in range(size)]


@register_env("guess")
class GuessEnv(WholeTextEnv):
    """Guess a secret integer; the env says "Higher." or "Lower." after each wrong guess."""

    description = "example: guess a number from higher/lower hints (a stateful env writing its own act)"
    catalogue = TaskCatalogue(splits=("train", "test"), tasks=guess_tasks)

    def __init__(self, max_steps: int = 8) -> None:
        if int(max_steps) < 1:
            raise ValueError(f"guess env: max_steps must be >= 1, got {max_steps}")
        self.max_steps = int(max_steps)

    def reset(self, secret: int, low: int = 1, high: int = 100) -> Observation:
        super().reset()
        self.secret, self.guesses = int(secret), []
        question = f"I am thinking of an integer between {low} and {high}. Guess it: answer with one number."
        return Observation(messages=[{"role": "user", "content": question}])

    def act(self, step: Step) -> None:
        numbers = _INTEGER.findall(step.raw)
        if not numbers:
            step.format_errors += 1
            step.messages.append({"role": "user", "content": "I need a number: answer with one integer."})
            return
        guess = int(numbers[-1])
        self.guesses.append(guess)
        if guess == self.secret:
            step.messages.append({"role": "user", "content": "Right!"})
            step.done = True
            self.status.turns_completed = 1
            return
        step.messages.append({"role": "user", "content": "Higher." if guess < self.secret else "Lower."})

    def outcome(self) -> Outcome:
        solved = bool(self.guesses) and self.guesses[-1] == self.secret
        reward = max(0.1, 1.0 - 0.1 * (len(self.guesses) - 1)) if solved else 0.0
        return Outcome(reward, float(solved), extras={"guesses": list(self.guesses)})
