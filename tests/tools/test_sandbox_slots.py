"""max_concurrency bounds every program: synchronous run() calls and pool (async, batch) calls together."""

from __future__ import annotations

import asyncio
import threading
import time

from agent_tune.tools.sandbox import CodeSandbox, ExecutionLimits, ExecutionResult


class _CountingSandbox(CodeSandbox):
    """Runs nothing; records how many programs were inside _execute at once."""

    def __init__(self, max_concurrency: int) -> None:
        super().__init__(limits=ExecutionLimits(), max_concurrency=max_concurrency)
        self._lock = threading.Lock()
        self.running = 0
        self.peak = 0

    def _execute(self, code: str, limits: ExecutionLimits) -> ExecutionResult:
        with self._lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        time.sleep(0.05)
        with self._lock:
            self.running -= 1
        return ExecutionResult(stdout=code, stderr="", exit_code=0)


def test_sync_and_async_runs_share_the_bound():
    with _CountingSandbox(max_concurrency=2) as box:
        threads = [threading.Thread(target=box.run, args=(f"sync{i}",)) for i in range(6)]
        for t in threads:
            t.start()

        async def many():
            return await box.arun_batch([f"async{i}" for i in range(6)])

        results = asyncio.run(many())
        for t in threads:
            t.join()
        assert [r.stdout for r in results] == [f"async{i}" for i in range(6)]
        assert box.peak == 2  # 12 programs, never more than 2 at once
        assert box.run("again").stdout == "again"  # slots are released
