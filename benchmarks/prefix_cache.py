"""vLLM's prefix-cache hit rate in a multi-turn run: BFCL multi-turn episodes through ``agent-tune eval``.

Every generation of a multi-turn episode re-sends the whole conversation so far (prompt, the model's earlier
turns, the tool results); with prefix caching on (vLLM's default, verl's ``rollout.enable_prefix_caching:
True``) the server prefills only the new tail. This script measures how much of the prompt tokens the cache
served, from the server's own Prometheus counters (``vllm:prefix_cache_queries`` / ``vllm:prefix_cache_hits``,
tokens; exposed as ``..._total`` on ``/metrics``), read before and after the run:

    hit rate = (hits_after - hits_before) / (queries_after - queries_before)

The episodes are played by ``agent-tune eval`` (the training episode runner, token ids to ``/completions``,
one episode's turns to the one server). With ``--base-url`` it uses a running server; without, it starts
``vllm.entrypoints.openai.api_server`` on SmolLM2-135M (CPU, fp32, as in the README) and stops it after.
The rate includes reuse across episodes (the system prompt and tool list that entries of one category share),
which ``--concurrency 1`` does not change; it is what a training step's server sees too.

    python benchmarks/prefix_cache.py --ids multi_turn_base_0 multi_turn_base_1 multi_turn_miss_func_0 \
        multi_turn_long_context_0 --max-tokens 128
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import ExitStack
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: the checkout's agent_tune
    sys.path.insert(0, str(REPO))

from agent_tune.testing.server_process import ServerProcess, free_port, openai_ready  # noqa: E402

COUNTERS = ("vllm:prefix_cache_queries", "vllm:prefix_cache_hits")


def read_counters(base: str) -> dict[str, float]:
    """The prefix-cache counters on ``base``/metrics, summed over engines (Prometheus text format)."""
    with urllib.request.urlopen(f"{base}/metrics", timeout=30) as resp:
        text = resp.read().decode()
    totals = dict.fromkeys(COUNTERS, 0.0)
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        name = line.split("{", 1)[0].split(" ", 1)[0]
        for counter in COUNTERS:
            if name in (counter, counter + "_total"):
                totals[counter] += float(line.rsplit(" ", 1)[1])
    return totals


def vllm_server(model_dir: str, port: int, log: Path) -> ServerProcess:
    """vLLM's OpenAI server on ``model_dir`` (CPU settings of the README), not started yet."""
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_dir,
           "--served-model-name", "smol", "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "8192",
           "--dtype", "float32", "--enable-prefix-caching"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    return ServerProcess("vLLM server", cmd, log, env=env)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base-url", default=None, help="a running server's OpenAI base URL (.../v1); default: start one")
    p.add_argument("--model", default="smol", help="served model name (with --base-url)")
    p.add_argument("--tokenizer", default=None, help="tokenizer folder (default: the SmolLM2 folder)")
    p.add_argument("--template", default="smollm2_tools")
    p.add_argument("--ids", nargs="+", default=["multi_turn_base_0", "multi_turn_base_1", "multi_turn_miss_func_0",
                                                 "multi_turn_long_context_0"])
    p.add_argument("--max-tokens", type=int, default=128, help="max new tokens per generation")
    p.add_argument("--concurrency", type=int, default=4)
    args = p.parse_args(argv)

    from agent_tune.models.smollm2 import ensure_smollm2

    model_dir = str(ensure_smollm2())
    work = Path(tempfile.mkdtemp(prefix="prefix_cache_"))
    with ExitStack() as stack:
        if args.base_url is None:
            port = free_port()
            base_url, model = f"http://127.0.0.1:{port}/v1", "smol"
            server = stack.enter_context(vllm_server(model_dir, port, work / "vllm.log"))
            up_s = server.wait_ready(openai_ready(base_url), timeout_s=600)
            print(f"vLLM server up in {up_s:.0f} s (log {work / 'vllm.log'})", flush=True)
        else:
            base_url, model = args.base_url.rstrip("/"), args.model
        root = base_url[: -len("/v1")] if base_url.endswith("/v1") else base_url
        before = read_counters(root)
        out = work / "eval.jsonl"
        cmd = [sys.executable, "-m", "agent_tune.cli", "eval", "--base-url", base_url, "--model", model,
               "--tokenizer", args.tokenizer or model_dir, "--template", args.template, "--ids", *args.ids,
               "--max-tokens", str(args.max_tokens), "--concurrency", str(args.concurrency), "--output", str(out),
               "--no-progress"]
        started = time.monotonic()
        subprocess.run(cmd, check=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)},
                       stdout=open(work / "eval.log", "w"), stderr=subprocess.STDOUT)
        wall = time.monotonic() - started
        after = read_counters(root)
    records = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    generations = sum(len(r.get("finish_reasons") or []) for r in records)
    queries = after["vllm:prefix_cache_queries"] - before["vllm:prefix_cache_queries"]
    hits = after["vllm:prefix_cache_hits"] - before["vllm:prefix_cache_hits"]
    print(f"{len(records)} episodes, {generations} generations, {wall:.0f} s; "
          f"prompt tokens looked up {queries:.0f}, served from the prefix cache {hits:.0f}: "
          f"hit rate {hits / queries if queries else float('nan'):.1%}")
    print(f"(eval results {out}, log {work / 'eval.log'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
