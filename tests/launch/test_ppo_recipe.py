"""The PPO recipe (config/recipe/ppo.yaml): GAE with verl's critic, selected by ``+recipe=ppo`` on the ToolRL and
ReTool configs (CPU and GPU); it passes the launcher's checks, changes only PPO keys, builds the critic like the
actor, and bad critic batch sizes fail naming the key."""

from __future__ import annotations

import dataclasses

import pytest
import yaml
from omegaconf import DictConfig, OmegaConf

pytest.importorskip("verl")
pytest.importorskip("hydra")

from agent_tune.errors import ConfigError  # noqa: E402
from agent_tune.launch import attention  # noqa: E402
from agent_tune.launch.compose import compose_config, resolve_model_paths  # noqa: E402
from agent_tune.launch.run_config import RunConfig  # noqa: E402
from agent_tune.launch.train import MODEL_KEYS, TrainLauncher, validate  # noqa: E402
from tests.launch.test_config import _has, _keys, _verl_base  # noqa: E402

RECIPE = "+recipe=ppo"
CPU_CONFIGS = ["agent_tune_toolrl_cpu", "agent_tune_retool_cpu"]
GPU_CONFIGS = ["agent_tune_toolrl", "agent_tune_retool"]
# What the recipe may change in the config underneath: the estimator, the group settings GRPO needs, the micro
# batches (samples per step fall to prompts x 1), and the critic.
PPO_KEYS = ("algorithm.adv_estimator", "algorithm.gamma", "algorithm.lam", "algorithm.filter_groups.enable",
            "trainer.v1.sampler.sampler_kwargs.filter_groups.enable",  # the sampler's copy of the one above
            "trainer.critic_warmup", "actor_rollout_ref.rollout.n", "actor_rollout_ref.actor.rollout_n",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", "actor_rollout_ref.ref.rollout_n",
            "critic.")
# Keys the recipe adds to verl's ppo_trainer YAML: fields of the dataclasses verl builds from those sections.
ADDED_KEYS = {
    "critic.ppo_infer_max_token_len_per_gpu": "CriticConfig",
    "critic.fsdp.use_dynamic_bsz": "FSDPEngineConfig",
    "critic.fsdp.micro_batch_size_per_gpu": "FSDPEngineConfig",
    "critic.fsdp.infer_micro_batch_size_per_gpu": "FSDPEngineConfig",
    "critic.fsdp.mixed_precision": "FSDPEngineConfig",
    "critic.model.override_config.attn_implementation": "HF config override",
}


@pytest.fixture(autouse=True)
def _flash_attn(monkeypatch):
    """The GPU configs use flash-attention 2: pretend ``flash_attn`` imports so their checks run on CPU."""
    monkeypatch.setattr(attention, "flash_attn_importable", lambda: True)


@pytest.fixture(scope="module")
def local_model() -> str:
    """A local Hugging Face folder: verl's critic config loads the model's config and tokenizer when checked, so
    the GPU configs' hub models are replaced by the converted SmolLM2 (the CPU configs' own model)."""
    from agent_tune.models.smollm2 import DEFAULT_CACHE_DIR, SmolLM2NotFoundError, ensure_smollm2

    try:
        return str(ensure_smollm2(DEFAULT_CACHE_DIR.expanduser()))
    except (SmolLM2NotFoundError, ImportError) as exc:
        pytest.skip(f"SmolLM2 cannot be converted here: {exc}")


def _ppo(name: str, local_model: str, overrides: tuple[str, ...] = ()) -> DictConfig:
    """``name`` + the recipe as the launcher composes it (the alias ``smollm2`` resolved); on GPU configs the
    critic reads the local model."""
    extra = [] if name in CPU_CONFIGS else [f"critic.model.path={local_model}"]
    config = compose_config(name, [RECIPE, *extra, *overrides])
    resolve_model_paths(config, MODEL_KEYS, RunConfig.parse(config).options.model_cache_dir)
    return config


def _flat(config: DictConfig) -> dict[str, object]:
    """Every leaf of ``config`` (resolved) under its dotted key."""
    out: dict[str, object] = {}

    def walk(node: object, prefix: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, f"{prefix}{key}.")
        else:
            out[prefix.rstrip(".")] = node

    walk(OmegaConf.to_container(config, resolve=True), "")
    return out


@pytest.mark.parametrize("name", CPU_CONFIGS + GPU_CONFIGS)
def test_recipe_composes_validates_and_builds_a_critic(name, local_model):
    from verl.trainer.ppo.utils import need_critic

    config = _ppo(name, local_model)
    validate(RunConfig.parse(config))
    assert config.algorithm.adv_estimator == "gae" and need_critic(config)
    assert (config.algorithm.gamma, config.algorithm.lam) == (1.0, 1.0)
    assert config.algorithm.filter_groups.enable is False and config.actor_rollout_ref.rollout.n == 1
    critic, actor, model = config.critic, config.actor_rollout_ref.actor, config.actor_rollout_ref.model
    assert critic.enable is True and critic.optim.lr == 1e-5 and actor.optim.lr != critic.optim.lr
    assert critic.ppo_mini_batch_size == actor.ppo_mini_batch_size
    # the critic is built like the actor, on whichever device the config trains
    assert critic.strategy == actor.strategy == "fsdp2"
    assert critic.model.use_remove_padding == model.use_remove_padding
    assert critic.model.enable_gradient_checkpointing == model.enable_gradient_checkpointing
    assert critic.model.override_config.attn_implementation == attention.attn_implementation(config)
    assert critic.fsdp.use_torch_compile == actor.fsdp_config.use_torch_compile
    assert critic.fsdp.mixed_precision == actor.fsdp_config.get("mixed_precision")
    # verl's v1 trainer reads the critic's batching from its engine section: it follows the critic's own keys
    assert critic.fsdp.use_dynamic_bsz == critic.use_dynamic_bsz == actor.use_dynamic_bsz
    assert critic.fsdp.micro_batch_size_per_gpu == critic.ppo_micro_batch_size_per_gpu == 2
    assert critic.fsdp.infer_micro_batch_size_per_gpu == critic.forward_micro_batch_size_per_gpu == 2
    assert critic.ppo_infer_max_token_len_per_gpu == critic.forward_max_token_len_per_gpu


@pytest.mark.parametrize("name", CPU_CONFIGS)
def test_cpu_critic_defaults_to_the_policy_model(name, local_model):
    config = _ppo(name, local_model)
    assert config.critic.model.path == config.actor_rollout_ref.model.path == local_model
    assert config.critic.model.override_config.attn_implementation == "sdpa"
    assert config.critic.fsdp.use_torch_compile is False and config.critic.fsdp.use_dynamic_bsz is False


def test_critic_model_has_its_own_path(local_model, tmp_path):
    config = compose_config("agent_tune_toolrl", [RECIPE, f"critic.model.path={tmp_path}"])
    assert config.critic.model.path == str(tmp_path)
    assert config.actor_rollout_ref.model.path == "Qwen/Qwen2.5-3B-Instruct"
    assert compose_config("agent_tune_toolrl", [RECIPE]).critic.model.path == "Qwen/Qwen2.5-3B-Instruct"


@pytest.mark.parametrize("name", CPU_CONFIGS + GPU_CONFIGS)
def test_recipe_changes_only_ppo_keys(name):
    grpo, ppo = _flat(compose_config(name)), _flat(compose_config(name, [RECIPE]))
    changed = {k for k in grpo.keys() | ppo.keys() if grpo.get(k) != ppo.get(k)}
    assert "algorithm.adv_estimator" in changed and "critic.enable" in changed
    outside = {k for k in changed if not any(k == p or k.startswith(p) for p in PPO_KEYS)}
    assert not outside, sorted(outside)


def test_kl_and_rollout_correction_stay_the_configs():
    """ToolRL keeps its KL penalty in the reward (on GPU; its CPU probe turns it off); every config
    keeps recipe/grpo's token-level rollout correction."""
    for name in CPU_CONFIGS + GPU_CONFIGS:
        base, ppo = compose_config(name), compose_config(name, [RECIPE])
        assert ppo.algorithm.use_kl_in_reward == base.algorithm.use_kl_in_reward
        assert ppo.algorithm.rollout_correction == base.algorithm.rollout_correction
        assert ppo.algorithm.rollout_correction.rollout_is == "token"
    assert compose_config("agent_tune_toolrl", [RECIPE]).algorithm.use_kl_in_reward is True


@pytest.mark.parametrize("name", ["agent_tune_toolrl_cpu", "agent_tune_retool"])
def test_added_keys_are_fields_of_what_reads_them(name):
    from verl.workers.config import CriticConfig, FSDPEngineConfig

    base, config = _verl_base(), compose_config(name, [RECIPE])
    added = {k for k in _keys(config) if k.startswith("critic.") and not _has(base, k)}
    assert added == set(ADDED_KEYS), sorted(added ^ set(ADDED_KEYS))
    fields = {"CriticConfig": {f.name for f in dataclasses.fields(CriticConfig)},
              "FSDPEngineConfig": {f.name for f in dataclasses.fields(FSDPEngineConfig)}}
    for key, reader in ADDED_KEYS.items():
        if reader in fields:
            assert key.rsplit(".", 1)[1] in fields[reader], key


@pytest.mark.parametrize("selection", [RECIPE, "+recipe@_global_=ppo"])
def test_command_line_selects_the_recipe(selection, capsys):
    """``agent-tune train --config-name agent_tune_toolrl_cpu +recipe=ppo`` (printed with ``--cfg``)."""
    code = TrainLauncher().main(["--config-name", "agent_tune_toolrl_cpu", selection, "--cfg"])
    assert code == 0
    printed = yaml.safe_load(capsys.readouterr().out)
    assert printed["algorithm"]["adv_estimator"] == "gae" and printed["critic"]["enable"] is True
    assert printed["critic"]["model"]["path"] == "${actor_rollout_ref.model.path}"  # printed unresolved
    assert printed["trainer"]["device"] == "cpu"


@pytest.mark.parametrize(
    "name,overrides,key",
    [
        # more samples than the step has
        ("agent_tune_toolrl_cpu", ("critic.ppo_mini_batch_size=8",), "critic.ppo_mini_batch_size"),
        # 12 samples over 8 GPUs
        ("agent_tune_toolrl", ("critic.ppo_mini_batch_size=12",), "critic.ppo_mini_batch_size"),
        # fixed micro batches (CPU) need a size; verl's message names the key without its ppo_ prefix
        ("agent_tune_toolrl_cpu", ("critic.ppo_micro_batch_size_per_gpu=null",), "critic.micro_batch_size_per_gpu"),
        # the deprecated global micro batch beside the per-GPU one
        ("agent_tune_retool_cpu", ("critic.ppo_micro_batch_size=4",), "critic.micro_batch_size"),
    ],
)
def test_bad_critic_batch_sizes_fail_naming_the_key(name, overrides, key, local_model):
    with pytest.raises(ConfigError) as info:
        validate(RunConfig.parse(_ppo(name, local_model, overrides)))
    assert key in str(info.value)
