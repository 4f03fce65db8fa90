"""A two-node Ray cluster on one machine for tests: a head and a worker started with ``ray start``.

Each node is its own ``ray start --block`` process (own GCS/raylet ports, dashboard agent port and a
custom resource naming the node), in its own process group, under one fresh ``--temp-dir``. Stopping it
ends exactly those processes: the two process groups, then any process whose command line names the
cluster's temp dir (Ray's workers and agents do). ``ray stop`` is not used: it ends every Ray process of
the user on the machine, other people's runs included.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

from agent_tune.testing.server_process import free_port

RAY = str(Path(sys.executable).with_name("ray"))


class LoopbackCluster:
    """``with LoopbackCluster(...) as cluster:`` a head and ``workers`` worker nodes on 127.0.0.1.

    Args:
        gpus_per_node: logical GPUs each node declares (verl places its workers on GPU bundles; on CPU
            nothing runs on them).
        cpus_per_node: logical CPUs each node declares.
        workers: worker nodes besides the head.
        env: environment for the nodes' processes (PYTHONPATH for the code the workers import).
    """

    def __init__(self, gpus_per_node: int = 1, cpus_per_node: int = 8, workers: int = 1,
                 env: dict[str, str] | None = None, log_dir: Path | None = None) -> None:
        self.gpus_per_node, self.cpus_per_node, self.workers = gpus_per_node, cpus_per_node, workers
        self.env = {**os.environ, **(env or {})}
        self.env.pop("RAY_ADDRESS", None)
        # Ray 2.60: `ray start` turns token authentication on when ~/.ray/auth_token exists, but
        # `ray.init(address=...)` with an explicit address never does, and then fails "InvalidAuthToken"
        # forever. One explicit mode for the nodes and every client (self.env) instead; a private loopback
        # cluster needs no token.
        self.env["RAY_AUTH_MODE"] = "disabled"
        self.temp_dir = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths must be < 108
        self.log_dir = Path(log_dir or self.temp_dir)
        self.port = free_port()
        # Ray binds its GCS to the node's IP (it ignored --node-ip-address=127.0.0.1 in a measured run: the head
        # listened on the host address and clients of 127.0.0.1 found no cluster), so address it there
        from ray.util import get_node_ip_address

        self.ip = get_node_ip_address()
        self.address = f"{self.ip}:{self.port}"
        self.last_error = ""
        self.procs: list[subprocess.Popen] = []
        self.node_names = ["head"] + [f"worker{i}" for i in range(workers)]

    def _start(self, name: str, extra: Sequence[str]) -> None:
        # the nodes share one IP: give each its own range of worker ports
        first = 20000 + 2000 * self.node_names.index(name)
        cmd = [RAY, "start", "--block", f"--num-cpus={self.cpus_per_node}", f"--num-gpus={self.gpus_per_node}",
               f"--min-worker-port={first}", f"--max-worker-port={first + 1999}",
               f'--resources={{"agent_tune_{name}": 1}}', f"--node-ip-address={self.ip}",
               f"--dashboard-agent-listen-port={free_port()}", f"--temp-dir={self.temp_dir}",
               "--disable-usage-stats", *extra]
        log = open(self.log_dir / f"ray_{name}.log", "w")
        self.procs.append(subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                           start_new_session=True))

    def start(self, timeout_s: float = 120.0) -> "LoopbackCluster":
        self._start("head", ["--head", f"--port={self.port}", "--include-dashboard=false"])
        self._wait_nodes(1, timeout_s)
        for name in self.node_names[1:]:
            self._start(name, [f"--address={self.address}"])
        self._wait_nodes(1 + self.workers, timeout_s)
        return self

    def _wait_nodes(self, n: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"ray start exited {proc.returncode}; logs in {self.log_dir}")
            if len(self.alive_nodes()) >= n:
                return
            time.sleep(2)
        raise TimeoutError(f"{n} Ray nodes not up after {timeout_s:.0f} s; logs in {self.log_dir}; last query "
                           f"error: {self.last_error[-1500:]}")

    def query(self, code: str, timeout_s: float = 120.0) -> str:
        """Run ``code`` in a fresh interpreter connected to the cluster (``ray`` imported, connected);
        its stdout."""
        script = (f"import json, ray\nray.init(address={self.address!r}, logging_level='ERROR', "
                  f"log_to_driver=False)\n{code}\nray.shutdown()\n")
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=self.env,
                              timeout=timeout_s)
        if proc.returncode != 0:
            raise RuntimeError(f"cluster query failed: {proc.stderr[-2000:]}")
        return proc.stdout

    def alive_nodes(self) -> list[dict]:
        """``ray.nodes()`` entries of the alive nodes (NodeID, Resources, ...)."""
        import json

        try:
            out = self.query("print(json.dumps([n for n in ray.nodes() if n['Alive']], default=str))", 60)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            self.last_error = str(exc)
            return []
        return json.loads(out.strip().splitlines()[-1])

    def actors(self) -> list[dict]:
        """Every actor the cluster has seen, alive or dead (class name, state, node id), from the GCS."""
        import json

        out = self.query("from ray._private import state\n"
                         "print(json.dumps(list(state.actors().values()), default=str))")
        return json.loads(out.strip().splitlines()[-1])

    def stop(self, grace_s: float = 20.0) -> None:
        """End the nodes' processes (and only those), even if a node already died."""
        for proc in self.procs:
            _signal_group(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for proc in self.procs:
            _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
        time.sleep(1)
        for pid in self.leftover_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def leftover_pids(self) -> list[int]:
        """Live processes whose command line names this cluster's temp dir."""
        pids = []
        marker = self.temp_dir.encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if marker in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
        return pids

    def __enter__(self) -> "LoopbackCluster":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)  # the group start_new_session gave this `ray start` (its pid)
    except (ProcessLookupError, PermissionError):
        pass
