"""Did vLLM sample with the trained LoRA adapter? Score each step's rollout tokens with the base model and
with the merged checkpoints, and compare with the log-probs vLLM sampled them with.

A GRPO run with ``+lora=grpo trainer.save_freq=1 agent_tune.dump_rollouts_dir=DIR
agent_tune.dump_rollout_tokens=true`` dumps every episode with its tokens, the log-probs vLLM sampled them
with and the trainer step, and saves a checkpoint after every step. Then

    python -m agent_tune.testing.lora_sync_check --dump DIR --model BASE_DIR --temperature 0.7 \
        --checkpoint 1=RUN/global_step_1/actor [--checkpoint 2=...] [--metrics RUN/verl_metrics.jsonl]

prints, per trainer step, the mean and largest absolute difference between vLLM's log-probs and those of

- ``base``: the base model (Hugging Face, fp32, logits divided by the sampling temperature as verl does);
- ``base~bf16``: the base model with its weights rounded to bf16: verl 0.9.1's merged-weight sync
  (``lora.merge=true``, ``_merged_lora_per_tensor_param``) sends bf16 tensors, so an fp32 vLLM on CPU holds
  bf16-rounded weights, also before the first update (the rollout starts from dummy weights and the first
  sync sends base + the identity adapter);
- ``merged@N~bf16``: the checkpoint saved after step N (its FSDP model shard read in fp32: base weights
  and adapter), merged as PEFT merges (``W + alpha/r * B @ A``) and rounded to bf16: what vLLM must hold
  for step N + 1's rollouts if the sync after step N reached it.

At step 1 vLLM must match ``base~bf16`` (the adapter is still the identity: LoRA's B starts at zero); at
step N + 1 it must match ``merged@N~bf16`` and no longer ``base~bf16``. For each checkpoint it also prints
how far its base weights are from ``--model`` (0: only the adapter trained) and the size of the adapter's
B matrices (0 before training). With ``--metrics`` it prints verl's per-step ``actor/ppo_kl``,
``actor/pg_loss``, ``actor/grad_norm``. (Not in CI; verl's model merger is not used: it writes bf16.)
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
from collections import defaultdict
from typing import Any


def policy_logprobs(model: Any, ids: list[int], n_prompt: int, mask: list[int], temperature: float) -> list[float]:
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


def rounded_bf16(model: Any) -> Any:
    """``model`` (in place) with every parameter rounded to bf16 and kept in fp32."""
    import torch

    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))
    return model


def load_episodes(dump: str) -> dict[int, list[dict[str, Any]]]:
    """The dumped episodes with tokens, by trainer step."""
    by_step: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for path in sorted(glob.glob(os.path.join(dump, "rollouts-*.jsonl"))):
        for line in open(path, encoding="utf-8"):
            rec = json.loads(line)
            if "response_ids" in rec and rec.get("global_steps") is not None:
                by_step[int(rec["global_steps"])].append(rec)
    return by_step


def merged_model(base_dir: str, actor_dir: str) -> tuple[Any, dict[str, float]]:
    """The base model with the checkpoint's weights and adapter merged in fp32; and facts about them."""
    import torch
    from transformers import AutoModelForCausalLM

    meta = json.load(open(os.path.join(actor_dir, "lora_train_meta.json"), encoding="utf-8"))
    scale = float(meta["lora_alpha"]) / float(meta["r"])
    [shard] = glob.glob(os.path.join(actor_dir, "model_world_size_1_rank_0.pt"))  # one FSDP process (CPU)
    raw = torch.load(shard, map_location="cpu", weights_only=False)
    sd = {k.removeprefix("base_model.model."): getattr(v, "_local_tensor", v).float() for k, v in raw.items()}
    model = AutoModelForCausalLM.from_pretrained(base_dir, torch_dtype=torch.float32)
    ref = {k: v.detach() for k, v in model.state_dict().items()}
    merged, base_diff, b_abs = {}, 0.0, []
    for key, value in sd.items():
        if ".lora_" in key:
            continue
        name = key.replace(".base_layer.", ".")
        if ".base_layer." in key:
            stem = key.rsplit(".base_layer.", 1)[0]
            a, b = sd[f"{stem}.lora_A.default.weight"], sd[f"{stem}.lora_B.default.weight"]
            b_abs.append(b.abs())
            merged[name] = value + scale * (b @ a)
        else:
            merged[name] = value
        base_diff = max(base_diff, float((value - ref[name]).abs().max()))
    missing, unexpected = model.load_state_dict(merged, strict=False)
    if unexpected or [k for k in missing if k != "lm_head.weight"]:  # lm_head: tied to the embedding
        raise ValueError(f"{shard}: missing {missing}, unexpected {unexpected}")
    facts = {"base_vs_model_max_abs": base_diff, "lora_B_max_abs": max(float(x.max()) for x in b_abs),
             "lora_B_mean_abs": statistics.fmean(float(x.mean()) for x in b_abs), "adapted_modules": len(b_abs)}
    return model.eval(), facts


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--dump", required=True, help="agent_tune.dump_rollouts_dir of the run")
    p.add_argument("--model", required=True, help="the base model's Hugging Face folder")
    p.add_argument("--temperature", type=float, default=1.0, help="the rollout's sampling temperature")
    p.add_argument("--checkpoint", action="append", default=[], metavar="N=ACTOR_DIR",
                   help="RUN/global_step_N/actor: the checkpoint saved after step N (repeatable)")
    p.add_argument("--metrics", default=None, help="the run's verl_metrics.jsonl (prints actor/ppo_kl per step)")
    p.add_argument("--max-episodes", type=int, default=8, help="episodes scored per step")
    args = p.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(os.cpu_count() or 1)
    by_step = load_episodes(args.dump)
    if not by_step:
        print(f"no dumped episodes with tokens in {args.dump}", file=sys.stderr)
        return 1
    scorers: dict[str, Any] = {
        "base": AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.float32).eval(),
        "base~bf16": rounded_bf16(AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.float32)).eval(),
    }
    for spec in args.checkpoint:
        step, _, actor_dir = spec.partition("=")
        model, facts = merged_model(args.model, actor_dir)
        scorers[f"merged@{int(step)}~bf16"] = rounded_bf16(model)
        print(f"checkpoint after step {step} ({actor_dir}): " + ", ".join(f"{k} {v:.3g}" for k, v in facts.items()))

    print("step  episodes  policy_tokens  " + "  ".join(f"{name:>28}" for name in scorers))
    print(" " * 31 + "  ".join(f"{'mean|vllm-x|  max|vllm-x|':>28}" for _ in scorers))
    for step in sorted(by_step):
        recs = by_step[step][: args.max_episodes]
        cells, n_tokens = [], 0
        for name, model in scorers.items():
            diffs = []
            for rec in recs:
                ids = rec["prompt_ids"] + rec["response_ids"]
                lp = policy_logprobs(model, ids, len(rec["prompt_ids"]), rec["response_mask"], args.temperature)
                vllm = [x for x, m in zip(rec["response_logprobs"], rec["response_mask"]) if m]
                diffs += [abs(a - b) for a, b in zip(vllm, lp)]
            n_tokens = len(diffs)
            cells.append(f"{statistics.fmean(diffs):>13.6f}  {max(diffs):>13.6f}")
        print(f"{step:>4}  {len(recs):>8}  {n_tokens:>13}  " + "  ".join(cells))
    if args.metrics:
        for line in open(args.metrics, encoding="utf-8"):
            m = json.loads(line)
            m = {**m.get("data", {}), "step": m.get("step")}  # verl's file logger: {"step", "data"}
            keys = ("actor/ppo_kl", "actor/pg_loss", "actor/grad_norm", "actor/pg_clipfrac")
            shown = ", ".join(f"{k} {m[k]:.3g}" for k in keys if isinstance(m.get(k), (int, float)))
            print(f"step {m.get('step')}: {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
