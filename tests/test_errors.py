"""The exception tree (:mod:`agent_tune.errors`): every exception class defined in ``agent_tune`` and ``verl_ext``
derives from one branch of :class:`AgentTuneError`, class names are unique, copies made by pickle (Ray) are
equal to the original, and commands exit with their branch's status.

The classes are collected in a fresh interpreter (:data:`PROBE`) that imports every module of both packages:
some modules act when imported (``verl_ext.cpu.plugin`` registers a vLLM platform), which must not leak into
the other tests of this process. A module whose optional third-party dependency is missing is skipped; an
import that fails inside our own code fails the test.
"""

from __future__ import annotations

import importlib
import json
import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_tune.errors import (
    EXIT_CODES,
    AgentTuneError,
    ConfigError,
    DataError,
    EnvError,
    RolloutError,
    SetupError,
    exit_code,
)

REPO = Path(__file__).resolve().parents[1]
# Exits raised on purpose as a SystemExit, never an Exception: RunPartDied is raised by a signal handler in the
# training child's main thread and must pass through ``except Exception`` in verl's and Ray's code (ray.get)
EXITS = {"agent_tune.launch.watchdog:RunPartDied"}
BRANCHES = ("ConfigError", "DataError", "SetupError", "EnvError", "RolloutError")
ROOT = "agent_tune.errors.AgentTuneError"

PROBE = r'''
import importlib, inspect, json, pickle, pkgutil, sys
import agent_tune, verl_ext

OURS = ("agent_tune", "verl_ext")


def ours(name):
    return name is not None and name.split(".")[0] in OURS


def custom_init(cls):
    owner = next(c for c in cls.__mro__ if "__init__" in vars(c))
    return ours(owner.__module__)


def pickle_problem(cls):
    try:
        exc = cls("a message")
        copy = pickle.loads(pickle.dumps(exc))
    except Exception as e:  # noqa: BLE001 - reported, the test fails naming the class
        return f"{type(e).__name__}: {e}"
    if type(copy) is not cls or copy.args != exc.args or str(copy) != str(exc) or vars(copy) != vars(exc):
        return f"the copy differs: {copy!r} {vars(copy)} != {exc!r} {vars(exc)}"
    return None


classes, skipped = [], []
for package in (agent_tune, verl_ext):
    names = [package.__name__] + [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".",
                                                                         onerror=lambda name: None)]
    for name in names:
        try:
            module = importlib.import_module(name)
        except ImportError as exc:
            if ours(exc.name) or exc.name is None:
                raise  # our own code failed to import
            skipped.append(f"{name} (no {exc.name})")
            continue
        for cls in vars(module).values():
            if inspect.isclass(cls) and issubclass(cls, BaseException) and cls.__module__ == module.__name__:
                classes.append({
                    "name": cls.__name__,
                    "where": f"{cls.__module__}:{cls.__qualname__}",
                    "mro": [f"{c.__module__}.{c.__qualname__}" for c in cls.__mro__],
                    "custom_init": custom_init(cls),
                    "pickle_problem": None if custom_init(cls) else pickle_problem(cls),
                })
print(json.dumps({"classes": classes, "skipped": skipped}))
'''


@pytest.fixture(scope="module")
def probe() -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.returncode == 0, out.stderr[-6000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_every_exception_derives_from_one_branch_of_the_root(probe) -> None:
    classes = probe["classes"]
    assert len(classes) > 40, probe  # the collection found them (45 when written)
    outside, branches = [], {}
    for c in classes:
        if c["where"].startswith("agent_tune.errors:"):
            continue
        if c["where"] in EXITS:  # a SystemExit on purpose, and only that
            assert "builtins.SystemExit" in c["mro"] and "builtins.Exception" not in c["mro"], c
            continue
        if ROOT not in c["mro"]:
            outside.append(c["where"])
        on = [b for b in BRANCHES if f"agent_tune.errors.{b}" in c["mro"]]
        if len(on) != 1:
            branches[c["where"]] = on
    assert not outside, f"not an AgentTuneError (derive from a branch of agent_tune.errors): {outside}"
    assert not branches, f"on no branch or on several: {branches}"


def test_the_errors_module_holds_the_root_its_branches_and_the_env_contracts_error_only(probe) -> None:
    defined = {c["name"]: c["mro"][1] for c in probe["classes"] if c["where"].startswith("agent_tune.errors:")}
    assert defined == {"AgentTuneError": "builtins.Exception", **{b: ROOT for b in BRANCHES},
                       "BackendGoneError": "agent_tune.errors.EnvError"}
    assert set(EXIT_CODES) == {ConfigError, DataError, SetupError, EnvError, RolloutError}


def test_exception_names_are_unique(probe) -> None:
    where: dict[str, list[str]] = {}
    for c in probe["classes"]:
        where.setdefault(c["name"], []).append(c["where"])
    assert {n: w for n, w in where.items() if len(w) > 1} == {}


# The builtins the classes refined before the tree: `except ValueError` and `pytest.raises(RuntimeError)` keep
# catching them.
BUILTINS = {
    "ConfigError": "ValueError", "OptionError": "ValueError", "CurriculumError": "ValueError",
    "ConfigFileError": "ValueError", "ParserSpecError": "ValueError", "UnknownEnvError": "KeyError",
    "UnknownParserError": "KeyError", "UnknownTemplateError": "KeyError",
    "DumpError": "ValueError", "BadConversation": "ValueError", "RllaFormatError": "ValueError",
    "BFCLDataError": "LookupError", "ResultsFileError": "ValueError", "SFTDataError": "ValueError",
    "SFTDatasetError": "ValueError",
    "InstallError": "RuntimeError", "SandboxUnavailableError": "RuntimeError", "PidsCgroupUnavailable": "RuntimeError",
    "SmolLM2NotFoundError": "FileNotFoundError", "QwenVocabNotFoundError": "FileNotFoundError",
    "EnvStateError": "RuntimeError", "EnvCheckError": "AssertionError", "BackendGoneError": "RuntimeError",
    "UserError": "RuntimeError",
    "EndpointUnavailableError": "ValueError", "UserUnavailableError": "ValueError",
    "TrajectoryError": "ValueError", "PromptTooLongError": "ValueError", "TemplateError": "ValueError",
    "UnshownFieldError": "ValueError", "TokenIdsUnavailableError": "RuntimeError", "EvalAbortedError": "RuntimeError",
    "ServerError": "RuntimeError", "ServerUnavailableError": "RuntimeError", "ModelNotFoundError": "RuntimeError",
    "RequestError": "RuntimeError", "UnusableAnswerError": "RuntimeError",
}


def test_each_class_still_refines_its_builtin(probe) -> None:
    mro = {c["name"]: c["mro"] for c in probe["classes"]}
    lost = {n: b for n, b in BUILTINS.items() if n in mro and f"builtins.{b}" not in mro[n]}
    assert lost == {}


def test_exceptions_with_the_usual_constructor_survive_pickling(probe) -> None:
    assert {c["where"]: c["pickle_problem"] for c in probe["classes"] if c["pickle_problem"]} == {}


# One instance of each class whose constructor is its own (or a parent's of ours), as its raiser builds it; by
# class name (names are unique), wherever its module lives.
CUSTOM: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "OptionError": (("trainer.total_epochs", "must be positive, got 0"), {}),
    "BadConversation": (("row 3: 9000 tokens > data.max_length 8192", "too_long"), {}),
    "UnshownFieldError": (
        ("message 2 (role 'assistant'): field 'reasoning_content' ...", "reasoning_content", 2, "assistant", "qwen3"),
        {}),
    "_Refused": (
        ({"code": "VALIDATION_ERROR", "message": "bad", "errors": [{"loc": ["action", "x"], "msg": "required"}]},),
        {}),
    "DecodeFailure": (("unterminated string at 12",), {}),
    "ServerUnavailableError": (
        ("http://127.0.0.1:9/v1 unreachable",), {"url": "http://127.0.0.1:9/v1", "attempts": 3, "last": "HTTP 503"}),
    "ModelNotFoundError": (("model 'm' is not served",), {"served": ("a", "b")}),
    "RequestError": ((400, "prompt too long"), {}),
    "Interrupted": ((signal.SIGTERM,), {}),
    "EnvTimeoutError": ((5.0, "skyrl env gsm8k step"), {}),
    "StartTimeoutError": ((60.0, "skyrl env gsm8k start"), {}),
    "BackendGoneError": (("connection lost: ConnectionClosed",), {"timed_out": True}),
}


def test_every_custom_constructor_has_a_pickling_case(probe) -> None:
    found = {c["name"] for c in probe["classes"] if c["custom_init"]}
    assert found - set(CUSTOM) == set()
    if not probe["skipped"]:  # every module imported: no stale case either
        assert set(CUSTOM) - found == set()


@pytest.mark.parametrize("name", sorted(CUSTOM))
def test_exceptions_with_their_own_constructor_survive_pickling(name: str, probe) -> None:
    where = {c["name"]: c["where"] for c in probe["classes"]}.get(name)
    if where is None:
        pytest.skip(f"not found; modules skipped: {probe['skipped']}")
    module_name, _, qualname = where.partition(":")
    cls = getattr(importlib.import_module(module_name), qualname)
    args, kwargs = CUSTOM[name]
    exc = cls(*args, **kwargs)
    for copy in (pickle.loads(pickle.dumps(exc)), pickle.loads(pickle.dumps(exc, protocol=2))):
        assert type(copy) is cls and copy.args == exc.args and str(copy) == str(exc)
        assert vars(copy) == vars(exc)


def test_exit_codes_follow_the_branch() -> None:
    from agent_tune.launch.curriculum import CurriculumError
    from agent_tune.launch.launcher import InstallError
    from agent_tune.openai_client import ServerUnavailableError
    from agent_tune.utils.typed_config import OptionError

    assert EXIT_CODES == {ConfigError: 2, DataError: 3, SetupError: 4, EnvError: 1, RolloutError: 1}
    assert exit_code(OptionError("a.b", "bad")) == exit_code(CurriculumError("x")) == 2
    assert exit_code(DataError("x")) == 3 and exit_code(InstallError("x")) == 4
    assert exit_code(ServerUnavailableError("x")) == exit_code(EnvError("x")) == 1
    # outside the tree: the command's own default (1 unless it says otherwise)
    assert exit_code(ValueError("x")) == exit_code(AgentTuneError("x")) == 1
    assert exit_code(OSError("x"), default=2) == 2 and exit_code(ConfigError("x"), default=5) == 2


def test_commands_exit_with_their_branchs_status(tmp_path: Path, capsys) -> None:
    from agent_tune.cli import main

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"instruction": "x"}]))
    assert main(["sft-data", "--format", "rlla_sft", str(bad), str(tmp_path / "o.jsonl")]) == 3  # DataError
    assert "bad.json record" in capsys.readouterr().err
    assert main(["data", "--env", "no_such_env", "--split", "train", "--out", str(tmp_path)]) == 2  # ConfigError
    assert "unknown environment 'no_such_env'" in capsys.readouterr().err
