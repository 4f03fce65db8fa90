"""Selecting verl's trainers by name: start-up checks, the shipped async configs, the config preparation."""

from __future__ import annotations

import pytest

pytest.importorskip("verl")

from omegaconf import OmegaConf  # noqa: E402

from agent_tune.errors import ConfigError  # noqa: E402
from agent_tune.launch.compose import compose_config  # noqa: E402
from agent_tune.launch.run_config import RunConfig  # noqa: E402
from agent_tune.launch.train import validate  # noqa: E402
from verl_ext.trainers import (  # noqa: E402
    FULLY_ASYNC,
    MAIN_PPO,
    ONE_STEP_OFF,
    check_trainer,
    prepare_config,
    trainer_name,
)


def _compose(*overrides: str):
    return compose_config("agent_tune_bfcl_cpu", list(overrides))


def test_default_is_verls_main_ppo() -> None:
    config = _compose()
    assert trainer_name(config) == MAIN_PPO and check_trainer(config) == MAIN_PPO


@pytest.mark.parametrize("recipe, name", [("one_step_off_policy_cpu", ONE_STEP_OFF),
                                          ("fully_async_policy_cpu", FULLY_ASYNC)])
def test_cpu_async_recipes_select_verls_trainer(recipe: str, name: str) -> None:
    config = _compose(f"+async={recipe}")
    assert check_trainer(config) == name
    # truncated importance sampling on off-policy samples; a separate rollout pool with a CPU weight sync
    rc = config.algorithm.rollout_correction
    assert (rc.rollout_is, rc.rollout_is_threshold, rc.bypass_mode, rc.loss_type) == ("token", 2.0, True, "reinforce")
    assert config.actor_rollout_ref.rollout.checkpoint_engine.backend == "cpu_tcp"
    assert config.ray_kwargs.ray_init.num_gpus == config.trainer.n_gpus_per_node + config.rollout.n_gpus_per_node
    prepared = prepare_config(config, name)
    assert prepared.actor_rollout_ref.rollout.nnodes == 1 and prepared.actor_rollout_ref.rollout.n_gpus_per_node == 1
    validate(RunConfig.parse(prepared))  # verl's own validate_config and the rollout/algorithm dataclasses accept it


def test_fully_async_exposes_verls_staleness_bound() -> None:
    config = _compose("+async=fully_async_policy_cpu", "async_training.staleness_threshold=0.25")
    assert config.async_training.staleness_threshold == 0.25 and config.async_training.partial_rollout is True


def test_colocate_async_is_a_v1_mode() -> None:
    config = _compose("+async=colocate_async")
    assert check_trainer(config) == MAIN_PPO
    assert config.trainer.v1.trainer_mode == "colocate_async"
    assert config.trainer.v1.sampler.max_off_policy_threshold == 2
    validate(RunConfig.parse(config))


@pytest.mark.parametrize("overrides, key", [
    (["+agent_tune.trainer=fast_policy"], "agent_tune.trainer"),
    (["+async=one_step_off_policy_cpu", "actor_rollout_ref.rollout.checkpoint_engine.backend=naive"],
     "checkpoint_engine.backend"),
    (["+async=one_step_off_policy_cpu", "actor_rollout_ref.rollout.checkpoint_engine.backend=nccl"],
     "checkpoint_engine.backend"),
    (["+async=one_step_off_policy_cpu", "actor_rollout_ref.hybrid_engine=true"], "actor_rollout_ref.hybrid_engine"),
    (["+async=one_step_off_policy_cpu", "rollout.n_gpus_per_node=0"], "rollout.n_gpus_per_node"),
    (["+async=fully_async_policy_cpu", "data.train_batch_size=2"], "data.train_batch_size"),
    (["+async=fully_async_policy_cpu", "actor_rollout_ref.rollout.multi_turn.enable=false"],
     "actor_rollout_ref.rollout.multi_turn.enable"),
])
def test_bad_async_config_fails_at_start_up_naming_the_key(overrides: list[str], key: str) -> None:
    config = _compose(*overrides)
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        validate(RunConfig.parse(config))


def test_fully_async_needs_its_section() -> None:
    config = _compose("+async=one_step_off_policy_cpu")
    OmegaConf.update(config, "agent_tune.trainer", FULLY_ASYNC)
    with pytest.raises(ValueError, match="'async_training'"):
        check_trainer(config)


def test_one_step_off_drops_verls_rollout_dump() -> None:
    # verl 0.9.1's OneStepOffRayTrainer has no dump executor: a rollout_data_dir failed its first step
    config = prepare_config(_compose("+async=one_step_off_policy_cpu", "trainer.rollout_data_dir=/tmp/x"),
                            ONE_STEP_OFF)
    assert config.trainer.rollout_data_dir is None
    kept = prepare_config(_compose("+async=fully_async_policy_cpu", "trainer.rollout_data_dir=/tmp/x"), FULLY_ASYNC)
    assert kept.trainer.rollout_data_dir == "/tmp/x"


def test_fully_async_validates_its_step_batch_and_keeps_verls_zero() -> None:
    config = _compose("+async=fully_async_policy_cpu")
    # verl's validate_config refuses a zero batch; it sees ppo_mini_batch_size x require_batches prompts
    validate(RunConfig.parse(config))
    assert config.data.train_batch_size == 0 and config.data.gen_batch_size == 1  # what verl's rollouter asserts
