"""Per-step training metrics as one jsonl, written while the run goes.

verl logs its step metrics (reward, response length, step time, ...) through its ``file`` logger, but
not the environments' per-episode metrics (``acc``, ``progress``, ``format_errors``, ...), and its file
logger starts over when a run resumes. The agent loop appends one record per episode, with the trainer
step that trains it (``verl_ext.agent_loop.sample_step``: under the async trainers, one past the weight
version that generated it), to ``samples-<pid>.jsonl`` files (``verl_ext.agent_loop``; read with
:mod:`verl_ext.sample_records`).
:class:`StepMetricsWriter` joins both, one line per step (training rows only: records whose ``split`` is
``val`` or ``test`` are left out), appending only steps not yet written, so the file survives resumes.
Validation rounds go to ``val_metrics.jsonl`` beside it: verl's per-data-source validation accuracy
(``val-core/<data_source>/acc/mean@N``) and, for BFCL, the leaderboard's multi-turn overall (the
unweighted mean of the four scored categories). A background thread polls while the trainer runs
(:func:`follow`).

Collapse monitoring (:func:`collapse_metrics`), per step, beside the means of the episode metrics
(``zero_call``: the zero-call rate, ``num_generations``: generations per episode): tool calls per
generation, the valid-call rate (calls the env ran / decoded calls), the format-error rate (generations
whose step reported a format error) and ``groups_with_signal``, the fraction of GRPO groups (the samples of
one prompt) whose rewards are not all equal: only those carry a policy gradient. A step where no group
does is logged as a warning.
"""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any, Iterator

from agent_tune.envs.bfcl.multi_turn.data import SCORED_CATEGORIES
from agent_tune.rollout.episode_metrics import METRIC_KEYS, stop_shares
from verl_ext.sample_records import SampleRecord, read_appended

logger = logging.getLogger(__name__)

# verl metric -> our name
VERL_KEYS = {
    "critic/score/mean": "reward",
    "response_length/mean": "response_length",
    "timing_s/step": "step_time_s",
    "timing_s/gen": "generate_time_s",
    "actor/pg_loss": "pg_loss",
    "actor/entropy": "entropy",
    "task_weighting/adv_weight_mean": "task_weighting_adv_weight",  # the task weighting's advantage mode
}
# per-sample keys of the agent loop averaged per step
SAMPLE_KEYS = METRIC_KEYS


def collapse_metrics(samples: list[SampleRecord]) -> dict[str, float]:
    """Collapse indicators of one step's training episodes (records of ``verl_ext.agent_loop``), beside
    the per-episode means (``zero_call`` = the zero-call rate, ``num_generations`` = generations per
    episode): tool calls per generation, valid-call rate (calls run / calls decoded), format-error rate
    (generations with a format error / generations), and the GRPO groups with signal.

    Episodes without ``num_generations`` and ``num_calls`` (an older agent loop) are left out; nothing is
    returned without any.
    """
    recs = [s for s in samples if s.num_generations is not None and s.num_calls is not None]
    out: dict[str, float] = {}
    if not recs:
        return out
    generations = sum(s.num_generations or 0.0 for s in recs)
    calls = sum(s.num_calls or 0.0 for s in recs)
    out["tool_calls_per_generation"] = calls / generations if generations else 0.0
    out["valid_call_rate"] = sum(float(s.valid_calls or 0) for s in recs) / calls if calls else 0.0
    errors = sum(float(s.format_error_generations or 0) for s in recs)
    out["format_error_rate"] = errors / generations if generations else 0.0
    groups: dict[str, list[float]] = {}
    for s in recs:
        if s.group is not None and s.reward is not None:
            groups.setdefault(s.group, []).append(s.reward)
    if groups:
        out["groups"] = float(len(groups))
        sized = [r for r in groups.values() if len(r) > 1]  # a group of one sample (PPO, n=1) has no spread
        if sized:
            out["groups_with_signal"] = sum(1 for r in sized if len(set(r)) > 1) / len(sized)
    return out


def validation_summary(data: dict[str, Any]) -> dict[str, float]:
    """Per-data-source validation accuracy from verl's step metrics, plus BFCL's multi-turn overall."""
    out: dict[str, float] = {}
    for key, value in data.items():
        parts = key.split("/")
        # val-core/<data_source...>/acc/mean@N
        if parts[0] == "val-core" and len(parts) >= 4 and parts[-2] == "acc" and parts[-1].startswith("mean@"):
            out["/".join(parts[1:-2])] = float(value)
    bfcl = [out[f"bfcl/{c}"] for c in SCORED_CATEGORIES if f"bfcl/{c}" in out]
    if len(bfcl) == len(SCORED_CATEGORIES):
        out["bfcl/overall"] = sum(bfcl) / len(bfcl)
    return out


def _read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    if not path.is_file():
        return
    with path.open(encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError:  # a line being written right now
                continue


class StepMetricsWriter:
    """Joins verl's file-logger lines and the agent loop's episode records into ``out_path`` (one JSON
    object per step).

    verl's log (one line per step, truncated when a run starts) is re-read whole at each poll. The episode
    files only grow, by one line per episode, so they are read from where the last poll stopped; records
    are kept only until their step is written.

    ``new_records_only`` (what a training run uses): the episode files' contents at construction belong to
    earlier runs in the same folder, whose steps are either written already or died with them (a run killed
    before its step was logged, then started again from its last checkpoint or from scratch); only what is
    appended after construction is joined to this run's steps, so a step never mixes two runs' episodes.
    """

    def __init__(self, verl_log: str | Path, samples_dir: str | Path, out_path: str | Path,
                 new_records_only: bool = False) -> None:
        self.verl_log = Path(verl_log)
        self.samples_dir = Path(samples_dir)
        self.out_path = Path(out_path)
        self.written = {row["step"] for row in _read_jsonl(self.out_path) if "step" in row}
        self.val_path = self.out_path.with_name("val_metrics.jsonl")
        self.val_written = {row["step"] for row in _read_jsonl(self.val_path) if "step" in row}
        # bytes of each episode file already read (or, with new_records_only, left to earlier runs; a line an
        # earlier run left half-written is skipped with them, as a reused pid appends after it)
        self._offsets: dict[str, int] = (
            {path.name: path.stat().st_size for path in self.samples_dir.glob("samples-*.jsonl")}
            if new_records_only else {})
        self._pending: dict[Any, list[SampleRecord]] = {}  # training episode records of unwritten steps

    def _read_new_samples(self) -> None:
        """Add the complete lines appended to the episode files since the last poll to ``_pending``."""
        for rec in read_appended(self.samples_dir, self._offsets):
            if rec.is_training and rec.global_steps not in self.written:
                self._pending.setdefault(rec.global_steps, []).append(rec)

    def poll(self) -> list[dict[str, Any]]:
        """Append every step that both sources now hold and that is not written yet; returns them."""
        verl_steps = {row["step"]: row.get("data", {}) for row in _read_jsonl(self.verl_log) if "step" in row}
        self._read_new_samples()
        new = []
        for step in sorted(verl_steps):
            if step in self.written:
                continue
            samples = self._pending.pop(step, None)
            if not samples:
                continue
            row: dict[str, Any] = {"step": step, "samples": len(samples)}
            for key, name in VERL_KEYS.items():
                if key in verl_steps[step]:
                    row[name] = verl_steps[step][key]
            metrics = [s.episode_metrics() for s in samples]
            for key in SAMPLE_KEYS:
                values = [m[key] for m in metrics if key in m]
                if values:
                    row[key] = sum(values) / len(values)
            row.update(stop_shares([s.stop_reason for s in samples]))
            row.update(collapse_metrics(samples))
            if row.get("groups_with_signal") == 0.0:
                logger.warning("step %s: no GRPO group carries gradient (all %d groups have equal rewards; "
                               "reward %s); the update does nothing", step, int(row["groups"]), row.get("reward"))
            new.append(row)
        self._poll_validation(verl_steps)
        if new:
            self.out_path.parent.mkdir(parents=True, exist_ok=True)
            with self.out_path.open("a", encoding="utf-8") as f:
                for row in new:
                    f.write(json.dumps(row) + "\n")
            self.written.update(r["step"] for r in new)
            for row in new:
                logger.info("%s", _row_summary(row))
        return new

    def _poll_validation(self, verl_steps: dict[Any, dict[str, Any]]) -> None:
        rows = []
        for step in sorted(verl_steps):
            if step in self.val_written:
                continue
            summary = validation_summary(verl_steps[step])
            if summary:
                rows.append({"step": step, **summary})
        if rows:
            self.val_path.parent.mkdir(parents=True, exist_ok=True)
            with self.val_path.open("a", encoding="utf-8") as f:
                for row in rows:
                    f.write(json.dumps(row) + "\n")
                    logger.info("validation at step %s: %s", row["step"],
                                " ".join(f"{k}={v:.3f}" for k, v in row.items() if k != "step"))
            self.val_written.update(r["step"] for r in rows)


def _row_summary(row: dict[str, Any]) -> str:
    """``metrics row: step N reward=... acc=...`` for the training log (the console formats its own)."""
    parts = [f"metrics row: step {row['step']}"]
    for key in ("reward", "acc", "progress", "format_errors", "groups_with_signal", "pg_loss", "response_length",
                "step_time_s"):
        if key in row:
            parts.append(f"{key}={row[key]:.3g}")
    return " ".join(parts)


def follow(writer: StepMetricsWriter, interval_s: float = 5.0) -> tuple[threading.Thread, threading.Event]:
    """Poll ``writer`` every ``interval_s`` in a daemon thread until the returned event is set
    (then one last poll). Errors while polling are logged, never raised into the trainer."""
    stop = threading.Event()

    def loop() -> None:
        while True:
            done = stop.wait(interval_s)
            try:
                writer.poll()
            except Exception as exc:  # never take the training run down for a metrics line
                logger.warning("step metrics: %s: %s", type(exc).__name__, exc)
            if done:
                return

    thread = threading.Thread(target=loop, name="agent-tune-step-metrics", daemon=True)
    thread.start()
    return thread, stop


def wait_stop(thread: threading.Thread, stop: threading.Event, timeout_s: float = 30.0) -> None:
    """Stop a :func:`follow` thread after its final poll."""
    stop.set()
    thread.join(timeout_s)

