"""Garbage-collector settings of a rollout worker process, applied once: freeze the start-up heap, and make
full collections rarer.

A process that runs thousands of concurrent episodes (one verl agent-loop worker) holds, besides the
episodes, everything it imported and loaded at start-up: torch, transformers, verl, Ray, the tokenizer,
~540,000 container objects that live as long as the process. CPython's generation-2 (full) collection walks
all of them every time, and it holds every thread while it runs. :func:`apply_worker_gc`:

* ``freeze``: collects once, then moves every surviving object to the collector's permanent generation
  (:func:`gc.freeze`), which later collections skip; objects created afterwards (the episodes) are collected
  as before. Alone, this shortens each full collection but makes them more frequent (CPython 3.11 runs one
  when the objects that reached generation 2 since the last one exceed 25% of those it kept then, and the
  frozen ones no longer count).
* ``gen2_threshold``: the collector's third threshold (``gc.set_threshold(t0, t1, gen2_threshold)``):
  a full collection runs at most once per that many generation-1 collections (Python's: 10); the 25% rule
  above still applies.

Measured together (``benchmarks/episode_scale.py --gc-modes``, 4,096 concurrent BFCL episodes): the longest
full collection 0.57-0.68x in CPU time, the time spent in full collections 0.11-0.12x, peak RSS unchanged
(CPython 3.11).

Once per process, at the end of start-up, is the point: freezing again later (periodically) would also freeze
the garbage cycles and the short-lived objects alive at that moment, which would then never be collected.
The agent loop (``verl_ext/agent_loop.py``) applies ``agent_tune.worker_gc`` (``config/base/agent_tune.yaml``)
when the first loop of a process is built; a missing key changes nothing.
"""

from __future__ import annotations

import gc
import threading

from pydantic import model_validator

from agent_tune.utils.typed_config import ConfigModel, OptionError

CONFIG_KEY = "agent_tune.worker_gc"

_done = False
_lock = threading.Lock()


class WorkerGC(ConfigModel):
    """``agent_tune.worker_gc``: freeze the start-up heap; the gen-2 threshold (``None``: Python's)."""

    freeze: bool = False
    gen2_threshold: int | None = None

    @model_validator(mode="after")
    def _in_range(self) -> WorkerGC:
        if self.gen2_threshold is not None and self.gen2_threshold < 1:
            raise OptionError("gen2_threshold", f"a positive integer, or null for Python's (10), got "
                                                f"{self.gen2_threshold!r}")
        return self


def parse_worker_gc(value: object) -> WorkerGC:
    """``agent_tune.worker_gc`` as :class:`WorkerGC` (``None``: nothing changed); an
    :class:`~agent_tune.utils.typed_config.OptionError` (a ``ValueError``) names the key."""
    return WorkerGC.parse(value, CONFIG_KEY)


def apply_worker_gc(value: object) -> bool:
    """Apply ``agent_tune.worker_gc`` (see the module docstring; a :class:`WorkerGC` or its mapping) to this
    process, once: ``True`` on the call that did; later calls in the process only check ``value``. ``freeze``:
    :func:`gc.collect` first, so no garbage is frozen."""
    global _done
    settings = parse_worker_gc(value)
    with _lock:
        if _done:
            return False
        _done = True
    if settings.gen2_threshold is not None:
        first, second, _ = gc.get_threshold()
        gc.set_threshold(first, second, settings.gen2_threshold)
    if settings.freeze:
        gc.collect()
        gc.freeze()
    return True
