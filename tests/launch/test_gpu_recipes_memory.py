"""The GPU recipes recompute the entropy bonus's softmax in backward (docs/gpu.md, Memory); CPU configs do not."""

from __future__ import annotations

import pytest

pytest.importorskip("verl")
pytest.importorskip("hydra")

from agent_tune.launch.compose import compose_config  # noqa: E402

GPU_RECIPES = ["agent_tune_bfcl", "agent_tune_bfcl_stage2", "agent_tune_retool", "agent_tune_tau2",
               "agent_tune_toolrl"]


@pytest.mark.parametrize("name", GPU_RECIPES)
def test_gpu_recipes_checkpoint_the_entropy(name):
    actor = compose_config(name).actor_rollout_ref.actor
    assert actor.entropy_coeff > 0  # the update computes the entropy with grad
    assert actor.entropy_checkpointing is True
    assert actor.fsdp_config.entropy_checkpointing is True  # what verl's FSDP engine reads


@pytest.mark.parametrize("name", ["agent_tune_toolrl_cpu", "agent_tune_tau2_cpu"])
def test_cpu_configs_sharing_a_recipe_keep_verl_default(name):
    assert compose_config(name).actor_rollout_ref.actor.fsdp_config.entropy_checkpointing is False
