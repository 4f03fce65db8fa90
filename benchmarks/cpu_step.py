"""Where one step of the CPU main job goes, and how close its update comes to this machine's matmul peaks.

Runs the main job (``agent-tune train --config-name agent_tune_bfcl_cpu``, the README's command: BFCL
train_base rows with 3 worked examples, 2 prompts x 4 samples, SmolLM2-135M) for ``--steps`` steps with a
checkpoint at the last, once per ``--variant`` (``current``: the config as it is; ``unpacked``: verl's own
update path, without shared-prefix packing, one sample per micro batch; ``fp32_ckpt``: the earlier
setting, fp32 compute with gradient checkpointing; ``one_thread``: the update's worker on one torch
thread, as Ray's default left it), one after the other on the same data; then
measures this machine's fp32 and bf16 matmul peaks (2048 x 2048, torch's threads) in the same process.

Per variant, the mean over its steps of verl's timings (``<run>/verl_metrics.jsonl``):

- ``generation`` (``timing_s/gen``: the rollouts through vLLM and the agent loop), ``old log-probs``
  (``old_log_prob``: none in bypass mode), ``reference`` (``ref``: none without a KL term), ``update`` (actor
  forward + backward + optimizer, ``timing_s/update_actor``), ``weight sync`` (``update_weights``),
  ``checkpoint save`` (``save_checkpoint``: only the last step saves, so the mean is half of it over 2
  steps) and ``the rest`` (the step minus those: reward, advantages, metrics, data);
- the update split by its FLOPs: the real tokens' forward and backward, the forward recomputed by
  gradient checkpointing, and the padding verl's engine adds when a micro batch holds sequences of
  different lengths (it pads to the longest; one sequence per micro batch pads nothing). Per-sample token
  counts come from the agent loop's episode records (``<run>/samples``), micro batches from the config;
- achieved FLOP/s of the update = (forward + backward + recompute + padding FLOPs) / update time, as a
  fraction of the measured fp32 and bf16 matmul peaks. With shared-prefix packing the FLOPs are those it
  computes (:func:`packed_flops`: each group's prompt once, the head on response positions). FLOPs per
  token: 2 x the matmul parameters (attention and MLP projections, lm_head) forward, x3 for forward +
  backward, plus causal attention (2 x layers x hidden x length per token forward).

Then each variant's step, update and generation time against the first variant's, as ratios, and the
actor/vLLM log-prob gap (``actor/ppo_kl``: in bypass mode the first mini batch's mean log pi_rollout - log
pi_theta, before any update) and the learning signal (calls, pg_loss, groups with signal).

Not part of CI (each variant ~10-20 min on 2 cores); heavy: run it alone.

    python benchmarks/cpu_step.py [--variant current fp32_ckpt] [--steps 2] [--work /tmp/cpu_step] \
        [--reuse] [hydra overrides for every variant ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

REPO = Path(__file__).resolve().parents[1]
# the update's path before shared-prefix packing: verl's engine as it is, one sample per micro batch
UNPACKED = ["agent_tune.cpu_shared_prefix=false", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1", "trainer.balance_batch=true"]
VARIANTS = {
    "current": [],
    "unpacked": UNPACKED,
    "fp32_ckpt": ["agent_tune.cpu_precision=fp32", "actor_rollout_ref.model.enable_gradient_checkpointing=true"],
    "fp32": ["agent_tune.cpu_precision=fp32"],
    "bf16_ckpt": ["actor_rollout_ref.model.enable_gradient_checkpointing=true"],
    # the update on one core, as Ray's OMP_NUM_THREADS=1 left it before the engine set the thread count
    "one_thread": ["agent_tune.cpu_threads=1"],
}
TIMERS = (("generation", "gen"), ("old log-probs", "old_log_prob"), ("reference", "ref"),
          ("update", "update_actor"), ("weight sync", "update_weights"), ("checkpoint save", "save_checkpoint"))


def build_data(out: Path, shots: int = 3) -> Path:
    """The main job's BFCL splits, built once."""
    if not (out / "train_base.parquet").is_file():
        subprocess.run([sys.executable, str(REPO / "data_preprocess" / "bfcl.py"), "--out", str(out),
                        "--shots", str(shots)], cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    return out


def train(run: Path, data: Path, steps: int, overrides: Sequence[str]) -> float:
    """One main-job run into ``run`` (from scratch); its wall time."""
    cmd = [sys.executable, "-m", "agent_tune.launch.train", "--config-name", "agent_tune_bfcl_cpu",
           f"data.train_files={data / 'train_base.parquet'}", f"data.val_files={data / 'val.parquet'}",
           f"trainer.default_local_dir={run}", f"trainer.total_training_steps={steps}", f"trainer.save_freq={steps}",
           "trainer.resume_mode=disable", *overrides]
    print(f"[{run.name}] {' '.join(cmd[2:])}", flush=True)
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=REPO)
    if proc.returncode != 0:
        raise SystemExit(f"[{run.name}] training exited {proc.returncode}; see {run / 'train.log'}")
    return time.monotonic() - started


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def model_flops(config: dict) -> tuple[float, float]:
    """(matmul FLOPs per token forward, attention FLOPs per token per context token forward) of a decoder."""
    h, layers, ff, vocab = (config["hidden_size"], config["num_hidden_layers"], config["intermediate_size"],
                            config["vocab_size"])
    kv = h // config["num_attention_heads"] * config.get("num_key_value_heads", config["num_attention_heads"])
    per_layer = h * h * 2 + h * kv * 2 + 3 * h * ff  # q, o; k, v; gate, up, down
    return 2.0 * (layers * per_layer + h * vocab), 2.0 * 2 * layers * h  # QK^T and AV: 2 x 2 x h per pair


def packed_flops(groups: dict[str, list[tuple[int, int]]], config: dict) -> float:
    """Forward FLOPs of shared-prefix packing (verl_ext/cpu/shared_prefix.py) as it computes them: one row
    per group (prompt once, then the responses) through the layers, the head only on the response
    positions, attention over the prompt's causal half plus every response query against the whole row."""
    dense, attention = model_flops(config)
    head = 2.0 * config["hidden_size"] * config["vocab_size"]
    total = 0.0
    for members in groups.values():
        prompt = members[0][0]
        responses = sum(r for _, r in members)
        row = prompt + responses
        if len(members) == 1:  # a causal row
            total += (dense - head) * row + head * responses + attention * row * (row + 1) / 2
        else:
            total += ((dense - head) * row + head * responses
                      + attention * (prompt * (prompt + 1) / 2 + responses * row))
    return total


def update_flops(lengths: list[int], micro: int, config: dict, recompute: bool) -> dict[str, float]:
    """The update's FLOPs on verl's own path, split into real tokens (forward + backward), recompute and
    padding."""
    dense, attention = model_flops(config)

    def forward(length: int) -> float:  # causal attention: token i attends to i + 1 tokens
        return dense * length + attention * length * (length + 1) / 2

    real = sum(forward(n) for n in lengths)
    padded = 0.0
    for start in range(0, len(lengths), micro):
        group = lengths[start:start + micro]
        padded += len(group) * forward(max(group))
    pad = padded - real
    return {"real": 3 * real, "recompute": padded if recompute else 0.0, "padding": 3 * pad}


def matmul_peak(dtype_name: str, n: int = 2048, repeats: int = 10) -> float:
    """GFLOP/s of an n x n matmul in ``dtype_name`` (best of ``repeats``)."""
    import torch

    dtype = getattr(torch, dtype_name)
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - started)
    return 2 * n ** 3 / best / 1e9


def summarize(run: Path, wall: float | None) -> dict:
    """One run's per-step breakdown (means over its steps) from its files."""
    from omegaconf import OmegaConf

    config = OmegaConf.load(run / "train_config.yaml")
    model = json.loads((Path(config.actor_rollout_ref.model.path) / "config.json").read_text())
    steps = [r for r in read_jsonl(run / "verl_metrics.jsonl") if "timing_s/step" in r.get("data", r)]
    steps = [r.get("data", r) for r in steps]
    if not steps:
        raise SystemExit(f"no step metrics in {run / 'verl_metrics.jsonl'}")
    rows = read_jsonl(run / "metrics.jsonl")
    samples = [s for path in sorted((run / "samples").glob("samples-*.jsonl")) for s in read_jsonl(path)]
    micro = int(config.actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu)
    recompute = bool(config.actor_rollout_ref.model.enable_gradient_checkpointing)
    packed = bool(config.actor_rollout_ref.actor.fsdp_config.get("shared_prefix", False))
    out: dict = {"steps": len(steps), "wall_s": wall, "precision": str(config.actor_rollout_ref.rollout.dtype),
                 "checkpointing": recompute, "micro_batch": micro, "shared_prefix": packed}
    step_time = statistics.mean(s["timing_s/step"] for s in steps)
    out["step"] = step_time
    named = 0.0
    for label, key in TIMERS:
        value = sum(s.get(f"timing_s/{key}", 0.0) for s in steps) / len(steps)
        out[label] = value
        named += value
    out["the rest"] = step_time - named  # reward, advantages, metrics, data
    flops = {"real": 0.0, "recompute": 0.0, "padding": 0.0}
    for step in sorted({s.get("global_steps") for s in samples if s.get("global_steps") is not None}):
        mine = [s for s in samples if s.get("global_steps") == step and "prompt_length" in s]
        if packed:  # one micro batch per group (the main job's settings)
            groups: dict[str, list[tuple[int, int]]] = {}
            for s in mine:
                groups.setdefault(str(s.get("group")), []).append((int(s["prompt_length"]),
                                                                    int(s["response_length"])))
            flops["real"] += 3 * packed_flops(groups, model) / len(steps)
            continue
        lengths = [int(s["prompt_length"]) + int(s["response_length"]) for s in mine]
        for key, value in update_flops(lengths, micro, model, recompute).items():
            flops[key] += value / len(steps)
    total = sum(flops.values())
    out["update_flops"] = flops
    out["update_gflops_per_s"] = total / out["update"] / 1e9 if out["update"] and total else None
    for key, value in flops.items():
        out[f"update: {key}"] = out["update"] * value / total if total else None
    out["tokens_per_step"] = statistics.mean(s.get("perf/total_num_tokens", 0) for s in steps)
    out["ppo_kl"] = [s.get("actor/ppo_kl") for s in steps]
    out["pg_loss"] = [r.get("pg_loss") for r in rows]
    out["groups_with_signal"] = [r.get("groups_with_signal") for r in rows]
    out["tool_calls"] = sum(s.get("num_calls", 0) for s in samples)
    out["reward"] = [r.get("reward") for r in rows]
    return out


def fmt(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:.1f}{unit}"


def report(results: dict[str, dict], peaks: dict[str, float]) -> None:
    names = list(results)
    first = results[names[0]]
    print(f"\nmatmul peaks (2048 x 2048, this machine): fp32 {peaks['float32']:.0f} GFLOP/s, "
          f"bf16 {peaks['bfloat16']:.0f} GFLOP/s (bf16/fp32 {peaks['bfloat16'] / peaks['float32']:.2f}x)")
    for name, r in results.items():
        print(f"\n== {name}: vLLM {r['precision']}, gradient checkpointing {r['checkpointing']}, micro batch "
              f"{r['micro_batch']}, shared-prefix packing {r.get('shared_prefix')}, {r['steps']} steps, "
              f"{r['tokens_per_step']:.0f} tokens/step")
        print(f"  {'part (mean per step)':<28}{'s':>8}{'share':>8}")
        parts = [label for label, _ in TIMERS] + ["the rest"]
        for label in parts:
            print(f"  {label:<28}{r[label]:>8.1f}{r[label] / r['step']:>8.0%}")
            if label == "update":
                for key in ("real", "recompute", "padding"):
                    value = r[f"update: {key}"]
                    if value is not None:
                        print(f"    {'of which ' + key:<26}{value:>8.1f}{value / r['step']:>8.0%}")
        print(f"  {'step':<28}{r['step']:>8.1f}")
        achieved = r["update_gflops_per_s"]
        if achieved:
            print(f"  update FLOPs (as computed) {sum(r['update_flops'].values()) / 1e12:.2f} TFLOP/step")
            print(f"  update achieved {achieved:.1f} GFLOP/s = {achieved / peaks['float32']:.2f} of the fp32 peak, "
                  f"{achieved / peaks['bfloat16']:.2f} of the bf16 peak")
        print(f"  actor/vLLM log-prob gap (actor/ppo_kl per step): {r['ppo_kl']}")
        print(f"  learning signal: {r['tool_calls']} tool calls, pg_loss {r['pg_loss']}, groups_with_signal "
              f"{r['groups_with_signal']}, reward {r['reward']}")
    if len(names) > 1:
        print(f"\n{'ratio to ' + names[0]:<24}" + "".join(f"{n:>14}" for n in names[1:]))
        for label in ("step", "generation", "old log-probs", "reference", "update", "weight sync", "checkpoint save",
                      "the rest"):
            cells = "".join(f"{results[n][label] / first[label]:>13.2f}x" if first[label] else f"{'-':>14}"
                            for n in names[1:])
            print(f"{label:<24}{cells}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", nargs="+", default=["current"], choices=sorted(VARIANTS),
                        help="configs to run, the first is the reference of the ratios")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--work", type=Path, default=Path("/tmp/cpu_step"))
    parser.add_argument("--reuse", action="store_true", help="report on runs already in --work, train nothing")
    parser.add_argument("overrides", nargs="*", help="hydra overrides for every variant")
    args = parser.parse_args(argv)
    data = build_data(args.work / "data")
    results = {}
    for name in args.variant:
        run = args.work / name
        wall = None if args.reuse else train(run, data, args.steps, [*VARIANTS[name], *args.overrides])
        results[name] = summarize(run, wall)
    peaks = {name: matmul_peak(name) for name in ("float32", "bfloat16")}
    report(results, peaks)
    (args.work / "summary.json").write_text(json.dumps({"peaks": peaks, "runs": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
