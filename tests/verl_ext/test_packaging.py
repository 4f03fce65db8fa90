"""An installed wheel carries the Hydra configs: ``agent-tune train`` composes them without a checkout."""

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
import verl_ext, verl_ext.train as t
from pathlib import Path
assert Path(verl_ext.__file__).resolve().is_relative_to(Path({target!r}).resolve()), verl_ext.__file__
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
    shipped = {p.relative_to(target / "verl_ext" / "config") for p in (target / "verl_ext" / "config").rglob("*.yaml")}
    assert shipped == {p.relative_to(REPO / "config") for p in (REPO / "config").rglob("*.yaml")}

    env = {**os.environ, "PYTHONPATH": str(target)}
    out = subprocess.run([sys.executable, "-c", PROBE.format(target=str(target))], cwd=tmp_path, env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    config_dir, composed = out.stdout.strip().splitlines()[-2:]
    assert Path(config_dir) == target / "verl_ext" / "config"
    assert composed == "3 smollm2_tools"
