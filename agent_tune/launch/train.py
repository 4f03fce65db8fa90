"""``agent-tune train``: compose a Hydra config from ``config/`` and run verl's PPO/GRPO trainer.

    agent-tune train --config-name agent_tune_grpo_cpu data.train_files=... trainer.total_training_steps=2

The command line, the start-up phases (config, install check, data files, the ``smollm2`` model alias),
the training child and the exit codes are the launcher skeleton's (:mod:`agent_tune.launch.launcher`,
shared with ``agent-tune sft``); the default config is ``agent_tune_grpo``.

The training child (``--_child``; the config it runs is saved to
``<trainer.default_local_dir>/train_config.yaml``) appends its whole output (verl, Ray's forwarded worker
logs, vLLM) to ``<trainer.default_local_dir>/train.log``. It runs :func:`run`: for ``trainer.device=cpu``
it loads agent-tune's CPU support into verl (:mod:`verl_ext.cpu.launch`), checks the config as verl will
read it (:func:`validate`), runs verl's own ``main_ppo`` task (what ``python -m verl.trainer.main_ppo`` does
after Hydra; or verl's one-step-off-policy / fully-async trainer when ``agent_tune.trainer`` names one,
:mod:`verl_ext.trainers`) while writing the per-step ``metrics.jsonl`` (:mod:`agent_tune.launch.step_metrics`)
and, on CPU, removes the shared-memory files the run left in ``/dev/shm``. Meanwhile the launcher shows the
phases the log passes (Ray, vLLM, first step), one progress line per step with rate and ETA, and at the end
where the metrics, checkpoints and log are, or the error found in the log; the child's exit code is the
launcher's (:mod:`agent_tune.launch.console`). ``--verbose`` or ``agent_tune.console=verbose`` also
streams the log live.
"""

from __future__ import annotations

import copy
import logging
import sys
from pathlib import Path
from typing import Sequence

from omegaconf import DictConfig, OmegaConf, open_dict

import verl_ext
from agent_tune.errors import ConfigError
from agent_tune.launch.attention import check_attention
from agent_tune.launch.batch_split import check_batch_split
from agent_tune.launch.compose import describe_config_error
from agent_tune.launch.launcher import Child, Launcher, run_dir
from agent_tune.options import AgentTuneOptions, TaskWeightingConfig, parse_options
from agent_tune.utils.typed_config import OptionError, check_arguments

logger = logging.getLogger("agent_tune.launch.train")  # also when run as __main__

MODEL_KEYS = ("actor_rollout_ref.model.path", "actor_rollout_ref.model.tokenizer_path", "critic.model.path")
CHILD_CONFIG = "train_config.yaml"
TRAIN_LOG = "train.log"


def validate(config: DictConfig) -> None:
    """Start-up checks, so that mistakes fail before Ray and the models start.

    Checks the ``agent_tune`` block (:func:`check_options`: every key typed by :mod:`agent_tune.options`), that a
    step's batch splits over the data-parallel ranks (:func:`agent_tune.launch.batch_split.check_batch_split`), runs
    verl's own ``validate_config`` and builds the rollout and algorithm dataclasses (which reject unknown fields
    and bad values) on the composed config, then checks the environments' options (:func:`check_env_kwargs`).
    """
    from hydra.errors import HydraException
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    on_cpu = OmegaConf.select(config, "trainer.device") == "cpu"
    if on_cpu and OmegaConf.select(config, "actor_rollout_ref.actor.strategy") == "fsdp":
        raise ConfigError("config key 'actor_rollout_ref.actor.strategy': FSDP1 needs CUDA; use fsdp2 on CPU")
    options = check_options(config)
    check_attention(config)
    if on_cpu and need_reference_policy(config):
        key = next((k for k in ("algorithm.use_kl_in_reward", "actor_rollout_ref.actor.use_kl_loss")
                    if OmegaConf.select(config, k, default=False)), "actor_rollout_ref.ref")
        raise ConfigError(
            f"config key '{key}': needs a reference policy, which verl cannot build on CPU (its FSDP engine "
            "shards a forward-only model under CPUOffloadPolicy(pin_memory=True), and pinning memory needs an "
            "accelerator: verl/workers/engine/fsdp/transformer_impl.py); set it to false on CPU")
    # before verl's own checks, which skip the batch sizes when use_dynamic_bsz is on (the GPU configs)
    check_batch_split(_step_batch_view(config), use_critic=need_critic(config))
    try:
        validate_config(
            config=_step_batch_view(config), use_reference_policy=need_reference_policy(config),
            use_critic=need_critic(config)
        )
        for key in ("actor_rollout_ref.rollout", "algorithm"):
            omega_conf_to_dataclass(OmegaConf.select(config, key))
    except HydraException as exc:  # a dataclass rejecting a field: the message names the section
        raise ConfigError(describe_config_error(exc)) from exc
    except (AssertionError, ValueError, TypeError, KeyError) as exc:
        raise ConfigError(f"invalid config: {exc}") from exc
    check_env_kwargs(config, options)
    from agent_tune.launch.lora import check_lora
    from verl_ext.trainers import SEPARATE_POOL_TRAINERS, check_trainer

    check_lora(config.actor_rollout_ref.model, "actor_rollout_ref.model", rollout=True)
    try:
        trainer = check_trainer(config)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    if options.task_weighting.enable and trainer in SEPARATE_POOL_TRAINERS:
        raise ConfigError(f"config key 'agent_tune.task_weighting.enable': not supported with agent_tune.trainer="
                          f"{trainer} (the task weighting's sampler plugs into the synchronous trainers)")


def _step_batch_view(config: DictConfig) -> DictConfig:
    """``config`` as verl's ``validate_config`` reads it. verl's fully-async trainer takes
    ``data.train_batch_size=0`` (its rollouter feeds prompts one by one) and trains on
    ``ppo_mini_batch_size x async_training.require_batches`` prompts a step; its own ``main`` skips
    ``validate_config``, which would refuse a zero batch. The checks then see that step batch."""
    from verl_ext.trainers import FULLY_ASYNC, trainer_name

    if trainer_name(config) != FULLY_ASYNC or OmegaConf.select(config, "data.train_batch_size") != 0:
        return config
    view = copy.deepcopy(config)
    mini = int(OmegaConf.select(view, "actor_rollout_ref.actor.ppo_mini_batch_size"))
    batches = int(OmegaConf.select(view, "async_training.require_batches", default=1))
    OmegaConf.update(view, "data.train_batch_size", mini * batches)
    return view


def check_options(config: DictConfig) -> AgentTuneOptions:
    """The ``agent_tune`` block as the agent loop and the launchers read it (:func:`agent_tune.options.parse_options`,
    which also checks ``worker_gc`` and ``task_weighting``): an unknown key or a bad value raises a
    :class:`~agent_tune.errors.ConfigError` naming ``agent_tune.<key>``."""
    return parse_options(OmegaConf.select(config, "agent_tune", default=None))


def check_task_weighting(config: DictConfig) -> TaskWeightingConfig:
    """``agent_tune.task_weighting`` (:class:`agent_tune.options.TaskWeightingConfig`), checked with the whole
    block (:func:`check_options`)."""
    return check_options(config).task_weighting


def check_env_kwargs(config: DictConfig, options: AgentTuneOptions | None = None) -> None:
    """Each ``agent_tune.env_kwargs`` entry, with the parsers the agent loop adds, as its environment class
    checks it: each value against the constructor's annotation (:func:`agent_tune.options.check_arguments`, also
    for envs whose own ``check_kwargs`` does not call ``BaseToolEnv``'s), then ``check_kwargs``. A bad reward
    option fails here, not in a rollout worker, naming ``agent_tune.env_kwargs.<env>.<option>`` when the type
    check finds it."""
    options = options if options is not None else check_options(config)
    if not options.env_kwargs:
        return
    from agent_tune.envs import get_env_class
    from verl_ext.agent_loop import env_kwargs_for

    for name in options.env_kwargs:
        key = f"agent_tune.env_kwargs.{name}"
        try:
            env_class = get_env_class(name)
            kwargs = env_kwargs_for(name, {}, options)
            check_arguments(env_class.__init__, kwargs)
            env_class.check_kwargs(kwargs)
        except OptionError as exc:  # keyed by the constructor parameter
            raise ConfigError(str(exc.under(key))) from exc
        except (KeyError, ValueError) as exc:
            raise ConfigError(f"config key '{key}': {exc}") from exc


AGENT_LOOPS_YAML = Path(verl_ext.__file__).resolve().with_name("agent_loops.yaml")  # agent-tune's loops


def prepare_outputs(config: DictConfig) -> tuple[Path, Path, Path]:
    """Fill in agent-tune's defaults for where a run writes, and return (verl log, rollout dir, metrics file).

    - ``actor_rollout_ref.rollout.agent.agent_loop_config_path``: agent-tune's loops (``agent_tune``),
      unless the config names another file;
    - ``trainer.rollout_data_dir``: ``<trainer.default_local_dir>/rollouts`` (verl dumps every step's
      samples there);
    - ``trainer.logger`` gains verl's ``file`` logger, written to ``<default_local_dir>/verl_metrics.jsonl``;
    - ``agent_tune.sample_metrics_dir``: ``<default_local_dir>/samples`` (the agent loop's per-episode records);
    - ``agent_tune.metrics_file``: ``<default_local_dir>/metrics.jsonl`` (see :mod:`agent_tune.launch.step_metrics`).
    """
    out = run_dir(config)
    with open_dict(config):
        if not OmegaConf.select(config, "actor_rollout_ref.rollout.agent.agent_loop_config_path", default=None):
            OmegaConf.update(config, "actor_rollout_ref.rollout.agent.agent_loop_config_path", str(AGENT_LOOPS_YAML))
        if not OmegaConf.select(config, "trainer.rollout_data_dir", default=None):
            OmegaConf.update(config, "trainer.rollout_data_dir", str(out / "rollouts"))
        loggers = OmegaConf.select(config, "trainer.logger")
        loggers = [loggers] if isinstance(loggers, str) else list(loggers or [])
        if "file" not in loggers:
            OmegaConf.update(config, "trainer.logger", loggers + ["file"], merge=False)
        if not OmegaConf.select(config, "agent_tune.sample_metrics_dir", default=None):
            OmegaConf.update(config, "agent_tune.sample_metrics_dir", str(out / "samples"), force_add=True)
        if not OmegaConf.select(config, "agent_tune.metrics_file", default=None):
            OmegaConf.update(config, "agent_tune.metrics_file", str(out / "metrics.jsonl"), force_add=True)
        verl_log = out / "verl_metrics.jsonl"
        # verl's file logger takes its path from this variable (read in the trainer process)
        existing = OmegaConf.select(config, "ray_kwargs.ray_init.runtime_env.env_vars", default=None)
        env_vars = OmegaConf.to_container(existing, resolve=True) if existing else {}
        env_vars["VERL_FILE_LOGGER_PATH"] = str(verl_log)
        OmegaConf.update(config, "ray_kwargs.ray_init.runtime_env.env_vars", env_vars, force_add=True, merge=False)
    out.mkdir(parents=True, exist_ok=True)
    return verl_log, Path(config.agent_tune.sample_metrics_dir), Path(config.agent_tune.metrics_file)


def run(config: DictConfig) -> None:
    """Run verl's PPO task on a composed config in this process (what verl's ``main_ppo.main`` does after
    Hydra); the training child of ``agent-tune train`` calls this."""
    from agent_tune.launch.step_metrics import StepMetricsWriter, follow, wait_stop

    on_cpu = OmegaConf.select(config, "trainer.device") == "cpu"
    verl_log, samples_dir, metrics_file = prepare_outputs(config)
    snapshot = None
    if on_cpu:
        from verl_ext.cpu.launch import enable_cpu_support
        from verl_ext.cpu.shm import ShmSnapshot

        enable_cpu_support(config)
        if OmegaConf.select(config, "agent_tune.cleanup_shm", default=True):
            snapshot = ShmSnapshot.take()

    import ray
    from verl.utils.device import auto_set_device

    from agent_tune.launch.cluster import check_cluster, prepare_for_cluster
    from agent_tune.launch.debug_modes import prepare_debug
    from verl_ext.trainers import check_trainer, prepare_config, run_trainer

    auto_set_device(config)
    address = prepare_for_cluster(config)
    try:
        trainer = check_trainer(config)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    config = prepare_config(config, trainer)
    prepare_debug(config)  # agent_tune.debug: rollout-only / replay (agent_tune/launch/debug_modes.py)
    validate(config)
    if address is not None:
        try:
            check_cluster(config, address)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
    thread, stop = follow(StepMetricsWriter(verl_log, samples_dir, metrics_file, new_records_only=True))
    logger.info("per-step metrics: %s", metrics_file)
    try:
        wrap = None
        if check_task_weighting(config).enable:
            from verl_ext.task_weighting_runner import task_runner_class as wrap
        run_trainer(config, trainer, wrap)
    finally:
        wait_stop(thread, stop)
        if ray.is_initialized():
            ray.shutdown()
        if snapshot is not None:
            removed = snapshot.cleanup()
            if removed:
                logger.info("removed %d shared-memory files left in %s", len(removed), snapshot.directory)


class TrainLauncher(Launcher):
    """``agent-tune train``: the skeleton's start-up, then :func:`run` in the child, followed by
    :func:`agent_tune.launch.console.watch` on the log and ``metrics.jsonl``."""

    command = "train"
    description = "Run verl GRPO with an agent-tune Hydra config. Overrides: key=value, +key=value, ~key."
    default_config_name = "agent_tune_grpo"
    module = "agent_tune.launch.train"
    child_config = CHILD_CONFIG
    log_name = TRAIN_LOG
    model_keys = MODEL_KEYS
    start_note = "; Ray, the models and vLLM start next"

    def follow(self, child: Child, verbose: bool) -> int:
        from agent_tune.launch.console import RunFiles, watch

        metrics = Path(OmegaConf.select(child.config, "agent_tune.metrics_file", default=None)
                       or child.run_dir / "metrics.jsonl")
        files = RunFiles(log=child.log_path, metrics=metrics, checkpoints=child.run_dir,
                         val_metrics=metrics.with_name("val_metrics.jsonl"))
        return watch(child.proc, files, total_steps=OmegaConf.select(child.config, "trainer.total_training_steps",
                                                                     default=None),
                     verbose=verbose, echo=sys.stdout, log_offset=child.log_offset, started=child.started,
                     stop_requested=child.stop_requested)

    def run_child(self, config: DictConfig) -> None:
        OmegaConf.set_struct(config, True)
        run(config)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``agent-tune train``; returns the process exit code."""
    return TrainLauncher().main(argv)


if __name__ == "__main__":
    sys.exit(main())
