"""``agent-tune train`` records every episode by default: the launcher points ``agent_tune.episodes.dir`` at the
run folder, as it does ``sample_metrics_dir``, and the child reads it back from the saved config."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

pytest.importorskip("verl")
pytest.importorskip("hydra")

from agent_tune.launch.compose import compose_config  # noqa: E402
from agent_tune.launch.run_config import RunConfig  # noqa: E402
from agent_tune.launch.train import prepare_outputs  # noqa: E402
from agent_tune.options import options_of  # noqa: E402


def test_episodes_go_to_the_run_folder_by_default(tmp_path):
    config = compose_config("agent_tune_grpo_cpu", [f"trainer.default_local_dir={tmp_path}"])
    run = prepare_outputs(RunConfig.parse(config))
    assert run.options.episodes.enable and run.options.episodes.dir == str(tmp_path / "episodes")
    assert run.options.episodes.tokens_every == 8  # config/base/agent_tune.yaml
    assert options_of(run.config).episodes == run.options.episodes  # what the child and the workers read
    assert run.options.sample_metrics_dir == str(tmp_path / "samples")


def test_a_chosen_folder_and_recording_off_are_kept(tmp_path):
    config = compose_config("agent_tune_grpo_cpu", [f"trainer.default_local_dir={tmp_path}",
                                                    f"agent_tune.episodes.dir={tmp_path / 'elsewhere'}",
                                                    "agent_tune.episodes.enable=false"])
    run = prepare_outputs(RunConfig.parse(config))
    assert run.options.episodes.dir == str(tmp_path / "elsewhere") and not run.options.episodes.enable
    assert OmegaConf.select(run.config, "agent_tune.episodes.enable") is False
