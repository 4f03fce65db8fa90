"""The layout's one import rule outside the packages: nothing outside ``tests/`` imports ``tests``.

Shared test servers, fakes and checks that benchmarks and tools need live in :mod:`agent_tune.testing`; every
``.py`` file of the repository outside ``tests/`` (benchmarks, examples, dataset builders, scripts, the packages)
is parsed and its imports checked.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SKIPPED = {"tests", "build", "outputs", "data", "node_modules"}  # plus hidden folders (.venv, .git, caches)


def _python_files_outside_tests() -> list[Path]:
    found = []
    for root, dirs, files in os.walk(REPO):
        top = Path(root) == REPO
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__" and not (top and d in SKIPPED)]
        found += [Path(root) / f for f in files if f.endswith(".py")]
    return sorted(found)


def _imports_tests(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        if any(name == "tests" or name.startswith("tests.") for name in names):
            lines.append(node.lineno)
    return lines


def test_nothing_outside_tests_imports_tests() -> None:
    files = _python_files_outside_tests()
    assert any(f.parent.name == "benchmarks" for f in files) and any(f.parent.name == "agent_tune" for f in files)
    offenders = []
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        offenders += [f"{path.relative_to(REPO)}:{line}" for line in _imports_tests(tree)]
    assert not offenders, f"imports of tests/ outside tests/ (move what they need to agent_tune/testing/): {offenders}"
