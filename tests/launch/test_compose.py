"""Composition errors a newcomer meets, each one line with the fix (:mod:`agent_tune.launch.compose`)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("hydra")

from agent_tune.errors import ConfigError  # noqa: E402
from agent_tune.launch.compose import check_data_files, compose_config, rows_hint, shipped_configs  # noqa: E402


def _error(name: str, *overrides: str) -> str:
    with pytest.raises(ConfigError) as info:
        compose_config(name, list(overrides))
    message = str(info.value)
    assert "\n" not in message, message
    return message


def test_a_typo_in_a_key_gets_the_key_it_meant() -> None:
    message = _error("agent_tune_grpo_cpu", "trainer.total_training_step=2")
    assert message.startswith("config key 'trainer.total_training_step' does not exist: "
                              "did you mean trainer.total_training_steps?")
    assert _error("agent_tune_grpo_cpu", "agent_tune.consol=quiet").startswith(
        "config key 'agent_tune.consol' does not exist: did you mean agent_tune.console?")


def test_a_key_with_no_close_name_lists_its_neighbours() -> None:
    message = _error("agent_tune_grpo_cpu", "trainer.zzzz=1")
    assert "the keys under 'trainer': " in message and "total_training_steps" in message
    assert "+trainer.zzzz=1" in message  # how to add a key the config lacks
    assert "did you mean trainer.total_epochs" in _error("agent_tune_grpo_cpu", "~trainer.total_epoch")


def test_a_bad_config_name_lists_the_shipped_configs() -> None:
    message = _error("agent_tune_bfcl_cpux")
    assert message.startswith("config 'agent_tune_bfcl_cpux' does not exist in ")
    assert "did you mean agent_tune_bfcl_cpu?" in message
    names = shipped_configs()
    assert {"agent_tune_grpo_cpu", "agent_tune_bfcl_cpu"} <= set(names)
    assert all(name in message for name in names) and "search path" not in message


def test_a_missing_data_file_says_how_to_build_the_rows(tmp_path: Path) -> None:
    config = compose_config("agent_tune_bfcl_cpu", [f"data.val_files={tmp_path / 'val.parquet'}"])
    with pytest.raises(ConfigError) as info:
        check_data_files(config)  # verl's gsm8k default for the training file
    message = str(info.value)
    assert message.startswith("config key 'data.train_files': file ") and "gsm8k" in message
    assert "`agent-tune data --env bfcl --split train val --out data/bfcl`" in message
    assert "data.train_files=data/bfcl/train.parquet data.val_files=data/bfcl/val.parquet" in message


def test_rows_hint_without_a_catalogue_env_names_the_general_way() -> None:
    config = compose_config("agent_tune_grpo_cpu")
    assert "agent-tune data --env NAME" in rows_hint(config) and "data_preprocess/" in rows_hint(config)


def test_composing_reads_verls_configs_without_importing_verl() -> None:
    """Hydra's pkg:// source would import verl (torch, seconds, its warnings) before any key is checked."""
    import subprocess
    import sys

    probe = ("import sys; from agent_tune.launch.compose import compose_config; "
             "c = compose_config('agent_tune_bfcl_cpu'); "
             "print(c.actor_rollout_ref.rollout.name, sorted(m for m in ('verl', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=300)
    assert out.stdout.split("\n")[0] == "vllm []", out.stdout + out.stderr


def test_the_file_search_path_composes_what_the_package_one_does() -> None:
    from omegaconf import OmegaConf

    for name in ("agent_tune_bfcl_cpu", "agent_tune_sft_cpu"):
        through_package = compose_config(name, ["hydra.searchpath=[pkg://verl.trainer.config]"])
        assert OmegaConf.to_yaml(compose_config(name)) == OmegaConf.to_yaml(through_package), name
