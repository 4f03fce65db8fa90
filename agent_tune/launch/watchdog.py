"""What died in a run: the training child's watch on its Ray actors, and the launcher's one-line cause.

A Ray actor of the run (verl's training workers, the vLLM server, the agent-loop and reward workers, the trainer
itself) can die mid-step: killed by the kernel's OOM killer, by a person, or crashed. verl then fails the step
only when it next calls that actor, which may be minutes later (a training worker killed during the rollouts) or
never (a wait without a timeout). So the training child watches (:class:`RunWatchdog`): every few seconds it
asks Ray's GCS which actors of this job are dead by no one's request (their process or node died, or Ray's
memory monitor killed them: :func:`unexpected_deaths`). On the first such death it writes one line to the log,
``[agent-tune] error: died: <what>`` (:data:`DIED`), gives the trainer ``grace_s`` to fail by itself, then stops
it (:class:`RunPartDied` raised in the child's main thread: the trainer's ``finally`` shuts Ray down and cleans
``/dev/shm``), and ends the process if that shut-down hangs (:func:`agent_tune.launch.lifeline.exit_after`).
A death the trainer itself ran into first is still named: :meth:`RunWatchdog.stop` looks once more, after a
failure, before Ray is shut down.

vLLM's engine processes are not Ray actors; their death is vLLM's to see (its client fails every request with
``EngineDeadError`` at once and logs which process died), and the step fails with it.

The launcher reads the cause from the log (:func:`death_cause`): the watch's line, else Ray's own
``ActorDiedError`` (class and pid), else vLLM's dead-engine lines; the console prints it as one line, the
traceback stays in ``train.log``.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

logger = logging.getLogger(__name__)

DIED = "died: "  # the watch's log line: "[agent-tune] error: died: <what>"
STOP_SIGNAL = signal.SIGUSR1  # how the watch stops the trainer (see RunWatchdog)
INTERVAL_S = 2.0  # how often the GCS is asked (a query takes ~15 ms)
GRACE_S = 10.0  # how long the trainer may take to fail by itself once a part of the run died (it fails at once
# when it was waiting on the dead actor; a training worker killed during the rollouts is called only after them)

# What verl's actor classes do, for the message (the class name is always shown as well)
ROLES = {
    "WorkerDict": "verl's training worker: the FSDP actor and reference model",
    "vLLMHttpServer": "the vLLM server",
    "AgentLoopWorker": "an agent-loop worker: it plays the episodes",
    "AgentLoopWorkerTQ": "an agent-loop worker: it plays the episodes",
    "RewardLoopWorker": "a reward worker",
    "TaskRunner": "verl's trainer",
    "TaskRunnerV1": "verl's trainer",
}

# ActorDiedErrorContext.Reason values (Ray's common.proto) that mean the process or its node went away
_WORKER_DIED, _NODE_DIED = 1, 3
_INTENDED = "INTENDED_USER_EXIT"  # the worker exit type of an actor that ended itself (its reason is WORKER_DIED)


@dataclass(frozen=True)
class Death:
    """A Ray actor of the run that died unexpectedly."""

    class_name: str
    pid: int | None
    how: str  # "its process ended unexpectedly (...)", "its node died", "Ray's memory monitor killed it"

    def describe(self) -> str:
        """``WorkerDict (verl's training worker: ...), a Ray actor, pid 123: its process ended unexpectedly ...``"""
        name = self.class_name.rsplit(".", 1)[-1]  # verl's colocated class: create_colocated_worker_cls.<locals>.X
        role = ROLES.get(name)
        what = f"{name} ({role}), a Ray actor" if role else f"{name}, a Ray actor" if name else "a Ray actor"
        pid = f", pid {self.pid}" if self.pid else ""
        return f"{what}{pid}: {self.how}"


def unexpected_deaths(actors: Iterable[Mapping[str, Any]]) -> list[Death]:
    """The actors among ``actors`` (entries of Ray's actor table: ``ActorClassName``, ``State``, ``Pid``,
    ``DeathCause``) that are dead by no one's request: their worker process or node died, or Ray's memory
    monitor killed them. An actor that went out of scope, was killed by ``ray.kill`` or whose constructor raised
    (an error the trainer reports itself) is not one; nor is one that died because its owner did (its owner is
    listed)."""
    out = []
    for actor in actors:
        if actor.get("State") != "DEAD":
            continue
        cause = actor.get("DeathCause")
        context = cause.WhichOneof("context") if cause is not None else None
        if context == "oom_context":
            how = "Ray's memory monitor killed it (out of memory)"
        elif context == "actor_died_error_context":
            reason = cause.actor_died_error_context.reason
            if _INTENDED in cause.actor_died_error_context.error_message:  # ray.actor.exit_actor()
                continue
            if reason == _WORKER_DIED:
                how = "its process ended unexpectedly (killed, crashed, or out of memory?)"
            elif reason == _NODE_DIED:
                how = "its node died"
            else:
                continue
        else:
            continue
        out.append(Death(str(actor.get("ActorClassName") or "?"), int(actor.get("Pid") or 0) or None, how))
    return out


def _job_actors() -> list[dict[str, Any]]:
    """The dead actors of this process's Ray job, from the GCS."""
    import ray
    from ray._private import state

    job = ray.JobID.from_hex(ray.get_runtime_context().get_job_id())
    return list(state.actors(job_id=job, actor_state_name="DEAD").values())


class RunPartDied(SystemExit):
    """Raised in the training child's main thread when a Ray actor of the run died and the trainer did not fail
    by itself within the watch's grace (the message names what died; the exit status is 1). A ``SystemExit``:
    besides ``KeyboardInterrupt``, the only exception a signal handler can raise through ``ray.get``, which
    raises it on as ``SystemExit(1)``."""


class RunWatchdog:
    """Watches the Ray actors of the run from a daemon thread of the training child (see the module docstring).

    ``start()`` before the trainer runs (Ray may not be up yet: the watch begins once this process has joined
    it), ``stop()`` in the trainer's ``finally``, before ``ray.shutdown()``.

    Args:
        grace_s: how long the trainer may take to fail by itself after a death before it is stopped.
        interval_s: how often the GCS is asked.
        stop_after: how long the stopped run's shut-down may take before the process is ended.
        actors: where the dead actors come from (the GCS; a test's list).
        send_stop: how the run is stopped (default: :data:`STOP_SIGNAL` to this process, whose handler,
            installed by :meth:`start` in the main thread, raises :class:`RunPartDied` there: ``ray.get`` wakes
            for signals, and the trainer's ``finally`` shuts Ray down. Not SIGTERM: Ray's native handler prints a
            stack dump for it).
        force_exit: how a shut-down that hangs is ended: called with ``stop_after`` and the message, it waits
            that long and, if the process still runs, ends it (:func:`~agent_tune.launch.lifeline.exit_after`,
            exit status 1).
    """

    def __init__(self, grace_s: float = GRACE_S, interval_s: float = INTERVAL_S, stop_after: float | None = None,
                 actors: Callable[[], list[dict[str, Any]]] = _job_actors,
                 send_stop: Callable[[], None] = lambda: os.kill(os.getpid(), STOP_SIGNAL),
                 force_exit: Callable[[float, str], None] | None = None) -> None:
        from agent_tune.launch.lifeline import GRACE_S as SHUTDOWN_S
        from agent_tune.launch.lifeline import exit_after

        self.grace_s, self.interval_s = grace_s, interval_s
        self.stop_after = SHUTDOWN_S if stop_after is None else stop_after
        self._actors, self._send_stop = actors, send_stop
        self._force_exit = force_exit or (lambda after_s, message: exit_after(after_s, message, 1))
        self._ended = threading.Event()  # the trainer returned or raised
        self._lock = threading.Lock()
        self.deaths: list[Death] = []
        self._thread: threading.Thread | None = None
        self._previous: Any = None  # the stop signal's handler before start()

    def start(self) -> None:
        """Begin watching in a daemon thread (called from the main thread, it installs the stop's handler)."""
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(STOP_SIGNAL, self._raise)
        self._thread = threading.Thread(target=self._watch, name="agent-tune-run-watchdog", daemon=True)
        self._thread.start()

    def look(self) -> list[Death]:
        """One look at the GCS; the first time it finds deaths, they are logged (``died: ...``). Returns the
        deaths known so far (none while this process has not joined Ray, or when the GCS cannot be asked)."""
        try:
            import ray

            if not ray.is_initialized():
                return self.deaths
            found = unexpected_deaths(self._actors())
        except Exception as exc:  # noqa: BLE001 - a watch must never be what breaks the run
            logger.debug("run watchdog: the GCS could not be asked: %s", exc)
            return self.deaths
        with self._lock:
            if found and not self.deaths:
                self.deaths = found
                logger.error("%s%s", DIED, "; ".join(d.describe() for d in found))
        return self.deaths

    def _watch(self) -> None:
        while not self._ended.is_set() and not self.look():
            self._ended.wait(self.interval_s)
        if not self.deaths:
            return
        if not self._ended.wait(self.grace_s):
            logger.error("the trainer did not stop %ds after a part of the run died: stopping it", int(self.grace_s))
            self._send_stop()
        self._end_hung()

    def _raise(self, _signum: int, _frame: object) -> None:
        if not self._ended.is_set():  # a late signal never cuts the shut-down short
            raise RunPartDied(f"{DIED}{'; '.join(d.describe() for d in self.deaths)}")  # exit status 1

    def _end_hung(self) -> None:
        self._force_exit(self.stop_after, f"the run did not shut down {int(self.stop_after)}s after a part of it "
                         "died: exiting now")

    def stop(self, failed: bool) -> list[Death]:
        """The trainer is done: it returned, or raised (``failed``). After a failure, one last look, so a death
        the trainer ran into first is named too (the shut-down's bound is then the caller's:
        :func:`agent_tune.launch.train.run` bounds every failed run's). Returns the deaths seen."""
        self._ended.set()  # the watch thread ends, or (after a death) goes on to its deadline
        if self._previous is not None and threading.current_thread() is threading.main_thread():
            signal.signal(STOP_SIGNAL, self._previous)
            self._previous = None
        if failed and not self.deaths:
            self.look()
        return self.deaths


# --- the launcher's side: the cause, from the log -------------------------------------------------------------

_OURS = re.compile(r"^\[agent-tune\] error: " + re.escape(DIED) + r"(?P<what>.+)$")
_RAY_DIED = re.compile(r"ActorDiedError: The actor died unexpectedly")
_RAY_FIELD = re.compile(r"^\s*(?P<key>class_name|pid):\s*(?P<value>\S+)")
# vLLM 0.31's lines when a process of its engine dies (v1/executor/multiproc_executor.py, v1/engine/core_client.py)
_VLLM_WORKER = re.compile(r"Worker proc (?P<name>\S+) died unexpectedly \(exit code: (?P<code>-?\d+|None)\)")
_VLLM_CORE = re.compile(r"engine core exited unexpectedly")
_VLLM_DEAD = re.compile(r"EngineDeadError")
_HOW = "ended unexpectedly (killed, crashed, or out of memory?)"


def death_cause(lines: list[str]) -> str | None:
    """The one-line cause of a failed run whose part died, from its log lines (cleaned of Ray's prefixes):
    the watchdog's ``died:`` line, else Ray's ``ActorDiedError`` (the dead actor's class and pid), else vLLM's
    dead-engine lines; None when nothing in the log says a part died."""
    for line in reversed(lines):
        if m := _OURS.match(line):
            return f"died: {m.group('what')}"
    for i in range(len(lines) - 1, -1, -1):
        if _RAY_DIED.search(lines[i]):
            fields = {}
            for line in lines[i + 1:i + 8]:
                if m := _RAY_FIELD.match(line):
                    fields.setdefault(m.group("key"), m.group("value"))
            pid = fields.get("pid", "")
            death = Death(fields.get("class_name", ""), int(pid) if pid.isdigit() else None,
                          f"its process {_HOW}")
            return f"{DIED}{death.describe()}"
    for line in reversed(lines):
        if m := _VLLM_WORKER.search(line):
            code = m.group("code")
            how = _HOW if not code.startswith("-") else f"ended unexpectedly ({_signal_name(-int(code))})"
            return f"{DIED}the vLLM server's engine: its model worker process {m.group('name')} {how}"
    if any(_VLLM_CORE.search(line) for line in lines):
        return f"{DIED}the vLLM server's engine: its engine core process {_HOW}"
    if any(_VLLM_DEAD.search(line) for line in lines):
        return f"{DIED}the vLLM server's engine (vLLM: EngineDeadError)"
    return None


def _signal_name(number: int) -> str:
    try:
        return f"killed by {signal.Signals(number).name}"
    except ValueError:
        return f"signal {number}"
