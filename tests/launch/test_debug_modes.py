"""``agent_tune.debug`` (agent_tune/launch/debug_modes.py): the typed key, the recipes, what each mode sets for
verl and the configs it refuses, naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("verl")

from omegaconf import OmegaConf  # noqa: E402

from agent_tune.errors import ConfigError  # noqa: E402
from agent_tune.launch.compose import compose_config  # noqa: E402
from agent_tune.launch.debug_modes import (  # noqa: E402
    BASE_LOOPS,
    MANAGER_KEY,
    NO_UPDATE_BEFORE,
    REPLAY_MANAGER,
    prepare_debug,
)
from agent_tune.launch.run_config import RunConfig  # noqa: E402
from agent_tune.options import parse_options  # noqa: E402
from agent_tune.rollout.dump import append_jsonl, step_dump_path  # noqa: E402
from agent_tune.utils.typed_config import OptionError  # noqa: E402

CPU = "agent_tune_toolcall_cpu"
OWN = {"agent_tune_record": "verl_ext.replay_loop.RecordingLoop",
       "agent_tune_replay": "verl_ext.replay_loop.ReplayLoop"}


def _dump(folder: Path, steps: int = 1) -> Path:
    for step in range(1, steps + 1):
        append_jsonl(step_dump_path(folder, step, 1), [{"global_steps": step, "index": 0, "sample": 0}])
    return folder


def _config(tmp_path: Path, *overrides: str):
    return compose_config(CPU, [f"trainer.default_local_dir={tmp_path / 'run'}", *overrides])


def test_option_is_typed() -> None:
    assert not parse_options({}).debug.active
    assert parse_options({"debug": None}).debug.rollout_only is False
    assert parse_options({"debug": {"replay": True, "replay_dir": "/d"}}).debug.active
    with pytest.raises(OptionError, match="'agent_tune.debug.replay': set together with rollout_only"):
        parse_options({"debug": {"rollout_only": True, "replay": True, "replay_dir": "/d"}})
    with pytest.raises(OptionError, match="'agent_tune.debug.replay_dir': replay needs the folder"):
        parse_options({"debug": {"replay": True}})
    with pytest.raises(OptionError, match="'agent_tune.debug.replay': false while replay_dir='/d'"):
        parse_options({"debug": {"replay_dir": "/d"}})
    with pytest.raises(OptionError, match="'agent_tune.debug.rollout_only': got 'yes'"):
        parse_options({"debug": {"rollout_only": "yes"}})
    with pytest.raises(OptionError, match="agent_tune.debug.dump"):
        parse_options({"debug": {"dump": "/d"}})


def test_shipped_default_is_off() -> None:
    config = compose_config(CPU)
    before = OmegaConf.to_container(config, resolve=True)
    assert not prepare_debug(RunConfig.parse(config)).options.debug.active
    assert OmegaConf.to_container(config, resolve=True) == before


def test_rollout_only_sets_no_update_and_the_recording_loop(tmp_path) -> None:
    config = _config(tmp_path, "+debug=rollout_only",
                     f"actor_rollout_ref.rollout.agent.agent_loop_config_path={BASE_LOOPS}")
    debug = prepare_debug(RunConfig.parse(config)).options.debug
    run = (tmp_path / "run").resolve()
    assert debug.rollout_only and debug.dump_dir == str(run / "rollout_dump")
    assert config.trainer.critic_warmup == NO_UPDATE_BEFORE and config.trainer.save_freq == -1
    assert config.trainer.val_before_train is False and config.trainer.test_freq == -1
    assert config.actor_rollout_ref.actor.use_kl_loss is False
    loops = OmegaConf.load(config.actor_rollout_ref.rollout.agent.agent_loop_config_path)
    assert {e["name"]: e["_target_"] for e in loops} == {"agent_tune": "verl_ext.replay_loop.RecordingLoop", **OWN}
    assert OmegaConf.select(config, MANAGER_KEY) is None  # verl's own manager


def test_replay_sets_the_replay_loop_and_manager(tmp_path) -> None:
    dump = _dump(tmp_path / "dump", steps=2)
    config = _config(tmp_path, "+debug=replay", f"agent_tune.debug.replay_dir={dump}", "trainer.total_training_steps=2")
    assert prepare_debug(RunConfig.parse(config)).options.debug.replay_dir == str(dump.resolve())
    assert OmegaConf.select(config, MANAGER_KEY) == REPLAY_MANAGER
    loops = OmegaConf.load(config.actor_rollout_ref.rollout.agent.agent_loop_config_path)
    assert {e["name"]: e["_target_"] for e in loops} == {"agent_tune": "verl_ext.replay_loop.ReplayLoop", **OWN}
    assert config.trainer.critic_warmup == 0  # the update runs


def test_replay_recipe_needs_the_folder(tmp_path) -> None:
    config = _config(tmp_path, "+debug=replay")
    with pytest.raises(OptionError, match="'agent_tune.debug.replay_dir': replay needs the folder"):
        prepare_debug(RunConfig.parse(config)).options.debug


@pytest.mark.parametrize(("overrides", "message"), [
    (["+agent_tune.trainer=one_step_off_policy"], "'agent_tune.debug.rollout_only': needs verl's v1 sync trainer"),
    (["trainer.use_v1=false"], "needs verl's v1 sync trainer .*use_v1=False"),
    (["agent_tune.task_weighting.enable=true"], "'agent_tune.task_weighting.enable': not with"),
    (["algorithm.adv_estimator=gae"], "'algorithm.adv_estimator': .* still train the critic"),
    (["actor_rollout_ref.rollout.agent.agent_loop_config_path=/x/loops.yaml"],
     "agent_loop_config_path': .*replaces agent-tune's agent loop file"),
    (["trainer.test_freq=1"], "'trainer.test_freq': set -1 with agent_tune.debug.rollout_only"),
])
def test_rollout_only_refuses(tmp_path, overrides, message) -> None:
    with pytest.raises(ConfigError, match=message):
        prepare_debug(RunConfig.parse(_config(tmp_path, "+debug=rollout_only", *overrides))).options.debug


def test_rollout_only_refuses_a_used_dump_folder(tmp_path) -> None:
    dump = _dump(tmp_path / "dump")
    with pytest.raises(ConfigError, match=r"'agent_tune.debug.dump_dir': .* already holds the dump of steps \[1\]"):
        prepare_debug(RunConfig.parse(_config(tmp_path, "+debug=rollout_only", f"agent_tune.debug.dump_dir={dump}")))


@pytest.mark.parametrize(("overrides", "message"), [
    (["trainer.total_training_steps=3"], r"'trainer.total_training_steps': 3, but .* holds steps 1..2"),
    (["trainer.val_before_train=true"], "'trainer.val_before_train': set false with agent_tune.debug.replay"),
    (["trainer.test_freq=5"], "'trainer.test_freq': set -1"),
    ([f"+{MANAGER_KEY}=my.Manager"], f"'{MANAGER_KEY}': .* uses {REPLAY_MANAGER}"),
])
def test_replay_refuses(tmp_path, overrides, message) -> None:
    dump = _dump(tmp_path / "dump", steps=2)
    with pytest.raises(ConfigError, match=message):
        prepare_debug(RunConfig.parse(_config(tmp_path, "+debug=replay", f"agent_tune.debug.replay_dir={dump}",
                              "trainer.total_training_steps=2", *overrides))).options.debug


def test_replay_refuses_a_folder_without_a_dump(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"'agent_tune.debug.replay_dir': no step dump"):
        prepare_debug(RunConfig.parse(_config(tmp_path, "+debug=replay", f"agent_tune.debug.replay_dir={tmp_path}")))
