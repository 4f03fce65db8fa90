"""An installed wheel carries the Hydra configs (``agent-tune train`` composes them without a checkout) and
exactly the checkout's modules."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("hydra")
pytest.importorskip("verl")

REPO = Path(__file__).resolve().parents[2]

PROBE = """
import agent_tune, agent_tune.launch.compose as t
from pathlib import Path
assert Path(agent_tune.__file__).resolve().is_relative_to(Path({target!r}).resolve()), agent_tune.__file__
print(t.default_config_dir())
cfg = t.compose_config("agent_tune_bfcl_cpu", ["trainer.total_training_steps=3"])
print(cfg.trainer.total_training_steps, cfg.agent_tune.template)
"""


def test_wheel_ships_configs(tmp_path: Path) -> None:
    wheels, target = tmp_path / "wheels", tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    str(REPO), "-w", str(wheels)], check=True, cwd=tmp_path)
    (wheel,) = wheels.glob("agent_tune-*.whl")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
                    str(wheel)], check=True, cwd=tmp_path)
    shipped = {p.relative_to(target / "agent_tune" / "config")
               for p in (target / "agent_tune" / "config").rglob("*.yaml")}
    assert shipped == {p.relative_to(REPO / "config") for p in (REPO / "config").rglob("*.yaml")}
    # the modules are the checkout's: none that was moved or deleted since an earlier build in build/
    packages = ("agent_tune", "verl_ext")
    modules = {p.relative_to(target) for package in packages for p in (target / package).rglob("*.py")}
    assert modules == {p.relative_to(REPO) for package in packages
                       for p in (REPO / package).rglob("*.py") if "__pycache__" not in p.parts}

    # the viewer's page is built from files shipped beside its modules
    static = {p.name for p in (target / "agent_tune" / "view" / "static").iterdir()}
    assert static == {p.name for p in (REPO / "agent_tune" / "view" / "static").iterdir()}
    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run([sys.executable, "-c", PROBE.format(target=str(target))], cwd=tmp_path, env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    config_dir, composed = out.stdout.strip().splitlines()[-2:]
    assert Path(config_dir) == target / "agent_tune" / "config"
    assert composed == "3 smollm2_tools"
