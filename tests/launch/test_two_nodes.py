"""GRPO on a two-node Ray cluster, of an env written as one file and of an MCP server: verl's trainer with
``trainer.nnodes=2`` on a head and a worker started with ``ray start`` on loopback, FSDP ranks and vLLM servers on
both nodes.

Each step's batch holds a row of each env. The calculator example (``examples/envs/calculator.py``, named by its
path, edited nowhere else) and the MCP notes example (``examples/mcp/``: the ``mcp`` env starting
``python -m examples.mcp.notes_server`` in the agent-loop workers, its verifier reading the server's state) both
get their rows from ``agent-tune data --env`` (their task catalogues), and ``agent-tune train`` with the notes
example's CPU config (``agent_tune_mcp_notes_cpu``: the generic CPU GRPO config plus the mcp env's options) trains
on them for 2 steps; their evals against a vLLM server are ``tests/eval/test_vllm_catalogue_slow.py``. One
trainer start-up serves all three claims (several ranks and nodes; a one-file env trains; an MCP server trains),
which keeps CI short.

Slow (minutes on 2 cores; ~2x the memory of one node's run): the config joins the cluster through
``+ray_kwargs.ray_init.address`` (the launcher drops the local-cluster ``num_cpus``/``num_gpus`` and checks the
cluster can place ``trainer.nnodes`` x ``trainer.n_gpus_per_node``) and runs 2 steps, shortened to fit CI:
2 prompts x 2 samples a step (two sequences per rank), 32 response tokens, no checkpoint, prompts padded to 512
tokens (the calculator's worked examples and tool take ~450). The worker actors' Ray node ids prove both nodes
worked, and the run leaves no vLLM file in /dev/shm although the cluster's raylets, not the run, started its actors.
The cluster is stopped afterwards even on failure (its own processes only, see ``ray_cluster.py``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.launch.ray_cluster import LoopbackCluster
from tests.launch.test_bfcl_main_job import _shm_files

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 1500
ENV = "examples.envs.calculator:CalculatorEnv"
MCP_TASKS = '{"path": "examples/mcp/tasks.jsonl"}'
# two prompts x 2 samples a step (micro-batches of 1), 32 response tokens, prompts padded to 512 tokens, no checkpoint
SHORT = ("data.train_batch_size=2", "actor_rollout_ref.actor.ppo_mini_batch_size=2", "actor_rollout_ref.rollout.n=2",
         "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1",
         "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1",
         "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1",
         "data.max_response_length=32", "data.max_prompt_length=512", "trainer.save_freq=-1",
         "trainer.total_training_steps=2")

pytestmark = [
    pytest.mark.slow,
]


class PeakMemory:
    """Peak of the machine's used memory (MemTotal - MemAvailable) while it runs, sampled every second."""

    def __init__(self) -> None:
        self.base = self.peak = _used_gb()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.peak = max(self.peak, _used_gb())

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak


def _used_gb() -> float:
    info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
    kb = lambda key: int(info[key].split()[0])  # noqa: E731
    return (kb("MemTotal") - kb("MemAvailable")) / 2**20


def test_one_file_env_and_an_mcp_server_train_on_two_ray_nodes(tmp_path: Path) -> None:
    pytest.importorskip("verl")
    pytest.importorskip("vllm")
    data, notes = tmp_path / "data", tmp_path / "notes"
    # 2 + 2 training rows: the 2 steps of 2 prompts play each row once, both envs every run
    made = subprocess.run([sys.executable, "-m", "agent_tune.cli", "data", "--env", ENV, "--split", "train", "test",
                           "--out", str(data), "--options", '{"size": 2}'],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0 and "2 train rows, 2 test rows" in made.stdout, made.stdout + made.stderr
    made = subprocess.run([sys.executable, "-m", "agent_tune.cli", "data", "--env", "mcp", "--split", "train", "test",
                           "--out", str(notes), "--options", MCP_TASKS, "--categories", "add", "--limit", "2"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0 and "2 train rows, 2 test rows" in made.stdout, made.stdout + made.stderr
    ckpt = tmp_path / "ckpt"
    env = {"PYTHONPATH": str(REPO)}
    shm_before = _shm_files()
    with LoopbackCluster(gpus_per_node=1, cpus_per_node=8, env=env, log_dir=tmp_path) as cluster:
        nodes = cluster.alive_nodes()
        assert len(nodes) == 2 and len({n["NodeID"] for n in nodes}) == 2
        memory, started = PeakMemory(), time.monotonic()
        cmd = [sys.executable, "-m", "agent_tune.launch.train", "--config-name", "agent_tune_mcp_notes_cpu",
               f"+ray_kwargs.ray_init.address={cluster.address}", "trainer.nnodes=2", "trainer.n_gpus_per_node=1",
               f"data.train_files=[{data / 'train.parquet'},{notes / 'train.parquet'}]",
               f"data.val_files=[{data / 'test.parquet'},{notes / 'test.parquet'}]",
               f"trainer.default_local_dir={ckpt}", *SHORT]
        with open(tmp_path / "train.out", "w") as out:
            proc = subprocess.run(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, timeout=RUN_TIMEOUT_S,
                                  env=cluster.env)
        wall, peak = time.monotonic() - started, memory.stop()
        log = (ckpt / "train.log").read_text(errors="replace") if (ckpt / "train.log").is_file() else ""
        assert proc.returncode == 0, (tmp_path / "train.out").read_text()[-3000:] + log[-6000:]
        actors = cluster.actors()
        # vLLM's /dev/shm files on this machine went with the run: the cluster's raylets, not the run, started its
        # actors, and the clean-up found them through the GCS (agent_tune/launch/cluster.py); others' may be in use
        from verl_ext.cpu.shm import paths_in_use

        leftover = _shm_files() - shm_before
        assert leftover <= paths_in_use(), sorted(leftover - paths_in_use())
    print(f"\ntwo-node run: {wall:.0f} s wall, machine memory used peak {peak:.1f} GB "
          f"(before {memory.base:.1f} GB)")
    rows = [json.loads(line) for line in (ckpt / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and all(r["samples"] == 4 for r in rows)
    # the episodes were the one-file env's (built in the agent-loop workers from the rows' env path) and the MCP
    # server's: every training row played twice, the notes tasks' calls reaching their servers
    samples = [json.loads(line) for f in sorted((ckpt / "samples").glob("samples-*.jsonl"))
               for line in f.read_text().splitlines() if line.strip()]
    train = [s for s in samples if s["split"] == "train"]
    assert sorted(s["task"].partition(":")[0] for s in train) == ["examples.envs.calculator"] * 4 + ["mcp"] * 4, \
        [s["task"] for s in train]
    # the FSDP workers (verl's WorkerDict actors) and the vLLM servers ran on both nodes
    node_ids = {n["NodeID"] for n in nodes}
    workers = [a for a in actors if "WorkerDict" in a["ActorClassName"]]
    servers = [a for a in actors if "vLLM" in a["ActorClassName"] and "Server" in a["ActorClassName"]]
    assert {a["Address"]["NodeID"] for a in workers} == node_ids, workers
    assert {a["Address"]["NodeID"] for a in servers} == node_ids, servers
    assert not cluster.leftover_pids()
