"""SFT rows from the reference answers of training rows, played through the one episode runner.

``agent-tune sft-data --format reference TRAIN_ROWS OUT.jsonl --tokenizer DIR --template NAME`` plays every row of
a training file (``agent-tune data`` / ``data_preprocess/*.py`` output: each row names its env) with a scripted
policy that writes the env's reference answers, and keeps each episode the env scores a success as a row of
tokens: the episode's ``prompt_ids + response_ids`` and ``[0] * len(prompt_ids) + response_mask``, the very row
the eval's ``--sft-out`` writes for a successful sampled episode (:func:`agent_tune.eval.rft.rft_row`). So SFT on
the reference rows, RFT and GRPO train on the tokens the runner renders, template separators and tool results
included.

The reference answers come from one hook of the env contract,
:meth:`agent_tune.envs.base.BaseToolEnv.reference_replies`: after ``reset``, the assistant texts a correct policy
writes in that episode, one per generation (``None``: the env knows none). Implemented by the ``toolcall`` env
(the task's ground-truth calls; a BFCL entry's first accepted value per parameter), the ``mcp`` env (the task's
``solution``: its calls in one generation, then its answer) and the calculator example (one call with the
question's expression, then the number). A row whose env knows no reference, whose episode asks for more
generations than the reference has, or that the env does not score a success (accuracy below ``min_accuracy``:
a reference the scorer rejects, an episode cut by the token budget) is dropped and counted by its reason
(:class:`ReferenceReport`).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from agent_tune.envs import make_env
from agent_tune.envs.base import BaseToolEnv
from agent_tune.errors import DataError
from agent_tune.eval.rft import rft_row
from agent_tune.eval.task_rows import TaskRow, load_task_rows, row_env_kwargs
from agent_tune.rollout import ChatRenderer, EpisodeResult, PromptTooLongError, RolloutLimits, run_episode
from agent_tune.rollout.scripted_policy import ScriptedPolicy

NO_REFERENCE = "no reference"  # the env's reference_replies gave None for the row
REFERENCE_TOO_SHORT = "reference ran out"  # the episode asked for more generations than the reference has
PROMPT_TOO_LONG = "prompt too long"
NOT_A_SUCCESS = "not a success"  # the env scored the reference below min_accuracy


class _NoReplyLeft(DataError):
    """The scripted episode asked for a generation the reference does not have (its one argument: the reason)."""


class _ReferenceReplies:
    """The scripted policy's replies: the env's reference, read at the first generation (after ``reset``)."""

    def __init__(self, env: BaseToolEnv) -> None:
        self.env = env
        self.texts: list[str] | None = None

    def __call__(self, prompt: str) -> str:
        if self.texts is None:
            replies = self.env.reference_replies()
            if replies is None:
                raise _NoReplyLeft(NO_REFERENCE)
            self.texts = [str(t) for t in replies]
        if not self.texts:
            raise _NoReplyLeft(REFERENCE_TOO_SHORT)
        return self.texts.pop(0)


@dataclass
class ReferenceReport:
    """What :func:`reference_rows` did: rows kept, and the dropped ones by reason (``dropped``: id -> reason)."""

    kept: int = 0
    dropped: dict[str, str] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """Dropped rows per reason."""
        return dict(Counter(self.dropped.values()))

    def summary(self) -> str:
        reasons = ", ".join(f"{n} {r}" for r, n in sorted(self.counts().items()))
        return f"{self.kept} reference rows kept, {len(self.dropped)} dropped" + (f" ({reasons})" if reasons else "")


async def play_reference(row: TaskRow, renderer: ChatRenderer, limits: RolloutLimits, tool_parser: str = "hermes",
                         reasoning_parser: str = "none", env_kwargs: Mapping[str, Any] | None = None,
                         ) -> tuple[EpisodeResult | None, str | None]:
    """One row played with its env's reference replies: ``(result, None)``, or ``(None, reason)`` when it could not
    be played to its end (no reference, the reference ran out, the prompt does not fit)."""
    env = make_env(row.env, **row_env_kwargs(row, tool_parser, reasoning_parser, env_kwargs))
    try:
        policy = ScriptedPolicy(renderer, _ReferenceReplies(env))
        try:
            return await run_episode(env, policy, renderer, limits, {}, task=row.task), None
        except _NoReplyLeft as exc:
            return None, str(exc.args[0])
        except PromptTooLongError:
            return None, PROMPT_TOO_LONG
    finally:
        env.close()


async def _reference_rows(rows: Mapping[str, TaskRow], renderer: ChatRenderer, limits: RolloutLimits,
                          tool_parser: str, reasoning_parser: str, env_kwargs: Mapping[str, Any] | None,
                          min_accuracy: float, extra: Mapping[str, Any]) -> tuple[list[dict[str, Any]],
                                                                                  ReferenceReport]:
    out: list[dict[str, Any]] = []
    report = ReferenceReport()
    for test_id, row in rows.items():  # one at a time: a reference episode is cheap, an env server may not be
        result, reason = await play_reference(row, renderer, limits, tool_parser, reasoning_parser, env_kwargs)
        if result is None:
            report.dropped[test_id] = str(reason)
            continue
        accuracy = float(result.info.get("accuracy") or 0.0)
        if accuracy < min_accuracy:
            report.dropped[test_id] = NOT_A_SUCCESS
            continue
        out.append(rft_row(test_id, 0, result, accuracy, {"env": row.env, "source": "reference", **extra}))
        report.kept += 1
    return out, report


def reference_rows(rows: str | Path | Mapping[str, TaskRow], renderer: ChatRenderer, limits: RolloutLimits,
                   tool_parser: str = "hermes", reasoning_parser: str = "none",
                   env_kwargs: Mapping[str, Any] | None = None, min_accuracy: float = 1.0,
                   extra: Mapping[str, Any] | None = None) -> tuple[list[dict[str, Any]], ReferenceReport]:
    """SFT rows (the eval's ``--sft-out`` rows: ``input_ids``, ``loss_mask``, ``messages``, ``tools``, ``id``...) of the
    reference episodes of ``rows`` (a training file, or its :class:`TaskRow` s by id) that score at least
    ``min_accuracy``, and the report of the dropped ones. ``env_kwargs`` are the run's kwargs of the envs (a
    config's ``agent_tune.env_kwargs.<env>``), under each row's own; ``extra`` is added to every row."""
    task_rows = load_task_rows(rows) if isinstance(rows, (str, Path)) else dict(rows)
    return asyncio.run(_reference_rows(task_rows, renderer, limits, tool_parser, reasoning_parser, env_kwargs,
                                       min_accuracy, dict(extra or {})))


__all__ = ["ReferenceReport", "play_reference", "reference_rows"]
