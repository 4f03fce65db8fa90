"""Paths a run saves into its own folder: saved relative, read where the folder is now."""

from __future__ import annotations

import shutil
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from agent_tune.utils.run_paths import (
    load_run_config,
    localized_config,
    read_path,
    save_run_config,
    store_path,
)


def _config(run: Path) -> DictConfig:
    return OmegaConf.create({
        "trainer": {"default_local_dir": str(run), "rollout_data_dir": str(run / "rollouts"),
                    "total_training_steps": 2, "project_name": "p", "exp": "${trainer.project_name}-x"},
        "data": {"train_files": ["/elsewhere/train.parquet"], "val_files": str(run.parent / "val.parquet")},
        "agent_tune": {"episodes": {"dir": str(run / "episodes"), "tokens_every": 8},
                       "metrics_file": str(run / "metrics.jsonl")},
        "ray_kwargs": {"ray_init": {"runtime_env": {"env_vars": {
            "VERL_FILE_LOGGER_PATH": str(run / "verl_metrics.jsonl"), "MLFLOW_TRACKING_URI": (run / "mlruns").as_uri(),
        }}}},
    })


def test_a_saved_config_names_the_run_folders_files_relative_and_reads_them_where_it_is(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    save_run_config(_config(run), run / "train_config.yaml")
    text = (run / "train_config.yaml").read_text()
    assert str(run / "episodes") not in text and str(run / "metrics.jsonl") not in text
    saved = OmegaConf.to_container(OmegaConf.load(run / "train_config.yaml"), resolve=False)
    assert saved["agent_tune"]["episodes"]["dir"] == "${trainer.default_local_dir}/episodes"
    assert saved["trainer"]["rollout_data_dir"] == "${trainer.default_local_dir}/rollouts"
    assert saved["trainer"]["default_local_dir"] == str(run)  # where it was written, for the record
    moved = tmp_path / "copied" / "run"
    shutil.copytree(run, moved)
    shutil.rmtree(run)
    config = load_run_config(moved / "train_config.yaml")
    assert config.trainer.default_local_dir == str(moved.resolve())
    assert config.agent_tune.episodes.dir == str(moved.resolve() / "episodes")
    assert config.agent_tune.metrics_file == str(moved.resolve() / "metrics.jsonl")
    env = config.ray_kwargs.ray_init.runtime_env.env_vars
    assert env.VERL_FILE_LOGGER_PATH == str(moved.resolve() / "verl_metrics.jsonl")
    assert env.MLFLOW_TRACKING_URI == "file:" + str(moved.resolve() / "mlruns")
    # what points outside the run is kept as it was; other interpolations are left to resolve later
    assert list(config.data.train_files) == ["/elsewhere/train.parquet"]
    assert config.data.val_files == str(tmp_path / "val.parquet")
    assert config.trainer.exp == "p-x" and config.agent_tune.episodes.tokens_every == 8


def test_an_older_config_with_absolute_paths_is_read_in_the_new_place_once_the_old_is_gone(tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    (old / "episodes").mkdir(parents=True)
    config = _config(old)
    assert localized_config(config, new).agent_tune.episodes.dir == str(old / "episodes")  # still there: kept
    shutil.rmtree(old)
    assert localized_config(config, new).agent_tune.episodes.dir == str(new.resolve() / "episodes")


def test_store_and_read_a_path(tmp_path):
    run = tmp_path / "run"
    assert store_path(run / "a" / "model", run) == "a/model"
    assert store_path(run, run) == "."
    assert store_path(tmp_path / "runner" / "x", run) == str(tmp_path / "runner" / "x")  # a sibling, not inside
    assert read_path("a/model", run) == run / "a" / "model"
    assert read_path(str(tmp_path / "x"), run) == tmp_path / "x"
    assert read_path("/gone/run/a/model", run, saved_folder="/gone/run") == run / "a" / "model"
