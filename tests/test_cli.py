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


HELPED = [["-h"], ["train", "-h"], ["sft", "-h"], ["data", "-h"], ["sft-data", "-h"], ["curriculum", "-h"],
          ["eval", "-h"], ["eval", "report", "-h"], ["plot", "-h"]]


@pytest.mark.parametrize("argv", HELPED, ids=lambda argv: " ".join(argv))
def test_every_command_help_has_an_example(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "examples:\n  agent-tune " in out or "\n    agent-tune " in out, out[-600:]
    if argv[0] == "train":
        assert "(default: agent_tune_grpo)" in out and "--dry-run" in out


def _parsers() -> list:
    from agent_tune.data_cli import parser as data_parser
    from agent_tune.eval.cli import report_parser, run_parser
    from agent_tune.sft.convert import parser as sft_data_parser

    return [data_parser(), run_parser(), report_parser(), sft_data_parser()]


def test_every_option_with_a_default_says_it() -> None:
    from agent_tune.utils.cli_args import HelpFormatter

    missing = []
    for parser in _parsers():
        formatter = HelpFormatter(parser.prog)
        for action in parser._actions:
            if not action.option_strings or action.help in (None, "==SUPPRESS==") or action.dest == "help":
                continue
            default = action.default
            if default is None or default is False or default in ("", [], {}):
                continue
            if "default" not in formatter._get_help_string(action):
                missing.append(f"{parser.prog} {action.option_strings[-1]}")
    assert not missing, missing


def test_eval_sampling_help_names_defaults_and_an_example(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["eval", "-h"])
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    assert "episodes in flight at once" in out and "(default: 16)" in out
    assert "samples per entry (pass@k for k <= n; e.g. --n 4 --temperature 0.7 for pass@4) (default: 1)" in out
    assert "(0: greedy, one answer per entry; > 0 with --n > 1 for pass@k) (default: 0.0)" in out
