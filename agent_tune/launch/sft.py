"""``agent-tune sft``: compose a Hydra config from ``config/`` and run verl's own SFT trainer (FSDP).

    agent-tune sft --config-name agent_tune_sft_cpu data.train_files=data/sft_synth/train.parquet

The rows are multi-turn tool conversations rendered by :class:`verl_ext.sft_dataset.AgentTuneSFTDataset`
(``data.custom_cls``), token for token as the RL rollout holds the same conversation; the loss is on the
assistant tokens only (verl's ``sft_loss`` on the loss mask).

The command line, the start-up phases (config, install check, data files, ``model.path=smollm2``), the
training child and the exit codes are the launcher skeleton's (:mod:`agent_tune.launch.launcher`, shared
with ``agent-tune train``; the default config is ``agent_tune_sft``); then :func:`validate` checks what
agent-tune's dataset and this launcher support. The child is verl's trainer under ``torchrun`` (one process
per GPU of ``trainer.n_gpus_per_node``, one process on CPU, where it first loads agent-tune's CPU support:
:mod:`verl_ext.cpu.launch`), with a step budget the data cannot fill lowered to what its epochs hold
(:mod:`verl_ext.sft_trainer`). Its whole output goes to ``<trainer.default_local_dir>/sft.log``; the console
shows the data report (rows rendered, rows skipped with their row ids and reasons), one line per step with
the loss, and at the end the checkpoint and its Hugging Face folder (``global_step_<N>/huggingface``: the
``actor_rollout_ref.model.path`` of a GRPO run; with LoRA, the command that exports the base model and the
adapter with verl's model merger). Per-step metrics are appended to
``<trainer.default_local_dir>/sft_metrics.jsonl``. Running the same command again resumes from the latest
checkpoint (``trainer.resume_mode=auto``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from pathlib import Path
from typing import IO, Sequence

from omegaconf import DictConfig, OmegaConf

from agent_tune.errors import ConfigError
from agent_tune.launch.launcher import Child, Launcher
from agent_tune.launch.run_config import RunConfig
from agent_tune.utils.logs import PREFIX

logger = logging.getLogger("agent_tune.launch.sft")

MODEL_KEYS = ("model.path", "model.tokenizer_path")
CHILD_CONFIG = "sft_config.yaml"
SFT_LOG = "sft.log"
METRICS_FILE = "sft_metrics.jsonl"
# verl's console logger: "step:3 - train/loss:1.234 - train/grad_norm:5.6 - ...", often right after tqdm's
# progress bar on the same line
_STEP_LINE = re.compile(r"(?<![\w/])step:(\d+) - (.*)$")
_SHOWN = ("SFT rows:", "  skipped row", "  ... and ", "SFT steps:")
_STEPS_LINE = re.compile(r"SFT steps: (\d+) ")  # verl_ext.sft_trainer's line when it lowers the budget


def validate(config: DictConfig) -> None:
    """Start-up checks, naming the key: verl's engine/optimizer/checkpoint dataclasses, and what
    agent-tune's dataset and this launcher support."""
    from hydra.errors import HydraException
    from verl.utils.config import omega_conf_to_dataclass

    from verl_ext.sft_dataset import BAD_ROWS, PAD_MODES, SFTDatasetError, observation_pattern

    if not config.data.get("train_files"):
        raise ConfigError("config key 'data.train_files': missing (the SFT conversations, .parquet or .jsonl)")
    for key in ("engine", "optim", "checkpoint"):
        try:
            omega_conf_to_dataclass(config[key])
        except HydraException as exc:
            raise ConfigError(f"config key '{key}': {exc}") from exc
        except (AssertionError, ValueError, TypeError) as exc:
            raise ConfigError(f"config key '{key}': {exc}") from exc
    data = config.data
    if data.get("truncation") != "error":
        raise ConfigError(f"config key 'data.truncation': {data.get('truncation')!r}; agent-tune never truncates "
                          "SFT rows (set 'error'; data.bad_rows decides what happens to long rows)")
    if data.get("pad_mode") not in PAD_MODES:
        raise ConfigError(f"config key 'data.pad_mode': {data.get('pad_mode')!r}, expected one of {PAD_MODES}")
    if data.get("bad_rows", "skip") not in BAD_ROWS:
        raise ConfigError(f"config key 'data.bad_rows': {data.get('bad_rows')!r}, expected one of {BAD_ROWS}")
    try:
        observation_pattern(data)
    except SFTDatasetError as exc:
        raise ConfigError(str(exc)) from exc
    if int(data.max_length) <= 0:
        raise ConfigError(f"config key 'data.max_length': must be positive, got {data.max_length}")
    if int(config.trainer.nnodes) != 1:
        raise ConfigError("config key 'trainer.nnodes': agent-tune sft runs on one node (start verl's "
                          "sft_trainer with torchrun yourself for more)")
    world = 1 if config.trainer.device == "cpu" else int(config.trainer.n_gpus_per_node)
    if int(data.train_batch_size) % world:
        raise ConfigError(f"config key 'data.train_batch_size': {data.train_batch_size} is not divisible by "
                          f"the {world} processes")
    if config.trainer.device == "cpu" and config.engine.strategy == "fsdp":
        raise ConfigError("config key 'engine.strategy': FSDP1 needs CUDA; use fsdp2 on CPU")
    from agent_tune.launch.lora import check_lora

    check_lora(config.model, "model")


def parse_step_line(line: str) -> dict[str, float] | None:
    """verl's console line for a step as ``{"step": N, "train/loss": ..., ...}``; ``None`` for other lines."""
    m = _STEP_LINE.search(line.strip())
    if not m:
        return None
    record: dict[str, float] = {"step": int(m.group(1))}
    for part in m.group(2).split(" - "):
        key, _, value = part.partition(":")
        try:
            record[key.strip()] = float(value)
        except ValueError:
            continue
    return record


def step_summary(record: dict[str, float], total: int | None) -> str:
    """``step 3/8: loss 1.2345, grad_norm 5.67, lr 1e-04``."""
    parts = [f"loss {record['train/loss']:.4f}"] if "train/loss" in record else []
    if "train/grad_norm" in record:
        parts.append(f"grad_norm {record['train/grad_norm']:.3g}")
    if "train/lr" in record:
        parts.append(f"lr {record['train/lr']:.3g}")
    of = f"/{total}" if total else ""
    return f"step {int(record['step'])}{of}: " + ", ".join(parts)


def _shown(piece: str) -> str | None:
    """The data report's text in a line of the child's output (the dataset logs it: ``[agent-tune] SFT rows: ...``),
    or None when the line is not part of it."""
    text = piece[len(PREFIX) + 1:] if piece.startswith(PREFIX + " ") else piece
    return text if text.startswith(_SHOWN) else None


def follow(stream: IO[str], log: IO[str], metrics: Path, total: int | None, verbose: bool, echo: IO[str]) -> None:
    """Copy the child's output to the log; show the data report and a line per step; append step metrics."""
    for line in stream:
        log.write(line)
        log.flush()
        if verbose:
            echo.write(line)
        for piece in line.split("\r"):  # tqdm's progress bar shares lines with verl's step lines
            record = parse_step_line(piece)
            if record is not None:
                with metrics.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(record) + "\n")
                if not verbose:
                    echo.write(step_summary(record, total) + "\n")
            elif (shown := _shown(piece)) is not None:
                budget = _STEPS_LINE.match(shown)
                if budget:  # the trainer lowered the step budget to what the data holds
                    total = int(budget.group(1))
                if not verbose:
                    echo.write(shown if shown.endswith("\n") else shown + "\n")
        echo.flush()


def lora_export_hint(ckpt: Path) -> str:
    """How to hand a LoRA checkpoint to GRPO: verl's model merger writes the base model and the adapter."""
    export = ckpt / "lora_export"
    return (f"LoRA adapter export: python -m verl.model_merger merge --backend fsdp --local_dir {ckpt} "
            f"--target_dir {export}\n  then GRPO with +lora=grpo actor_rollout_ref.model.path={export} "
            f"actor_rollout_ref.model.lora_adapter_path={export}/lora_adapter (docs/lora.md)\n")


def latest_checkpoint(out: Path) -> Path | None:
    """The ``global_step_<N>`` folder with the largest N, if any."""
    steps = [(int(p.name.rsplit("_", 1)[1]), p) for p in out.glob("global_step_*")
             if p.name.rsplit("_", 1)[1].isdigit()]
    return max(steps)[1] if steps else None


class SFTLauncher(Launcher):
    """``agent-tune sft``: the skeleton's start-up and :func:`validate`, then verl's SFT trainer under
    torchrun, its output read line by line (:func:`follow`), and the checkpoint reported at the end."""

    command = "sft"
    description = ("Multi-turn SFT with verl's SFT trainer on an agent-tune Hydra config. "
                   "Overrides: key=value, +key=value, ~key.")
    examples = (
        "agent-tune sft-data --format rlla_sft rlla.jsonl data/sft/train.parquet      (rows from other projects' data)",
        "agent-tune sft --config-name agent_tune_sft_cpu data.train_files=data/sft/train.parquet "
        "data.val_files=data/sft/train.parquet --dry-run",
    )
    default_config_name = "agent_tune_sft"
    module = "agent_tune.launch.sft"
    child_config = CHILD_CONFIG
    log_name = SFT_LOG
    model_keys = MODEL_KEYS
    pipe_output = True

    def check(self, run: RunConfig) -> RunConfig:
        validate(run.config)
        return run

    def child_command(self, run: RunConfig, config_file: Path) -> list[str]:
        """``torchrun`` on one node: one process per GPU, one on CPU."""
        nproc = 1 if run.on_cpu else int(run.config.trainer.n_gpus_per_node)
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes=1",
                f"--nproc_per_node={nproc}", *super().child_command(run, config_file)[1:]]

    def child_environment(self, run: RunConfig) -> dict[str, str]:
        """Ours, unbuffered, plus agent-tune's CPU support for ``trainer.device=cpu``."""
        env = super().child_environment(run)
        if run.on_cpu:
            from verl_ext.cpu.launch import cpu_environment

            env.update(cpu_environment(env))
            env.setdefault("OMP_NUM_THREADS", str(os.cpu_count() or 1))
        return env

    def follow(self, child: Child, verbose: bool) -> int:
        from agent_tune.launch.console import describe_exit, exit_status, failure_excerpt

        echo = sys.stdout
        total = child.run.total_steps
        try:
            follow(child.proc.stdout, child.log, child.run_dir / METRICS_FILE, total, verbose, echo)
        finally:
            rc = child.proc.wait()
        if rc != 0:
            with child.log_path.open(encoding="utf-8", errors="replace") as f:
                f.seek(child.log_offset)
                tail = f.read().splitlines()
            stopped = " (stopped on request)" if child.stop_requested() else ""
            echo.write(f"agent-tune sft: training failed ({describe_exit(rc)}){stopped}:\n"
                       + "\n".join(failure_excerpt(tail, limit=30)) + f"\nfull log: {child.log_path}\n")
            echo.flush()
            return exit_status(rc)
        ckpt = latest_checkpoint(child.run_dir)
        if ckpt is not None:
            hf = ckpt / "huggingface"
            echo.write(f"checkpoint: {ckpt}\n")
            if int(OmegaConf.select(child.run.config, "model.lora_rank", default=0) or 0) > 0:
                echo.write(lora_export_hint(ckpt))
            elif (hf / "config.json").is_file():
                echo.write(f"Hugging Face folder (actor_rollout_ref.model.path for GRPO): {hf}\n")
        echo.write(f"per-step metrics: {child.run_dir / METRICS_FILE}; full log: {child.log_path}\n")
        echo.flush()
        return 0

    def run_child(self, config: DictConfig) -> None:
        """One torchrun process: verl's SFT trainer on the saved config."""
        if config.trainer.device == "cpu":
            from verl_ext.cpu.launch import enable_cpu_support

            enable_cpu_support(config)
        from verl.utils.device import auto_set_device

        from verl_ext.sft_trainer import run_sft

        auto_set_device(config)
        run_sft(config)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``agent-tune sft``; returns the process exit code."""
    return SFTLauncher().main(argv)


if __name__ == "__main__":
    sys.exit(main())
