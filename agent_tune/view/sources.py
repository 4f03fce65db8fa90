"""What ``agent-tune view`` reads: a training run folder, a curriculum run folder, an eval output, a rollout dump.

Each is a :class:`Source`: it tells its kind and title, hands over the episode records written since it was last
asked (:meth:`Source.poll`, so ``--serve`` follows a run that is still training), its per-step curves
(:meth:`Source.curves`) and, for an eval, its report (:meth:`Source.report`). Records are read with
:mod:`agent_tune.rollout.records` (the one reader of every record file); :func:`open_source` tells the kinds
apart:

- a **training run folder** (``trainer.default_local_dir``: ``metrics.jsonl``, ``episodes/``,
  ``train_config.yaml``; a curriculum stage's folder, holding ``checkpoints/``, works too): the curves of
  ``metrics.jsonl`` and ``val_metrics.jsonl``, the episodes of ``episodes/`` (a rollout-only run without them:
  its ``rollout_dump/``);
- a **curriculum run folder** (``curriculum_state.json``, a folder per stage): every stage's run, one after the
  other on one step axis (stage ``k``'s steps follow the last step of stage ``k - 1``), each stage marked;
- an **eval output** (``agent-tune eval --output X.jsonl``, its ``_meta`` header first): its records and the
  report ``agent-tune eval report`` prints (per category accuracy, pass@k, the env's own lines);
- a **rollout dump** (``step_<N>/rollouts-<pid>.jsonl`` of the rollout-only mode, or ``dump_rollouts_dir``'s
  ``rollouts-<pid>.jsonl``), or a folder or file of episode records (``episodes-<pid>.jsonl.gz``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from agent_tune.errors import DataError
from agent_tune.rollout.records import EPISODES_DIR, FILE_PREFIX, read_new, record_files
from agent_tune.utils.jsonl import read_jsonl

KINDS = ("train", "curriculum", "eval", "dump")
DEFAULT_TOOL_PARSER = "hermes"
CURRICULUM_STATE = "curriculum_state.json"  # agent_tune.launch.curriculum.STATE_FILE
CHECKPOINTS = "checkpoints"  # a curriculum stage's run folder under its own folder


class ViewSourceError(DataError, ValueError):
    """A path ``agent-tune view`` cannot show: missing, or none of the kinds it reads."""


@dataclass(frozen=True)
class Origin:
    """Where a record came from: its ``kind`` (``train``, ``eval`` or ``dump``: how its keys are read), its
    curriculum ``stage`` (``None`` outside a curriculum), the ``step_offset`` added to its trainer step, and the
    ``env`` of an eval run (the results header's)."""

    kind: str
    stage: str | None = None
    step_offset: int = 0
    env: str | None = None


@dataclass
class Curves:
    """Per-step rows (``{"step": global step, key: value, ...}``, validation rows too, each with ``"val": 1``)
    and the curriculum's stages (``{"name", "first", "last"}``: their global steps)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    stages: list[dict[str, Any]] = field(default_factory=list)


class _Follower:
    """Follows a set of growing record files: each poll returns the records appended since the last one."""

    def __init__(self, files: Callable[[], Iterable[Path]]) -> None:
        self.files = files
        self.lines: dict[Path, int] = {}

    def poll(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for path in self.files():
            new, self.lines[path] = read_new(path, self.lines.get(path, 0))
            out.extend(new)
        return out


class Source:
    """One thing to show. Subclasses set ``kind`` and ``title`` and implement :meth:`poll`."""

    kind = "dump"
    title = ""
    tool_parser = DEFAULT_TOOL_PARSER  # the parser the policy's calls are decoded with on the page

    def poll(self) -> list[tuple[dict[str, Any], Origin]]:
        """The records written since the last call (all of them the first time), with their origin."""
        raise NotImplementedError

    def curves(self) -> Curves:
        """The per-step curves, read now (empty: none)."""
        return Curves()

    def report(self) -> dict[str, Any] | None:
        """An eval's report (``{"summary", "text"}``), read now; ``None`` for the other kinds."""
        return None


def _metric_rows(path: Path, offset: int = 0, stage: str | None = None, val: bool = False) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    rows = []
    for _, row in read_jsonl(path, ViewSourceError):
        if isinstance(row, dict) and isinstance(row.get("step"), (int, float)):
            out = {k: v for k, v in row.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
            out["step"] = int(row["step"]) + offset
            if stage is not None:
                out["stage"] = stage
            if val:
                out["val"] = 1
            rows.append(out)
    return rows


def _saved_option(run: Path, key: str) -> Any:
    """``agent_tune.<key>`` of the run's saved config (``train_config.yaml``), or ``None``."""
    path = run / "train_config.yaml"
    if not path.is_file():
        return None
    from omegaconf import OmegaConf

    try:
        return OmegaConf.select(OmegaConf.load(path), f"agent_tune.{key}", default=None)
    except Exception:  # a config that does not load is the trainer's business, not the viewer's
        return None


def _dump_files(folder: Path) -> list[Path]:
    """A dump's record files: the rollout-only mode's ``step_<N>/rollouts-*.jsonl``, ``dump_rollouts_dir``'s
    ``rollouts-*.jsonl``, episode logs (``episodes-*.jsonl[.gz]``)."""
    files = [p for step in sorted(folder.glob("step_*")) if step.is_dir() for p in record_files(step, "rollouts")]
    return files + record_files(folder, "rollouts") + record_files(folder, FILE_PREFIX)


class RunFolder(Source):
    """A training run folder (``trainer.default_local_dir``)."""

    kind = "train"

    def __init__(self, folder: Path, stage: str | None = None, step_offset: int = 0) -> None:
        self.folder = folder
        self.stage = stage
        self.step_offset = step_offset
        self.title = str(folder)
        self.tool_parser = str(_saved_option(folder, "tool_parser") or DEFAULT_TOOL_PARSER)
        saved = _saved_option(folder, "episodes.dir")
        episodes = Path(str(saved)) if saved else folder / EPISODES_DIR
        dump = folder / "rollout_dump"
        if not episodes.is_dir() and dump.is_dir():  # a rollout-only run of before the episode log
            self._follower = _Follower(lambda: _dump_files(dump))
        else:
            self._follower = _Follower(lambda: record_files(episodes) if episodes.is_dir() else [])

    def poll(self) -> list[tuple[dict[str, Any], Origin]]:
        origin = Origin("train", self.stage, self.step_offset)
        return [(rec, origin) for rec in self._follower.poll()]

    def curves(self) -> Curves:
        rows = _metric_rows(self.folder / "metrics.jsonl", self.step_offset, self.stage)
        rows += _metric_rows(self.folder / "val_metrics.jsonl", self.step_offset, self.stage, val=True)
        return Curves(rows)

    def last_step(self) -> int:
        """The run's last step (its metrics', else its episodes'): where the next curriculum stage's steps start."""
        rows = _metric_rows(self.folder / "metrics.jsonl")
        return max((int(r["step"]) for r in rows), default=0)


class CurriculumFolder(Source):
    """A curriculum run folder: its stages' runs one after the other."""

    kind = "curriculum"

    def __init__(self, folder: Path, names: list[str]) -> None:
        self.folder = folder
        self.title = str(folder)
        self.names = names
        self._runs: dict[str, RunFolder] = {}

    def _stages(self) -> list[RunFolder]:
        """The stages that have a run folder, each with its step offset (the last step of the stages before)."""
        runs, offset = [], 0
        for name in self.names:
            folder = self.folder / name / CHECKPOINTS
            if not folder.is_dir():
                break  # a later stage cannot have started
            run = self._runs.get(name)
            if run is None:
                run = self._runs[name] = RunFolder(folder, stage=name, step_offset=offset)
                self.tool_parser = run.tool_parser
            runs.append(run)
            offset += run.last_step()
        return runs

    def poll(self) -> list[tuple[dict[str, Any], Origin]]:
        return [item for run in self._stages() for item in run.poll()]

    def curves(self) -> Curves:
        curves = Curves()
        for run in self._stages():
            rows = run.curves().rows
            curves.rows += rows
            steps = [r["step"] for r in rows if not r.get("val")]
            curves.stages.append({"name": run.stage, "first": run.step_offset + 1,
                                  "last": max(steps, default=run.step_offset)})
        return curves


class EvalOutput(Source):
    """An ``agent-tune eval --output`` results file."""

    kind = "eval"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.title = str(path)
        self._seen = 0
        self._meta: dict[str, Any] = {}

    def _read(self) -> list[dict[str, Any]]:
        from agent_tune.eval.store import ResultsFileError, read_results

        try:
            meta, records = read_results(self.path)
        except ResultsFileError as exc:
            raise ViewSourceError(str(exc)) from None
        self._meta = meta or {}
        self.tool_parser = str(self._meta.get("tool_parser") or DEFAULT_TOOL_PARSER)
        return records

    def poll(self) -> list[tuple[dict[str, Any], Origin]]:
        records = self._read()
        new, self._seen = records[self._seen:], len(records)
        env = self._meta.get("env")
        origin = Origin("eval", env=None if env is None else str(env))
        return [(rec, origin) for rec in new]

    def report(self) -> dict[str, Any] | None:
        """The report ``agent-tune eval report`` prints, computed now from the file (its env's own lines
        included); the saved ``X.report.json`` when the records cannot be summarised here (an env that does not
        import)."""
        from agent_tune.eval.report import format_table, report_file

        try:
            summary = report_file(self.path)
            return {"summary": _plain(summary), "text": format_table(summary)}
        except Exception as exc:  # noqa: BLE001 - an env's report hook may fail here; the saved one still shows
            saved = self.path.with_suffix(".report.json")
            if saved.is_file():
                doc = json.loads(saved.read_text(encoding="utf-8"))
                return {"summary": doc, "text": f"(saved report {saved.name}; not recomputed: {exc})"}
            return {"summary": None, "text": f"no report: {exc}"}


class DumpFolder(Source):
    """A rollout dump, or a folder or single file of episode records."""

    kind = "dump"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.title = str(path)
        self._follower = _Follower(lambda: [path] if path.is_file() else _dump_files(path))

    def poll(self) -> list[tuple[dict[str, Any], Origin]]:
        origin = Origin("dump")
        return [(rec, origin) for rec in self._follower.poll()]


def _plain(value: Any) -> Any:
    """``value`` as JSON holds it (a report summary may hold tuples, numpy numbers, ...)."""
    return json.loads(json.dumps(value, default=str))


def _is_eval_output(path: Path) -> bool:
    with path.open("rb") as f:
        first = f.readline()
    try:
        head = json.loads(first)
    except ValueError:
        return False
    return isinstance(head, dict) and ("_meta" in head or "test_id" in head)


def _curriculum_stages(folder: Path) -> list[str] | None:
    state = folder / CURRICULUM_STATE
    if state.is_file():
        names = json.loads(state.read_text(encoding="utf-8")).get("stages")
        if isinstance(names, list) and names:
            return [str(n) for n in names]
    return None


def open_source(path: str | Path) -> Source:
    """The :class:`Source` for ``path`` (see the module docstring for the kinds and how each is told apart).

    Raises:
        ViewSourceError: ``path`` does not exist, or is none of the kinds.
    """
    path = Path(path).expanduser()
    if path.is_file():
        if path.name.endswith(".jsonl") and _is_eval_output(path):
            return EvalOutput(path)
        return DumpFolder(path)
    if not path.is_dir():
        raise ViewSourceError(f"{path}: no such file or folder")
    names = _curriculum_stages(path)
    if names:
        return CurriculumFolder(path, names)
    if (path / CHECKPOINTS).is_dir() and not (path / "metrics.jsonl").exists():
        return RunFolder(path / CHECKPOINTS)  # a curriculum stage's folder
    if any((path / name).exists() for name in ("metrics.jsonl", EPISODES_DIR, "train_config.yaml", "samples")):
        return RunFolder(path)
    if _dump_files(path):
        return DumpFolder(path)
    raise ViewSourceError(
        f"{path}: not a training run folder (metrics.jsonl, {EPISODES_DIR}/), a curriculum run folder "
        f"({CURRICULUM_STATE}), an eval output (agent-tune eval --output X.jsonl) or a rollout dump "
        "(step_<N>/rollouts-*.jsonl)")
