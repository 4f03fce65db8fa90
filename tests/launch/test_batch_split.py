"""A step's batch and each PPO mini-batch split evenly over the data-parallel ranks, checked at start-up."""

from __future__ import annotations

import pytest

pytest.importorskip("verl")
pytest.importorskip("hydra")

from agent_tune.errors import ConfigError  # noqa: E402
from agent_tune.launch import attention  # noqa: E402
from agent_tune.launch.batch_split import check_batch_split, data_parallel  # noqa: E402
from agent_tune.launch.compose import compose_config, default_config_dir  # noqa: E402
from agent_tune.launch.run_config import RunConfig  # noqa: E402
from agent_tune.launch.train import validate  # noqa: E402

# every shipped trainer config, GPU and CPU (the SFT ones are verl SFT-trainer configs without rollouts)
SHIPPED = sorted(p.stem for p in default_config_dir().glob("*.yaml") if not p.stem.startswith("agent_tune_sft"))


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_config_splits_evenly(name):
    config = compose_config(name)
    check_batch_split(config)
    dp = data_parallel(config, "actor_rollout_ref.actor").size
    n = config.actor_rollout_ref.rollout.n
    if config.data.train_batch_size:  # the fully-async configs feed prompts one by one (0)
        assert config.data.train_batch_size * n % dp == 0
    assert config.actor_rollout_ref.actor.ppo_mini_batch_size * n % dp == 0


def test_tau2_trains_on_four_gpus():
    config = compose_config("agent_tune_tau2")
    assert data_parallel(config, "actor_rollout_ref.actor").size == 4
    check_batch_split(config)
    with pytest.raises(ConfigError, match=r"'data.train_batch_size'=16 x 'actor_rollout_ref.rollout.n'=4 = 64"):
        check_batch_split(compose_config("agent_tune_tau2", ["trainer.n_gpus_per_node=6"]))


def test_bad_train_batch_names_the_key_with_dynamic_batch_size_on():
    config = compose_config("agent_tune_bfcl", ["data.train_batch_size=33", "actor_rollout_ref.rollout.n=3"])
    assert config.actor_rollout_ref.actor.use_dynamic_bsz is True  # verl's validate_config skips its check
    with pytest.raises(ConfigError) as err:
        check_batch_split(config)
    message = str(err.value)
    assert "'data.train_batch_size'=33 x 'actor_rollout_ref.rollout.n'=3 = 99 samples" in message
    assert "8 data-parallel ranks (trainer.n_gpus_per_node=8 x trainer.nnodes=1)" in message


def test_bad_mini_batch_names_the_key():
    config = compose_config("agent_tune_tau2", ["actor_rollout_ref.actor.ppo_mini_batch_size=3",
                                                "actor_rollout_ref.rollout.n=3"])
    check_batch_split(compose_config("agent_tune_tau2", ["actor_rollout_ref.rollout.n=3"]))  # 48 and 48 split
    with pytest.raises(ConfigError, match=r"'actor_rollout_ref.actor.ppo_mini_batch_size'=3 x .* = 9 samples"):
        check_batch_split(config)


def test_a_micro_batch_that_does_not_divide_a_ranks_mini_batch_names_the_key():
    # CPU: 1 rank, mini-batch 2 x n 4 = 8 samples; micro-batches of 4 split them, of 3 do not
    check_batch_split(compose_config("agent_tune_grpo_cpu", []))
    bad = compose_config("agent_tune_grpo_cpu", ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3"])
    with pytest.raises(ConfigError, match=r"'actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu'=3: .* = 8 "
                                          r"samples\) does not split"):
        check_batch_split(bad)
    # with dynamic batch size verl packs micro-batches by tokens: nothing to check
    check_batch_split(compose_config("agent_tune_grpo_cpu", ["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=3",
                                                             "actor_rollout_ref.actor.use_dynamic_bsz=true"]))


def test_sequence_parallel_divides_the_ranks():
    config = compose_config("agent_tune_bfcl_stage2")  # Ulysses 4 over 8 GPUs: 2 data-parallel ranks
    dp = data_parallel(config, "actor_rollout_ref.actor")
    assert dp.size == 2 and "actor_rollout_ref.actor.ulysses_sequence_parallel_size=4" in dp.how
    check_batch_split(compose_config("agent_tune_bfcl_stage2", ["data.train_batch_size=1",
                                                                "actor_rollout_ref.actor.ppo_mini_batch_size=1"]))
    # the engine key itself counts too
    config = compose_config("agent_tune_bfcl", ["actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size=2"])
    assert data_parallel(config, "actor_rollout_ref.actor").size == 4
    with pytest.raises(ConfigError, match=r"do not divide into groups of 3"):
        data_parallel(compose_config("agent_tune_bfcl", ["actor_rollout_ref.actor.ulysses_sequence_parallel_size=3"]),
                      "actor_rollout_ref.actor")


def test_megatron_divides_by_tensor_pipeline_and_context_sizes():
    config = compose_config("agent_tune_grpo", [
        "actor_rollout_ref.actor.strategy=megatron",
        "+actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
        "+actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=2",
    ])
    assert data_parallel(config, "actor_rollout_ref.actor").size == 2


def test_critic_mini_batch_is_checked_only_with_a_critic():
    config = compose_config("agent_tune_bfcl", ["critic.ppo_mini_batch_size=1", "critic.rollout_n=1",
                                                "actor_rollout_ref.rollout.n=4"])
    check_batch_split(config, use_critic=False)
    with pytest.raises(ConfigError, match=r"'critic.ppo_mini_batch_size'=1 x .* = 4 samples .* 8 data-parallel"):
        check_batch_split(config, use_critic=True)


def test_validate_runs_the_check(monkeypatch):
    monkeypatch.setattr(attention, "flash_attn_importable", lambda: True)
    config = compose_config("agent_tune_retool", ["data.train_batch_size=63", "actor_rollout_ref.rollout.n=5"])
    with pytest.raises(ConfigError, match=r"'data.train_batch_size'=63 x 'actor_rollout_ref.rollout.n'=5 = 315"):
        validate(RunConfig.parse(config))
