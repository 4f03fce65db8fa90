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
from agent_tune.utils.run_paths import load_run_config

KINDS = ("train", "curriculum", "eval", "dump")
DEFAULT_TOOL_PARSER = "hermes"
CURRICULUM_STATE = "curriculum_state.json"  # agent_tune.launch.curriculum.STATE_FILE
CHECKPOINTS = "checkpoints"  # a curriculum stage's run folder under its own folder
RUN_CONFIG = "train_config.yaml"  # agent_tune.launch.train.CHILD_CONFIG


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

    def none_found(self) -> str:
        """The line that says where episodes were looked for, when none were found."""
        return f"no episode records in {self.title}"


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


class _SavedOptions:
    """``agent_tune.<key>`` of the run's saved config (``train_config.yaml``), read once, where the folder is now
    (its paths into the run moved along: :func:`agent_tune.utils.run_paths.load_run_config`)."""

    def __init__(self, run: Path) -> None:
        self.config = None
        if (run / RUN_CONFIG).is_file():
            try:
                self.config = load_run_config(run / RUN_CONFIG)
            except Exception:  # a config that does not load is the trainer's business, not the viewer's
                pass

    def get(self, key: str) -> Any:
        """The value (``None``: no config, no such key, or a value that does not resolve)."""
        from omegaconf import OmegaConf

        try:
            return None if self.config is None else OmegaConf.select(self.config, f"agent_tune.{key}", default=None)
        except Exception:  # noqa: BLE001 - as above
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
        options = _SavedOptions(folder)
        self.tool_parser = str(options.get("tool_parser") or DEFAULT_TOOL_PARSER)
        self.recording_off = options.get("episodes.enable") is False
        saved = options.get("episodes.dir")
        episodes = Path(str(saved)) if saved else folder / EPISODES_DIR
        if not episodes.is_dir() and (folder / EPISODES_DIR).is_dir():
            episodes = folder / EPISODES_DIR  # saved outside the run and not there: the copy beside the run
        self.episodes = episodes
        dump = folder / "rollout_dump"
        if not episodes.is_dir() and dump.is_dir():  # a rollout-only run of before the episode log
            self.episodes = dump
            self._follower = _Follower(lambda: _dump_files(dump))
        else:
            self._follower = _Follower(lambda: record_files(episodes) if episodes.is_dir() else [])

    def poll(self) -> list[tuple[dict[str, Any], Origin]]:
        origin = Origin("train", self.stage, self.step_offset)
        return [(rec, origin) for rec in self._follower.poll()]

    def none_found(self) -> str:
        if self.recording_off:
            why = "the run recorded none: agent_tune.episodes.enable=false in its train_config.yaml"
        elif not self.episodes.is_dir():
            why = "no such folder"
        else:
            why = f"no {FILE_PREFIX}-*.jsonl.gz in it yet: the run has not finished an episode"
        return f"no episodes in {self.episodes} ({why})"

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

    def none_found(self) -> str:
        stages = self._stages()
        if not stages:
            return f"no episodes: no stage of {self.folder} has a run folder (<stage>/{CHECKPOINTS}) yet"
        return "; ".join(run.none_found() for run in stages)

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


# keys every episode record has some of (agent_tune.rollout.dump.episode_record, the eval's, older dumps')
EPISODE_KEYS = frozenset({"reward", "segments", "messages", "stop_reason", "response_ids"})
PARQUET_MAGIC = b"PAR1"


def _first_row(path: Path) -> dict[str, Any] | str:
    """The first JSON object of a ``.jsonl`` or ``.jsonl.gz`` file, or why there is none."""
    import gzip

    with path.open("rb") as f:
        gzipped = f.read(2) == b"\x1f\x8b"
    try:
        with (gzip.open(path, "rt", encoding="utf-8", errors="replace") if gzipped
              else path.open("r", encoding="utf-8", errors="replace")) as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    return row if isinstance(row, dict) else "its first line is JSON but not an object"
    except EOFError:  # a gzip member cut short (a writer killed or still writing): the reader's business
        return ""
    except (ValueError, OSError):
        return "not JSON lines"
    return ""


def not_episode_records(path: Path) -> str | None:
    """What ``path`` is, when it is a file of something else than episode records (``None``: it may hold them, or
    is empty). A training-data file is named as one: its rows (``prompt``, ``extra_info``) would show as empty
    episodes."""
    with path.open("rb") as f:
        magic = f.read(4)
    if magic == PARQUET_MAGIC:
        try:
            import pyarrow.parquet as pq

            columns = set(pq.read_schema(path).names)
        except Exception:  # noqa: BLE001 - what it is, said as well as can be
            columns = set()
        if {"prompt", "extra_info"} <= columns:
            return "this is a training-data file (rows with prompt/extra_info), not episode records"
        return f"this is a parquet file{f' (columns: {_names(columns)})' if columns else ''}, not episode records"
    row = _first_row(path)
    if isinstance(row, str):
        return None if not row else f"this is not a file of episode records ({row})"
    if row.keys() & EPISODE_KEYS or "_meta" in row:
        return None
    if {"prompt", "extra_info"} <= row.keys():
        return "this is a training-data file (rows with prompt/extra_info), not episode records"
    return f"this is not a file of episode records (its first row's keys: {_names(row)})"


def _names(keys: Iterable[str], most: int = 8) -> str:
    names = sorted(str(k) for k in keys)
    return ", ".join(names[:most]) + (", ..." if len(names) > most else "")


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
        ViewSourceError: ``path`` does not exist, is none of the kinds, or is a file of something else than
            episode records (a training-data file, say: :func:`not_episode_records`).
    """
    path = Path(path).expanduser()
    if path.is_file():
        what = not_episode_records(path)
        if what is not None:
            raise ViewSourceError(f"{path}: {what}; view a run folder, an eval output or a dump")
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
    if any((path / name).exists() for name in ("metrics.jsonl", EPISODES_DIR, RUN_CONFIG, "samples")):
        return RunFolder(path)
    if _dump_files(path):
        return DumpFolder(path)
    raise ViewSourceError(
        f"{path}: not a training run folder (metrics.jsonl, {EPISODES_DIR}/), a curriculum run folder "
        f"({CURRICULUM_STATE}), an eval output (agent-tune eval --output X.jsonl) or a rollout dump "
        "(step_<N>/rollouts-*.jsonl)")
