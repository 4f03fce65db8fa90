"""Run a coroutine to completion from synchronous code, whether or not an event loop runs in this thread."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Coroutine, TypeVar

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(coro)``; from inside a running event loop (a sync env method the runner calls on the
    loop, a start-up check), run it on a fresh loop in a helper thread instead, blocking the caller until it is
    done."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="agent-tune-sync") as pool:
        return pool.submit(asyncio.run, coro).result()
