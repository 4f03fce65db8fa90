"""``agent-tune train``: compose a Hydra config from ``config/`` and run verl's PPO/GRPO trainer.

    agent-tune train --config-name agent_tune_grpo_cpu data.train_files=... trainer.total_training_steps=2

The command line, the start-up phases (config, install check, data files, the ``smollm2`` model alias),
the training child and the exit codes are the launcher skeleton's (:mod:`agent_tune.launch.launcher`,
shared with ``agent-tune sft``); the default config is ``agent_tune_grpo``.

The command's own start-up check (:meth:`TrainLauncher.check`, the last phase of the skeleton's pipeline, also
run on every stage of ``agent-tune curriculum``) prepares the parsed run (:func:`prepare`: where it writes, the
trainer's and the debugging mode's settings) and checks it as verl will read it (:func:`validate`). The
training child (``--_child``) runs that prepared config, saved to
``<trainer.default_local_dir>/train_config.yaml``, and appends its whole output (verl, Ray's forwarded worker
logs, vLLM) to ``<trainer.default_local_dir>/train.log``. It runs :func:`run`: for ``trainer.device=cpu`` it
loads agent-tune's CPU support into verl (:mod:`verl_ext.cpu.launch`), runs verl's own ``main_ppo`` task (what
``python -m verl.trainer.main_ppo`` does after Hydra; or verl's one-step-off-policy / fully-async trainer when
``agent_tune.trainer`` names one, :mod:`verl_ext.trainers`) while writing the per-step ``metrics.jsonl``
(:mod:`agent_tune.launch.step_metrics`), watching the run's Ray actors (:mod:`agent_tune.launch.watchdog`: one
that dies stops the run, named in the log) and, on CPU, removes the shared-memory files the run left in
``/dev/shm``. Meanwhile the launcher shows the
phases the log passes (Ray, vLLM, first step), one progress line per step with rate and ETA, and at the end
where the metrics, checkpoints and log are, or the error found in the log; the child's exit code is the
launcher's (:mod:`agent_tune.launch.console`). ``--verbose`` or ``agent_tune.console=verbose`` also
streams the log live.
"""

from __future__ import annotations

import contextlib
import copy
import io
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from omegaconf import DictConfig, OmegaConf, open_dict

import verl_ext
from agent_tune.errors import ConfigError
from agent_tune.launch.attention import check_attention
from agent_tune.launch.batch_split import check_batch_split, need_critic
from agent_tune.launch.compose import describe_config_error
from agent_tune.launch.launcher import Child, Launcher
from agent_tune.launch.run_config import RunConfig
from agent_tune.options import AgentTuneOptions
from agent_tune.rollout.records import EPISODES_DIR
from agent_tune.utils.typed_config import OptionError, check_arguments

if TYPE_CHECKING:
    from verl_ext.cpu.shm import ShmSnapshot

logger = logging.getLogger("agent_tune.launch.train")  # also when run as __main__

MODEL_KEYS = ("actor_rollout_ref.model.path", "actor_rollout_ref.model.tokenizer_path", "critic.model.path")
CHILD_CONFIG = "train_config.yaml"
TRAIN_LOG = "train.log"


def validate(run: RunConfig) -> None:
    """Start-up checks, so that mistakes fail before Ray and the models start.

    The ``agent_tune`` block is typed already (:class:`RunConfig` parsed it). Checks the attention choice, that a
    step's batch splits over the data-parallel ranks (:func:`agent_tune.launch.batch_split.check_batch_split`), runs
    verl's own ``validate_config`` and builds the rollout and algorithm dataclasses (which reject unknown fields
    and bad values) on the composed config, then the environments' options (:func:`check_env_kwargs`), LoRA and
    the trainer's needs.
    """
    from hydra.errors import HydraException
    from verl.trainer.ppo.utils import need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    config, options = run.config, run.options
    on_cpu = run.on_cpu
    if on_cpu and OmegaConf.select(config, "actor_rollout_ref.actor.strategy") == "fsdp":
        raise ConfigError("config key 'actor_rollout_ref.actor.strategy': FSDP1 needs CUDA; use fsdp2 on CPU")
    check_attention(config, options.attention_fallback)
    use_critic = need_critic(config)  # verl's answer without its GRPO warning
    # before verl's own checks, which skip the batch sizes when use_dynamic_bsz is on (the GPU configs)
    check_batch_split(_step_batch_view(run), use_critic=use_critic)
    try:
        with contextlib.redirect_stdout(io.StringIO()) as said:  # verl prints "All configuration checks passed"
            validate_config(config=_step_batch_view(run), use_reference_policy=need_reference_policy(config),
                            use_critic=use_critic)
        logger.debug("%s", said.getvalue().strip())
        for key in ("actor_rollout_ref.rollout", "algorithm"):
            omega_conf_to_dataclass(OmegaConf.select(config, key))
    except HydraException as exc:  # a dataclass rejecting a field: the message names the section
        raise ConfigError(describe_config_error(exc)) from exc
    except (AssertionError, ValueError, TypeError, KeyError) as exc:
        raise ConfigError(f"invalid config: {exc}") from exc
    check_env_kwargs(options)
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


def _step_batch_view(run: RunConfig) -> DictConfig:
    """``config`` as verl's ``validate_config`` reads it. verl's fully-async trainer takes
    ``data.train_batch_size=0`` (its rollouter feeds prompts one by one) and trains on
    ``ppo_mini_batch_size x async_training.require_batches`` prompts a step; its own ``main`` skips
    ``validate_config``, which would refuse a zero batch. The checks then see that step batch."""
    from verl_ext.trainers import FULLY_ASYNC

    config = run.config
    if run.options.trainer != FULLY_ASYNC or OmegaConf.select(config, "data.train_batch_size") != 0:
        return config
    view = copy.deepcopy(config)
    mini = int(OmegaConf.select(view, "actor_rollout_ref.actor.ppo_mini_batch_size"))
    batches = int(OmegaConf.select(view, "async_training.require_batches", default=1))
    OmegaConf.update(view, "data.train_batch_size", mini * batches)
    return view


def check_env_kwargs(options: AgentTuneOptions) -> None:
    """Each ``agent_tune.env_kwargs`` entry, with the parsers the agent loop adds, as its environment class
    checks it: each value against the constructor's annotation
    (:func:`~agent_tune.utils.typed_config.check_arguments`, also
    for envs whose own ``check_kwargs`` does not call ``BaseToolEnv``'s), then ``check_kwargs``. A bad reward
    option fails here, not in a rollout worker, naming ``agent_tune.env_kwargs.<env>.<option>`` when the type
    check finds it."""
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


VERL_LOG = "verl_metrics.jsonl"  # verl's file logger, in the run folder


def logger_locations(loggers: list[str], out: Path) -> dict[str, str]:
    """Where verl's own loggers named in ``trainer.logger`` write in the run folder ``out``, as the variables
    verl reads (``verl/utils/tracking.py``): ``tensorboard`` -> ``TENSORBOARD_DIR=<out>/tensorboard`` (verl's
    default is relative to the working directory), ``mlflow`` -> ``MLFLOW_TRACKING_URI=file:<out>/mlruns``
    (verl's default is a database in /tmp), ``wandb`` -> ``WANDB_DIR=<out>`` (``WANDB_MODE=offline`` keeps it
    off the network)."""
    where = {"tensorboard": ("TENSORBOARD_DIR", str(out / "tensorboard")),
             "mlflow": ("MLFLOW_TRACKING_URI", (out / "mlruns").as_uri()),
             "wandb": ("WANDB_DIR", str(out))}
    return dict(where[name] for name in loggers if name in where)


def prepare_outputs(run: RunConfig) -> RunConfig:
    """Fill in agent-tune's defaults for where a run writes (the launcher creates the run folder):

    - ``actor_rollout_ref.rollout.agent.agent_loop_config_path``: agent-tune's loops (``agent_tune``),
      unless the config names another file;
    - ``trainer.rollout_data_dir``: ``<trainer.default_local_dir>/rollouts`` (verl dumps every step's
      samples there);
    - ``trainer.logger`` gains verl's ``file`` logger, written to ``<default_local_dir>/verl_metrics.jsonl``;
      verl's ``tensorboard``, ``mlflow`` and ``wandb`` loggers, when named, write there too
      (:func:`logger_locations`);
    - ``agent_tune.sample_metrics_dir``: ``<default_local_dir>/samples`` (the agent loop's per-episode records);
    - ``agent_tune.metrics_file``: ``<default_local_dir>/metrics.jsonl`` (see :mod:`agent_tune.launch.step_metrics`);
    - ``agent_tune.episodes.dir``: ``<default_local_dir>/episodes`` (every episode's record,
      :mod:`agent_tune.rollout.records`).
    """
    config, out = run.config, run.run_dir
    with open_dict(config):
        OmegaConf.update(config, "trainer.default_local_dir", str(out), merge=False)
        if not OmegaConf.select(config, "actor_rollout_ref.rollout.agent.agent_loop_config_path", default=None):
            OmegaConf.update(config, "actor_rollout_ref.rollout.agent.agent_loop_config_path", str(AGENT_LOOPS_YAML))
        if not OmegaConf.select(config, "trainer.rollout_data_dir", default=None):
            OmegaConf.update(config, "trainer.rollout_data_dir", str(out / "rollouts"))
        loggers = OmegaConf.select(config, "trainer.logger")
        loggers = [loggers] if isinstance(loggers, str) else list(loggers or [])
        if "file" not in loggers:
            OmegaConf.update(config, "trainer.logger", loggers + ["file"], merge=False)
        # verl's loggers take their paths from these variables (read in the trainer process): its file logger
        # always writes to the run folder; tensorboard and mlflow do too, unless the user points them elsewhere
        existing = OmegaConf.select(config, "ray_kwargs.ray_init.runtime_env.env_vars", default=None)
        env_vars = OmegaConf.to_container(existing, resolve=True) if existing else {}
        env_vars["VERL_FILE_LOGGER_PATH"] = str(out / VERL_LOG)
        for variable, value in logger_locations(loggers, out).items():
            if variable not in env_vars and variable not in os.environ:
                env_vars[variable] = value
        OmegaConf.update(config, "ray_kwargs.ray_init.runtime_env.env_vars", env_vars, force_add=True, merge=False)
    episodes = run.options.episodes
    return run.set_options(sample_metrics_dir=run.options.sample_metrics_dir or str(out / "samples"),
                           metrics_file=run.options.metrics_file or str(out / "metrics.jsonl"),
                           episodes=episodes.model_copy(update={"dir": episodes.dir or str(out / EPISODES_DIR)}))


def prepare(run: RunConfig) -> RunConfig:
    """The run as its training child will run it: :func:`prepare_outputs`; a run joining a Ray cluster drops
    the local-only Ray options (:func:`agent_tune.launch.cluster.prepare_for_cluster`); the trainer checked and
    its settings made (:func:`verl_ext.trainers.check_trainer` / ``prepare_config``); the debugging mode's
    settings (:func:`agent_tune.launch.debug_modes.prepare_debug`). Raises :class:`ConfigError` naming the key."""
    from agent_tune.launch.cluster import prepare_for_cluster
    from agent_tune.launch.debug_modes import prepare_debug
    from verl_ext.trainers import check_trainer, prepare_config

    run = prepare_outputs(run)
    prepare_for_cluster(run.config)
    try:
        trainer = check_trainer(run.config)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    run = RunConfig(prepare_config(run.config, trainer), run.options)
    return prepare_debug(run)


def _end_and_clean_up(snapshot: ShmSnapshot, wait_s: float = 10.0) -> None:
    """After the run's shut-down: end the processes of the run that outlived it, then remove its ``/dev/shm``
    files. A survivor (a vLLM engine whose parent was killed, a Ray worker busy in C code) would die later, still
    holding files the clean-up must then leave. Ray's dashboard processes are usually still exiting here: ending
    them is routine, so it is not on the console."""
    from agent_tune.launch.lifeline import end_processes

    ended = end_processes(snapshot.live_processes())
    if ended:
        logger.debug("ended %d processes of the run still running after its shut-down", len(ended))
    removed = snapshot.cleanup(wait_s=wait_s)
    if removed:
        logger.info("removed %d shared-memory files left in %s", len(removed), snapshot.directory)


def run(config: DictConfig) -> None:
    """Run verl's PPO task on a config the launcher prepared and checked (:meth:`TrainLauncher.check`), in this
    process (what verl's ``main_ppo.main`` does after Hydra); the training child of ``agent-tune train``."""
    from agent_tune.launch.lifeline import GRACE_S as SHUTDOWN_S
    from agent_tune.launch.lifeline import deadline, shield_shutdown
    from agent_tune.launch.step_metrics import StepMetricsWriter, follow, wait_stop
    from agent_tune.launch.watchdog import RunWatchdog

    parsed = RunConfig.parse(config)
    options = parsed.options
    snapshot = None
    if parsed.on_cpu:
        from verl_ext.cpu.launch import enable_cpu_support
        from verl_ext.cpu.shm import ShmSnapshot

        enable_cpu_support(config)
        if options.cleanup_shm:  # only the files this run's processes hold: another run's are left alone
            from agent_tune.launch.lifeline import at_forced_exit

            snapshot = ShmSnapshot.take()
            snapshot.watch()
            at_forced_exit(lambda: _end_and_clean_up(snapshot, wait_s=5.0))  # a shut-down that hangs still cleans up

    import ray
    from verl.utils.device import auto_set_device

    from agent_tune.launch.cluster import check_cluster, cluster_address, job_actor_pids_here
    from verl_ext.trainers import MAIN_PPO, run_trainer

    auto_set_device(config)
    address = cluster_address(config)
    if address is not None:
        try:
            check_cluster(config, address)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
        if snapshot is not None:  # the run's actors here are the cluster's raylet's children: their files are the run's
            snapshot.roots_from = job_actor_pids_here
    metrics_file = Path(str(options.metrics_file))
    writer = StepMetricsWriter(parsed.run_dir / VERL_LOG, Path(str(options.sample_metrics_dir)), metrics_file,
                               new_records_only=True)
    thread, stop = follow(writer)
    logger.info("per-step metrics: %s", metrics_file)
    watchdog = RunWatchdog()  # a Ray actor of the run that dies stops the run, named in the log
    watchdog.start()
    failed = True
    try:
        wrap = None
        if options.task_weighting.enable:
            from verl_ext.task_weighting_runner import task_runner_class as wrap
        run_trainer(config, options.trainer or MAIN_PPO, wrap)
        failed = False
    finally:
        shield_shutdown()
        if failed:  # a failure or a stop (SIGTERM, Ctrl-C): Ray's teardown can hang on a dead part, so it is bounded
            deadline(SHUTDOWN_S, f"the run did not shut down within {int(SHUTDOWN_S)}s: exiting now", 1)
        watchdog.stop(failed)  # after a failure: names a dead actor the trainer ran into first
        wait_stop(thread, stop)
        if snapshot is not None:
            snapshot.observe()  # what the run's processes hold before Ray tears them down
        if ray.is_initialized():
            ray.shutdown()
            shield_shutdown()  # Ray's shut-down puts SIGTERM back to its default action: a late one would kill
            # the clean-up below
        if snapshot is not None:
            _end_and_clean_up(snapshot)


class TrainLauncher(Launcher):
    """``agent-tune train``: the skeleton's start-up, then :func:`run` in the child, followed by
    :func:`agent_tune.launch.console.watch` on the log and ``metrics.jsonl``."""

    command = "train"
    description = "Run verl GRPO with an agent-tune Hydra config. Overrides: key=value, +key=value, ~key."
    examples = (
        "agent-tune data --env bfcl --split train val --out data/bfcl      (the rows first)",
        "agent-tune train --config-name agent_tune_bfcl_cpu data.train_files=data/bfcl/train.parquet "
        "data.val_files=data/bfcl/val.parquet trainer.total_training_steps=2 --dry-run",
        "agent-tune train --config-name agent_tune_bfcl_cpu data.train_files=data/bfcl/train.parquet "
        "data.val_files=data/bfcl/val.parquet trainer.total_training_steps=2",
    )
    default_config_name = "agent_tune_grpo"
    module = "agent_tune.launch.train"
    child_config = CHILD_CONFIG
    log_name = TRAIN_LOG
    model_keys = MODEL_KEYS
    start_note = "; Ray, the models and vLLM start next"

    def check(self, run: RunConfig) -> RunConfig:
        """:func:`prepare`, then :func:`validate`: the child runs what passed."""
        run = prepare(run)
        validate(run)
        return run

    def follow(self, child: Child, verbose: bool) -> int:
        from agent_tune.launch.console import RunFiles, watch

        metrics = Path(str(child.run.options.metrics_file))
        files = RunFiles(log=child.log_path, metrics=metrics, checkpoints=child.run_dir,
                         val_metrics=metrics.with_name("val_metrics.jsonl"))
        return watch(child.proc, files, total_steps=child.run.total_steps,
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
