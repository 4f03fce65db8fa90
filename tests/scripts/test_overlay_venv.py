"""scripts/_overlay_venv.sh (install_trl.sh and install_bfcl_cli.sh build on it): ``overlay_venv DIR`` makes DIR a
venv of the trainer's Python that imports the trainer's packages, once, and refuses without the trainer's venv.

Run for real in a temporary repository copy whose ``.venv`` is this test's own venv (``python -m venv``, no
install)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCRIPT = ". scripts/_steps.sh; . scripts/_overlay_venv.sh; overlay_venv .venv-x; echo \"PY=$PY\""


def _repo(tmp_path: Path, with_trainer: bool = True) -> Path:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    for name in ("_steps.sh", "_overlay_venv.sh"):
        shutil.copy(REPO / "scripts" / name, repo / "scripts" / name)
    if with_trainer:
        (repo / ".venv").symlink_to(Path(sys.prefix))
    return repo


def _run(repo: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", f"set -euo pipefail; {SCRIPT}", "install_x.sh"], cwd=repo,
                          capture_output=True, text=True, timeout=300)


def test_the_overlay_imports_the_trainers_packages_and_is_built_once(tmp_path) -> None:
    repo = _repo(tmp_path)
    first = _run(repo)
    assert first.returncode == 0, first.stderr
    assert "install_x.sh: venv .venv-x (the trainer's Python)" in first.stdout
    assert first.stdout.rstrip().endswith("PY=.venv-x/bin/python")
    py = repo / ".venv-x" / "bin" / "python"
    probe = subprocess.run([str(py), "-c", "import sys, omegaconf; print(sys.prefix); print(omegaconf.__file__)"],
                           capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, probe.stderr
    prefix, omegaconf_file = probe.stdout.split()
    assert Path(prefix).resolve() == (repo / ".venv-x").resolve()  # its own venv, not the trainer's
    trainer = Path(sys.prefix).resolve()
    assert Path(omegaconf_file).resolve().is_relative_to(trainer)  # a trainer package, through the .pth

    again = _run(repo)  # idempotent: the venv is kept
    assert again.returncode == 0, again.stderr
    assert "venv .venv-x" not in again.stdout and again.stdout.rstrip().endswith("PY=.venv-x/bin/python")


def test_no_trainer_venv_is_refused_naming_the_fix(tmp_path) -> None:
    repo = _repo(tmp_path, with_trainer=False)
    result = _run(repo)
    assert result.returncode == 2
    assert result.stderr.strip() == "install_x.sh: no ./.venv (the trainer's venv): run bash scripts/install.sh first"
    assert not (repo / ".venv-x").exists()
