"""Paths a run saves that point into its own folder, kept relative to it, so a run folder can be copied or moved.

A run folder (``trainer.default_local_dir``) holds the config its child ran (``train_config.yaml``), and a
curriculum folder its state file; both name files of the run itself (``agent_tune.episodes.dir``, the metrics
files, the sample folder, checkpoints, exported models). Saved absolute, those names break when the folder is
copied elsewhere (a cluster's run opened on a laptop). So:

- **the saved config** holds each of them as ``${trainer.default_local_dir}/<relative path>`` (OmegaConf's own
  interpolation; ``trainer.default_local_dir`` itself stays the absolute path it was written at, for the record),
  and whoever reads it (:func:`load_run_config`: the training child, ``agent-tune view``) first sets
  ``trainer.default_local_dir`` to the folder the file is in now;
- **other saved paths** (a curriculum's checkpoint and model) are stored relative (:func:`store_path`) and read
  against the folder (:func:`read_path`), an absolute one of an older file moved along when it is gone.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from omegaconf import DictConfig, OmegaConf

RUN_DIR_KEY = "trainer.default_local_dir"
RUN_DIR_REF = "${" + RUN_DIR_KEY + "}"
_FILE_URI = "file:"  # MLflow's tracking URI of the run folder (agent_tune/launch/train.py:logger_locations)


def _inside(path: str, folder: Path) -> str | None:
    """``path`` relative to ``folder`` (POSIX; ``""``: the folder itself), or ``None`` when it is not inside."""
    if not path.startswith("/"):
        return None
    try:
        rel = PurePosixPath(path).relative_to(PurePosixPath(str(folder)))
    except ValueError:
        return None
    return "" if str(rel) == "." else str(rel)


def store_path(path: str | Path, folder: Path) -> str:
    """How a path is saved in ``folder``'s files: relative when it is inside ``folder``, else as given."""
    rel = _inside(str(path), folder)
    return str(path) if rel is None else (rel or ".")


def read_path(saved: str | Path, folder: Path, saved_folder: str | Path | None = None) -> Path:
    """A path ``folder``'s files saved, where it is now: a relative one under ``folder``; an absolute one as it is,
    unless it is gone and was inside ``saved_folder`` (the folder's old place, a file written before paths were
    saved relative), then the same place under ``folder``."""
    path = Path(saved)
    if not path.is_absolute():
        return folder / path
    if saved_folder is not None and not path.exists():
        rel = _inside(str(path), Path(saved_folder))
        if rel is not None:
            return folder / rel if rel else folder
    return path


def _map_strings(value: Any, fn: Any) -> Any:
    if isinstance(value, dict):
        return {k: _map_strings(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [_map_strings(v, fn) for v in value]
    return fn(value) if isinstance(value, str) else value


def portable_config(config: DictConfig, run_dir: Path) -> DictConfig:
    """The config as saved in ``run_dir``: every string naming a path inside it (``file:`` URIs too) written as
    ``${trainer.default_local_dir}/<relative path>``; ``trainer.default_local_dir`` itself as it is."""
    def portable(text: str) -> str:
        scheme = _FILE_URI if text.startswith(_FILE_URI + "/") else ""
        rel = _inside(text[len(scheme):], run_dir)
        if rel is None:
            return text
        return scheme + (f"{RUN_DIR_REF}/{rel}" if rel else RUN_DIR_REF)

    container = OmegaConf.to_container(config, resolve=False)
    here = OmegaConf.select(config, RUN_DIR_KEY, default=None)
    out = OmegaConf.create(_map_strings(container, portable))
    if here is not None:
        OmegaConf.update(out, RUN_DIR_KEY, str(here), merge=False)
    return out


def localized_config(config: DictConfig, run_dir: Path) -> DictConfig:
    """A saved run config read in the folder it is in now (``run_dir``): ``trainer.default_local_dir`` set to it,
    its references resolved to paths there; an absolute path of an older file that is gone and was inside the old
    ``trainer.default_local_dir`` moved along (:func:`read_path`)."""
    run_dir = Path(run_dir).resolve()
    old = OmegaConf.select(config, RUN_DIR_KEY, default=None)
    old = None if old is None else str(old)

    def local(text: str) -> str:
        if RUN_DIR_REF in text:
            return text.replace(RUN_DIR_REF, str(run_dir))
        if old and text.startswith(old) and _inside(text, Path(old)) is not None:
            return str(read_path(text, run_dir, old))
        return text

    out = OmegaConf.create(_map_strings(OmegaConf.to_container(config, resolve=False), local))
    OmegaConf.update(out, RUN_DIR_KEY, str(run_dir), merge=False, force_add=True)
    return out


def save_run_config(config: DictConfig, path: Path) -> None:
    """Save the config a run's child runs as ``path`` (in the run folder), its paths into the folder relative."""
    OmegaConf.save(portable_config(config, path.parent.resolve()), path)


def load_run_config(path: str | Path) -> DictConfig:
    """A config saved by :func:`save_run_config`, read where the file is now (:func:`localized_config`)."""
    path = Path(path)
    return localized_config(OmegaConf.load(path), path.parent)
