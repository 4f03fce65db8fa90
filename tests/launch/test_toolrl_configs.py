"""ToolRL's recipe configs: ToolRL's values, every reward variant one Hydra override away, bad options
rejected at start-up naming the key, and the trainer's total steps reaching the reward schedules."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

pytest.importorskip("verl")
pytest.importorskip("hydra")

from agent_tune.errors import ConfigError  # noqa: E402
from agent_tune.launch import attention  # noqa: E402
from agent_tune.launch.compose import compose_config  # noqa: E402
from agent_tune.launch.run_config import RunConfig  # noqa: E402
from agent_tune.launch.train import validate  # noqa: E402

KEY = "agent_tune.env_kwargs.toolcall.reward"

# one override set per ToolRL variant (its environment variable in the comment)
VARIANTS = [
    [f"{KEY}.length=fixed"],  # WITHLENGTH
    [f"{KEY}.length=scheduled"],  # WITHLENGTH + SCHEDULELENGTH
    [f"{KEY}.scale=max1"],  # CORRECTMAX1
    [f"{KEY}.scale=two_stage", f"{KEY}.two_stage_step=30"],  # MAX1STEP30MAX3
    [f"{KEY}.scale=smooth"],  # SCHEDULEREWARD
    [f"{KEY}.granularity=finegrained"],  # REFINEDREWARD
    [f"{KEY}.granularity=intermediate"],  # INTERMEDIATEREWARD
    [f"{KEY}.granularity=coarse"],  # COARSEREWARD
    [f"{KEY}.matching=optimal"],  # agent-tune's order-free matching (default: toolrl, ToolRL's code's)
]


@pytest.fixture(autouse=True)
def _flash_attn(monkeypatch):
    monkeypatch.setattr(attention, "flash_attn_importable", lambda: True)


def _reward(config) -> dict:
    return OmegaConf.to_container(OmegaConf.select(config, KEY), resolve=True)


def test_gpu_recipe_holds_toolrl_values() -> None:
    c = compose_config("agent_tune_toolrl")
    assert c.actor_rollout_ref.model.path == "Qwen/Qwen2.5-3B-Instruct"
    assert c.algorithm.adv_estimator == "grpo" and c.actor_rollout_ref.rollout.n == 4
    assert c.data.train_batch_size == 512 and c.actor_rollout_ref.actor.optim.lr == 1e-6
    assert c.trainer.total_epochs == 15 and c.trainer.total_training_steps == 105
    assert c.agent_tune.tool_parser == "toolrl" and c.agent_tune.env_kwargs.toolcall.answer_format == "toolrl"
    assert _reward(c)["total_training_steps"] == 105


@pytest.mark.parametrize("overrides", VARIANTS, ids=lambda o: o[0].rsplit(".", 1)[1])
def test_every_variant_is_one_override(overrides: list[str]) -> None:
    config = compose_config("agent_tune_toolrl_cpu", overrides)
    validate(RunConfig.parse(config))
    key, value = overrides[0].rsplit(".", 1)[1].split("=")
    assert str(_reward(config)[key]) == value


def test_trainer_total_steps_reach_the_reward() -> None:
    c = compose_config("agent_tune_toolrl", ["trainer.total_training_steps=50", f"{KEY}.length=scheduled"])
    assert _reward(c)["total_training_steps"] == 50


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ([f"{KEY}.scale=big"], "reward.scale='big' is not one of default, max1, two_stage, smooth"),
        ([f"{KEY}.granularity=refined"], "is not one of default, finegrained, intermediate, coarse"),
        ([f"{KEY}.length=scheduled", "trainer.total_training_steps=null"], "reward.length=scheduled needs a horizon"),
        ([f"+{KEY}.lenght=fixed"], "reward.lenght is not a reward option"),
        (["agent_tune.tool_parser=hermes"], "answer_format=toolrl reads calls with tool_parser=toolrl"),
    ],
)
def test_bad_reward_options_fail_at_start_up(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate(RunConfig.parse(compose_config("agent_tune_toolrl_cpu", overrides)))
    assert "agent_tune.env_kwargs.toolcall" in str(info.value) and message in str(info.value)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["+agent_tune.env_kwargs.bfcl.max_step_per_turn=3"], "unexpected keyword argument 'max_step_per_turn'"),
        (["agent_tune.env_kwargs.bfcl.reward=sintax"], "bfcl.reward': 'sintax' is not one of 'progress'"),
    ],
)
def test_bad_env_options_of_any_env_fail_at_start_up(overrides: list[str], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        validate(RunConfig.parse(compose_config("agent_tune_bfcl_cpu", overrides)))
    assert "agent_tune.env_kwargs.bfcl" in str(info.value) and message in str(info.value)
