"""The environment registry: one place mapping names to environment classes.

Three ways in: the ``@register_env("name")`` decorator, the built-in table below (imported lazily
so that listing names never imports optional dependencies), and the ``agent_tune.envs`` entry-point
group, through which an installed plugin package adds environments. ``make_env`` also accepts a
``package.module:Class`` path.
"""

from __future__ import annotations

import ast
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Callable, NamedTuple, TypeVar

from agent_tune.envs.base import BaseToolEnv
from agent_tune.errors import ConfigError
from agent_tune.utils.imports import import_object

ENTRY_POINT_GROUP = "agent_tune.envs"

# Built-in environments: name -> "module:Class", imported on first use.
_BUILTIN: dict[str, str] = {
    "agent_r1": "agent_tune.envs.agent_r1.env:AgentR1Env",
    "bfcl": "agent_tune.envs.bfcl.multi_turn.env:BFCLToolEnv",
    "mcp": "agent_tune.envs.mcp.env:MCPToolEnv",
    "nemo_gym": "agent_tune.envs.nemo_gym.env:NemoGymEnv",
    "openenv": "agent_tune.envs.openenv.env:OpenEnvEnv",
    "retool": "agent_tune.envs.retool.env:ReToolToolEnv",
    "skyrl": "agent_tune.envs.skyrl.env:SkyRLGymEnv",
    "tau2": "agent_tune.envs.tau2.env:Tau2ToolEnv",
    "tinker": "agent_tune.envs.tinker.env:TinkerEnv",
    "toolcall": "agent_tune.envs.toolcall.env:ToolCallToolEnv",
    "verifiers": "agent_tune.envs.verifiers.env:VerifiersEnv",
    "verl_tools": "agent_tune.envs.verl_tools.env:VerlToolsEnv",
}

# The same classes by class name ("BFCLToolEnv": "module:Class"), for `from agent_tune.envs import BFCLToolEnv`.
BUILTIN_CLASSES: dict[str, str] = {path.rpartition(":")[2]: path for path in _BUILTIN.values()}

_registered: dict[str, type[BaseToolEnv] | str] = dict(_BUILTIN)
_entry_points_loaded = False

E = TypeVar("E", bound=type[BaseToolEnv])


class UnknownEnvError(ConfigError, KeyError):
    """Raised when an environment name is not registered; the message lists the known names."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0])


def register_env(name: str) -> Callable[[E], E]:
    """Class decorator registering an environment under ``name``."""

    def deco(cls: E) -> E:
        if not (isinstance(cls, type) and issubclass(cls, BaseToolEnv)):
            raise TypeError(f"@register_env({name!r}) must decorate a BaseToolEnv subclass, got {cls!r}")
        existing = _registered.get(name)
        if existing is not None and not isinstance(existing, str) and existing is not cls:
            raise ValueError(f"environment name {name!r} is already registered to {existing.__qualname__}")
        _registered[name] = cls
        cls._registered_as = name
        return cls

    return deco


def unregister_env(name: str) -> None:
    """Remove ``name`` from the registry (a decorated class, a plugin's entry point or a built-in).

    A removed built-in or entry point does not come back in this process. Raises UnknownEnvError for a
    name that is not registered.
    """
    _load_entry_points()
    if name not in _registered:
        raise UnknownEnvError(f"unknown environment {name!r}; known: {', '.join(env_names())}")
    del _registered[name]


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        _registered.setdefault(ep.name, ep.value)


def _import_path(path: str) -> type[BaseToolEnv]:
    if ":" not in path:
        raise ValueError(f"environment path {path!r} must look like 'package.module:Class'")
    cls = import_object(path)
    if not (isinstance(cls, type) and issubclass(cls, BaseToolEnv)):
        raise TypeError(f"{path!r} is not a BaseToolEnv subclass")
    return cls


def env_names() -> list[str]:
    """All registered environment names, sorted."""
    _load_entry_points()
    return sorted(_registered)


def get_env_class(name: str) -> type[BaseToolEnv]:
    """Resolve ``name`` (a registered name or ``package.module:Class``) to its class."""
    if not _entry_points_loaded:  # checked here: one lookup per env built (make_env)
        _load_entry_points()
    if name not in _registered:
        if ":" in name:
            return _import_path(name)
        raise UnknownEnvError(f"unknown environment {name!r}; known: {', '.join(env_names())}")
    entry = _registered[name]
    if isinstance(entry, str):
        entry = _import_path(entry)
        _registered[name] = entry
    return entry


def make_env(name: str, **kwargs: Any) -> BaseToolEnv:
    """Build an environment by registered name or ``package.module:Class`` path."""
    return get_env_class(name)(**kwargs)


class EnvCard(NamedTuple):
    """What ``agent-tune envs`` shows of an env: its name, its one-line description, whether it has a task
    catalogue (``agent-tune data`` / ``eval --env``)."""

    name: str
    description: str
    catalogue: bool


def describe_envs() -> list[EnvCard]:
    """An :class:`EnvCard` for every registered environment. A built-in one is read from its source (listing must
    not import tau2 or litellm); an env that is imported to be described and fails says why inline."""
    rows = []
    for name in env_names():
        entry = _registered[name]
        card = _card_from_source(name, entry) if isinstance(entry, str) else None
        if card is not None:
            rows.append(card)
            continue
        try:
            cls = get_env_class(name)
            rows.append(EnvCard(name, cls.description or "", cls.catalogue is not None))
        except Exception as exc:  # an optional dependency is missing: say so, keep listing
            rows.append(EnvCard(name, f"(unavailable: {type(exc).__name__}: {exc})", False))
    return rows


def _card_from_source(name: str, path: str) -> EnvCard | None:
    """The card of a built-in env class ``path`` (``agent_tune....:Class``) from its module's source, when the class
    itself assigns ``description`` a string and ``catalogue`` a value; None otherwise (the caller imports it)."""
    module, _, class_name = path.partition(":")
    root = Path(__file__).resolve().parents[1]  # agent_tune/
    if not module.startswith("agent_tune."):
        return None
    file = root.joinpath(*module.split(".")[1:]).with_suffix(".py")
    try:
        tree = ast.parse(file.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return None
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name), None)
    if cls is None:
        return None
    values: dict[str, ast.expr] = {}
    for node in cls.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            values[node.targets[0].id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            values[node.target.id] = node.value
    description = values.get("description")
    if not (isinstance(description, ast.Constant) and isinstance(description.value, str)):
        return None
    catalogue = values.get("catalogue")
    has_catalogue = catalogue is not None and not (isinstance(catalogue, ast.Constant) and catalogue.value is None)
    return EnvCard(name, description.value, has_catalogue)
