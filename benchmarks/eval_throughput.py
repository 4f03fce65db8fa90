"""Entries/s of the async evaluator against a sequential loop, on the same scripted server.

The server (agent_tune/testing/scripted_server.py) answers every generation with the ground truth after a fixed
latency, like an inference server whose per-request time does not depend on load. The sequential loop is
what an evaluator without concurrency does (bfcl-eval's ``generate`` with one thread): the same runner,
one episode after the other. The official ``bfcl generate`` does not run in the trainer's venv
(its CLI imports every provider SDK at start-up).

    python benchmarks/eval_throughput.py [--entries 24] [--latency 0.05] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_tune.envs.bfcl.multi_turn.data import SCORED_CATEGORIES, category_test_ids  # noqa: E402
from agent_tune.eval.evaluate import EvalSettings, Evaluator  # noqa: E402
from agent_tune.models.qwen_vocab import load_qwen3_tokenizer  # noqa: E402
from agent_tune.testing.scripted_server import ScriptedServer, oracle_script  # noqa: E402


def pick_ids(n: int) -> list[str]:
    """Entries spread over the four categories with distinct first questions."""
    out, seen = [], set()
    from agent_tune.envs.bfcl.multi_turn.data import load_entry

    per_cat = [category_test_ids(c) for c in SCORED_CATEGORIES]
    for i in range(200):
        for ids in per_cat:
            q = load_entry(ids[i]).question[0][-1]["content"]
            if q not in seen:
                seen.add(q)
                out.append(ids[i])
            if len(out) == n:
                return out
    return out


async def timed(tok, ids, latency, concurrency) -> tuple[float, float]:
    async with ScriptedServer(tok, oracle_script(ids), ids, latency=latency) as srv:
        with tempfile.TemporaryDirectory() as d:
            s = EvalSettings(base_url=srv.base_url, model="scripted", template="qwen3", concurrency=concurrency,
                             progress=False)
            ev = Evaluator(s, tok)
            t0 = time.perf_counter()
            out = await ev.run(ids, Path(d) / "r.jsonl")
            dt = time.perf_counter() - t0
    acc = sum(r["accuracy"] for r in out.records) / len(out.records)
    return dt, acc


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--entries", type=int, default=24)
    p.add_argument("--latency", type=float, default=0.05, help="seconds per generation request")
    p.add_argument("--concurrency", type=int, default=16)
    args = p.parse_args(argv)
    tok = load_qwen3_tokenizer()
    ids = pick_ids(args.entries)
    seq_t, seq_acc = asyncio.run(timed(tok, ids, args.latency, 1))
    par_t, par_acc = asyncio.run(timed(tok, ids, args.latency, args.concurrency))
    print(f"{len(ids)} entries, {args.latency * 1000:.0f} ms per generation")
    print(f"sequential loop      : {seq_t:7.2f} s  {len(ids) / seq_t:7.2f} entries/s  accuracy {seq_acc:.3f}")
    print(f"async, concurrency {args.concurrency:<2}: {par_t:7.2f} s  "
          f"{len(ids) / par_t:7.2f} entries/s  accuracy {par_acc:.3f}")
    print(f"speed-up: {seq_t / par_t:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
