"""The GPU recipes exercised on CPU (config/device/cpu_probe.yaml, ``+device=cpu_probe``): each GPU recipe plus the
overlay passes the launcher's checks, and the overlay changes only device, model and size keys (plus the KL terms,
which cannot run on CPU: docs/gpu.md), so the recipe's algorithm keys run as on GPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from omegaconf import DictConfig, OmegaConf

pytest.importorskip("verl")
pytest.importorskip("hydra")

from agent_tune.launch import attention  # noqa: E402
from agent_tune.launch.compose import compose_config, default_config_dir  # noqa: E402
from agent_tune.launch.run_config import RunConfig  # noqa: E402
from agent_tune.launch.train import validate  # noqa: E402

PROBE = "+device=cpu_probe"
GPU_RECIPES = ["agent_tune_bfcl", "agent_tune_toolrl", "agent_tune_tau2", "agent_tune_retool"]
ARR = "actor_rollout_ref"
# Keys the overlay may change. Device: where and how verl runs (platform, Ray, FSDP engine, attention kernel,
# vLLM's CPU settings). Model: the weights and the chat template that fits them. Size: batch, lengths, micro
# batches, run length, and verl's own interpolations of those (prompt_length, the critic's copies of the
# actor's batch keys, the ToolRL reward schedules' horizon, which is the run length).
DEVICE_KEYS = {
    "trainer.device", "trainer.n_gpus_per_node", "trainer.nnodes", "ray_kwargs.", "transfer_queue.",
    "reward.num_workers", "agent_tune.cpu_precision", "agent_tune.cpu_shared_prefix", "agent_tune.cpu_threads",
    f"{ARR}.rollout.n_gpus_per_node",
    f"{ARR}.model.use_remove_padding", f"{ARR}.actor.use_remove_padding", f"{ARR}.model.enable_gradient_checkpointing",
    f"{ARR}.model.override_config.attn_implementation", f"{ARR}.actor.strategy", f"{ARR}.ref.strategy",
    f"{ARR}.actor.use_torch_compile", f"{ARR}.ref.use_torch_compile", f"{ARR}.actor.fsdp_config.",
    f"{ARR}.ref.fsdp_config.", f"{ARR}.actor.ulysses_sequence_parallel_size",
    f"{ARR}.rollout.tensor_model_parallel_size", f"{ARR}.rollout.dtype", f"{ARR}.rollout.enforce_eager",
    f"{ARR}.rollout.enable_sleep_mode", f"{ARR}.rollout.max_num_seqs", f"{ARR}.rollout.agent.num_workers",
    f"{ARR}.rollout.checkpoint_engine.", f"{ARR}.rollout.engine_kwargs.vllm.",
}
MODEL_KEYS = {f"{ARR}.model.path", "agent_tune.template", f"{ARR}.rollout.prometheus.served_model_name"}
SIZE_KEYS = {
    "data.train_batch_size", "data.max_prompt_length", "data.max_response_length", "data.dataloader_num_workers",
    "data.filter_overlong_prompts", f"{ARR}.actor.ppo_mini_batch_size", f"{ARR}.actor.ppo_micro_batch_size_per_gpu",
    f"{ARR}.actor.use_dynamic_bsz", f"{ARR}.ref.log_prob_micro_batch_size_per_gpu",
    f"{ARR}.ref.log_prob_use_dynamic_bsz", f"{ARR}.rollout.log_prob_micro_batch_size_per_gpu",
    f"{ARR}.rollout.log_prob_use_dynamic_bsz", f"{ARR}.rollout.max_model_len", f"{ARR}.rollout.max_num_batched_tokens",
    f"{ARR}.rollout.prompt_length", f"{ARR}.rollout.response_length", "distillation.teacher_models.",
    "critic.ppo_mini_batch_size", "critic.use_dynamic_bsz", "trainer.total_training_steps", "trainer.save_freq",
    "trainer.test_freq", "trainer.val_before_train", "agent_tune.env_kwargs.toolcall.reward.total_training_steps",
    "trainer.v1.sampler.sampler_kwargs.train_batch_size",  # data.train_batch_size, handed to the sampler
}
# Algorithm keys that cannot run on CPU, switched off by the overlay (docs/gpu.md says why).
CPU_IMPOSSIBLE: set[str] = set()  # Ulysses (> 1) is never set by a probed recipe
ALLOWED = DEVICE_KEYS | MODEL_KEYS | SIZE_KEYS | CPU_IMPOSSIBLE
# device/cpu.yaml keys the overlay does not copy: algorithm keys (the recipe's stay) and sizes (its own).
NOT_FROM_CPU_YAML = {
    "algorithm.filter_groups.enable", f"{ARR}.rollout.n", "data.max_prompt_length", "data.max_response_length",
    f"{ARR}.actor.ppo_mini_batch_size", f"{ARR}.actor.ppo_micro_batch_size_per_gpu",
    f"{ARR}.ref.log_prob_micro_batch_size_per_gpu", f"{ARR}.rollout.log_prob_micro_batch_size_per_gpu",
    f"{ARR}.rollout.max_num_batched_tokens", f"{ARR}.model.path", "trainer.total_training_steps",
    "trainer.save_freq", "trainer.resume_mode", "trainer.experiment_name",
}


@pytest.fixture(autouse=True)
def _flash_attn(monkeypatch):
    """The GPU configs use flash-attention 2: pretend ``flash_attn`` imports so their checks run on CPU."""
    monkeypatch.setattr(attention, "flash_attn_importable", lambda: True)


def _flat(config: DictConfig | dict) -> dict[str, object]:
    """Every leaf (resolved) under its dotted key."""
    out: dict[str, object] = {}

    def walk(node: object, prefix: str) -> None:
        if isinstance(node, dict):  # an empty section is no leaf
            for key, value in node.items():
                walk(value, f"{prefix}{key}.")
        else:
            out[prefix.rstrip(".")] = node

    walk(OmegaConf.to_container(config, resolve=True) if isinstance(config, DictConfig) else config, "")
    return out


def _allowed(key: str) -> bool:
    return any(key == a or (a.endswith(".") and key.startswith(a)) for a in ALLOWED)


def _probe_validated(name: str) -> DictConfig:
    """``name`` + the overlay, through the launcher's checks (tau2's against a stand-in user simulator)."""
    if "tau2" not in name:
        config = compose_config(name, [PROBE])
        validate(RunConfig.parse(config))
        return config
    from tests.users.fake_openai import FakeOpenAI

    with FakeOpenAI("user-simulator") as user:
        config = compose_config(name, [PROBE, f"agent_tune.env_kwargs.tau2.user.base_url={user.base_url}"])
        validate(RunConfig.parse(config))
    return config


@pytest.mark.parametrize("name", GPU_RECIPES)
def test_gpu_recipe_with_the_overlay_validates_on_cpu(name):
    config = _probe_validated(name)
    assert config.trainer.device == "cpu" and config.trainer.n_gpus_per_node == 1
    assert config.actor_rollout_ref.model.path == "smollm2" and config.trainer.total_training_steps == 1
    assert config.actor_rollout_ref.model.override_config.attn_implementation == "sdpa"


@pytest.mark.parametrize("name", GPU_RECIPES)
def test_overlay_changes_only_device_model_and_size_keys(name):
    gpu, cpu = _flat(compose_config(name)), _flat(compose_config(name, [PROBE]))
    changed = {k for k in gpu.keys() | cpu.keys() if gpu.get(k) != cpu.get(k)}
    assert {"trainer.device", f"{ARR}.model.path", "data.train_batch_size"} <= changed
    assert not [k for k in changed if not _allowed(k)], sorted(k for k in changed if not _allowed(k))


@pytest.mark.parametrize("name", GPU_RECIPES)
def test_the_recipes_algorithm_keys_run_as_on_gpu(name):
    gpu, cpu = compose_config(name), compose_config(name, [PROBE])
    for key in ("algorithm.adv_estimator", "algorithm.filter_groups", "algorithm.rollout_correction",
                f"{ARR}.rollout.n", f"{ARR}.rollout.temperature", f"{ARR}.actor.clip_ratio_low",
                f"{ARR}.actor.clip_ratio_high", f"{ARR}.actor.entropy_coeff", f"{ARR}.actor.loss_agg_mode",
                f"{ARR}.actor.optim", f"{ARR}.actor.entropy_checkpointing", "agent_tune.task_weighting"):
        assert OmegaConf.select(cpu, key) == OmegaConf.select(gpu, key), key


def test_the_gpu_recipes_differ_in_what_the_probe_exercises():
    """The probe is worth running per recipe: group sizes, dynamic sampling and task weighting differ between them."""
    configs = {name: compose_config(name, [PROBE]) for name in GPU_RECIPES}
    assert len({c.actor_rollout_ref.rollout.n for c in configs.values()}) >= 2
    assert {c.algorithm.filter_groups.enable for c in configs.values()} == {True, False}
    assert configs["agent_tune_tau2"].agent_tune.task_weighting.enable is True


def test_overlay_keeps_in_step_with_the_cpu_device_config():
    """Every key of config/device/cpu.yaml is in the overlay with the same value, except the algorithm keys the
    recipe keeps and the sizes the overlay sets itself."""
    folder = default_config_dir() / "device"
    device = _flat(yaml.safe_load(Path(folder / "cpu.yaml").read_text()))
    probe = _flat(yaml.safe_load(Path(folder / "cpu_probe.yaml").read_text()))
    missing = {k: v for k, v in device.items() if k not in NOT_FROM_CPU_YAML and probe.get(k) != v}
    assert not missing, missing
    assert NOT_FROM_CPU_YAML & device.keys() == NOT_FROM_CPU_YAML  # no stale exception
    assert not [k for k in probe if not _allowed(k) and k not in device], "overlay key outside the allow-lists"
