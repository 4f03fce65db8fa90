"""The environment registry: names, dotted paths, entry points, listing, errors."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import EntryPoint

import pytest

from agent_tune.envs import (
    BaseToolEnv,
    Observation,
    Outcome,
    UnknownEnvError,
    env_names,
    get_env_class,
    make_env,
    register_env,
    registry,
)
from agent_tune.envs.bfcl.multi_turn.env import BFCLToolEnv
from agent_tune.envs.registry import _BUILTIN


class _EchoEnv(BaseToolEnv):
    description = "echo test env"

    def __init__(self, greeting: str = "hi") -> None:
        self.greeting = greeting

    def reset(self, **task):
        super().reset()
        return Observation(messages=[{"role": "user", "content": self.greeting}])

    def extract_tool_calls(self, raw_response: str):
        from agent_tune.parsing import ParsedResponse

        return ParsedResponse(content=raw_response)

    def act(self, step) -> None:
        step.end_turn()

    def outcome(self) -> Outcome:
        return Outcome(1.0, 1.0)


def test_builtin_names_resolve() -> None:
    assert {"bfcl", "retool"} <= set(env_names())
    assert isinstance(make_env("bfcl", test_id="multi_turn_base_1"), BFCLToolEnv)


def test_register_decorator_and_dotted_path() -> None:
    register_env("echo_test")(_EchoEnv)
    assert make_env("echo_test", greeting="yo").reset().messages[0]["content"] == "yo"
    env = make_env(f"{__name__}:_EchoEnv")
    assert isinstance(env, _EchoEnv)
    with pytest.raises(ValueError, match="already registered"):
        register_env("echo_test")(BFCLToolEnv)
    with pytest.raises(TypeError):
        register_env("not_an_env")(object)


def test_unknown_name_lists_known_ones() -> None:
    with pytest.raises(UnknownEnvError) as err:
        make_env("no_such_env")
    assert "bfcl" in str(err.value) and "no_such_env" in str(err.value)


def test_entry_point_plugins_are_discovered(monkeypatch) -> None:
    ep = EntryPoint(name="plugin_echo", value=f"{__name__}:_EchoEnv", group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "entry_points", lambda group: [ep] if group == registry.ENTRY_POINT_GROUP else [])
    monkeypatch.setattr(registry, "_entry_points_loaded", False)
    assert "plugin_echo" in env_names()
    assert isinstance(make_env("plugin_echo"), _EchoEnv)


def test_cli_lists_envs_with_descriptions() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "agent_tune.cli", "envs"], capture_output=True, text=True, check=True
    ).stdout
    line = next(row for row in out.splitlines() if row.startswith("bfcl"))
    assert "BFCL" in line


def test_unregister_env() -> None:
    register_env("echo_unregister")(_EchoEnv)
    registry.unregister_env("echo_unregister")
    assert "echo_unregister" not in env_names()
    with pytest.raises(UnknownEnvError, match="echo_unregister"):
        make_env("echo_unregister")
    with pytest.raises(UnknownEnvError, match="never_registered"):
        registry.unregister_env("never_registered")
    register_env("echo_unregister")(_EchoEnv)  # the name is free again, for any class
    assert isinstance(make_env("echo_unregister"), _EchoEnv)


def test_registrations_do_not_leak_between_tests() -> None:
    # the earlier tests registered echo_test, plugin_echo and echo_unregister; the fixture removed them
    names = set(env_names())
    assert not names & {"echo_test", "plugin_echo", "echo_unregister"}
    assert {"bfcl", "retool", "toolcall"} <= names


def test_builtin_classes_import_from_the_package_lazily() -> None:
    """``from agent_tune.envs import BFCLToolEnv`` (and each built-in class) works, is the registered class, and
    importing the package alone loads neither bfcl-eval nor tau2."""
    import agent_tune.envs as envs

    for name, path in envs.BUILTIN_CLASSES.items():
        if name == "Tau2ToolEnv" and not _has("tau2"):
            continue
        cls = getattr(envs, name)
        assert cls.__name__ == name and cls is get_env_class(next(k for k, v in _BUILTIN.items() if v == path))
        assert name in dir(envs)
    assert envs.BFCLToolEnv is BFCLToolEnv
    with pytest.raises(AttributeError, match="NoSuchEnv"):
        envs.NoSuchEnv  # noqa: B018
    probe = ("import sys, agent_tune.envs; "
             "print(sorted(m for m in ('bfcl_eval', 'tau2', 'agent_tune.envs.bfcl.multi_turn.env') "
             "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def test_env_cards_read_from_source_match_the_classes() -> None:
    """``agent-tune envs`` reads built-ins from their source; what it reads is what the class says."""
    cards = {card.name: card for card in registry.describe_envs()}
    assert cards["openenv"].catalogue is False and cards["bfcl"].catalogue is True
    for name, path in registry._BUILTIN.items():
        static = registry._card_from_source(name, path)
        assert static is not None, f"{name}: description is not a literal in its class"
        try:
            cls = get_env_class(name)
        except ImportError:  # an optional dependency this machine lacks
            continue
        assert static == (name, cls.description, cls.catalogue is not None), name
