"""Every shipped config composes and passes the launcher's start-up checks; derived values follow their sources."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

pytest.importorskip("verl")
pytest.importorskip("hydra")

from agent_tune.errors import ConfigError  # noqa: E402
from agent_tune.launch import attention  # noqa: E402
from agent_tune.launch.compose import compose_config, default_config_dir  # noqa: E402
from agent_tune.launch.resolvers import resolve_own  # noqa: E402
from agent_tune.launch.run_config import RunConfig  # noqa: E402
from agent_tune.launch.train import validate  # noqa: E402

# GRPO configs; the SFT configs (agent_tune_sft*) are verl SFT-trainer configs: tests/launch/test_sft.py
SHIPPED = sorted(p.stem for p in default_config_dir().glob("*.yaml") if not p.stem.startswith("agent_tune_sft"))
GPU_CONFIGS = ["agent_tune_bfcl", "agent_tune_bfcl_stage2", "agent_tune_grpo", "agent_tune_retool", "agent_tune_toolrl"]


@pytest.fixture
def with_flash_attn(monkeypatch):
    """The GPU configs use flash-attention 2: pretend ``flash_attn`` imports so their checks run on CPU."""
    monkeypatch.setattr(attention, "flash_attn_importable", lambda: True)


def test_the_shipped_configs_are_the_ones_tested():
    assert set(GPU_CONFIGS) <= set(SHIPPED)
    assert len(SHIPPED) >= 8


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_config_composes_and_validates(name, with_flash_attn):
    config = compose_config(name)
    if OmegaConf.select(config, "agent_tune.env_kwargs.tau2") is not None:
        # validation includes the user simulator's health check: serve a stand-in
        from tests.users.fake_openai import FakeOpenAI

        with FakeOpenAI("user-simulator") as user:
            config = compose_config(name, [f"agent_tune.env_kwargs.tau2.user.base_url={user.base_url}"])
            validate(RunConfig.parse(config))
    else:
        validate(RunConfig.parse(config))
    rollout = config.actor_rollout_ref.rollout
    assert rollout.max_model_len == config.data.max_prompt_length + config.data.max_response_length
    raw = OmegaConf.to_yaml(config)  # nothing left for verl's Ray actors to resolve with our resolver
    assert "agent_tune_sum" not in raw


@pytest.mark.parametrize("name", GPU_CONFIGS)
def test_gpu_configs_share_the_gpu_device_group(name):
    config = compose_config(name)
    arr = config.actor_rollout_ref
    assert config.trainer.device == "cuda" and config.trainer.n_gpus_per_node == 8
    assert arr.actor.strategy == "fsdp2" and arr.ref.strategy == "fsdp2"
    assert arr.model.use_remove_padding is True
    assert "attn_implementation" not in arr.model.override_config  # verl's default: flash_attention_2
    assert "file" in config.trainer.logger and config.trainer.resume_mode == "auto"


@pytest.mark.parametrize(
    "name,prompt,response", [("agent_tune_bfcl_cpu", 1000, 300), ("agent_tune_bfcl", 4096, 12288)]
)
def test_max_model_len_follows_prompt_and_response(name, prompt, response):
    config = compose_config(name, [f"data.max_prompt_length={prompt}", f"data.max_response_length={response}"])
    assert config.actor_rollout_ref.rollout.max_model_len == prompt + response
    assert config.actor_rollout_ref.rollout.prompt_length == prompt  # verl's own interpolation


def test_explicit_max_model_len_wins():
    config = compose_config("agent_tune_bfcl_cpu", ["actor_rollout_ref.rollout.max_model_len=4000"])
    assert config.actor_rollout_ref.rollout.max_model_len == 4000


def test_stage2_is_stage1_with_longer_context():
    stage1, stage2 = compose_config("agent_tune_bfcl"), compose_config("agent_tune_bfcl_stage2")
    assert stage2.data.max_response_length > stage1.data.max_response_length
    assert stage2.actor_rollout_ref.actor.ulysses_sequence_parallel_size == 4
    assert stage2.actor_rollout_ref.rollout.max_model_len == 8192 + 16384
    assert stage2.trainer.experiment_name != stage1.trainer.experiment_name
    assert stage2.actor_rollout_ref.actor.optim.lr == stage1.actor_rollout_ref.actor.optim.lr


def test_sum_resolver_rejects_non_numbers():
    with pytest.raises(ConfigError):
        compose_config("agent_tune_bfcl_cpu", ["data.max_prompt_length=abc"])


def test_resolve_own_leaves_other_interpolations(tmp_path):
    config = OmegaConf.create(
        {"a": 2, "b": 3, "c": "${agent_tune_sum:${a},${b}}", "d": "${a}", "e": ["${agent_tune_sum:1,${b}}"]}
    )
    resolve_own(config)
    raw = OmegaConf.to_container(config, resolve=False)
    assert raw == {"a": 2, "b": 3, "c": 5, "d": "${a}", "e": [4]}


def test_tau2_gpu_config_leaves_gpus_to_the_user_simulator():
    config = compose_config("agent_tune_tau2")
    assert config.trainer.device == "cuda" and config.trainer.n_gpus_per_node == 4
    assert config.agent_tune.env_kwargs.tau2.reward_shaping.alpha == 0.25
    assert config.agent_tune.task_weighting.enable is True and config.trainer.total_training_steps == 100
    assert config.actor_rollout_ref.model.path == "Qwen/Qwen3-4B-Instruct-2507"


def test_tau2_config_with_the_user_server_down_fails_naming_it(with_flash_attn):
    from tests.users.fake_openai import free_port_url

    url = free_port_url()
    config = compose_config("agent_tune_tau2_cpu", [f"agent_tune.env_kwargs.tau2.user.base_url={url}"])
    with pytest.raises(ConfigError, match="agent_tune.env_kwargs.tau2.*user simulator at"):
        validate(RunConfig.parse(config))
