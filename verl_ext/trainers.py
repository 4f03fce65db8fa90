"""Which verl trainer runs a config: ``agent_tune.trainer`` names it, with verl's own names.

- ``main_ppo`` (default): ``verl.trainer.main_ppo`` (the v1 trainer when ``trainer.use_v1``; its
  ``trainer.v1.trainer_mode`` picks ``sync``, ``colocate_async`` or ``separate_async``);
- ``one_step_off_policy``: ``verl.experimental.one_step_off_policy`` (rollout of step k+1 overlaps the update
  of step k; rollout and training in separate resource pools);
- ``fully_async_policy``: ``verl.experimental.fully_async_policy`` (a rollouter streams samples to a
  trainer through a message queue; staleness bounded by ``async_training.staleness_threshold``, parameter
  sync every ``async_training.trigger_parameter_sync_step`` steps, interrupted generations resumed when
  ``async_training.partial_rollout``).

For the two experimental trainers :func:`run_trainer` does what their Hydra ``main`` does after composing
(copy ``rollout.nnodes/n_gpus_per_node`` into ``actor_rollout_ref.rollout``, verl's legacy-reward migration
for ``fully_async_policy``) and runs verl's ``run_ppo`` with their task runner. The configs under
``config/async/`` hold what each needs (verl's required settings, truncated importance sampling, the
staleness bound); :func:`check_trainer` fails at start-up, naming the key, on a config they cannot run.
"""

from __future__ import annotations

import logging
from typing import Callable, get_args

from omegaconf import DictConfig, OmegaConf, open_dict

from agent_tune.options import TrainerName, options_of

TRAINERS = get_args(TrainerName)  # agent_tune.trainer's choices, written once (agent_tune/options.py)
MAIN_PPO, ONE_STEP_OFF, FULLY_ASYNC = TRAINERS
SEPARATE_POOL_TRAINERS = (ONE_STEP_OFF, FULLY_ASYNC)

logger = logging.getLogger(__name__)


def trainer_name(config: DictConfig) -> str:
    """``agent_tune.trainer`` (``main_ppo`` when absent)."""
    return options_of(config).trainer or MAIN_PPO


def check_trainer(config: DictConfig) -> str:
    """The trainer's name, after checking the config has what that trainer needs.

    Raises:
        ValueError: naming the key (a missing ``rollout`` pool or ``async_training``
            section, the colocated ``naive`` weight sync or hybrid engine for a separate-pool trainer, a
            fully-async batch size other than verl's or ``multi_turn.enable`` off, which would replace the
            rows' agent loop).
    """
    name = trainer_name(config)  # one of TRAINERS: the typed block refuses another
    if name not in SEPARATE_POOL_TRAINERS:
        return name
    for key in ("rollout.nnodes", "rollout.n_gpus_per_node"):
        value = OmegaConf.select(config, key, default=None)
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"config key '{key}': {name} runs rollout in its own resource pool; set a "
                             f"positive size (config/async/{name}.yaml does), got {value!r}")
    if OmegaConf.select(config, "actor_rollout_ref.hybrid_engine", default=True):
        raise ValueError(f"config key 'actor_rollout_ref.hybrid_engine': {name} needs false (rollout and "
                         "training are separate)")
    backend = OmegaConf.select(config, "actor_rollout_ref.rollout.checkpoint_engine.backend", default="naive")
    if backend == "naive":
        raise ValueError(f"config key 'actor_rollout_ref.rollout.checkpoint_engine.backend': {name} moves weights "
                         "between pools; 'naive' only works colocated (nccl on GPUs, cpu_tcp on CPU)")
    if OmegaConf.select(config, "trainer.device") == "cpu" and backend != "cpu_tcp":
        raise ValueError(f"config key 'actor_rollout_ref.rollout.checkpoint_engine.backend': {backend!r} needs "
                         "accelerators; on CPU use cpu_tcp (verl_ext/cpu/checkpoint_engine.py)")
    if name == FULLY_ASYNC:
        if OmegaConf.select(config, "async_training", default=None) is None:
            raise ValueError("config key 'async_training': fully_async_policy needs it "
                             "(config/async/fully_async_policy.yaml)")
        if not OmegaConf.select(config, "actor_rollout_ref.rollout.multi_turn.enable", default=False):
            raise ValueError("config key 'actor_rollout_ref.rollout.multi_turn.enable': fully_async_policy needs "
                             "true, or verl's rollouter plays every row with its single_turn_agent instead of the "
                             "row's agent loop (config/async/fully_async_policy.yaml sets it)")
        # verl's rollouter asserts both: it feeds one prompt at a time, and a step is
        # ppo_mini_batch_size x async_training.require_batches prompts
        for key, want in (("data.train_batch_size", 0), ("data.gen_batch_size", 1)):
            value = OmegaConf.select(config, key, default=None)
            if value != want:
                raise ValueError(f"config key '{key}': fully_async_policy needs {want}, got {value!r} (a step "
                                 "is actor_rollout_ref.actor.ppo_mini_batch_size x async_training.require_batches "
                                 "prompts; config/async/fully_async_policy.yaml sets it)")
    return name


def prepare_config(config: DictConfig, name: str) -> DictConfig:
    """What verl's experimental ``main`` functions do to the composed config before ``run_ppo``."""
    if name not in SEPARATE_POOL_TRAINERS:
        return config
    with open_dict(config):
        config.actor_rollout_ref.rollout.nnodes = config.rollout.nnodes
        config.actor_rollout_ref.rollout.n_gpus_per_node = config.rollout.n_gpus_per_node
        if name == ONE_STEP_OFF and OmegaConf.select(config, "trainer.rollout_data_dir", default=None):
            # verl 0.9.1: OneStepOffRayTrainer never creates the thread pool its rollout dump uses
            # (`_init_dump_executor`, which RayPPOTrainer and the fully-async trainer call), so any
            # rollout_data_dir fails the first step with AttributeError '_dump_executor' (measured)
            logger.warning("one_step_off_policy: trainer.rollout_data_dir=%s dropped (verl's one-step trainer "
                           "cannot dump rollouts); agent_tune.dump_rollouts_dir still works",
                           config.trainer.rollout_data_dir)
            config.trainer.rollout_data_dir = None
    if name == FULLY_ASYNC:
        from verl.experimental.reward_loop import migrate_legacy_reward_impl

        config = migrate_legacy_reward_impl(config)
    return config


def run_trainer(config: DictConfig, name: str, wrap_runner: Callable[[type], type] | None = None) -> None:
    """Run trainer ``name`` (checked by :func:`check_trainer`) on ``config`` (prepared by
    :func:`prepare_config`): what ``python -m <verl main>`` does after Hydra. verl's ``run_ppo`` starts or
    joins Ray. ``wrap_runner`` subclasses the synchronous trainers' task runner (the task weighting's
    sampler; :func:`agent_tune.launch.train.validate` refuses it for the asynchronous ones)."""
    from verl.trainer import main_ppo

    if name == ONE_STEP_OFF:
        from verl.experimental.one_step_off_policy.main_ppo import OneStepTaskRunner as runner
    elif name == FULLY_ASYNC:
        from verl.experimental.fully_async_policy.fully_async_main import FullyAsyncTaskRunner as runner
    elif config.trainer.use_v1:
        runner = main_ppo.TaskRunnerV1
    else:
        from verl.trainer.main_ppo_v0 import TaskRunner as runner
    if wrap_runner is not None:
        runner = wrap_runner(runner)
    main_ppo.run_ppo(config, task_runner_class=runner)
