"""What recording every training episode costs: the episode log (``agent_tune.episodes``) vs the episode work it
rides on, and its size per 1,000 episodes.

The work: ``--episodes`` BFCL multi-turn episodes (the four scored categories' first entries, in turn), played
one after the other by the one episode runner in training mode, as the verl agent loop plays them: SmolLM2's
tokenizer and ``smollm2_tools`` template, ``--shots`` worked examples in every prompt (the main job's rows have
3), a scripted policy replaying each entry's ground truth at once (generation costs nothing here, so the
episode's time is the runner's and the env's own CPU work: reset, rendering, parsing, env steps, deltas).

The recording: for each finished episode, what the agent loop does with ``agent_tune.episodes`` on
(:func:`verl_ext.agent_loop.training_episode_record`, written a group at a time by
:class:`agent_tune.rollout.records.GroupRecorder` to a ``.jsonl.gz`` file), timed per setting:

* ``tokens_every=8`` (the default: token lists for the first group with signal of a step, then at most one in
  eight; every group here is given signal, the most groups the choice can take),
* ``tokens_every=0`` (no token lists), ``tokens_every=1`` (token lists for every episode),
* gzip level 9 instead of 6 (the level :data:`agent_tune.rollout.records.GZIP_LEVEL` uses), default tokens.

Printed per setting: ms per episode, the ratio to the episode work, and the file's size per 1,000 episodes;
the file is then read back (:func:`agent_tune.rollout.records.read_folder`) and checked.

    python benchmarks/episode_recording.py [--episodes 200] [--shots 3]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_tune.envs import make_env  # noqa: E402
from agent_tune.envs.bfcl.multi_turn.data import SCORED_CATEGORIES, load_entry  # noqa: E402
from agent_tune.envs.bfcl.multi_turn.replay import ground_truth_responses  # noqa: E402
from agent_tune.parsing import get_tool_parser  # noqa: E402
from agent_tune.rollout import (  # noqa: E402
    ChatRenderer,
    EpisodeResult,
    GenerationOutput,
    RolloutLimits,
    records,  # noqa: E402
    run_episode,
)
from agent_tune.testing.renderers import smollm2_renderer  # noqa: E402

LIMITS = RolloutLimits(max_prompt_length=32768, max_response_length=32768)


class ReplayPolicy:
    """The entry's ground truth, one reply per generation, at once, with distinct log-probs."""

    def __init__(self, replies: list[list[int]]) -> None:
        self.replies, self.i = replies, 0

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> GenerationOutput:
        ids = self.replies[min(self.i, len(self.replies) - 1)][: sampling_params["max_tokens"]]
        self.i += 1
        return GenerationOutput(list(ids), [-(k + 1) / 997.0 for k in range(len(ids))], "stop")


def entry_ids(n: int) -> list[str]:
    """``n`` ids cycling over the first entries (at most 100) of the scored categories."""
    per = min(100, max(1, n // len(SCORED_CATEGORIES)))
    ids = [f"{cat}_{i}" for i in range(per) for cat in SCORED_CATEGORIES]
    return (ids * (n // len(ids) + 1))[:n]


async def play(renderer: ChatRenderer, ids: list[str], shots: list[str]) -> tuple[list[EpisodeResult], float]:
    """Every episode, one after the other; (results, seconds)."""
    parser = get_tool_parser("hermes")
    eot = renderer.end_of_turn_id
    replies = {t: [renderer.encode(x) + [eot] for x in ground_truth_responses(load_entry(t), parser)] for t in set(ids)}
    results = []
    start = time.perf_counter()
    for test_id in ids:
        env = make_env("bfcl", test_id=test_id, shots=shots, tool_parser="hermes")
        try:
            results.append(await run_episode(env, ReplayPolicy(replies[test_id]), renderer, LIMITS,
                                             {"temperature": 1.0}))
        finally:
            env.close()
    return results, time.perf_counter() - start


def record_all(results: list[EpisodeResult], renderer: ChatRenderer, folder: Path, tokens_every: int,
               level: int, group_size: int) -> tuple[float, int]:
    """Record every result as the agent loop does; (seconds, bytes written)."""
    from verl_ext.agent_loop import training_episode_record

    recording = records.EpisodeRecording(dir=str(folder), tokens_every=tokens_every)
    path = recording.path(pid=1)
    recorder = records.GroupRecorder(path, tokens_every)
    saved, records.GZIP_LEVEL = records.GZIP_LEVEL, level
    try:
        start = time.perf_counter()
        for first in range(0, len(results), group_size):  # a group at a time, as a worker holds and writes them
            uid = f"group-{first // group_size}"
            group = results[first:first + group_size]
            for _ in group:
                recorder.begin(uid)
            for i, result in enumerate(group, first):
                kwargs = {"uid": uid, "global_steps": 1 + i // 64, "session_id": i % group_size,
                          "data_source": "bfcl", "extra_info": {"index": i // group_size, "split": "train"}}
                # rewards that differ within every group: the most token lists the choice can take (the budget)
                recorder.add(uid, kwargs["global_steps"], float(i % group_size),
                             lambda tokens, r=result, kw=kwargs: training_episode_record(r, kw, {}, "bfcl", tokens,
                                                                                         renderer.decode))
                recorder.release(uid)
        seconds = time.perf_counter() - start
    finally:
        records.GZIP_LEVEL = saved
    return seconds, path.stat().st_size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--episodes", type=int, default=200)
    ap.add_argument("--shots", type=int, default=3, help="worked examples per prompt (the main job's rows: 3)")
    ap.add_argument("--group-size", type=int, default=4, help="samples per GRPO group (the main job: 4)")
    args = ap.parse_args()
    renderer = smollm2_renderer()
    ids = entry_ids(args.episodes)
    shots = [f"multi_turn_base_{150 + k}" for k in range(args.shots)]  # entries none of the played ones are
    asyncio.run(play(renderer, ids[:8], shots))  # warm-up: caches, the start thread
    results, work = asyncio.run(play(renderer, ids, shots))
    n = len(results)
    prompt = sum(len(r.trajectory.prompt_ids) for r in results) / n
    response = sum(len(r.trajectory) for r in results) / n
    print(f"{n} BFCL episodes, {args.shots} shots, SmolLM2 tokenizer: {prompt:.0f} prompt + {response:.0f} response "
          f"tokens on average")
    print(f"episode work (runner + env, generation instant): {1000 * work / n:.2f} ms per episode")
    settings = [("tokens_every=8 (default)", 8, 6), ("tokens_every=0", 0, 6), ("tokens_every=1", 1, 6),
                ("tokens_every=8, gzip level 9", 8, 9)]
    print(f"{'recording':<30} {'ms/episode':>10} {'x episode work':>15} {'MB per 1,000 episodes':>22}")
    with tempfile.TemporaryDirectory() as tmp:
        for i, (label, every, level) in enumerate(settings):
            folder = Path(tmp) / str(i)
            seconds, size = record_all(results, renderer, folder, every, level, args.group_size)
            back = records.read_folder(folder)
            assert len(back) == n and all("messages" in r for r in back), "the file does not read back whole"
            with_tokens = sum("response_ids" in r for r in back)
            print(f"{label:<30} {1000 * seconds / n:>10.2f} {seconds / work:>15.3f} "
                  f"{size / n * 1000 / 1e6:>22.2f}   ({with_tokens} of {n} with token lists)")


if __name__ == "__main__":
    main()
