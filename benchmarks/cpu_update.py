"""Where the CPU actor update's time goes: verl's FSDP2 wrapping on one gloo rank, one packed micro batch.

Standalone (no Ray, no vLLM): SmolLM2-135M in fp32 wrapped as verl wraps it on CPU (``apply_fsdp2`` per
decoder layer and the root, FSDP2 mixed precision: bf16 parameters, fp32 gradient reduction), verl's
``fsdp2_clip_grad_norm_`` and torch's AdamW over the fp32 master weights; the micro batch is the main job's:
``--groups`` GRPO groups of a ``--prompt``-token prompt and 4 responses, packed one row per group
(:mod:`verl_ext.cpu.shared_prefix`) under bf16 autocast, log-prob and entropy loss. For each ``--threads``
count (torch's intra-op threads) it measures the fp32 and bf16 matmul peaks, then one update (forward,
backward, clip, optimizer step; best of ``--repeats``) and its FLOP/s against the bf16 peak; ``--profile``
adds torch.profiler's self time per operator class (matmuls, attention, copies/casts, the rest).

    python benchmarks/cpu_update.py [--threads 2 1] [--groups 1] [--repeats 2] [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from cpu_step import matmul_peak  # noqa: E402
from shared_prefix import MODEL, entropy, flops, log_prob, text_tokens  # noqa: E402

RESPONSES = (256, 256, 200, 120)
CLASSES = (("matmuls", ("aten::mm", "aten::bmm", "aten::addmm", "aten::linear")), ("attention", ("attention",)),
           ("copies and casts", ("aten::copy_", "aten::_to_copy", "aten::cat", "aten::fill_")))


def setup() -> None:
    """A one-rank gloo process group and verl's CPU platform in this process (as the launcher does)."""
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29533")
    from verl_ext.cpu.launch import _load_plugin_here, cpu_environment

    os.environ.update(cpu_environment())
    _load_plugin_here()
    torch.distributed.init_process_group("gloo", rank=0, world_size=1)


def build():
    """SmolLM2 under verl's FSDP2 wrapping with the CPU config's mixed precision, and its AdamW."""
    from torch.distributed.fsdp import MixedPrecisionPolicy
    from transformers import AutoModelForCausalLM
    from verl.utils.fsdp_utils import apply_fsdp2

    model = AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.float32, attn_implementation="sdpa")
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, cast_forward_inputs=True)
    apply_fsdp2(model, {"mp_policy": policy, "reshard_after_forward": True}, {})
    return model, torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.01)


def update(model, optimizer, batch, parts: dict[str, float]) -> None:
    """One update over the packed micro batch, adding each phase's seconds to ``parts``."""
    from verl.utils.fsdp_utils import fsdp2_clip_grad_norm_

    from verl_ext.cpu.shared_prefix import plan_rows, score_rows

    sequences, prompt_lens = batch
    total = sum(int(s.shape[0]) for s in sequences)
    started = time.perf_counter()
    rows = plan_rows(sequences, [torch.arange(s.shape[0]) for s in sequences], prompt_lens)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        lp, ent = score_rows(model, rows, total, torch.full((len(sequences),), 0.7), log_prob, entropy)
        loss = (-lp.sum() - 1e-3 * ent.sum()) / total
    marks = [("forward", time.perf_counter())]
    loss.backward()
    marks.append(("backward", time.perf_counter()))
    fsdp2_clip_grad_norm_(model.parameters(), max_norm=1.0)
    marks.append(("clip", time.perf_counter()))
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    marks.append(("optimizer", time.perf_counter()))
    for name, end in marks:
        parts[name] = parts.get(name, 0.0) + end - started
        started = end


def by_class(prof) -> dict[str, float]:
    """Profiled self CPU seconds per operator class."""
    out = {name: 0.0 for name, _ in CLASSES} | {"the rest": 0.0}
    for event in prof.key_averages():
        name = next((c for c, keys in CLASSES if any(k in event.key for k in keys)), "the rest")
        out[name] += event.self_cpu_time_total / 1e6
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[os.cpu_count() or 1])
    parser.add_argument("--groups", type=int, default=1)
    parser.add_argument("--prompt", type=int, default=1650)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args(argv)
    setup()
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(MODEL)
    config = json.loads((MODEL / "config.json").read_text())
    sequences, prompt_lens, work = [], [], 0.0
    for g in range(args.groups):
        prompt = text_tokens(tokenizer, args.prompt, skip=3000 * g)
        group = [torch.cat([prompt, text_tokens(tokenizer, n, skip=args.prompt + 300 * (i + 1) + 3000 * g)])
                 for i, n in enumerate(RESPONSES)]
        work += flops(config, group, args.prompt, "packed")
        sequences += group
        prompt_lens += [args.prompt] * len(group)
    model, optimizer = build()
    update(model, optimizer, (sequences, prompt_lens), {})  # warm-up: allocations, optimizer state
    for threads in args.threads:
        torch.set_num_threads(threads)
        peaks = {name: matmul_peak(name) for name in ("float32", "bfloat16")}
        best: dict[str, float] | None = None
        for _ in range(args.repeats):
            parts: dict[str, float] = {}
            update(model, optimizer, (sequences, prompt_lens), parts)
            if best is None or sum(parts.values()) < sum(best.values()):
                best = parts
        seconds = sum(best.values())
        print(f"threads {threads}: matmul peaks fp32 {peaks['float32']:.0f}, bf16 {peaks['bfloat16']:.0f} GFLOP/s; "
              f"update {seconds:.2f} s (" + ", ".join(f"{k} {v:.2f}" for k, v in best.items()) + f"); "
              f"{work / 1e12:.2f} TFLOP, {work / seconds / 1e9:.0f} GFLOP/s = "
              f"{work / seconds / 1e9 / peaks['bfloat16']:.2f} of the bf16 peak", flush=True)
        if args.profile:
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU]) as prof:
                update(model, optimizer, (sequences, prompt_lens), {})
            classes = by_class(prof)
            whole = sum(classes.values())
            print("  profiled self time: " + ", ".join(f"{k} {v:.2f} s ({v / whole:.0%})" for k, v in classes.items()),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
