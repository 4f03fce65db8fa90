"""What died in a run (:mod:`agent_tune.launch.watchdog`): which dead Ray actors count, the watch's line and its
stop of a trainer that does not fail by itself, the deadline of a shut-down that hangs, a real Ray actor killed
under a hung ``ray.get``, and the launcher's one-line cause read from the log."""

from __future__ import annotations

import io
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from agent_tune.launch.console import RunFiles, watch
from agent_tune.launch.watchdog import DIED, Death, RunWatchdog, death_cause, unexpected_deaths
from agent_tune.utils.logs import setup_logging

ray = pytest.importorskip("ray")
from ray.core.generated import common_pb2  # noqa: E402


def _actor(name: str, pid: int, reason: int | None = None, message: str = "", oom: bool = False,
           state: str = "DEAD") -> dict:
    cause = common_pb2.ActorDeathCause()
    if oom:
        cause.oom_context.error_message = "killed by the memory monitor"
    elif reason is not None:
        cause.actor_died_error_context.reason = reason
        cause.actor_died_error_context.error_message = message
    return {"ActorClassName": name, "Pid": pid, "State": state, "DeathCause": cause}


REASON = common_pb2.ActorDiedErrorContext.Reason
KILLED = "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker exit detail: ..."


def test_only_deaths_nobody_asked_for_count() -> None:
    actors = [
        _actor("create_colocated_worker_cls.<locals>.WorkerDict", 11, REASON.Value("WORKER_DIED"), KILLED),
        _actor("vLLMHttpServer", 12, oom=True),
        _actor("RewardLoopWorker", 13, REASON.Value("NODE_DIED"), "node died"),
        _actor("Gone", 14, REASON.Value("OUT_OF_SCOPE"), "all references to the actor were removed"),
        _actor("Killed", 15, REASON.Value("RAY_KILL"), "killed by `ray.kill`"),
        _actor("Orphan", 16, REASON.Value("OWNER_DIED"), "its owner died"),
        _actor("LeftByItself", 17, REASON.Value("WORKER_DIED"), "Worker exit type: INTENDED_USER_EXIT ..."),
        _actor("Alive", 18, state="ALIVE"),
        _actor("BadInit", 19),  # no death context (a constructor that raised is reported by the trainer)
    ]
    deaths = unexpected_deaths(actors)
    assert [d.pid for d in deaths] == [11, 12, 13]
    assert deaths[0].describe() == ("WorkerDict (verl's training worker: the FSDP actor and reference model), a Ray "
                                    "actor, pid 11: its process ended unexpectedly (killed, crashed, or out of "
                                    "memory?)")
    assert deaths[1].describe().startswith("vLLMHttpServer (the vLLM server), a Ray actor, pid 12: Ray's memory")
    assert deaths[2].describe().endswith("pid 13: its node died")


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def said(monkeypatch):
    """The watchdog's log lines; Ray taken as joined (the watch waits for that)."""
    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    handler = _Lines()
    log = logging.getLogger("agent_tune.launch.watchdog")
    log.addHandler(handler)
    yield handler.lines
    log.removeHandler(handler)


def _wait(predicate, timeout_s: float = 10.0) -> None:
    start = time.monotonic()
    while not predicate():
        assert time.monotonic() - start < timeout_s
        time.sleep(0.01)


def test_a_death_is_named_then_a_trainer_that_does_not_fail_is_stopped_and_a_hung_shut_down_ended(said) -> None:
    dead: list[dict] = []
    stops, exits = [], []
    dog = RunWatchdog(grace_s=0.3, interval_s=0.02, stop_after=0.3, actors=lambda: list(dead),
                      send_stop=lambda: stops.append(time.monotonic()), force_exit=lambda *a: exits.append(a))
    dog.start()
    time.sleep(0.1)
    assert said == [] and stops == []  # nothing dead: nothing said
    dead.append(_actor("WorkerDict", 42, REASON.Value("WORKER_DIED"), KILLED))
    seen = time.monotonic()
    _wait(lambda: exits)
    how = "its process ended unexpectedly (killed, crashed, or out of memory?)"
    assert said[0] == DIED + Death("WorkerDict", 42, how).describe()
    assert said[1] == "the trainer did not stop 0s after a part of the run died: stopping it"
    assert stops and 0.25 <= stops[0] - seen < 2.0  # the grace, then the stop
    assert exits == [(0.3, "the run did not shut down 0s after a part of it died: exiting now")]  # its deadline
    assert len([line for line in said if line.startswith(DIED)]) == 1  # said once
    dog.stop(failed=True)


def test_a_trainer_that_fails_by_itself_is_not_stopped(said) -> None:
    dead = [_actor("vLLMHttpServer", 7, REASON.Value("WORKER_DIED"), KILLED)]
    stops, exits = [], []
    dog = RunWatchdog(grace_s=5.0, interval_s=0.02, stop_after=0.2, actors=lambda: dead,
                      send_stop=lambda: stops.append(1), force_exit=lambda *a: exits.append(a))
    dog.start()
    _wait(lambda: said)
    assert [d.pid for d in dog.stop(failed=True)] == [7]  # the trainer raised within the grace
    _wait(lambda: exits)  # its shut-down still has a deadline
    assert stops == [] and [after for after, _ in exits] == [0.2]


def test_a_death_the_trainer_ran_into_first_is_named_at_stop(said) -> None:
    dead: list[dict] = []
    exits = []  # injected: the real deadline would end this very process (pytest) stop_after seconds later
    dog = RunWatchdog(grace_s=5.0, interval_s=60.0, stop_after=0.2, actors=lambda: list(dead),
                      force_exit=lambda *a: exits.append(a))
    dog.start()
    time.sleep(0.1)  # the watch's first look: nothing yet, next one in a minute
    dead.append(_actor("AgentLoopWorkerTQ", 9, REASON.Value("WORKER_DIED"), KILLED))
    assert [d.pid for d in dog.stop(failed=True)] == [9]
    assert said[0].startswith(f"{DIED}AgentLoopWorkerTQ (an agent-loop worker: it plays the episodes), a Ray "
                              "actor, pid 9: ")
    _wait(lambda: exits)  # the failed run's shut-down still has its deadline
    assert [after for after, _ in exits] == [0.2]


def test_a_finished_trainer_is_not_looked_at_again(said) -> None:
    looks = []
    dog = RunWatchdog(interval_s=60.0, actors=lambda: looks.append(1) or [])
    dog.start()
    _wait(lambda: looks)
    assert dog.stop(failed=False) == [] and looks == [1] and said == []


def test_the_gcs_unreachable_is_no_death(said) -> None:
    def broken() -> list:
        raise ConnectionError("GCS gone")

    dog = RunWatchdog(interval_s=60.0, actors=broken)
    assert dog.look() == [] and said == []


# A driver whose trainer hangs in ray.get on one actor while another actor of the run is SIGKILLed
DRIVER = textwrap.dedent("""
    import os, sys, time, ray
    from agent_tune.launch.watchdog import RunWatchdog
    from agent_tune.utils.logs import setup_logging
    setup_logging()
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)

    @ray.remote
    class Victim:
        def pid(self):
            return os.getpid()

    @ray.remote
    class Trainer:
        def hang(self):
            time.sleep(600)

    victim, trainer = Victim.remote(), Trainer.remote()
    dog = RunWatchdog(grace_s=1.0, interval_s=0.2, stop_after=20.0)
    dog.start()
    print("victim", ray.get(victim.pid.remote()), flush=True)
    failed = True
    try:
        ray.get(trainer.hang.remote())
        failed = False
    finally:
        dog.stop(failed)
        ray.shutdown()
        print("shut down", flush=True)
""")


@pytest.mark.slow  # a Ray instance: ~30 s on a loaded 2-core machine
def test_a_killed_ray_actor_stops_a_hung_trainer(tmp_path: Path) -> None:
    log = tmp_path / "driver.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-c", DRIVER], stdout=subprocess.PIPE, stderr=out, text=True,
                                env={**os.environ, "RAY_AUTH_MODE": "disabled"})
    try:
        line = proc.stdout.readline()
        assert line.startswith("victim "), log.read_text()[-3000:]
        victim = int(line.split()[1])
        os.kill(victim, signal.SIGKILL)
        killed = time.monotonic()
        rest = proc.communicate(timeout=60)[0]
        took = time.monotonic() - killed
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text()
    assert proc.returncode == 1, text[-3000:]  # RunPartDied: exit status 1, Ray shut down first
    assert "shut down" in rest and took < 20, (took, text[-3000:])
    assert f"[agent-tune] error: {DIED}Victim, a Ray actor, pid {victim}: its process ended unexpectedly" in text
    assert "stopping it" in text and "SIGTERM received" not in text
    assert death_cause(text.splitlines()).startswith(f"{DIED}Victim, a Ray actor, pid {victim}: ")


# --- the launcher's side -----------------------------------------------------------------------------------------

RAY_TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/venv/verl/trainer/main_ppo.py", line 101, in run_ppo',
    "ray.exceptions.RayTaskError(ActorDiedError): ray::TaskRunnerV1.run() (pid=8200, ip=192.0.2.2)",
    "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
    "\tclass_name: create_colocated_worker_cls.<locals>.WorkerDict",
    "\tactor_id: 190aa040ce1a017a73a395fb01000000",
    "\tpid: 8832",
    "\tnamespace: 7fb36e32",
    "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR",
]
VLLM_LINES = [  # vLLM 0.31's lines, as clean() leaves them
    "(EngineCore pid=9301) ERROR 11-29 05:01:02 [multiproc_executor.py:315] Worker proc VllmWorker-0 died "
    "unexpectedly (exit code: -9), shutting down executor.",
    "(MainProcess pid=9145) WARNING 11-29 05:01:02 [core_client.py:810] [shutdown] MPClient: engine core exited "
    "unexpectedly; starting cleanup",
    "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the "
    "root cause.",
]


def test_the_cause_from_the_log() -> None:
    ours = f"[agent-tune] error: {DIED}WorkerDict (x), a Ray actor, pid 3: its process ended unexpectedly"
    assert death_cause(["noise", ours] + RAY_TRACEBACK) == ours.removeprefix("[agent-tune] error: ")
    assert death_cause(RAY_TRACEBACK) == (
        f"{DIED}WorkerDict (verl's training worker: the FSDP actor and reference model), a Ray actor, pid 8832: its "
        "process ended unexpectedly (killed, crashed, or out of memory?)")
    assert death_cause(VLLM_LINES) == (f"{DIED}the vLLM server's engine: its model worker process VllmWorker-0 "
                                       "ended unexpectedly (killed by SIGKILL)")
    assert death_cause(VLLM_LINES[1:]) == (f"{DIED}the vLLM server's engine: its engine core process ended "
                                           "unexpectedly (killed, crashed, or out of memory?)")
    assert death_cause(VLLM_LINES[2:]) == f"{DIED}the vLLM server's engine (vLLM: EngineDeadError)"
    assert death_cause(["Traceback (most recent call last):", "RuntimeError: vLLM server died"]) is None


def test_the_console_says_what_died_in_one_line(tmp_path: Path) -> None:
    files = RunFiles(log=tmp_path / "train.log", metrics=tmp_path / "metrics.jsonl",
                     val_metrics=tmp_path / "val_metrics.jsonl", checkpoints=tmp_path)
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("2\n")
    files.log.write_text("\n".join(["(TaskRunnerV1 pid=1) Training Progress:   0%|", *RAY_TRACEBACK,
                                    "[agent-tune] removed 2 shared-memory files left in /dev/shm"]) + "\n")
    out = io.StringIO()
    setup_logging(stdout=out, stderr=out)
    try:
        status = watch(subprocess.Popen([sys.executable, "-c", "raise SystemExit(1)"]), files, interval_s=0.05)
    finally:
        setup_logging()
    lines = out.getvalue().splitlines()
    assert status == 1
    assert lines == [
        "[agent-tune] First step started (rollouts, then the update) [" + lines[0].rsplit("[", 1)[1],
        "[agent-tune] error: training failed (exit 1) after " + lines[1].split(" after ", 1)[1].split(":")[0]
        + f": {DIED}WorkerDict (verl's training worker: the FSDP actor and reference model), a Ray actor, pid 8832: "
        f"its process ended unexpectedly (killed, crashed, or out of memory?); run the same command again to "
        f"resume from {tmp_path / 'global_step_2'}",
        f"[agent-tune] full log: {files.log}",
    ]
    assert "Traceback" not in out.getvalue()


def test_the_deadline_thread_is_a_daemon() -> None:
    # a watch that saw nothing must never keep the child alive at exit
    dog = RunWatchdog(interval_s=60.0, actors=lambda: [])
    dog.start()
    assert all(t.daemon for t in threading.enumerate() if t.name.startswith("agent-tune-run"))
    dog.stop(failed=False)
