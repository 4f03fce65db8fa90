"""The actor update's forward + backward for one GRPO group, as verl scores it and with shared-prefix packing.

Standalone (no Ray, no vLLM): loads SmolLM2-135M-Instruct in fp32, builds one main-job-like group (a prompt
of ``--prompt`` tokens of BFCL text with worked examples, ``--n`` responses of the given lengths) and times,
under the main job's bf16 autocast:

- ``separate``: verl's path: one sequence per sample, logits for every position, fp32 log-softmax and
  entropy over the full vocabulary;
- ``packed``: one row ``[prompt, responses...]`` with the block mask, the head only on the positions the
  loss reads (:mod:`verl_ext.cpu.shared_prefix`).

Prints each variant's time, its FLOPs (what is computed: tokens through the layers, head rows, attention
pairs as the kernel computes them) and FLOP/s against the fp32 and bf16 matmul peaks measured in the same
process, and the ratio separate / packed. ``--profile`` prints torch.profiler's top operators per variant.

    python benchmarks/shared_prefix.py [--prompt 1650] [--responses 256 256 200 120] [--repeats 2] [--profile]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from cpu_step import matmul_peak, model_flops  # noqa: E402

from verl_ext.cpu.shared_prefix import plan_rows, score_rows  # noqa: E402

MODEL = Path.home() / ".cache" / "agent_tune" / "models" / "SmolLM2-135M-Instruct"
DATA = Path("/tmp/update-data/train_base.jsonl")


def text_tokens(tokenizer, count: int, skip: int = 0) -> torch.Tensor:
    """``count`` tokens of BFCL prompt text (the data file's messages when present, else the tokenizer's
    template text)."""
    import json

    text = ""
    if DATA.is_file():
        for line in DATA.read_text().splitlines():
            row = json.loads(line)
            text += " ".join(str(m.get("content", "")) for m in row.get("prompt", []))
            if len(text) > 8 * (count + skip):
                break
    while len(text) < 8 * (count + skip):
        text += " call(function='get_weather', arguments={'city': 'Paris'}) "
    ids = tokenizer(text, return_tensors="pt").input_ids[0]
    return ids[skip:skip + count]


def log_prob(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    from verl.utils.torch_functional import logprobs_from_logits

    return logprobs_from_logits(logits, labels)


def entropy(logits: torch.Tensor) -> torch.Tensor:
    from verl.utils.torch_functional import entropy_from_logits

    return entropy_from_logits(logits)


def separate(model, sequences, prompt_lens, temperature):
    """verl's path: per sample (one micro batch each, backward after each, as the main job ran it), full
    logits, log-prob and entropy everywhere; loss over the responses. Returns the summed loss, detached."""
    total = sum(int(s.shape[0]) for s in sequences)
    loss = 0.0
    for seq, p in zip(sequences, prompt_lens):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(input_ids=seq[None], use_cache=False).logits[0].div(temperature)
            ent = entropy(logits)
            lp = log_prob(logits, torch.roll(seq, -1))
            part = (-lp[p - 1:-1].sum() - 1e-3 * ent[p - 1:-1].sum()) / total
        part.backward()
        loss = loss + part.detach()
    return loss


def packed(model, sequences, prompt_lens, temperature):
    positions = [torch.arange(s.shape[0]) for s in sequences]
    rows = plan_rows(sequences, positions, prompt_lens)
    total = sum(int(s.shape[0]) for s in sequences)
    temps = torch.full((len(sequences),), temperature)
    lp, ent = score_rows(model, rows, total, temps, log_prob, entropy)
    return (-lp.sum() - 1e-3 * ent.sum()) / total


def flops(config: dict, sequences, prompt_len: int, variant: str) -> float:
    """Forward + backward FLOPs as computed: dense per token through the layers, head per head row, and
    attention per (query, key) pair the kernels evaluate (causal half for a plain sequence; for a packed row
    the prompt's causal half plus each response query against the whole row)."""
    dense, attention = model_flops(config)
    head = 2.0 * config["hidden_size"] * config["vocab_size"]
    body = dense - head
    if variant == "separate":
        lengths = [int(s.shape[0]) for s in sequences]
        forward = sum(body * n + head * n + attention * n * (n + 1) / 2 for n in lengths)
    else:
        total = prompt_len + sum(int(s.shape[0]) - prompt_len for s in sequences)
        responses = total - prompt_len
        # attention by parts: the prompt's causal half, then every response query against the whole row
        forward = body * total + head * responses + attention * (prompt_len * (prompt_len + 1) / 2 + responses * total)
    return 3 * forward


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt", type=int, default=1650)
    parser.add_argument("--responses", type=int, nargs="+", default=[256, 256, 200, 120])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--variant", nargs="+", default=["separate", "packed"])
    args = parser.parse_args(argv)
    import json

    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(MODEL)
    model = AutoModelForCausalLM.from_pretrained(MODEL, torch_dtype=torch.float32, attn_implementation="sdpa")
    config = json.loads((MODEL / "config.json").read_text())
    prompt = text_tokens(tokenizer, args.prompt)
    sequences = [torch.cat([prompt, text_tokens(tokenizer, n, skip=args.prompt + 300 * i)])
                 for i, n in enumerate(args.responses)]
    prompt_lens = [args.prompt] * len(sequences)
    peaks = {name: matmul_peak(name) for name in ("float32", "bfloat16")}
    print(f"matmul peaks: fp32 {peaks['float32']:.0f} GFLOP/s, bf16 {peaks['bfloat16']:.0f} GFLOP/s")
    fns = {"separate": separate, "packed": packed}
    times = {}
    for name in args.variant:
        best = float("inf")
        for _ in range(args.repeats):
            model.zero_grad(set_to_none=True)
            started = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = fns[name](model, sequences, prompt_lens, args.temperature)
            if loss.requires_grad:
                loss.backward()
            best = min(best, time.perf_counter() - started)
        times[name] = best
        work = flops(config, sequences, args.prompt, name)
        print(f"{name:>9}: {best:6.2f} s  {work / 1e12:.2f} TFLOP  {work / best / 1e9:6.1f} GFLOP/s = "
              f"{work / best / 1e9 / peaks['bfloat16']:.2f} of bf16 peak  (loss {loss.item():.5f})", flush=True)
        if args.profile:
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU]) as prof:
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = fns[name](model, sequences, prompt_lens, args.temperature)
                if loss.requires_grad:
                    loss.backward()
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=18))
    if len(times) > 1:
        print(f"separate / packed: {times['separate'] / times['packed']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
