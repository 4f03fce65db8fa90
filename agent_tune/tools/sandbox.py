"""The code-sandbox interface: limits, results, and a bounded pool shared by every backend.

A :class:`CodeSandbox` runs one Python program per call and never raises on what the program does:
a crash, a timeout or an oversized output comes back as an :class:`ExecutionResult` whose ``error``
says what happened. Backends implement :meth:`CodeSandbox._execute` (blocking); this class adds the
batch and async forms on top of one bounded thread pool. Every program, whether run in the caller's
thread (:meth:`CodeSandbox.run`) or through the pool, takes one of ``max_concurrency`` slots, so at most
that many run at a time; a slow or crashing program never breaks another one or the caller.
"""

from __future__ import annotations

import asyncio
import threading
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Sequence

from pydantic import model_validator

from agent_tune.errors import SetupError
from agent_tune.utils.typed_config import ConfigModel, OptionError


class SandboxUnavailableError(SetupError, RuntimeError):
    """The sandbox backend cannot run programs here (raised once, at construction)."""


class ExecutionLimits(ConfigModel):
    """Resource limits for one program run (``sandbox.limits``).

    ``cpu_seconds`` and ``wall_seconds`` bound CPU and elapsed time; ``memory_mb`` the address space of
    each process; ``max_processes`` the processes and threads alive at once inside one sandbox;
    ``max_file_size_mb`` any single file written; ``max_open_files`` the descriptors per process;
    ``max_output_bytes`` what is read from stdout and from stderr (each) before the run is killed;
    ``tmp_size_mb`` the size of the private writable ``/tmp``. Each must be positive.
    """

    cpu_seconds: int = 10
    wall_seconds: float = 20.0
    memory_mb: int = 1024
    max_processes: int = 32
    max_file_size_mb: int = 16
    max_open_files: int = 256
    max_output_bytes: int = 64 * 1024
    tmp_size_mb: int = 64

    @model_validator(mode="after")
    def _positive(self) -> ExecutionLimits:
        for name in type(self).model_fields:  # every field is a limit
            value = getattr(self, name)
            if value <= 0:
                raise OptionError(name, f"must be a positive number, got {value!r}")
        return self


@dataclass(frozen=True)
class ExecutionResult:
    """What one run produced.

    ``exit_code`` is the program's exit status (``None`` when the sandbox killed it or it never ran);
    ``timed_out`` is set when the wall-clock limit killed it; ``truncated`` when its output exceeded
    ``max_output_bytes`` (the run is killed and the first bytes are kept); ``error`` is a short
    human-readable account of any abnormal end (limit hit, signal, sandbox failure), else ``None``.
    """

    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool = False
    truncated: bool = False
    error: str | None = None
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        """True if the program ran to completion with exit status 0."""
        return self.exit_code == 0 and self.error is None and not self.timed_out and not self.truncated


class CodeSandbox(ABC):
    """Runs untrusted Python programs, each in isolation, at most ``max_concurrency`` at a time.

    Use it as a context manager or call :meth:`close` to stop the worker pool.
    """

    def __init__(self, limits: ExecutionLimits | None = None, max_concurrency: int = 4) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {max_concurrency}")
        self.limits = limits or ExecutionLimits()
        self.max_concurrency = max_concurrency
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_concurrency)  # shared by run() and the pool
        self._closed = False

    # -- backends implement this -------------------------------------------------------------
    @abstractmethod
    def _execute(self, code: str, limits: ExecutionLimits) -> ExecutionResult:
        """Run ``code`` once under ``limits`` (blocking). Must not raise for program behaviour."""

    # -- public API ----------------------------------------------------------------------------
    def run(self, code: str, limits: ExecutionLimits | None = None) -> ExecutionResult:
        """Run one program in the calling thread, once one of the ``max_concurrency`` slots is free."""
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, got {type(code).__name__}")
        self._check_open()
        with self._slots:
            return self._execute(code, limits or self.limits)

    def run_batch(self, codes: Sequence[str], limits: ExecutionLimits | None = None) -> list[ExecutionResult]:
        """Run many programs in parallel through the pool; results are in input order."""
        pool = self._get_pool()
        futures = [pool.submit(self.run, code, limits) for code in codes]
        return [f.result() for f in futures]

    async def arun(self, code: str, limits: ExecutionLimits | None = None) -> ExecutionResult:
        """Run one program in the pool without blocking the event loop."""
        pool = self._get_pool()
        return await asyncio.wrap_future(pool.submit(self.run, code, limits))

    async def arun_batch(self, codes: Sequence[str], limits: ExecutionLimits | None = None) -> list[ExecutionResult]:
        """Async form of :meth:`run_batch`."""
        return list(await asyncio.gather(*(self.arun(c, limits) for c in codes)))

    def with_limits(self, **overrides: float) -> ExecutionLimits:
        """This sandbox's default limits with some fields replaced (checked as a new :class:`ExecutionLimits`)."""
        return type(self.limits)(**{**self.limits.model_dump(), **overrides})

    def close(self) -> None:
        """Stop the pool (waiting for running programs). Safe to call twice."""
        self._closed = True
        with self._pool_lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)

    def __enter__(self) -> "CodeSandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- helpers ---------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed")

    def _get_pool(self) -> ThreadPoolExecutor:
        self._check_open()
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=self.max_concurrency, thread_name_prefix=f"{type(self).__name__}-worker"
                )
            return self._pool
