"""A training run folder written without a trainer, for the viewer's tests, benchmark (``benchmarks/viewer_scale.py``)
and the screenshots of ``docs/viewer.md``.

Real episodes, recorded by the real code; only the policy and the trainer are stand-ins. Each step plays
``groups`` BFCL multi-turn entries (in training mode, ``shots`` worked examples in every prompt, ``progress``
reward) ``samples`` times each with the one episode runner; a scripted policy plays each sample one way
(:data:`BEHAVIOURS`: the entry's ground truth, half of it, a malformed call, no call at all, or rambling past the
token budget), so rewards differ within a group, or, for a group whose samples all play alike, do not. Each episode
is then written as the agent loop writes it (``verl_ext.agent_loop``: :func:`training_episode_record` into
``<run>/episodes/``, a group at a time through :class:`~agent_tune.rollout.records.GroupRecorder`,
:func:`sample_record` into ``<run>/samples/``), a line of verl's step log per step (``verl_metrics.jsonl``: the
mean reward and response length, the step's wall time) and the launcher's per-step metrics writer joins them
into ``metrics.jsonl``. Log-probs are synthetic (no model samples here).

The agent loop's recording functions and the launcher's metrics writer are handed in (:class:`RunWriters`; the
caller imports them: the library imports neither ``verl_ext`` nor the launchers, ``tests/test_import_cycles.py``).
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from agent_tune.envs import make_env
from agent_tune.envs.bfcl.multi_turn.data import SCORED_CATEGORIES, load_entry
from agent_tune.envs.bfcl.multi_turn.replay import ground_truth_responses
from agent_tune.parsing import get_tool_parser
from agent_tune.rollout import ChatRenderer, EpisodeResult, GenerationOutput, RolloutLimits, run_episode
from agent_tune.rollout.dump import append_jsonl
from agent_tune.rollout.records import EPISODES_DIR, EpisodeRecording, GroupRecorder

BEHAVIOURS = ("right", "half", "malformed", "silent", "ramble")
MALFORMED = '<tool_call>\n{"name": "ls", "arguments": {oops\n</tool_call>'
SILENT = "I cannot do that."
RAMBLE = "Let me think about this step by step. " * 1000
WRITER_PID = 4242  # the file name's "pid": one writer


@dataclass(frozen=True)
class RunWriters:
    """The real recording code a synthetic run goes through: ``verl_ext.agent_loop.training_episode_record`` and
    ``sample_record``, and ``agent_tune.launch.step_metrics.StepMetricsWriter``."""

    episode_record: Callable[..., dict[str, Any]]
    sample_record: Callable[..., Any]
    step_metrics: Callable[..., Any]


@dataclass(frozen=True)
class SyntheticRun:
    """What :func:`write_synthetic_run` wrote: the run folder, the episodes and the steps."""

    folder: Path
    episodes: int
    steps: int


class ScriptedPolicy:
    """Replies with the next text (then ``fallback``), cut to ``max_tokens``; log-probs from a fixed wave."""

    def __init__(self, renderer: ChatRenderer, texts: Sequence[str], fallback: str = SILENT) -> None:
        self.renderer, self.texts, self.fallback, self.i = renderer, list(texts), fallback, 0

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> GenerationOutput:
        text = self.texts[self.i] if self.i < len(self.texts) else self.fallback
        self.i += 1
        ids = (self.renderer.encode(text) + [self.renderer.end_of_turn_id])[: sampling_params["max_tokens"]]
        lps = [-abs(math.sin(0.7 * k + self.i)) * 3.0 for k in range(len(ids))]
        return GenerationOutput(ids, lps, "stop")


def behaviour_texts(behaviour: str, truth: list[str]) -> list[str]:
    """The replies of one behaviour on an entry whose ground truth is ``truth``."""
    if behaviour == "right":
        return truth
    if behaviour == "half":
        return truth[: max(1, len(truth) // 2)]
    if behaviour == "malformed":
        return [MALFORMED]
    if behaviour == "ramble":
        return [RAMBLE]
    return []


def group_behaviours(step: int, group: int, samples: int) -> list[str]:
    """How the samples of one group play: mixed for most groups, all alike (no signal) for every third."""
    if (step + group) % 3 == 2:
        return ["silent" if group % 2 else "right"] * samples
    return [BEHAVIOURS[(step + group + k) % len(BEHAVIOURS)] for k in range(samples)]


async def _play(renderer: ChatRenderer, test_id: str, behaviour: str, truth: list[str], shots: list[str],
                limits: RolloutLimits, step: int) -> EpisodeResult:
    env = make_env("bfcl", test_id=test_id, shots=shots, tool_parser="hermes", reward="progress")
    try:
        policy = ScriptedPolicy(renderer, behaviour_texts(behaviour, truth))
        return await run_episode(env, policy, renderer, limits, {"temperature": 1.0}, global_step=step)
    finally:
        env.close()


def write_synthetic_run(folder: str | Path, renderer: ChatRenderer, writers: RunWriters, steps: int = 3,
                        groups: int = 2, samples: int = 4, tokens_every: int = 1, shots: int = 1,
                        entries_per_category: int = 25, max_response_length: int = 4096) -> SyntheticRun:
    """Write a run folder of ``steps`` x ``groups`` x ``samples`` episodes (see the module docstring).

    ``tokens_every``: as ``agent_tune.episodes.tokens_every``; ``max_response_length``: the token budget the
    rambling samples run past."""
    folder = Path(folder)
    recording = EpisodeRecording(dir=str(folder / EPISODES_DIR), tokens_every=tokens_every)
    recorder = GroupRecorder(recording.path(WRITER_PID), tokens_every)
    samples_file = folder / "samples" / f"samples-{WRITER_PID}.jsonl"
    limits = RolloutLimits(max_prompt_length=32768, max_response_length=max_response_length)
    parser = get_tool_parser("hermes")
    ids = [f"{cat}_{i}" for i in range(entries_per_category) for cat in SCORED_CATEGORIES]
    shot_ids = [f"multi_turn_base_{199 - k}" for k in range(shots)]  # never played here
    truths: dict[str, list[str]] = {}
    count = 0
    for step in range(1, steps + 1):
        started = time.perf_counter()
        rewards, lengths = [], []
        for group in range(groups):
            test_id = ids[((step - 1) * groups + group) % len(ids)]
            if test_id not in truths:
                truths[test_id] = ground_truth_responses(load_entry(test_id), parser)
            uid = f"step{step}-{test_id}"
            behaviours = group_behaviours(step, group, samples)
            for _ in behaviours:  # the group's samples start together, as in a worker
                recorder.begin(uid)
            for sample, behaviour in enumerate(behaviours):
                result = asyncio.run(_play(renderer, test_id, behaviour, truths[test_id], shot_ids, limits, step))
                kwargs = {"uid": uid, "global_steps": step, "session_id": sample, "data_source": "bfcl",
                          "extra_info": {"index": (step - 1) * groups + group, "split": "train",
                                         "env": {"name": "bfcl", "kwargs": {"test_id": test_id}}}}
                recorder.add(uid, step, result.reward, lambda tokens, r=result, kw=kwargs: writers.episode_record(
                    r, kw, {}, "bfcl", tokens, renderer.decode))
                recorder.release(uid)
                append_jsonl(samples_file, [writers.sample_record(result, kwargs, {}).as_dict()])
                rewards.append(result.reward)
                lengths.append(len(result.trajectory))
                count += 1
        data = {"critic/score/mean": sum(rewards) / len(rewards), "response_length/mean": sum(lengths) / len(lengths),
                "timing_s/step": time.perf_counter() - started}
        append_jsonl(folder / "verl_metrics.jsonl", [{"step": step, "data": data}])
    writers.step_metrics(folder / "verl_metrics.jsonl", folder / "samples", folder / "metrics.jsonl").poll()
    return SyntheticRun(folder, count, steps)


def write_synthetic_curriculum(folder: str | Path, renderer: ChatRenderer, writers: RunWriters,
                               stages: Sequence[str] = ("syntax", "base"), **kwargs: Any) -> list[SyntheticRun]:
    """A curriculum run folder: one :func:`write_synthetic_run` per stage in ``<folder>/<stage>/checkpoints`` and
    the runner's state file naming the stages."""
    folder = Path(folder)
    runs = [write_synthetic_run(folder / name / "checkpoints", renderer, writers, **kwargs) for name in stages]
    (folder / "curriculum_state.json").write_text(json.dumps({"curriculum": "synthetic", "stages": list(stages),
                                                              "current": len(stages), "records": {}}))
    return runs

