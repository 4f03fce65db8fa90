"""The local sandbox's scientific stack: numpy, sympy and scipy import and compute, read-only, under the same limits."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from agent_tune.tools import (
    ExecutionLimits,
    LocalSandbox,
    LocalSandboxConfig,
    SandboxConfig,
    SandboxUnavailableError,
    local_sandbox,
)
from agent_tune.tools.local_sandbox import DEFAULT_PACKAGES, PACKAGES_MOUNT, resolve_packages

from .sandbox_helpers import wait_no_children

# room for sympy's and scipy's imports on a loaded 2-core box, and the memory cap of the escape tests
LIMITS = ExecutionLimits(cpu_seconds=10, wall_seconds=30, memory_mb=512, max_processes=16)


@pytest.fixture(scope="module")
def box():
    sandbox = LocalSandbox(limits=LIMITS, max_concurrency=2)
    yield sandbox
    sandbox.close()


def test_default_config_binds_numpy_sympy_scipy_and_their_requirements(box):
    assert LocalSandboxConfig().packages == DEFAULT_PACKAGES == ("numpy", "sympy", "scipy")
    names = {d.split("==")[0].lower() for d in box.packages.distributions}
    assert names == {"numpy", "sympy", "scipy", "mpmath"}  # mpmath: sympy's requirement
    assert {"numpy", "sympy", "scipy", "mpmath"} <= set(box.packages.modules)
    import numpy

    site_packages = os.path.dirname(os.path.dirname(os.path.realpath(numpy.__file__)))
    assert all(os.path.dirname(host) == site_packages for _, host in box.packages.entries)


def test_programs_import_and_compute_with_the_stack(box):
    r = box.run(
        "import numpy as np, sympy, scipy\n"
        "from scipy import integrate, optimize\n"
        "x = sympy.symbols('x')\n"
        "print(sorted(sympy.solve(x**2 - 5*x + 6, x)))\n"
        "print(sympy.integrate(x**2, (x, 0, 3)), sympy.factorint(360))\n"
        "print(round(optimize.brentq(lambda t: t**3 - 2, 0, 2), 9))\n"
        "res = optimize.minimize_scalar(lambda t: (t - 1.5) ** 2 + 4)\n"
        "print(round(res.x, 6), round(res.fun, 6))\n"
        "val, _ = integrate.quad(lambda t: np.exp(-t * t), -np.inf, np.inf)\n"
        "print(round(val * val, 9))\n"
        "print(np.linalg.solve(np.array([[2.0, 1.0], [1.0, 3.0]]), np.array([3.0, 5.0])).round(9).tolist())\n"
    )
    assert r.ok, r.stderr
    assert r.stdout.splitlines() == [
        "[2, 3]",
        "9 {2: 3, 3: 2, 5: 1}",
        "1.25992105",  # 2 ** (1/3)
        "1.5 4.0",
        "3.141592654",  # (sqrt(pi)) ** 2
        "[0.8, 1.4]",
    ]


def test_only_the_bound_packages_are_visible(box):
    r = box.run(
        "import os, sys\nprint(sorted(os.listdir(%r)))\nprint(%r in sys.path)\n"
        "for name in ('torch', 'vllm', 'transformers', 'agent_tune', 'pip', 'pytest'):\n"
        "    try:\n        __import__(name)\n        print('IMPORTED', name)\n"
        "    except ModuleNotFoundError:\n        pass\n" % (PACKAGES_MOUNT, PACKAGES_MOUNT)
    )
    assert r.ok, r.stderr
    lines = r.stdout.splitlines()
    listed = ast.literal_eval(lines[0])
    assert listed == [name for name, _ in box.packages.entries]
    assert all(n.split(".")[0].split("-")[0] in {"numpy", "sympy", "scipy", "mpmath", "isympy"} for n in listed)
    assert lines[1:] == ["True"]  # and nothing else imported


def test_writes_to_the_packages_fail(box):
    init = os.path.join(dict(box.packages.entries)["numpy"], "__init__.py")
    before = (os.stat(init).st_mtime_ns, os.path.getsize(init))
    attempts = [
        f"open('{PACKAGES_MOUNT}/numpy/evil.py', 'w').write('x')",
        f"open('{PACKAGES_MOUNT}/numpy/__init__.py', 'a').write('import os')",
        f"import os\nos.remove('{PACKAGES_MOUNT}/sympy/__init__.py')",
        f"import os\nos.mkdir('{PACKAGES_MOUNT}/evil')",
        f"import os\nos.rename('{PACKAGES_MOUNT}/scipy', '{PACKAGES_MOUNT}/scipy2')",
        f"import os\nos.chmod('{PACKAGES_MOUNT}/numpy/__init__.py', 0o777)",
        "import numpy, os\nopen(os.path.join(os.path.dirname(numpy.__file__), 'version.py'), 'w').write('x')",
    ]
    for code in attempts:
        r = box.run(code + "\nprint('WROTE')")
        assert "WROTE" not in r.stdout and r.exit_code == 1, code
        assert "Read-only file system" in r.stderr or "PermissionError" in r.stderr, (code, r.stderr)
    assert (os.stat(init).st_mtime_ns, os.path.getsize(init)) == before
    r = box.run("import numpy\nprint(numpy.__file__)")  # still the pristine package
    assert r.ok and r.stdout == f"{PACKAGES_MOUNT}/numpy/__init__.py\n"


def test_network_still_off_with_the_stack_loaded(box):
    r = box.run(
        "import numpy, scipy, sympy, socket\n"
        "socket.create_connection(('1.1.1.1', 53), timeout=3)\nprint('CONNECTED')"
    )
    assert "CONNECTED" not in r.stdout and r.exit_code == 1 and "OSError" in r.stderr


def test_numpy_allocation_over_the_memory_cap_fails(box):
    # 1 GiB of float64 against a 512 MiB address-space cap; np.zeros maps lazily, the cap still refuses it
    for alloc in ("np.ones((1024, 1024, 128))", "np.zeros((1024, 1024, 128)); a[:] = 1"):
        r = box.run(f"import numpy as np\na = {alloc}\nprint('ALLOCATED')")
        assert "ALLOCATED" not in r.stdout and r.exit_code == 1
        assert "MemoryError" in r.stderr and "Unable to allocate 1.00 GiB" in r.stderr, r.stderr
    r = box.run("import numpy as np\na = np.ones((8, 1024, 1024))\nprint(int(a.sum()))")  # 64 MiB is fine
    assert r.ok and r.stdout == f"{8 * 1024 * 1024}\n"


def test_blas_stays_single_threaded_and_cpu_limit_holds(box):
    r = box.run(
        "import numpy as np\nm = np.random.default_rng(0).random((300, 300))\n(m @ m).sum()\n"
        "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('Threads')][0])"
    )
    assert r.ok and r.stdout == "1\n"
    limits = ExecutionLimits(cpu_seconds=1, wall_seconds=30, memory_mb=512)
    r = box.run("import numpy as np\nm = np.random.default_rng(0).random((200, 200))\nwhile True:\n"
                "    np.linalg.svd(m)", limits)
    assert not r.timed_out and r.error and "CPU time limit" in r.error
    assert wait_no_children() == []


def test_packages_come_from_config_with_their_requirements():
    cfg = SandboxConfig.parse({"local": {"packages": ["sympy"]}, "limits": {"wall_seconds": 30}}, "sandbox")
    assert cfg.local.packages == ("sympy",)
    with LocalSandbox(cfg.local, limits=cfg.limits) as box:
        assert {d.split("==")[0].lower() for d in box.packages.distributions} == {"sympy", "mpmath"}
        r = box.run("import mpmath, sympy\nprint(sympy.sqrt(8))\nimport numpy")
        assert r.stdout == "2*sqrt(2)\n" and "No module named 'numpy'" in r.stderr


def test_no_packages_means_no_site_packages_at_all():
    with LocalSandbox(LocalSandboxConfig(packages=()), limits=LIMITS) as box:
        assert box.packages.entries == ()
        r = box.run(f"import os, sys\nprint(os.path.exists({PACKAGES_MOUNT!r}), {PACKAGES_MOUNT!r} in sys.path)\n"
                    "import numpy")
        assert r.stdout == "False False\n" and "No module named 'numpy'" in r.stderr


def test_missing_or_bad_packages_fail_at_construction():
    with pytest.raises(SandboxUnavailableError, match="'no-such-dist-agent-tune' is not installed"):
        LocalSandbox(LocalSandboxConfig(packages=("no-such-dist-agent-tune",)))
    with pytest.raises(ValueError, match="list of distribution names"):
        LocalSandboxConfig(packages="numpy")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="distribution names"):
        LocalSandboxConfig(packages=("",))


def test_resolve_packages_follows_requirements_and_leaves_out_scripts_and_caches():
    mounts = resolve_packages(["sympy"])
    names = [name for name, _ in mounts.entries]
    assert "sympy" in names and "mpmath" in names and "isympy.py" in names
    assert not any(n in ("..", "__pycache__") or n.endswith(".pth") for n in names)
    assert mounts.modules == ("isympy", "mpmath", "sympy")
    assert all(os.path.exists(host) for _, host in mounts.entries)


def test_a_missing_requirement_is_named_with_what_requires_it(monkeypatch):
    import importlib.metadata as md

    class Fake(md.Distribution):
        """A distribution "x" of one stdlib module whose requirement is not installed."""

        def read_text(self, filename: str) -> str | None:
            if filename == "METADATA":
                return (
                    "Metadata-Version: 2.1\nName: x\nVersion: 1\nRequires-Dist: not-installed-dist\n"
                    "Requires-Dist: pytest; extra == 'dev'\n"
                )
            return "os.py,,\n" if filename == "RECORD" else None

        def locate_file(self, path: str | os.PathLike[str]) -> Path:
            return Path(os.path.dirname(os.__file__)) / path

    real = md.distribution
    monkeypatch.setattr(local_sandbox.metadata, "distribution", lambda name: Fake() if name == "x" else real(name))
    with pytest.raises(SandboxUnavailableError, match=r"'not-installed-dist' \(required by x\) is not installed"):
        resolve_packages(["x"])


def test_a_sandbox_python_of_another_version_is_refused_while_packages_are_bound(monkeypatch):
    monkeypatch.setattr(local_sandbox, "_HOST_PYTHON", "2.7")
    with pytest.raises(SandboxUnavailableError, match=r"runs Python 3\.\d+ but its packages .*numpy==.*Python 2\.7"):
        LocalSandbox(LocalSandboxConfig(), limits=LIMITS)
    LocalSandbox(LocalSandboxConfig(packages=()), limits=LIMITS).close()  # nothing bound: nothing to mismatch
