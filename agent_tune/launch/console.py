"""The training console: what ``agent-tune train`` shows while verl runs in a child process.

The launcher (:mod:`agent_tune.launch.train`) runs the trainer in a child process whose output (verl, Ray's
forwarded worker logs, vLLM) goes to ``train.log`` in the run folder, and watches it with
:func:`watch`: start-up phases named as they pass (found by :class:`PhaseDetector` in the log),
one progress line per training step (from the rows :mod:`agent_tune.launch.step_metrics` appends to
``metrics.jsonl``, formatted by :class:`Progress` with rate and ETA), where the results are at the end,
and, when the child fails, the cause found in the log (:func:`failure_excerpt`; one line naming what died when a
part of the run died: :func:`agent_tune.launch.watchdog.death_cause`). With ``verbose`` every log line is echoed
as well.

The pieces work on text and rows, not processes, so they are tested on canned logs.
"""

from __future__ import annotations

import json
import logging
import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, TextIO

from agent_tune.launch.watchdog import death_cause

logger = logging.getLogger(__name__)

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# Ray prefixes forwarded worker output with "(ActorName pid=123) " (possibly nested, e.g. vLLM's
# "(vLLMHttpServer pid=1) (EngineCore pid=2) ")
RAY_PREFIX = re.compile(r"^(?:\((?:[\w.-]+ )?pid=\d+(?:, ip=[\d.]+)?\) )+")


def clean(line: str) -> str:
    """A log line without colour codes, Ray's ``(Actor pid=N)`` prefixes, progress-bar redraws (what
    follows the last carriage return) and trailing whitespace."""
    text = RAY_PREFIX.sub("", ANSI.sub("", line)).rstrip()
    redraws = [part for part in text.split("\r") if part.strip()]
    return redraws[-1] if redraws else ""


def format_duration(seconds: float) -> str:
    """``7s``, ``1m22s``, ``2h05m``."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


# --- start-up phases -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Phase:
    """A milestone of a run: the first log line matching ``pattern`` reports ``message`` (formatted with
    the match's named groups)."""

    name: str
    pattern: re.Pattern[str]
    message: str


def _p(name: str, pattern: str, message: str) -> Phase:
    return Phase(name, re.compile(pattern), message)


# Markers of verl 0.9.1 / Ray 2.60 / vLLM 0.31 (seen in real main-job logs), in the order they pass.
PHASES: tuple[Phase, ...] = (
    _p("ray", r"Started a local Ray instance|Connected to Ray cluster", "Ray started"),
    _p("data", r"train dataset size: (?P<train>\d+), val dataset size: (?P<val>\d+)",
       "Data loaded by verl: {train} train / {val} val prompts"),
    _p("models", r"actor and ref model engine initialized|critic model engine initialized",
       "Actor and reference models built (FSDP)"),
    _p("vllm", r"LLMServerManager: \[(?P<servers>.*)\]", "vLLM server up ({servers})"),
    _p("resume", r"Resuming from (?P<path>\S+?),? (?:setting|$)|Resuming from (?P<path2>\S+)$",
       "Resuming from {path}"),
    _p("scratch", r"Training from scratch$", "Training from scratch (no checkpoint)"),
    _p("first_step", r"Training Progress:", "First step started (rollouts, then the update)"),
)
# Repeating events: reported every time.
CHECKPOINT = re.compile(r"Saving checkpoint to (?P<path>\S+)|local_global_step_folder: (?P<path2>\S+)")
TOTAL_STEPS = re.compile(r"Total training steps: (?P<total>\d+)")


class PhaseDetector:
    """Finds the start-up phases, the total step count and checkpoint saves in log lines.

    Each phase is reported once; ``resume`` and ``scratch`` exclude each other.
    """

    def __init__(self, phases: Iterable[Phase] = PHASES) -> None:
        self.phases = list(phases)
        self.seen: set[str] = set()
        self.total_steps: int | None = None

    def feed(self, line: str) -> list[str]:
        """The console messages this log line triggers (usually none)."""
        text = clean(line)
        if not text:
            return []
        out = []
        if self.total_steps is None and (m := TOTAL_STEPS.search(text)):
            self.total_steps = int(m.group("total"))
        for phase in self.phases:
            if phase.name in self.seen:
                continue
            m = phase.pattern.search(text)
            if m is None:
                continue
            self.seen.add(phase.name)
            if phase.name in ("resume", "scratch"):
                self.seen.update(("resume", "scratch"))
            groups = {k: v.replace("'", "") for k, v in m.groupdict().items() if v is not None}
            if "path2" in groups:
                groups["path"] = groups.pop("path2")
            out.append(phase.message.format(**groups))
        if m := CHECKPOINT.search(text):
            out.append(f"Saving checkpoint {m.group('path') or m.group('path2')}")
        return out


# --- progress lines --------------------------------------------------------------------------------

# The few row keys a person reads on every progress line, with their console names; the rest of a row (timings,
# losses, per-episode counts, env-specific keys) stays in metrics.jsonl (``agent-tune plot --table`` shows it).
HEADLINE = (("reward", "reward"), ("acc", "acc"), ("progress", "progress"), ("format_errors", "fmt-err"),
            ("response_length", "len"), ("groups_with_signal", "groups_with_signal"))
# Shown only when not zero: the share of episodes the runner cut short, and of each way an episode ended other
# than the env's own ``done`` (``stop/<reason>``).
WHEN_NOT_ZERO = (("truncated", "trunc"),)
STOP_PREFIX = "stop/"
STOP_SHOWN_ALWAYS = "stop/done"


def _value(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int):
        return str(value)
    return f"{value:.3f}" if abs(value) < 100 else f"{value:.0f}"


@dataclass
class Progress:
    """Formats one console line per ``metrics.jsonl`` row, with the rate and ETA.

    The rate is the mean step time (verl's ``timing_s/step``) of the last ``window`` steps of this
    launch, or, where a row lacks it, the wall time since the previous row (or since ``started``).
    """

    total_steps: int | None = None
    started: float = field(default_factory=time.monotonic)
    window: int = 5
    _times: list[float] = field(default_factory=list)
    _last: float | None = None

    def line(self, row: dict[str, Any], now: float | None = None) -> str:
        """The progress line for ``row`` (a step just finished at ``now``)."""
        now = time.monotonic() if now is None else now
        step = int(row["step"])
        step_time = row.get("step_time_s")
        if not isinstance(step_time, (int, float)):
            step_time = now - (self._last if self._last is not None else self.started)
        self._last = now
        self._times = (self._times + [float(step_time)])[-self.window:]
        rate = sum(self._times) / len(self._times)
        if self.total_steps:
            head = f"step {step}/{self.total_steps} ({100 * step / self.total_steps:.0f}%)"
            timing = f"{rate:.1f} s/step, ETA {format_duration(max(0, self.total_steps - step) * rate)}"
        else:
            head, timing = f"step {step}", f"{rate:.1f} s/step"
        metrics = [f"{name} {_value(row[key])}" for key, name in HEADLINE if key in row]
        metrics += [f"{name} {_value(row[key])}" for key, name in WHEN_NOT_ZERO if row.get(key)]
        stops = [f"{key[len(STOP_PREFIX):]} {_value(value)}" for key, value in row.items()
                 if key.startswith(STOP_PREFIX) and key != STOP_SHOWN_ALWAYS and value]
        return " | ".join([head, timing] + ([" ".join(metrics)] if metrics else [])
                          + (["stop " + " ".join(stops)] if stops else []))


def validation_line(row: dict[str, Any]) -> str:
    """The console line for a ``val_metrics.jsonl`` row."""
    values = " ".join(f"{k} {_value(v)}" for k, v in row.items() if k != "step")
    return f"validation at step {row.get('step')}: {values}"


# --- failures --------------------------------------------------------------------------------------

# Lines that follow a fatal traceback without being part of it (shutdown chatter).
_NOISE = re.compile(r"^(?:\d{4}-\d\d-\d\d[ T]|\[agent-tune\] (?!error)|INFO[: ]|WARNING[: ]|\*\*\* SIG|$)")
_ERROR = re.compile(r"\b(?:error|exception|killed|fatal)\b", re.IGNORECASE)


def failure_excerpt(lines: list[str], limit: int = 30) -> list[str]:
    """The cause of a failed run from its log: the last Python traceback (without the shutdown lines
    after it), else the last 10 lines naming an error, else the log's last 15 lines; at most ``limit``
    lines (a long traceback keeps its head and its end, where the exception is)."""
    text = [clean(line) for line in lines]
    starts = [i for i, line in enumerate(text) if line.startswith("Traceback (most recent call last)")]
    if starts:
        block = text[starts[-1]:]
        while len(block) > 1 and _NOISE.match(block[-1]):
            block.pop()
    else:
        errors = [line for line in text if _ERROR.search(line)]
        block = errors[-10:] if errors else [line for line in text if line][-15:]
    if len(block) > limit:
        omitted = len(block) - (limit - 1)
        block = block[:2] + [f"  ... ({omitted} lines, see the full log)"] + block[-(limit - 3):]
    return block


def silent_failure(lines: list[str]) -> bool:
    """Whether a log holds a Python traceback (used for a run that exited 0 without training a step)."""
    return any(clean(line).startswith("Traceback (most recent call last)") for line in lines)


def describe_exit(code: int) -> str:
    """``exit 1``, or the signal that ended the process (``killed by SIGKILL``, a hint for OOM)."""
    if code >= 0:
        return f"exit {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = f"signal {-code}"
    hint = " (out of memory?)" if -code == signal.SIGKILL else ""
    return f"killed by {name}{hint}"


def exit_status(code: int) -> int:
    """A child's return code as a shell exit status (a signal N becomes 128 + N)."""
    return code if code >= 0 else 128 - code


def resume_hint(files: RunFiles) -> str:
    """What running the same command again does: resume from the latest checkpoint, or start over."""
    latest = files.checkpoints / "latest_checkpointed_iteration.txt"
    if latest.is_file():
        return (f"run the same command again to resume from "
                f"{files.checkpoints / ('global_step_' + latest.read_text().strip())}")
    return "no checkpoint was saved: the same command starts over"


INTERRUPT_GRACE_S = 60.0  # how long Ctrl-C waits for the trainer's own shut-down before killing it

# --- following files -------------------------------------------------------------------------------

class Tail:
    """Reads the complete lines appended to a file since the last call (the file may not exist yet)."""

    def __init__(self, path: str | Path, offset: int | None = None) -> None:
        self.path = Path(path)
        self.offset = offset if offset is not None else 0
        self._partial = b""

    @classmethod
    def from_end(cls, path: str | Path) -> "Tail":
        """A tail that skips what the file holds now (an earlier run's lines)."""
        path = Path(path)
        return cls(path, path.stat().st_size if path.is_file() else 0)

    def read(self, final: bool = False) -> list[str]:
        """New complete lines; with ``final``, also a last line without its newline."""
        if not self.path.is_file():
            return []
        with self.path.open("rb") as f:
            f.seek(self.offset)
            chunk = f.read()
        self.offset += len(chunk)
        data = self._partial + chunk
        parts = data.split(b"\n")
        self._partial = parts.pop()
        if final and self._partial:
            parts.append(self._partial)
            self._partial = b""
        return [p.decode("utf-8", errors="replace").rstrip("\r") for p in parts]


def read_rows(tail: Tail, final: bool = False) -> list[dict[str, Any]]:
    """The JSON objects among a :class:`Tail`'s new lines."""
    rows = []
    for line in tail.read(final):
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and "step" in row:
            rows.append(row)
    return rows


@dataclass
class RunFiles:
    """Where a run writes: its log, per-step metrics, validation rows and checkpoints."""

    log: Path
    metrics: Path
    val_metrics: Path
    checkpoints: Path


def watch(
    proc: subprocess.Popen,
    files: RunFiles,
    total_steps: int | None = None,
    verbose: bool = False,
    echo: TextIO | None = None,
    interval_s: float = 1.0,
    log_offset: int = 0,
    clock: Callable[[], float] = time.monotonic,
    started: float | None = None,
    stop_requested: Callable[[], bool] = lambda: False,
) -> int:
    """Follow a training child until it exits; report phases, steps and the outcome; return its code.

    Args:
        proc: the child; its output goes to ``files.log``.
        files: the run's files (``metrics.jsonl`` rows already there when the watch starts are not shown).
        total_steps: the run's last step, if known from the config (else taken from verl's log).
        verbose: echo every new log line to ``echo``.
        echo: stream for the echoed log (needed with ``verbose``).
        interval_s: polling period.
        log_offset: where this launch's part of the log starts (the log is appended to across resumes).
        clock: monotonic time source.
        started: when the launch began, on ``clock`` (default: now); times on the console count from it.
        stop_requested: true once someone asked the run to stop (the launcher got SIGTERM, e.g. from the
            curriculum runner ending a stage at a checkpoint): the child's exit is then reported as a stop,
            not as a failure.
    """
    started = clock() if started is None else started
    phases = PhaseDetector()
    progress = Progress(total_steps=total_steps, started=started)
    log = Tail(files.log, log_offset)
    metrics, val = Tail.from_end(files.metrics), Tail.from_end(files.val_metrics)
    steps_done: list[int] = []

    def poll(final: bool = False) -> None:
        for line in log.read(final):
            if verbose and echo is not None:
                echo.write(line + "\n")
            for message in phases.feed(line):
                logger.info("%s [%s]", message, format_duration(clock() - started))
        if echo is not None:
            echo.flush()
        if progress.total_steps is None and phases.total_steps is not None:
            progress.total_steps = phases.total_steps
        for row in read_rows(metrics, final):
            steps_done.append(int(row["step"]))
            logger.info(progress.line(row, clock()))
            if row.get("groups_with_signal") == 0.0:
                logger.warning("step %s: no GRPO group carries gradient (every group's rewards are equal): "
                               "this step did not update the policy", row["step"])
        for row in read_rows(val, final):
            logger.info(validation_line(row))

    interrupted = False
    try:
        while proc.poll() is None:
            poll()
            time.sleep(interval_s)
    except KeyboardInterrupt:
        interrupted = True
        logger.warning("interrupted: stopping the trainer (Ray and vLLM with it; up to %ds)", int(INTERRUPT_GRACE_S))
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(INTERRUPT_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    poll(final=True)
    code = proc.returncode
    elapsed = format_duration(clock() - started)

    def launch_lines() -> list[str]:
        if not files.log.is_file():
            return []
        with files.log.open("rb") as f:
            f.seek(log_offset)
            return f.read().decode("utf-8", errors="replace").splitlines()

    if code == 0 and not steps_done and not stop_requested() and silent_failure(launch_lines()):
        # verl's fully-async trainer ends "normally" when its rollouter dies: exit 0, no step trained
        logger.error("the trainer exited 0 after %s without training a step, and its log has an error; from "
                     "the log:\n%s", elapsed, "\n".join("    " + line for line in failure_excerpt(launch_lines())))
        logger.info("full log: %s", files.log)
        return 1
    if code == 0 or stop_requested() or interrupted:
        done = f"{len(steps_done)} step{'s' if len(steps_done) != 1 else ''}"
        if interrupted:
            logger.info("interrupted (Ctrl-C) after %s: %s this launch; run the same command again to resume from "
                        "the latest checkpoint", elapsed, done)
        elif code == 0:
            logger.info("done: %s in %s", done, elapsed)
        else:
            logger.info("stopped on request (%s) after %s: %s", describe_exit(code), elapsed, done)
        logger.info("metrics: %s", files.metrics)
        latest = files.checkpoints / "latest_checkpointed_iteration.txt"
        if latest.is_file():
            step = latest.read_text().strip()
            logger.info("checkpoints: %s (latest %s)", files.checkpoints, files.checkpoints / f"global_step_{step}")
        else:
            logger.info("checkpoints: none saved in %s", files.checkpoints)
        logger.info("episodes, curves and tokens: agent-tune view %s", files.checkpoints)
    elif (death := death_cause([clean(line) for line in launch_lines()])) is not None:
        # a part of the run died: one line naming it (its traceback is in the log)
        logger.error("training failed (%s) after %s: %s; %s", describe_exit(code), elapsed, death, resume_hint(files))
    else:
        cause = failure_excerpt(launch_lines()) or ["(the log is empty)"]
        logger.error("training failed (%s) after %s; from the log:\n%s", describe_exit(code), elapsed,
                     "\n".join("    " + line for line in cause))
    logger.info("full log: %s", files.log)
    return 128 + signal.SIGINT if interrupted else exit_status(code)
