"""The ``agent-tune`` command line itself (:mod:`agent_tune.cli`): ``--version``, ``envs``, the help texts."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import agent_tune
from agent_tune.cli import main
from agent_tune.envs.base import RETIRED_NAMES

ROOT = Path(__file__).resolve().parents[1]


def test_version_prints_the_one_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"agent-tune {agent_tune.__version__}"
    assert re.fullmatch(r"\d+\.\d+\.\d+", agent_tune.__version__)
    # setup.py reads the same string rather than writing its own
    assert 'version=VERSION' in (ROOT / "setup.py").read_text()


def test_changelog_has_the_usual_shape_and_the_contract_migrations() -> None:
    text = (ROOT / "CHANGELOG.md").read_text()
    assert "Keep a Changelog" in text and "semantic versioning" in text
    headings = re.findall(r"^## \[([^\]]+)\]", text, re.M)
    assert headings[0] == "Unreleased" and agent_tune.__version__ in headings
    released = text[text.index(f"## [{agent_tune.__version__}]"):]
    for name in [*RETIRED_NAMES, "call_tool", "termination", "CallToolEnv"]:
        assert f"`{name}" in released, f"CHANGELOG's [{agent_tune.__version__}] does not say what became of {name}"
    assert released.count("Migration:") >= 7


def test_envs_lists_names_and_catalogues_without_importing_tau2() -> None:
    probe = ("import sys, contextlib, io; from agent_tune.cli import main; out = io.StringIO()\n"
             "with contextlib.redirect_stdout(out): main(['envs'])\n"
             "print(sorted(m for m in ('tau2', 'litellm', 'bfcl_eval', 'torch') if m in sys.modules))\n"
             "print(out.getvalue())")
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT,
                          timeout=120)
    first, *lines = proc.stdout.splitlines()
    assert first == "[]", first  # nothing heavy imported to list names
    rows = {line.split()[0]: line.split()[1] for line in lines[1:] if line and not line.startswith("tasks:")}
    assert rows["bfcl"] == "yes" and rows["tau2"] == "yes" and rows["openenv"] == "-"
    assert "tau2-bench" in next(line for line in lines if line.startswith("tau2"))
