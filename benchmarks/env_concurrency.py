"""Each concurrency mechanism of the episode runner (agent_tune/sync.py) against going without it, in one run.

docs/design.md, "Concurrency", names the mechanisms that remain; this measures why each is there. Every case
plays the same work both ways, concurrently as the runner does (``asyncio.gather`` of many episodes on one loop),
and prints the ratio without / with:

1. **env thread pool**: ``--episodes`` episodes of a blocking env (``act`` sleeps ``--block-ms``, as a SkyRL env's
   SQL does) stepped with ``astep`` (the step in ``env_executor``) vs ``step`` called on the loop.
2. **async act on the loop**: ``4 x --episodes`` episodes of the env with ``async def act`` awaited by ``astep`` vs
   stepped through the sync front (``step`` in the pool: a fresh event loop per step, a worker held while it waits).
3. **background loop**: calls over a connection to a local TCP server, the connection opened once per episode on
   the background loop and each call awaited there (``on_background_loop``), vs a fresh loop and connection per
   call (``run_sync`` from a pool thread); and the hop's own cost next to a call on the caller's own loop.
4. **start thread**: ``--starts`` episode starts costing ``--start-ms`` of CPU each (BFCL: ``reset`` and the prompt
   render, ~5 ms) in the start thread vs on the loop: the loop's longest stall while they start.
5. **default executor for blocking resets**: resets that wait ``--block-ms`` (tau2's user, an MCP server start) in
   the default executor vs in the start thread; and the blocking steps of other episodes meanwhile, those resets
   in the env pool vs not.
6. **a thread per bounded call**: calls that hang (never answer within their bound) abandoned in threads of their
   own vs in the env pool: the blocking steps of the other episodes afterwards.
7. **run_sync's thread**: a coroutine run from synchronous code called on a running loop: ``asyncio.run`` refuses
   it (a correctness need); the cost per call is printed.

CPU only, a few seconds; ratios within one run (the machine is shared).

    .venv/bin/python benchmarks/env_concurrency.py [--episodes 32] [--steps 3] [--block-ms 10]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import threading
import time
from typing import Any, Awaitable, Callable

from agent_tune.envs.base import BaseToolEnv, Observation, Outcome, Step
from agent_tune.parsing.types import ParsedResponse
from agent_tune.sync import (
    ENV_THREADS,
    call_in_thread,
    env_executor,
    in_thread,
    on_background_loop,
    run_sync,
    start_executor,
    wait,
)


class _Env(BaseToolEnv):
    """A whole-text env whose step waits ``block`` seconds."""

    block = 0.01

    def reset(self, **task: Any) -> Observation:
        super().reset()
        return Observation(messages=[{"role": "user", "content": "go"}])

    def extract_tool_calls(self, raw_response: str) -> ParsedResponse:
        return ParsedResponse(content=raw_response)

    def is_answer(self, raw_response: str) -> bool:
        return False

    def outcome(self) -> Outcome:
        return Outcome(0.0, 0.0)


class BlockingEnv(_Env):
    def act(self, step: Step) -> None:
        time.sleep(self.block)


class AsyncEnv(_Env):
    async def act(self, step: Step) -> None:
        await asyncio.sleep(self.block)


async def _timed(work: Awaitable[Any]) -> float:
    t0 = time.perf_counter()
    await work
    return time.perf_counter() - t0


async def _episodes(env_cls: type[_Env], n: int, steps: int, block: float,
                    play: Callable[[_Env], Awaitable[Any]]) -> float:
    envs = []
    for _ in range(n):
        env = env_cls()
        env.block = block
        env.reset()
        envs.append(env)

    async def one(env: _Env) -> None:
        for _ in range(steps):
            await play(env)

    return await _timed(asyncio.gather(*(one(e) for e in envs)))


async def _on_loop(env: _Env) -> Any:
    return env.step("x")


async def _via_pool(env: _Env) -> Any:
    return await in_thread(env.step, "x", pool=env_executor())


async def _astep(env: _Env) -> Any:
    return await env.astep("x")


# ------------------------------------------------------------------ 3. a connection on the background loop
async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while line := await reader.readline():
        writer.write(line)
        await writer.drain()
    writer.close()


def _server() -> int:
    """A line echo server on a loop of its own (the remote server); its port."""
    ready: list[int] = []
    started = threading.Event()

    def serve() -> None:
        async def main() -> None:
            server = await asyncio.start_server(_echo, "127.0.0.1", 0)
            ready.append(server.sockets[0].getsockname()[1])
            started.set()
            await server.serve_forever()

        asyncio.run(main())

    threading.Thread(target=serve, daemon=True).start()
    started.wait(10)
    return ready[0]


class _Connection:
    def __init__(self, port: int) -> None:
        self.port = port

    async def open(self) -> _Connection:
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        return self

    async def call(self) -> bytes:
        self.writer.write(b"ping\n")
        await self.writer.drain()
        return await self.reader.readline()

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


async def _one_shot(port: int) -> bytes:
    conn = await _Connection(port).open()
    try:
        return await conn.call()
    finally:
        await conn.close()


async def _connections(port: int, n: int, calls: int) -> dict[str, float]:
    async def background(_: int) -> None:
        conn = wait(_Connection(port).open(), 10)  # opened at reset, in a thread: on the background loop
        for _ in range(calls):
            await on_background_loop(conn.call(), 10)
        wait(conn.close(), 10)

    async def fresh_loop(_: int) -> None:
        for _ in range(calls):
            await in_thread(run_sync, _one_shot(port), pool=env_executor())

    async def own_loop(_: int) -> None:  # the lower bound: a connection on the caller's loop (not reachable from reset)
        conn = await _Connection(port).open()
        for _ in range(calls):
            await conn.call()
        await conn.close()

    return {name: await _timed(asyncio.gather(*(fn(i) for i in range(n))))
            for name, fn in (("background", background), ("fresh", fresh_loop), ("own", own_loop))}


# ------------------------------------------------------------------ 4. the loop's longest stall
async def _longest_stall(work: Awaitable[Any]) -> tuple[float, float]:
    """(seconds ``work`` took, the longest gap between ticks of a 1 ms ticker on the loop meanwhile)."""
    gaps: list[float] = []
    done = False

    async def ticker() -> None:
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    tick = asyncio.ensure_future(ticker())
    await asyncio.sleep(0.01)
    gaps.clear()
    took = await _timed(work)
    done = True
    await tick
    return took, max(gaps, default=0.0)


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def _starts(n: int, cost: float, where: str) -> Any:
    async def start() -> None:
        if where == "loop":
            _busy(cost)
        else:
            await in_thread(_busy, cost, pool=start_executor())

    return await asyncio.gather(*(start() for _ in range(n)))


async def main(args: argparse.Namespace) -> None:
    n, steps, block = args.episodes, args.steps, args.block_ms / 1000
    rows: list[tuple[str, float, float, str]] = []

    def row(name: str, without: float, with_: float, unit: str = "s") -> None:
        rows.append((name, without, with_, unit))

    # warm the pools and the background loop
    await in_thread(int, pool=env_executor())
    await in_thread(int, pool=start_executor())
    wait(asyncio.sleep(0), 5)

    # 1. the env thread pool
    pool = await _episodes(BlockingEnv, n, steps, block, _astep)
    loop = await _episodes(BlockingEnv, n, steps, block, _on_loop)
    row(f"1 env pool: {n} blocking episodes x {steps} steps (on the loop / astep)", loop, pool)

    # 2. an async act awaited on the loop
    many = 4 * n  # more episodes than the pool has threads
    awaited = await _episodes(AsyncEnv, many, steps, block, _astep)
    fresh = await _episodes(AsyncEnv, many, steps, block, _via_pool)
    row(f"2 async act: {many} episodes x {steps} steps (sync front in the pool / astep)", fresh, awaited)

    # 3. the background loop
    port = _server()
    conn = await _connections(port, n, steps * 3)
    row(f"3 background loop: {n} episodes x {steps * 3} calls (fresh loop+connection per call / background)",
        conn["fresh"], conn["background"])
    row("3 ... its hop (background / a connection on the caller's own loop)", conn["background"], conn["own"])
    hop_ms = (conn["background"] - conn["own"]) / (n * steps * 3) * 1e3

    # 4. the start thread
    starts, cost = args.starts, args.start_ms / 1000
    took_thread, stall_thread = await _longest_stall(_starts(starts, cost, "thread"))
    took_loop, stall_loop = await _longest_stall(_starts(starts, cost, "loop"))
    row(f"4 start thread: longest loop stall, {starts} starts of {args.start_ms:g} ms CPU (on the loop / thread)",
        stall_loop, stall_thread)
    row("4 ... the starts' wall time (on the loop / thread)", took_loop, took_thread)

    # 5. blocking resets in the default executor
    def blocking_reset() -> None:
        time.sleep(block * 5)

    resets = n // 2
    in_start = await _timed(asyncio.gather(*(in_thread(blocking_reset, pool=start_executor()) for _ in range(resets))))
    in_default = await _timed(asyncio.gather(*(in_thread(blocking_reset) for _ in range(resets))))
    row(f"5 default executor: {resets} resets waiting {args.block_ms * 5:g} ms (start thread / default executor)",
        in_start, in_default)

    async def steps_beside(resets_pool: Any) -> float:
        slow = [asyncio.ensure_future(in_thread(time.sleep, 0.2, pool=resets_pool)) for _ in range(ENV_THREADS)]
        await asyncio.sleep(0.01)
        took = await _episodes(BlockingEnv, n, 1, block, _astep)
        await asyncio.gather(*slow)
        return took

    shared, apart = await steps_beside(env_executor()), await steps_beside(None)
    row(f"5 ... {n} blocking steps while {ENV_THREADS} slow resets run (resets in the env pool / default executor)",
        shared, apart)

    # 6. a thread per bounded call
    hang, bound = 0.6, 0.05

    async def hung_call(own_thread: bool) -> None:
        try:
            if own_thread:  # a plain act's bounded call: the pool worker is back after the bound
                await in_thread(functools.partial(call_in_thread, time.sleep, hang, timeout=bound), pool=env_executor())
            else:  # the bounded call itself on a pool worker: abandoned, it holds the worker until it returns
                await asyncio.wait_for(asyncio.wrap_future(env_executor().submit(time.sleep, hang)), bound)
        except (TimeoutError, asyncio.TimeoutError):
            pass

    async def after_hung_calls(own_threads: bool) -> float:
        await asyncio.gather(*(hung_call(own_threads) for _ in range(ENV_THREADS)))
        return await _episodes(BlockingEnv, n, 1, block, _astep)

    own = await after_hung_calls(True)
    await asyncio.sleep(hang)
    pooled = await after_hung_calls(False)
    row(f"6 thread per bounded call: {n} blocking steps after {ENV_THREADS} hung calls (in the pool / own threads)",
        pooled, own)

    # 7. run_sync's thread
    async def nothing() -> None:
        return None

    coro = nothing()
    try:
        asyncio.run(coro)
        refused = "no"
    except RuntimeError:
        coro.close()
        refused = "yes"
    calls = 200
    t0 = time.perf_counter()
    for _ in range(calls):
        run_sync(nothing())
    per_call = (time.perf_counter() - t0) / calls
    await asyncio.sleep(0)

    width = max(len(r[0]) for r in rows)
    print(f"{'case':<{width}}  {'without':>9}  {'with':>9}  ratio")
    for name, without, with_, _ in rows:
        print(f"{name:<{width}}  {without:9.4f}  {with_:9.4f}  {without / max(with_, 1e-9):6.1f}x")
    print(f"7 run_sync on a running loop: asyncio.run refused: {refused}; a helper thread and loop per call: "
          f"{per_call * 1e3:.2f} ms")
    print(f"3 the background loop's hop: {hop_ms:.3f} ms per call (wall time over the calls, {n} episodes at once)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--block-ms", type=float, default=10.0)
    parser.add_argument("--starts", type=int, default=128)
    parser.add_argument("--start-ms", type=float, default=2.0)
    asyncio.run(main(parser.parse_args()))
