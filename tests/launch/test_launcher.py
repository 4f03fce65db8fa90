"""The launcher skeleton ``agent-tune train`` and ``agent-tune sft`` share, with scripted training children:
the run folder, the log and its header, the config the child runs, exit codes, SIGTERM, the child's side."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from omegaconf import DictConfig, OmegaConf

from agent_tune.errors import ConfigError
from agent_tune.launch.launcher import Child, Launcher
from agent_tune.launch.run_config import RunConfig
from agent_tune.launch.sft import SFTLauncher
from agent_tune.utils.run_lock import LOCK_NAME, RunFolderBusy, RunLock
from tests.launch.test_lifeline import gone, wait_gone

REPO = Path(__file__).resolve().parents[2]


class Scripted(Launcher):
    """A command whose child is a Python snippet (``{config}``: the saved config's path)."""

    command = "scripted"
    module = "unused"
    child_config = "child.yaml"
    log_name = "child.log"

    def __init__(self, script: str) -> None:
        self.script = script
        self.followed: Child | None = None

    def child_command(self, config: DictConfig, config_file: Path) -> list[str]:
        return [sys.executable, "-c", textwrap.dedent(self.script).replace("{config}", str(config_file))]

    def follow(self, child: Child, verbose: bool) -> int:
        self.followed = child
        return child.proc.wait()


def _config(out: Path, **extra) -> DictConfig:
    return OmegaConf.create({"trainer": {"default_local_dir": str(out), "total_training_steps": 2}, **extra})


def test_launch_runs_the_child_on_the_saved_config_with_its_output_in_the_log(tmp_path: Path) -> None:
    out = tmp_path / "run"
    launcher = Scripted("""
        from omegaconf import OmegaConf
        print("child sees", OmegaConf.load("{config}").trainer.default_local_dir)
        raise SystemExit(3)
    """)
    (out).mkdir()
    (out / "child.log").write_text("an earlier launch\n")
    assert launcher.launch(RunConfig.parse(_config(out)), "cfg", False, time.monotonic()) == 3
    child = launcher.followed
    assert child is not None and child.run_dir == out.resolve() and child.log_path == out / "child.log"
    log = (out / "child.log").read_text()
    assert log.startswith("an earlier launch\n===== agent-tune scripted --config-name cfg: ")
    assert log[child.log_offset:].startswith("=====")  # this launch's part of the log
    assert f"child sees {out.resolve()}" in log
    assert OmegaConf.load(out / "child.yaml").trainer.total_training_steps == 2


def test_the_saved_config_travels_with_the_run_folder(tmp_path: Path) -> None:
    out = tmp_path / "run"
    config = _config(out, agent_tune={"episodes": {"dir": str(out / "episodes")}})
    assert Scripted("raise SystemExit(0)").launch(RunConfig.parse(config), "cfg", False, time.monotonic()) == 0
    saved = OmegaConf.to_container(OmegaConf.load(out / "child.yaml"), resolve=False)
    assert saved["agent_tune"]["episodes"]["dir"] == "${trainer.default_local_dir}/episodes"
    moved = tmp_path / "elsewhere" / "run"
    shutil.copytree(out, moved)
    shutil.rmtree(out)
    seen: list[DictConfig] = []

    class Child(Scripted):
        def run_child(self, config: DictConfig) -> None:
            seen.append(config)

    assert Child("").child_main(str(moved / "child.yaml")) == 0  # what the training child runs after a move
    assert seen[0].trainer.default_local_dir == str(moved.resolve())
    assert seen[0].agent_tune.episodes.dir == str(moved.resolve() / "episodes")


def test_sigterm_to_the_launcher_stops_the_child_and_says_so(tmp_path: Path) -> None:
    class Stopped(Scripted):
        def follow(self, child: Child, verbose: bool) -> int:
            assert not child.stop_requested()
            signal.raise_signal(signal.SIGTERM)  # as the curriculum runner ends a stage
            return super().follow(child, verbose)

    before = signal.getsignal(signal.SIGTERM)
    launcher = Stopped("import time; time.sleep(60)")
    run = RunConfig.parse(_config(tmp_path / "run"))
    assert launcher.launch(run, "cfg", False, time.monotonic()) == -signal.SIGTERM
    assert launcher.followed.stop_requested() and signal.getsignal(signal.SIGTERM) is before


def test_a_bad_key_exits_2_before_anything_starts(capsys) -> None:
    pytest.importorskip("hydra")
    launcher = Scripted("raise SystemExit(0)")
    launcher.default_config_name = "agent_tune_grpo_cpu"
    assert launcher.main(["trainer.bogus=1"]) == 2
    assert "agent-tune scripted: error: " in capsys.readouterr().err and launcher.followed is None


def test_the_child_side_exits_2_on_a_config_error(tmp_path: Path) -> None:
    class Failing(Scripted):
        def run_child(self, config: DictConfig) -> None:
            raise ConfigError(f"config key 'trainer.x': {config.trainer.x}")

    path = tmp_path / "c.yaml"
    OmegaConf.save(OmegaConf.create({"trainer": {"x": "bad"}}), path)
    assert Failing("").main(["--_child", str(path)]) == 2


def test_a_child_started_by_hand_takes_the_folders_lock_itself(tmp_path: Path, capsys) -> None:
    path = tmp_path / "run" / "c.yaml"  # where a launcher saves it: in the run folder (the child reads it there)
    path.parent.mkdir()
    OmegaConf.save(_config(tmp_path / "run"), path)
    held_while_running = []

    class ByHand(Scripted):
        def run_child(self, config: DictConfig) -> None:
            with pytest.raises(RunFolderBusy):
                RunLock.folder(tmp_path / "run").acquire()
            held_while_running.append(True)

    with RunLock.folder(tmp_path / "run"):  # a launcher runs there
        assert ByHand("").main(["--_child", str(path), "--_detached"]) == 2
    assert f"{(tmp_path / 'run').resolve()} is in use by another run: pid {os.getpid()} " in capsys.readouterr().err
    assert not held_while_running
    assert ByHand("").main(["--_child", str(path), "--_detached"]) == 0  # free: it runs, holding the folder
    assert held_while_running == [True]
    lock = RunLock.folder(tmp_path / "run")
    assert lock.acquire() is None  # and lets go at its end
    lock.release()


def _sft_child(tmp_path: Path, script: str, monkeypatch) -> SFTLauncher:
    launcher = SFTLauncher()
    monkeypatch.setattr(launcher, "child_command",
                        lambda config, config_file: [sys.executable, "-c", textwrap.dedent(script)])
    monkeypatch.setattr(launcher, "child_environment", lambda config: None)
    return launcher


def test_sft_follows_its_child_and_reports_the_checkpoint(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "run"
    launcher = _sft_child(tmp_path, f"""
        import pathlib
        print("SFT rows: 2 rendered, 0 skipped")
        print("noise")
        print("step:1 - train/loss:0.5 - train/lr:0.0001")
        (pathlib.Path({str(out)!r}) / "global_step_1" / "huggingface").mkdir(parents=True)
        (pathlib.Path({str(out)!r}) / "global_step_1" / "huggingface" / "config.json").write_text("{{}}")
    """, monkeypatch)
    echo = io.StringIO()
    monkeypatch.setattr(sys, "stdout", echo)
    run = RunConfig.parse(_config(out, model={"lora_rank": 0}))
    assert launcher.launch(run, "sft_cfg", False, time.monotonic()) == 0
    shown = echo.getvalue()
    assert "SFT rows: 2 rendered, 0 skipped\nstep 1/2: loss 0.5000, lr 0.0001\n" in shown and "noise" not in shown
    assert f"checkpoint: {out / 'global_step_1'}" in shown
    hf = out / "global_step_1" / "huggingface"
    assert f"Hugging Face folder (actor_rollout_ref.model.path for GRPO): {hf}" in shown
    assert [json.loads(line)["step"] for line in (out / "sft_metrics.jsonl").read_text().splitlines()] == [1]
    log = (out / "sft.log").read_text()
    assert log.startswith("===== agent-tune sft --config-name sft_cfg: ") and "noise" in log


def test_sft_failure_shows_the_cause_and_exits_with_the_childs_status(tmp_path: Path, monkeypatch) -> None:
    out = tmp_path / "run"
    launcher = _sft_child(tmp_path, """
        import sys
        print("Traceback (most recent call last):")
        print("ValueError: no rows")
        sys.exit(5)
    """, monkeypatch)
    echo = io.StringIO()
    monkeypatch.setattr(sys, "stdout", echo)
    assert launcher.launch(RunConfig.parse(_config(out, model={})), "sft_cfg", False, time.monotonic()) == 5
    assert "agent-tune sft: training failed (exit 5):\nTraceback" in echo.getvalue()
    assert "ValueError: no rows" in echo.getvalue() and f"full log: {out / 'sft.log'}" in echo.getvalue()


def _config_dir(tmp_path: Path, **data: str) -> Path:
    """A config folder with one config, ``tiny``, whose run folder is ``tmp_path/run``."""
    folder = tmp_path / "configs"
    folder.mkdir()
    config = {"trainer": {"default_local_dir": str(tmp_path / "run"), "total_training_steps": 2}}
    if data:
        config["data"] = data
    OmegaConf.save(OmegaConf.create(config), folder / "tiny.yaml")
    return folder


class Noisy(Scripted):
    """A command whose start-up check makes a library speak: a ``warnings.warn`` and a root-logger record."""

    def check(self, run: RunConfig) -> RunConfig:
        import logging
        import warnings

        warnings.warn("torchtitan engine is not available", UserWarning, stacklevel=1)
        logging.getLogger("verl.plugin.platform").warning("No supported accelerator detected")
        return run


def test_library_warnings_at_start_up_go_to_the_log_not_the_console(tmp_path: Path, capsys, monkeypatch) -> None:
    pytest.importorskip("hydra")
    import agent_tune.launch.launcher as launcher_module

    monkeypatch.setattr(launcher_module, "check_install", lambda config: {"torch": "x"})
    launcher = Noisy("print('trained')")
    assert launcher.main(["--config-dir", str(_config_dir(tmp_path)), "--config-name", "tiny"]) == 0
    console = capsys.readouterr()
    shown = console.out + console.err
    assert "Training started" in shown and "Install check: torch x" in shown  # our own lines stay
    assert "Warning" not in shown and "WARNING" not in shown and "accelerator" not in shown, shown
    log = (tmp_path / "run" / "child.log").read_text()
    assert "UserWarning: torchtitan engine is not available" in log
    assert "WARNING verl.plugin.platform: No supported accelerator detected" in log
    assert log.index("torchtitan") < log.index("===== agent-tune scripted") < log.index("trained")


def test_dry_run_runs_every_check_and_starts_nothing(tmp_path: Path, capsys, monkeypatch) -> None:
    pytest.importorskip("hydra")
    import agent_tune.launch.launcher as launcher_module

    installs: list[object] = []
    monkeypatch.setattr(launcher_module, "check_install", lambda config: installs.append(config) or {"torch": "x"})
    launcher = Noisy("raise SystemExit(5)")
    assert launcher.main(["--config-dir", str(_config_dir(tmp_path)), "--config-name", "tiny", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert launcher.followed is None and not (tmp_path / "run").exists() and len(installs) == 1
    assert "Dry run: every start-up check passed; nothing started" in out and "Warning" not in out


def test_a_missing_data_file_is_named_before_the_install_check(tmp_path: Path, capsys, monkeypatch) -> None:
    pytest.importorskip("hydra")
    import agent_tune.launch.launcher as launcher_module

    monkeypatch.setattr(launcher_module, "check_install", lambda config: pytest.fail("the install check ran first"))
    folder = _config_dir(tmp_path, train_files=str(tmp_path / "train.parquet"))
    assert Scripted("").main(["--config-dir", str(folder), "--config-name", "tiny", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "config key 'data.train_files': file " in err and "build the rows with `agent-tune data" in err
# A command whose child, like the train child, shuts down through its ``finally`` on SIGTERM (ray.init's
# handler raises SystemExit), run as a real launcher process: ``python FAKE RUN_DIR [--detach]``.
FAKE_COMMAND = textwrap.dedent('''
    import signal, sys, time
    from pathlib import Path
    from omegaconf import OmegaConf
    from agent_tune.launch.launcher import Launcher
    from agent_tune.launch.run_config import RunConfig
    from agent_tune.utils.logs import setup_logging

    class Fake(Launcher):
        command = "fake"
        module = "fake_command"
        child_config = "child.yaml"
        log_name = "child.log"

        def follow(self, child, verbose):
            return child.proc.wait()

        def run_child(self, config):
            state = Path(config.trainer.default_local_dir) / "state"
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
            state.write_text("running")
            try:
                time.sleep(300)
            finally:
                state.write_text("stopped cleanly")

    if __name__ == "__main__":
        if "--_child" in sys.argv:
            sys.exit(Fake().main())
        setup_logging()
        launcher = Fake()
        run = RunConfig.parse(OmegaConf.create({"trainer": {"default_local_dir": sys.argv[1]}}))
        lock = launcher.lock_run_dir(run.run_dir)
        sys.exit(launcher.launch(run, "cfg", False, time.monotonic(), lock=lock, detach="--detach" in sys.argv))
''')


def _start_fake(tmp_path: Path, *flags: str) -> tuple[subprocess.Popen, Path]:
    (tmp_path / "fake_command.py").write_text(FAKE_COMMAND)
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    proc = subprocess.Popen([sys.executable, "-m", "fake_command", str(run_dir), *flags], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)  # a terminal of its own, as a user's shell
    start = time.monotonic()
    while not (run_dir / "state").is_file():
        assert time.monotonic() - start < 120 and proc.poll() in (None, 0), "the fake run did not start"
        time.sleep(0.1)
    return proc, run_dir


def _child_pid(run_dir: Path) -> int:
    return json.loads((run_dir / LOCK_NAME).read_text())["child_pid"]


@pytest.mark.parametrize("death", ["SIGKILL to the launcher", "SIGHUP to its terminal's process group"])
def test_the_launchers_death_stops_the_child_which_shuts_down_and_frees_the_folder(tmp_path: Path,
                                                                                   death: str) -> None:
    launcher, run_dir = _start_fake(tmp_path)
    child = _child_pid(run_dir)
    with pytest.raises(RunFolderBusy, match=f"pid {launcher.pid}, training child pid {child} on host "):
        RunLock.folder(run_dir).acquire()
    if death.startswith("SIGKILL"):
        launcher.kill()  # an OOM kill
    else:
        os.killpg(launcher.pid, signal.SIGHUP)  # a closed terminal: the child leaves it to the launcher
    launcher.wait()
    wait_gone(child)  # within the 60 s bound
    assert (run_dir / "state").read_text() == "stopped cleanly"  # through its finally, as on SIGTERM
    lock = RunLock.folder(run_dir)
    assert "from a run that is gone" in lock.acquire()  # a restart is accepted
    lock.release()


def test_detach_returns_at_once_and_leaves_the_run_holding_its_folder(tmp_path: Path) -> None:
    launcher, run_dir = _start_fake(tmp_path, "--detach")
    out, _ = launcher.communicate(timeout=60)
    child = _child_pid(run_dir)
    assert launcher.returncode == 0
    assert f"Training started in the background (pid {child})" in out
    assert f"log: {run_dir / 'child.log'}" in out and f"stop it: kill {child}" in out
    time.sleep(2)  # the launcher is gone; the run is not tied to it
    assert not gone(child) and (run_dir / "state").read_text() == "running"
    with pytest.raises(RunFolderBusy, match=f"stop it with `kill {child}`"):
        RunLock.folder(run_dir).acquire()
    os.kill(child, signal.SIGTERM)
    wait_gone(child)
    assert (run_dir / "state").read_text() == "stopped cleanly"


def test_a_busy_run_folder_is_refused_by_the_cli_before_the_start_up(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    with RunLock.folder(run_dir) as held:
        proc = subprocess.run([sys.executable, "-m", "agent_tune.cli", "train", "--config-name", "agent_tune_grpo_cpu",
                               f"trainer.default_local_dir={run_dir}"], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
        holder = held.holder.describe()
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"agent-tune train: error: {run_dir} is in use by another run: {holder}; stop it with "
        f"`kill {os.getpid()}` (it shuts down cleanly, keeping what it saved), or choose another folder "
        "(trainer.default_local_dir=...)")
    assert "Install check" not in proc.stdout and not (run_dir / "train_config.yaml").exists()


def test_detach_is_a_flag_of_train_not_of_sft(capsys) -> None:
    from agent_tune.launch.train import TrainLauncher

    assert TrainLauncher().parse_args(["--detach"]).detach and not TrainLauncher().parse_args([]).detach
    with pytest.raises(SystemExit):  # sft's launcher writes the log from the training's output: it must stay
        SFTLauncher().parse_args(["--detach"])
    assert "unrecognized arguments: --detach" in capsys.readouterr().err
