"""The adapters' option values are checked one way, by their typed options (``AdapterOptions`` and its
subclasses): a bad value is an ``OptionError`` keyed by the option, from the constructor and from the start-up check
(``check_kwargs``) alike, before anything of the adapted framework is built."""

from __future__ import annotations

import pytest

from agent_tune.envs import get_env_class
from agent_tune.envs.adapter_options import AdapterOptions
from agent_tune.utils.typed_config import OptionError

# (env, valid kwargs apart from the bad one, the bad option and its value)
CASES = [
    ("skyrl", {}, "max_steps", 0),
    ("skyrl", {}, "stop", "</sql>"),
    ("skyrl", {}, "stop", ["</sql>", ""]),
    ("skyrl", {}, "env_config", 3),
    ("skyrl", {}, "call_timeout", 0),
    ("verifiers", {"environment": "tests.envs.no_such_module:load"}, "max_steps", 0),
    ("verifiers", {"environment": "tests.envs.no_such_module:load"}, "start_timeout", -1.0),
    ("tinker", {"builder": "tests.envs.no_such_module:Builder"}, "member", -1),
    ("tinker", {"builder": "tests.envs.no_such_module:Builder"}, "split", "dev"),
    ("agent_r1", {"env": "tests.envs.test_agent_r1_env:ReToolLikeEnv"}, "batch_window", 0.0),
    ("agent_r1", {"env": "tests.envs.test_agent_r1_env:ReToolLikeEnv"}, "env_kwargs", ["x"]),
    ("verl_tools", {"tool_config": "no_such.yaml"}, "max_parallel_calls", 0),
    ("verl_tools", {"tool_config": "no_such.yaml"}, "lifecycle", "trajectory"),
    ("verl_tools", {"tool_config": "no_such.yaml"}, "max_steps", 0),
    ("mcp", {"server": {"command": ["no-such-server"]}}, "max_steps", 0),
    ("mcp", {"server": {"command": ["no-such-server"]}}, "call_timeout", 0),
    ("nemo_gym", {"base_url": "http://127.0.0.1:9"}, "max_steps", 0),
    ("openenv", {"base_url": "http://127.0.0.1:9"}, "start_timeout", -1.0),
]


@pytest.mark.parametrize("env,valid,key,value", CASES)
def test_a_bad_value_names_its_key_from_the_constructor_and_the_start_up_check(env, valid, key, value) -> None:
    if env in ("skyrl", "tinker"):
        pytest.importorskip({"skyrl": "skyrl_gym", "tinker": "tinker_cookbook"}[env])
    cls = get_env_class(env)
    kwargs = {**valid, key: value}
    with pytest.raises(OptionError) as from_check:
        cls.check_kwargs(kwargs)
    with pytest.raises(OptionError) as from_constructor:
        cls(**kwargs)
    assert from_check.value.key == from_constructor.value.key == key


def test_the_shared_model() -> None:
    options = AdapterOptions.of({"stop": ("</a>",), "max_steps": 2, "other": 1})
    assert options.stop == ["</a>"] and options.max_steps == 2 and options.call_timeout == 60.0
    with pytest.raises(OptionError, match="'stop': got '</a>'"):
        AdapterOptions.of({"stop": "</a>"})  # refused, not split into characters
    with pytest.raises(OptionError, match="'max_steps': got True"):
        AdapterOptions.of({"max_steps": True})
