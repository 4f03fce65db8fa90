"""scripts/install_gpu.sh installs torch's CUDA 13.0 build and checks torch's CUDA and nvcc before flash-attn.

The fake repository of tests/scripts/test_install.py: pip is logged, ``torch.version.cuda`` is a stub's and
``nvcc`` a fake on PATH.
"""

from __future__ import annotations

import shutil

import pytest

from tests.scripts.test_install import _fake_repo, _pip_calls, _run

FLASH_STEP = "pip install flash-attn build tools"


@pytest.fixture(autouse=True)
def _needs_bash():
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")


def test_torch_comes_first_from_the_cuda_13_index(tmp_path):
    repo = _fake_repo(tmp_path, fail_pip_on=None)
    result = _run(repo, "install_gpu.sh")
    assert result.returncode == 0, result.stderr
    calls = _pip_calls(tmp_path)
    torch_call = calls[1]  # after pip's own upgrade
    assert "--index-url https://download.pytorch.org/whl/cu130" in torch_call
    assert "torch==2.11.0 torchvision==0.26.0 torchaudio==2.11.0" in torch_call
    assert "-e .[gpu,models,retool,tau2,dev]" in calls[2]
    assert calls[-1].split()[-2] == "flash-attn==2.8.3"  # the CUDA check passed, flash-attn was built


@pytest.mark.parametrize(
    "cuda,nvcc_release,message",
    [
        ("12.8", "13.0", "torch.version.cuda is 12.8, the GPU set needs the CUDA 13.0 build"),
        (None, "13.0", "torch.version.cuda is none"),  # a CPU torch
        ("13.0", "12.9", "is CUDA 12.9 but torch is built for CUDA 13.0"),
    ],
)
def test_a_cuda_mismatch_stops_before_flash_attn_naming_it(tmp_path, cuda, nvcc_release, message):
    repo = _fake_repo(tmp_path, fail_pip_on=None, cuda=cuda, nvcc_release=nvcc_release)
    result = _run(repo, "install_gpu.sh")
    assert result.returncode == 1
    assert "install_gpu.sh: step 'check CUDA 13.0 (torch.version.cuda, nvcc --version)' failed" in result.stderr
    assert message in result.stderr
    assert not any("flash-attn" in call or "ninja" in call for call in _pip_calls(tmp_path))


def test_a_newer_cuda_13_toolkit_passes(tmp_path):
    repo = _fake_repo(tmp_path, fail_pip_on=None, nvcc_release="13.1")
    result = _run(repo, "install_gpu.sh")
    assert result.returncode == 0, result.stderr
    assert any("flash-attn==2.8.3" in call for call in _pip_calls(tmp_path))


def test_missing_nvcc_is_named(tmp_path):
    repo = _fake_repo(tmp_path, fail_pip_on=None)
    (tmp_path / "cuda" / "bin" / "nvcc").unlink()
    env_cuda = tmp_path / "no-cuda"
    env_cuda.mkdir()
    result = _run(repo, "install_gpu.sh", extra_env={"CUDA_HOME": str(env_cuda)})
    assert result.returncode == 1
    assert f"no nvcc at {env_cuda}/bin/nvcc" in result.stderr
