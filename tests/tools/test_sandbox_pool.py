"""The bounded pool: many programs in parallel, correct outputs, nothing left behind."""

from __future__ import annotations

import asyncio
import time

import pytest

from agent_tune.tools import ExecutionLimits, LocalSandbox, SandboxConfig, close_shared_sandboxes, shared_sandbox
from agent_tune.utils.typed_config import OptionError

from .sandbox_helpers import wait_no_children


@pytest.mark.slow
def test_200_executions_in_parallel_batches():
    box = LocalSandbox(limits=ExecutionLimits(wall_seconds=30), max_concurrency=8)
    cgroup_dir = box._cgroups.path if box._cgroups is not None else None
    try:
        for batch in range(4):
            codes = [f"import sys\nn = {batch * 50 + i}\nprint(n * n)\nprint(n, file=sys.stderr)" for i in range(50)]
            if batch == 3:  # a crash and a timeout inside the batch do not affect the others
                codes[7] = "raise SystemExit(5)"
                codes[11] = "import time\ntime.sleep(60)"
            results = box.run_batch(codes, ExecutionLimits(wall_seconds=3 if batch == 3 else 30))
            for i, r in enumerate(results):
                n = batch * 50 + i
                if batch == 3 and i == 7:
                    assert r.exit_code == 5 and r.error is None
                elif batch == 3 and i == 11:
                    assert r.timed_out
                else:
                    assert r.ok, (n, r)
                    assert r.stdout == f"{n * n}\n" and r.stderr == f"{n}\n"
        assert wait_no_children() == []
        if cgroup_dir is not None:
            assert [p for p in cgroup_dir.iterdir() if p.is_dir()] == []  # every run's cgroup removed
    finally:
        box.close()
    if cgroup_dir is not None:
        assert not cgroup_dir.exists()


def test_pool_bounds_concurrency():
    box = LocalSandbox(limits=ExecutionLimits(wall_seconds=20), max_concurrency=2)
    try:
        t0 = time.monotonic()
        results = box.run_batch(["import time\ntime.sleep(1)\nprint('done')"] * 4)
        elapsed = time.monotonic() - t0
        assert all(r.stdout == "done\n" for r in results)
        assert elapsed >= 1.9  # two waves of two, not four at once
    finally:
        box.close()


async def test_async_batch_and_event_loop_stays_free():
    box = LocalSandbox(limits=ExecutionLimits(wall_seconds=20), max_concurrency=4)
    try:
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.05)
                ticks += 1

        task = asyncio.create_task(ticker())
        results = await box.arun_batch([f"import time\ntime.sleep(0.5)\nprint({i})" for i in range(4)])
        task.cancel()
        assert [r.stdout for r in results] == [f"{i}\n" for i in range(4)]
        assert ticks >= 5  # the loop kept running while programs ran
    finally:
        box.close()


def test_shared_sandbox_is_one_per_config_and_closes():
    cfg = SandboxConfig(max_concurrency=3)
    try:
        a = shared_sandbox(cfg)
        b = shared_sandbox({"max_concurrency": 3})
        c = shared_sandbox(SandboxConfig(max_concurrency=2))
        assert a is b and a is not c
    finally:
        close_shared_sandboxes()
    with pytest.raises(RuntimeError, match="closed"):
        a.run("print(1)")


def test_config_from_dict_validates():
    cfg = SandboxConfig.parse(
        {"backend": "local", "limits": {"cpu_seconds": 3}, "local": {"process_limit": "auto"}}, "sandbox"
    )
    assert cfg.limits.cpu_seconds == 3 and cfg.limits.wall_seconds == ExecutionLimits().wall_seconds
    with pytest.raises(ValueError, match="unknown sandbox config keys"):
        SandboxConfig.parse({"backend": "local", "timeout": 3}, "sandbox")
    with pytest.raises(ValueError, match="backend"):
        SandboxConfig(backend="docker")  # type: ignore[arg-type]
    with pytest.raises(OptionError, match="limits.cpu_secs"):
        SandboxConfig.parse({"limits": {"cpu_secs": 3}}, "sandbox")
