"""The CPU update's attention, one decoder layer of SmolLM2 on the main job's packed group, by kernel.

Attention is the slowest part of the CPU actor update (`benchmarks/cpu_update.py --profile`). This times the
forward + backward of one layer's attention for one packed GRPO group (a ``--prompt``-token prompt and
responses of 256/256/200/120 tokens; 9 query heads, 3 key/value heads, head dim 64, bf16) in the ways a
kernel could run it, in one process, against the bf16 matmul peak measured in the same run:

- ``by_parts``: what the update runs (:func:`verl_ext.cpu.shared_prefix.shared_prefix_attention`): torch's CPU
  flash kernel on the prompt causally, then the response queries against the whole row under the block mask;
- ``split``: the same kernel without the masked pairs: the prompt causally, the response queries against the
  prompt (no mask) and each response causally against itself (padded into one batch); the parts would be
  merged by their log-sum-exp, so this is what dropping the response-to-response pairs could save at most;
- ``compiled``: the attention written as matmuls and a softmax over blocks of 256 queries, compiled by
  ``torch.compile`` for this one shape (a real use would compile per prompt length);
- ``flex``: torch's ``flex_attention`` with the block mask, where torch supports its backward on CPU.

The useful FLOPs are those of the pairs the mask keeps (x3 for forward + backward).

    python benchmarks/cpu_attention.py [--threads 2] [--prompt 1650] [--repeats 3]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable, Optional

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from cpu_step import matmul_peak  # noqa: E402

RESPONSES = (256, 256, 200, 120)
HEADS, KV_HEADS, HEAD_DIM = 9, 3, 64  # SmolLM2-135M
BLOCK = 256
FLASH = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
FLASH_BACKWARD = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward


def best(fn: Callable[[], None], repeats: int) -> float:
    fn()  # warm-up (and compilation)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def row_mask(prompt: int) -> torch.Tensor:
    """The packed row's (T, T) mask, True = attend, as the update builds it (:func:`build_row`)."""
    from verl_ext.cpu.shared_prefix import build_row

    sequences = [torch.arange(prompt + length) for length in RESPONSES]  # the same prompt ids in every sample
    starts = [sum(prompt + length for length in RESPONSES[:i]) for i in range(len(RESPONSES))]
    row = build_row(list(range(len(RESPONSES))), sequences, sequences, [prompt] * len(RESPONSES), starts)
    return row.attention_mask[0, 0]


class Layer:
    """One layer's queries, keys and values for the packed row, and the gradient of its output."""

    def __init__(self, prompt: int) -> None:
        torch.manual_seed(0)
        self.prompt, self.mask = prompt, row_mask(prompt)
        total = self.mask.shape[0]
        self.q = torch.randn(1, HEADS, total, HEAD_DIM, dtype=torch.bfloat16)
        self.k = torch.randn(1, KV_HEADS, total, HEAD_DIM, dtype=torch.bfloat16)
        self.v = torch.randn(1, KV_HEADS, total, HEAD_DIM, dtype=torch.bfloat16)
        self.grad = torch.randn(1, HEADS, total, HEAD_DIM, dtype=torch.bfloat16)

    def leaves(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return tuple(t.detach().requires_grad_() for t in (self.q, self.k, self.v))

    def useful_flops(self) -> float:
        """Forward + backward FLOPs of the kept pairs: 2 matmuls of 2 x head_dim per pair and head, x3."""
        return 3 * 2 * 2 * HEAD_DIM * HEADS * float(self.mask.sum())


def by_parts(layer: Layer) -> None:
    from verl_ext.cpu.shared_prefix import shared_prefix_attention

    q, k, v = layer.leaves()
    out, _ = shared_prefix_attention(torch.nn.Module(), q, k, v, None,
                                     shared_prefix=(layer.prompt, layer.mask[layer.prompt:]))
    out.transpose(1, 2).backward(layer.grad)


def split(layer: Layer) -> None:
    """The flash kernel's forward and backward on the kept pairs only (the merge itself not timed)."""
    p = layer.prompt
    repeat = HEADS // KV_HEADS
    k, v = (t.repeat_interleave(repeat, 1) for t in (layer.k, layer.v))
    q_resp = layer.q[:, :, p:].contiguous()
    k_prompt, v_prompt = k[:, :, :p].contiguous(), v[:, :, :p].contiguous()
    q_prompt = layer.q[:, :, :p].contiguous()
    out, lse = FLASH(q_prompt, k_prompt, v_prompt, 0.0, True)
    FLASH_BACKWARD(layer.grad[:, :, :p].contiguous(), q_prompt, k_prompt, v_prompt, out, lse, 0.0, True)
    out, lse = FLASH(q_resp, k_prompt, v_prompt, 0.0, False)
    FLASH_BACKWARD(layer.grad[:, :, p:].contiguous(), q_resp, k_prompt, v_prompt, out, lse, 0.0, False)
    longest = max(RESPONSES)
    qs, ks, vs = (torch.zeros(len(RESPONSES), HEADS, longest, HEAD_DIM, dtype=torch.bfloat16) for _ in range(3))
    begin = p
    for i, length in enumerate(RESPONSES):
        for dst, src in ((qs, layer.q), (ks, k), (vs, v)):
            dst[i, :, :length] = src[0, :, begin:begin + length]
        begin += length
    out, lse = FLASH(qs, ks, vs, 0.0, True)
    FLASH_BACKWARD(torch.randn_like(out), qs, ks, vs, out, lse, 0.0, True)


def key_ends(mask: torch.Tensor) -> tuple[int, ...]:
    """For each block of queries, one past the last key any of them attends to."""
    return tuple(int(mask[b:b + BLOCK].any(0).nonzero().max()) + 1 for b in range(0, mask.shape[0], BLOCK))


def blocked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor,
                      ends: tuple[int, ...]) -> torch.Tensor:
    """Attention as matmuls and a softmax, over blocks of queries, each against the keys up to ``ends``."""
    repeat = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(repeat, 1), v.repeat_interleave(repeat, 1)
    outs = []
    for block, keys in enumerate(ends):
        begin = block * BLOCK
        end = min(begin + BLOCK, q.shape[2])
        scores = (q[:, :, begin:end] @ k[:, :, :keys].transpose(-1, -2)).float() * HEAD_DIM ** -0.5
        scores = scores.masked_fill(~mask[begin:end, :keys], float("-inf"))
        outs.append(torch.softmax(scores, -1).to(v.dtype) @ v[:, :, :keys])
    return torch.cat(outs, 2)


def compiled(layer: Layer, fn: Callable) -> None:
    q, k, v = layer.leaves()
    fn(q, k, v, layer.mask, key_ends(layer.mask)).backward(layer.grad)


def flex(layer: Layer) -> Optional[Callable[[], None]]:
    """The flex_attention run, or None where torch has no CPU backward for it."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    mask = layer.mask
    block_mask = create_block_mask(lambda b, h, qi, ki: mask[qi, ki], None, None, *mask.shape, device="cpu")
    fn = torch.compile(flex_attention)

    def run() -> None:
        q, k, v = layer.leaves()
        fn(q, k, v, block_mask=block_mask, enable_gqa=True).backward(layer.grad)

    try:
        run()
    except NotImplementedError as exc:
        print(f"flex: {str(exc).splitlines()[0]}")
        return None
    return run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompt", type=int, default=1650)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    layer = Layer(args.prompt)
    flops = layer.useful_flops()
    compiled_fn = torch.compile(blocked_attention)
    runs = {"by_parts": lambda: by_parts(layer), "split": lambda: split(layer),
            "compiled": lambda: compiled(layer, compiled_fn), "flex": flex(layer)}
    times = {name: best(fn, args.repeats) for name, fn in runs.items() if fn is not None}
    peak = matmul_peak("bfloat16")
    print(f"one layer, prompt {args.prompt} + responses {list(RESPONSES)}, {args.threads} threads; "
          f"{flops / 1e9:.2f} GFLOP forward + backward; bf16 matmul peak {peak:.0f} GFLOP/s (same run)")
    print(f"{'kernel':<10} {'time':>9} {'GFLOP/s':>8} {'of peak':>8} {'by_parts / it':>14}")
    at_peak = flops / (peak * 1e9)
    for name, seconds in times.items():
        rate = flops / seconds / 1e9
        print(f"{name:<10} {seconds * 1e3:7.1f}ms {rate:8.0f} {rate / peak:8.2f} {times['by_parts'] / seconds:13.2f}x")
    print(f"{'at peak':<10} {at_peak * 1e3:7.1f}ms {peak:8.0f} {1:8.2f} {times['by_parts'] / at_peak:13.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
