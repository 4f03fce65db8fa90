"""Composing an agent-tune Hydra config, as every launcher does first.

:func:`compose_config` composes a config of ``config/`` (the checkout's folder, or the copy an installed
wheel carries: :func:`default_config_dir`) with Hydra overrides and resolves agent-tune's own resolvers
(:mod:`agent_tune.launch.resolvers`); a config that does not exist, an unknown key or a malformed value
raises :class:`~agent_tune.errors.ConfigError` naming the key. :func:`resolve_model_paths` turns the model
alias ``smollm2`` into the converted Hugging Face folder, :func:`check_data_files` checks the local data files.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import re
from pathlib import Path
from typing import Sequence

from omegaconf import DictConfig, OmegaConf, open_dict

from agent_tune.errors import ConfigError
from agent_tune.launch.resolvers import resolve_own

SMOLLM2_ALIAS = "smollm2"
SMOLLM2_DIRNAME = "SmolLM2-135M-Instruct"
DATA_KEYS = ("data.train_files", "data.val_files")


def default_config_dir() -> Path:
    """The configs: the checkout's ``config/`` folder, else the copy a wheel ships in ``agent_tune/config``."""
    package = Path(__file__).resolve().parents[1]  # agent_tune/
    checkout = package.parent / "config"  # in site-packages this may be some other distribution's folder
    return checkout if (checkout / "base" / "agent_tune.yaml").is_file() else package / "config"


def check_override_syntax(parser: argparse.ArgumentParser, overrides: Sequence[str]) -> None:
    """Exit through ``parser.error`` on an argument that is not a Hydra override (``key=value``, ``~key``)."""
    for item in overrides:
        if item.startswith("-"):
            parser.error(f"unknown option {item!r} (overrides look like key=value)")
        if "=" not in item and not item.startswith("~"):
            parser.error(f"override {item!r} is not key=value")


def compose_config(config_name: str, overrides: Sequence[str] = (), config_dir: str | Path | None = None) -> DictConfig:
    """Compose ``config_name`` with ``overrides`` through Hydra's compose API.

    Raises:
        ConfigError: a config that does not exist, or an override naming a key the config lacks (the
            message names the key and how to add a new one) or holding a malformed value.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    config_dir = Path(config_dir) if config_dir is not None else default_config_dir()
    if not config_dir.is_dir():
        raise ConfigError(f"config folder {config_dir} does not exist")
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir.resolve()), version_base=None):
            config = compose(config_name=config_name,
                             overrides=[*overrides, *_file_search_path(config_dir, config_name, overrides)])
            resolve_own(config)  # ${agent_tune_sum:...} values become numbers before verl's Ray actors see them
            return config
    except (HydraException, OmegaConfBaseException) as exc:
        raise ConfigError(_explain(exc, config_name, overrides, config_dir)) from exc
    finally:
        GlobalHydra.instance().clear()


VERL_CONFIGS = "pkg://verl.trainer.config"


def _file_search_path(config_dir: Path, config_name: str, overrides: Sequence[str]) -> list[str]:
    """The override that reads verl's configs from their folder rather than as a package: Hydra's ``pkg://`` source
    imports ``verl`` (torch with it, several seconds and verl's import-time warnings) before any key is checked. [] when
    the config's search path is not the shipped one, the user sets it, or verl is not installed (Hydra then says so)."""
    if any(o.lstrip("+~").startswith("hydra.searchpath") for o in overrides):
        return []
    try:
        declared = OmegaConf.select(OmegaConf.load(config_dir / f"{config_name}.yaml"), "hydra.searchpath")
        spec = importlib.util.find_spec("verl")  # a top-level package: found, not imported
    except Exception:  # a missing or unreadable config: compose reports it
        return []
    if declared is None or VERL_CONFIGS not in list(declared) or spec is None or not spec.submodule_search_locations:
        return []
    folder = Path(next(iter(spec.submodule_search_locations))) / "trainer" / "config"
    if not folder.is_dir():
        return []
    paths = [folder.as_uri() if p == VERL_CONFIGS else str(p) for p in declared]
    return [f"hydra.searchpath=[{','.join(paths)}]"]


def shipped_configs(config_dir: str | Path | None = None) -> list[str]:
    """The config names ``--config-name`` takes: the YAML files at the top of the config folder."""
    folder = Path(config_dir) if config_dir is not None else default_config_dir()
    return sorted(p.stem for p in folder.glob("*.yaml"))


def _did_you_mean(word: str, choices: Sequence[str]) -> str | None:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return close[0] if close else None


_MISSING_KEY = (re.compile(r"Key '[^']*' is not in struct"), re.compile(r"Could not delete from config\. '([^']+)'"))


def _explain(exc: BaseException, config_name: str, overrides: Sequence[str], config_dir: Path) -> str:
    """One line for a composition error: a missing config lists the shipped ones, a key the config lacks gets the
    closest existing key; anything else is :func:`describe_config_error`'s message."""
    detail = describe_config_error(exc)
    if f"Cannot find primary config '{config_name}'" in detail:
        names = shipped_configs(config_dir)
        close = _did_you_mean(config_name, names)
        hint = f"did you mean {close}? " if close else ""
        return f"config '{config_name}' does not exist in {config_dir}: {hint}the configs: {', '.join(names)}"
    key = _missing_key(exc, detail)
    if key is None:
        return detail
    override = next((o for o in overrides if o.lstrip("~").split("=", 1)[0] == key), f"{key}=...")
    parent, _, leaf = key.rpartition(".")
    siblings = _keys_under(config_name, [o for o in overrides if o != override], config_dir, parent)
    close = _did_you_mean(leaf, siblings) if siblings else None
    if close is not None:
        suggestion = f"did you mean {parent + '.' if parent else ''}{close}?"
    else:
        shown = ", ".join(siblings[:12]) + (f" and {len(siblings) - 12} more" if len(siblings) > 12 else "")
        suggestion = f"the keys under '{parent or '(top)'}': {shown}" if siblings else "no such key"
    add = "" if override.startswith("~") else f" (a key the config lacks is added as +{override.lstrip('+')})"
    return f"config key '{key}' does not exist: {suggestion}{add}"


def _missing_key(exc: BaseException, detail: str) -> str | None:
    """The dotted key an override names that the config lacks, else None."""
    if _MISSING_KEY[0].search(detail):
        node: BaseException | None = exc
        while node is not None:
            if getattr(node, "full_key", None):
                return str(node.full_key)
            node = node.__cause__ or node.__context__
    deleted = _MISSING_KEY[1].search(detail)
    return deleted.group(1) if deleted else None


def _keys_under(config_name: str, overrides: Sequence[str], config_dir: Path, parent: str) -> list[str]:
    """The keys the config (composed without the failing override) holds under ``parent``; [] if it does not
    compose or ``parent`` is not a mapping."""
    try:
        config = compose_config(config_name, overrides, config_dir)
    except ConfigError:
        return []
    node = OmegaConf.select(config, parent, default=None) if parent else config
    return [str(k) for k in node.keys()] if OmegaConf.is_dict(node) else []


def describe_config_error(exc: BaseException) -> str:
    """One readable message from Hydra's exception chain, leading with the key when there is one."""
    messages = []
    full_key = None
    node: BaseException | None = exc
    while node is not None:
        text = str(node).strip()
        if text and text not in messages:
            messages.append(text)
        full_key = full_key or getattr(node, "full_key", None)
        node = node.__cause__ or node.__context__
    detail = "\n".join(messages)
    if full_key:
        return f"config key '{full_key}': {detail}"
    return detail


def smollm2_dir(model_cache_dir: str | None) -> Path:
    """Where the alias ``smollm2`` resolves: ``<agent_tune.model_cache_dir>/SmolLM2-135M-Instruct`` (``None``:
    ``~/.cache/agent_tune/models``)."""
    return Path(model_cache_dir or "~/.cache/agent_tune/models").expanduser() / SMOLLM2_DIRNAME


def resolve_model_paths(config: DictConfig, keys: Sequence[str], model_cache_dir: str | None = None) -> None:
    """Replace the alias ``smollm2`` at the model/tokenizer path ``keys`` by the cached HF folder under
    ``model_cache_dir`` (``agent_tune.model_cache_dir``; converting once); a failure names the first key holding
    the alias."""
    aliased = [k for k in keys if OmegaConf.select(config, k, default=None) == SMOLLM2_ALIAS]
    if not aliased:
        return
    from agent_tune.models.smollm2 import SmolLM2NotFoundError, ensure_smollm2

    try:
        path = str(ensure_smollm2(smollm2_dir(model_cache_dir)))
    except (SmolLM2NotFoundError, FileExistsError) as exc:
        raise ConfigError(f"config key '{aliased[0]}' ({SMOLLM2_ALIAS}): {exc}") from exc
    with open_dict(config):
        for key in keys:
            if OmegaConf.select(config, key, default=None) == SMOLLM2_ALIAS:
                OmegaConf.update(config, key, path, merge=False)


def data_files(config: DictConfig) -> list[tuple[str, str]]:
    """``(key, file)`` for each entry of ``data.train_files`` / ``data.val_files`` (one file or a list)."""
    out = []
    for key in DATA_KEYS:
        value = OmegaConf.select(config, key, default=None)
        if value is None:
            continue
        out += [(key, str(item)) for item in ([value] if isinstance(value, str) else list(value))]
    return out


def check_data_files(config: DictConfig) -> None:
    """Fail early, naming the key, when a local ``data.train_files`` / ``data.val_files`` entry is missing."""
    for key, item in data_files(config):
        if "://" in item:  # hdfs://, s3://...: verl copies those itself
            continue
        if not Path(item).expanduser().exists():
            raise ConfigError(f"config key '{key}': file {item} does not exist; {rows_hint(config)}")


def rows_hint(config: DictConfig) -> str:
    """How to build the rows a config trains on: ``agent-tune data`` for the first env it configures
    (``agent_tune.env_kwargs``) that declares a task catalogue, and the overrides that point at them."""
    from agent_tune.envs import get_env_class

    envs = list(OmegaConf.select(config, "agent_tune.env_kwargs", default=None) or [])
    for name in envs:
        try:
            catalogue = get_env_class(str(name)).catalogue
        except Exception:  # an env that does not import here cannot tell: the next one may
            continue
        if catalogue is None:
            continue
        splits = list(catalogue.splits)
        train = "train" if "train" in splits else splits[0]
        val = next((s for s in ("val", "validation", "test") if s in splits), train)
        folder = f"data/{name}"
        wanted = " ".join(dict.fromkeys((train, val)))
        return (f"build the rows with `agent-tune data --env {name} --split {wanted} --out {folder}` (--options JSON "
                f"for the catalogue's own choices, such as a source file), then pass "
                f"data.train_files={folder}/{train}.parquet data.val_files={folder}/{val}.parquet")
    return ("build the rows with `agent-tune data --env NAME --split train test --out DIR` (`agent-tune envs` marks "
            "the envs with tasks) or a data_preprocess/ script, then pass data.train_files=... data.val_files=...")
