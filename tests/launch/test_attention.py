"""flash-attention 2 without flash_attn fails at start-up naming the key and the fix, or falls back to SDPA."""

from __future__ import annotations

import copy
import importlib.machinery
import logging
import sys
import types

import pytest
from omegaconf import open_dict

pytest.importorskip("verl")
pytest.importorskip("hydra")

from agent_tune.errors import ConfigError  # noqa: E402
from agent_tune.launch.attention import attn_implementation, check_attention  # noqa: E402
from agent_tune.launch.compose import compose_config  # noqa: E402
from agent_tune.launch.run_config import RunConfig  # noqa: E402
from agent_tune.launch.train import validate  # noqa: E402


@pytest.fixture
def no_flash_attn(monkeypatch):
    """``import flash_attn`` raises ImportError (a None entry in sys.modules)."""
    monkeypatch.setitem(sys.modules, "flash_attn", None)


@pytest.fixture
def with_flash_attn(monkeypatch):
    """``import flash_attn`` succeeds (a stand-in module with a spec, as transformers looks it up)."""
    module = types.ModuleType("flash_attn")
    module.__spec__ = importlib.machinery.ModuleSpec("flash_attn", None)
    monkeypatch.setitem(sys.modules, "flash_attn", module)


@pytest.fixture(scope="module")
def composed():
    return compose_config("agent_tune_bfcl")


@pytest.fixture
def gpu_config(composed):
    """A fresh copy of the composed GPU BFCL config (check_attention may change it)."""
    return copy.deepcopy(composed)


def test_gpu_configs_use_verl_default_flash_attention(gpu_config):
    assert attn_implementation(gpu_config) == "flash_attention_2"
    assert gpu_config.agent_tune.attention_fallback == "error"


def test_missing_flash_attn_fails_naming_key_and_fix(no_flash_attn, gpu_config):
    config = gpu_config
    with pytest.raises(ConfigError) as info:
        validate(RunConfig.parse(config))
    message = str(info.value)
    assert "actor_rollout_ref.model.override_config.attn_implementation" in message
    assert "scripts/install_gpu.sh" in message and "--no-build-isolation" in message
    assert "agent_tune.attention_fallback=sdpa" in message


def test_sdpa_fallback_warns_and_switches(no_flash_attn, caplog):
    config = compose_config("agent_tune_bfcl", ["agent_tune.attention_fallback=sdpa"])  # the override path
    assert config.actor_rollout_ref.model.use_remove_padding is True
    with caplog.at_level(logging.WARNING, logger="agent_tune.launch.attention"):
        validate(RunConfig.parse(config))
    assert config.actor_rollout_ref.model.override_config.attn_implementation == "sdpa"
    assert config.actor_rollout_ref.model.use_remove_padding is False
    assert any("falls back" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)


def test_sdpa_fallback_refused_with_ulysses(no_flash_attn, gpu_config):
    config = gpu_config
    config.agent_tune.attention_fallback = "sdpa"
    config.actor_rollout_ref.actor.ulysses_sequence_parallel_size = 4
    with pytest.raises(ConfigError, match=r"actor_rollout_ref\.actor\.ulysses_sequence_parallel_size"):
        check_attention(config, RunConfig.parse(config).options.attention_fallback)


def test_flash_attn_present_leaves_config_alone(with_flash_attn, gpu_config):
    config = gpu_config
    config.agent_tune.attention_fallback = "sdpa"
    check_attention(config, RunConfig.parse(config).options.attention_fallback)
    assert attn_implementation(config) == "flash_attention_2"
    assert config.actor_rollout_ref.model.use_remove_padding is True


def test_sdpa_configs_need_no_flash_attn(no_flash_attn, gpu_config):
    config = compose_config("agent_tune_bfcl_cpu")
    check_attention(config, RunConfig.parse(config).options.attention_fallback)  # the CPU device group sets sdpa
    assert attn_implementation(config) == "sdpa"
    with open_dict(gpu_config):
        gpu_config.actor_rollout_ref.model.override_config.attn_implementation = "eager"
    check_attention(gpu_config, RunConfig.parse(gpu_config).options.attention_fallback)
    assert attn_implementation(gpu_config) == "eager"


def test_critic_model_checked_when_gae(no_flash_attn, gpu_config):
    config = gpu_config
    config.algorithm.adv_estimator = "gae"
    with open_dict(config):
        config.actor_rollout_ref.model.override_config.attn_implementation = "sdpa"
    with pytest.raises(ConfigError, match=r"critic\.model\.override_config\.attn_implementation"):
        check_attention(config, RunConfig.parse(config).options.attention_fallback)


def test_unknown_fallback_named(with_flash_attn, gpu_config):
    config = gpu_config
    config.agent_tune.attention_fallback = "maybe"
    with pytest.raises(ConfigError, match="agent_tune.attention_fallback"):
        check_attention(config, RunConfig.parse(config).options.attention_fallback)
