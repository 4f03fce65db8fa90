"""examples/run_grpo_toolrl.sh maps ToolRL's reward switches (its environment variables) to the toolcall env's
reward keys, prints the mapping, and refuses what ToolRL's reward module would ignore or stack into no variant.

The script runs with a fake interpreter (as in test_launch_scripts.py): no training starts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from agent_tune.rewards.toolrl_config import ToolRLRewardConfig
from tests.scripts.test_launch_scripts import FAKE, PATH_KEYS, REPO, USER_VARIABLES, _overrides, _read_calls

SCRIPT = REPO / "examples" / "run_grpo_toolrl.sh"
R = "agent_tune.env_kwargs.toolcall.reward"


@pytest.fixture(autouse=True)
def _needs_bash():
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")


def _script(tmp_path: Path, env_extra: dict[str, str], args: tuple[str, ...] = ()):
    """Run the script with a fake PYTHON; return its result and the interpreter calls it made."""
    log = tmp_path / "calls.txt"
    fake = tmp_path / "fake_python"
    fake.write_text(FAKE.replace("LOG", str(log)))
    fake.chmod(0o755)
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    for name in ("train.parquet", "val.parquet"):
        (data / name).write_bytes(b"")
    env = {k: v for k, v in os.environ.items() if k not in USER_VARIABLES}
    env.update(PYTHON=str(fake), DATA_DIR=str(data), WORK_DIR=str(tmp_path / "work"))
    env.update(env_extra)
    result = subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=60,
                            cwd=tmp_path)
    return result, (_read_calls(log) if log.exists() else [])


MAPPING = [
    ({"WITHLENGTH": "1"}, {"length": "fixed"}),
    ({"WITHLENGTH": "1", "SCHEDULELENGTH": "1"}, {"length": "scheduled"}),
    ({"CORRECTMAX1": "1"}, {"scale": "max1"}),
    ({"MAX1STEP30MAX3": "1"}, {"scale": "two_stage"}),
    ({"SCHEDULEREWARD": "1"}, {"scale": "smooth"}),
    ({"REFINEDREWARD": "1"}, {"granularity": "finegrained"}),
    ({"INTERMEDIATEREWARD": "1"}, {"granularity": "intermediate"}),
    ({"COARSEREWARD": "1"}, {"granularity": "coarse"}),
    # one switch of each kind together: ToolRL's module combines them too (length + scale + granularity)
    ({"WITHLENGTH": "1", "SCHEDULELENGTH": "1", "MAX1STEP30MAX3": "1", "REFINEDREWARD": "1"},
     {"length": "scheduled", "scale": "two_stage", "granularity": "finegrained"}),
]

# the switches each value comes from, as the script prints them
SOURCE = {"fixed": "WITHLENGTH=1", "scheduled": "WITHLENGTH=1 SCHEDULELENGTH=1", "max1": "CORRECTMAX1=1",
          "two_stage": "MAX1STEP30MAX3=1", "smooth": "SCHEDULEREWARD=1", "finegrained": "REFINEDREWARD=1",
          "intermediate": "INTERMEDIATEREWARD=1", "coarse": "COARSEREWARD=1"}


@pytest.mark.parametrize("switches,keys", MAPPING)
def test_each_switch_reaches_its_key_and_is_printed(tmp_path, switches, keys):
    result, calls = _script(tmp_path, switches)
    assert result.returncode == 0, result.stderr
    overrides = _overrides(calls)
    assert {k: v for k, v in overrides.items() if k not in PATH_KEYS} == {f"{R}.{k}": v for k, v in keys.items()}
    printed = [line for line in result.stdout.splitlines() if line.startswith("ToolRL switches:")]
    assert printed == [f"ToolRL switches: {SOURCE[v]} -> {R}.{k}={v}" for k, v in keys.items()]
    # every value the script passes is one the reward config takes
    ToolRLRewardConfig(**keys, total_training_steps=105)


@pytest.mark.parametrize("value", ["0", ""])
def test_a_switch_set_to_0_or_empty_is_off(tmp_path, value):
    result, calls = _script(tmp_path, {name: value for name in (
        "WITHLENGTH SCHEDULELENGTH CORRECTMAX1 MAX1STEP30MAX3 SCHEDULEREWARD REFINEDREWARD INTERMEDIATEREWARD "
        "COARSEREWARD").split()})
    assert result.returncode == 0, result.stderr
    assert set(_overrides(calls)) <= PATH_KEYS and "ToolRL switches" not in result.stdout


REFUSED = [
    ({"WITHLENGTH": "true"}, "WITHLENGTH=true: ToolRL turns a switch on only with 1"),
    ({"CORRECTMAX1": "yes"}, "CORRECTMAX1=yes"),
    ({"SCHEDULELENGTH": "1"}, "SCHEDULELENGTH=1 without WITHLENGTH=1"),
    ({"CORRECTMAX1": "1", "MAX1STEP30MAX3": "1"}, "CORRECTMAX1=1 MAX1STEP30MAX3=1: ToolRL rescales"),
    ({"CORRECTMAX1": "1", "SCHEDULEREWARD": "1"}, "CORRECTMAX1=1 SCHEDULEREWARD=1"),
    ({"MAX1STEP30MAX3": "1", "SCHEDULEREWARD": "1"}, "MAX1STEP30MAX3=1 SCHEDULEREWARD=1"),
    ({"COARSEREWARD": "1", "REFINEDREWARD": "1"}, "COARSEREWARD=1 with REFINEDREWARD=1"),
    ({"COARSEREWARD": "1", "INTERMEDIATEREWARD": "1"}, "COARSEREWARD=1 with INTERMEDIATEREWARD=1"),
    ({"REFINEDREWARD": "1", "INTERMEDIATEREWARD": "1"}, "REFINEDREWARD=1 with INTERMEDIATEREWARD=1"),
    ({"CORRECTMAX1": "1", "REWARD_SCALE": "smooth"}, f"means {R}.scale=max1 but REWARD_SCALE=smooth"),
    ({"WITHLENGTH": "1", "REWARD_LENGTH": "scheduled"}, f"means {R}.length=fixed but REWARD_LENGTH=scheduled"),
]


@pytest.mark.parametrize("switches,words", REFUSED)
def test_combinations_toolrl_would_not_run_are_refused_before_anything_runs(tmp_path, switches, words):
    rlla = tmp_path / "rlla_rl.json"
    rlla.write_text("[]")
    result, calls = _script(tmp_path, {**switches, "RLLA_FILE": str(rlla), "DATA_DIR": str(tmp_path / "fresh")})
    assert result.returncode == 2 and words in result.stderr, result.stderr
    assert calls == []  # neither the data build nor the training ran


def test_an_argument_setting_the_same_key_otherwise_is_refused(tmp_path):
    result, calls = _script(tmp_path, {"MAX1STEP30MAX3": "1"}, (f"++{R}.scale=smooth",))
    assert result.returncode == 2 and f"the argument {R}.scale=smooth sets it too" in result.stderr
    assert calls == []


def test_agreeing_settings_pass_once_more(tmp_path):
    """A switch and REWARD_SCALE or an argument that say the same thing are not a conflict."""
    result, calls = _script(tmp_path, {"CORRECTMAX1": "1", "REWARD_SCALE": "max1"}, (f"{R}.scale=max1",))
    assert result.returncode == 0, result.stderr
    assert _overrides(calls)[f"{R}.scale"] == "max1"
