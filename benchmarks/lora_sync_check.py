"""Did vLLM sample with the trained LoRA adapter? Compare each step's rollout log-probs with the base model's.

A GRPO run with ``+lora=grpo agent_tune.dump_rollouts_dir=DIR agent_tune.dump_rollout_tokens=true`` dumps
every episode with its tokens and the log-probs vLLM sampled them with. This script scores the same policy
tokens with the base model alone (Hugging Face, fp32, logits divided by the sampling temperature as verl's
trainer does) and prints, per trainer step, the mean absolute difference between vLLM's log-probs and the
base model's. At step 1 the adapter is still the identity (LoRA's B starts at zero), so vLLM must match the
base model (~1e-5); after an update vLLM serves the updated adapter, so its log-probs move away from the
base model's. With ``--metrics`` (the run's verl_metrics.jsonl) it also prints verl's ``actor/ppo_kl``: in
bypass mode that is the KL between vLLM's log-probs and the trainer's adapter before the step's update, ~0
when vLLM holds the trainer's current adapter. (Not in CI.)

    python benchmarks/lora_sync_check.py --dump DIR --model MODEL_DIR --temperature 0.7 [--metrics FILE]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
from collections import defaultdict


def policy_logprobs(model, ids: list[int], n_prompt: int, mask: list[int], temperature: float) -> list[float]:
    """The model's log-probs of the mask-1 response tokens of ``ids`` (prompt ``n_prompt`` tokens long)."""
    import torch

    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float() / temperature
        logp = torch.log_softmax(logits, dim=-1)
    out = []
    for j, m in enumerate(mask):
        if m:
            pos = n_prompt + j
            out.append(float(logp[pos - 1, ids[pos]]))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dump", required=True, help="agent_tune.dump_rollouts_dir of the run")
    p.add_argument("--model", required=True, help="the base model's Hugging Face folder")
    p.add_argument("--temperature", type=float, default=1.0, help="the rollout's sampling temperature")
    p.add_argument("--metrics", default=None, help="the run's verl_metrics.jsonl (prints actor/ppo_kl per step)")
    p.add_argument("--max-episodes", type=int, default=8, help="episodes scored per step")
    args = p.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(os.cpu_count() or 1)
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.float32).eval()
    by_step: dict[int, list[dict]] = defaultdict(list)
    for path in sorted(glob.glob(os.path.join(args.dump, "rollouts-*.jsonl"))):
        for line in open(path, encoding="utf-8"):
            rec = json.loads(line)
            if "response_ids" in rec and rec.get("global_steps") is not None:
                by_step[int(rec["global_steps"])].append(rec)
    if not by_step:
        print(f"no dumped episodes with tokens in {args.dump}", file=sys.stderr)
        return 1
    print("step  episodes  policy_tokens  mean|vllm-base|  max|vllm-base|")
    for step in sorted(by_step):
        diffs = []
        for rec in by_step[step][: args.max_episodes]:
            ids = rec["prompt_ids"] + rec["response_ids"]
            base = policy_logprobs(model, ids, len(rec["prompt_ids"]), rec["response_mask"], args.temperature)
            vllm = [lp for lp, m in zip(rec["response_logprobs"], rec["response_mask"]) if m]
            diffs += [abs(a - b) for a, b in zip(vllm, base)]
        n = min(len(by_step[step]), args.max_episodes)
        print(f"{step:>4}  {n:>8}  {len(diffs):>13}  {statistics.fmean(diffs):>15.6f}  {max(diffs):>14.6f}")
    if args.metrics:
        for line in open(args.metrics, encoding="utf-8"):
            m = json.loads(line)
            m = {**m.get("data", {}), "step": m.get("step")}  # verl's file logger: {"step", "data"}
            keys = ("actor/ppo_kl", "actor/pg_clipfrac", "actor/grad_norm", "actor/pg_loss")
            shown = ", ".join(f"{k} {m[k]:.3g}" for k in keys if isinstance(m.get(k), (int, float)))
            print(f"step {m.get('step')}: {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
