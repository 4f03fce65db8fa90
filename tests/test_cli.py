"""The ``agent-tune`` command line itself (:mod:`agent_tune.cli`): ``--version``, ``envs``, the help texts."""

from __future__ import annotations

import re
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
