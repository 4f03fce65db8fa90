"""Running on an existing Ray cluster: what the launcher changes and checks before verl starts.

verl's ``run_ppo`` calls ``ray.init(**ray_kwargs.ray_init)``. With an address (``+ray_kwargs.ray_init.address``
or Ray's own ``RAY_ADDRESS``) that call joins a running cluster, and Ray then refuses ``num_cpus`` /
``num_gpus`` (they size a cluster Ray would start itself; the CPU config sets both).
:func:`prepare_for_cluster` drops them for such a run.

verl places ``trainer.nnodes`` placement groups of ``trainer.n_gpus_per_node`` GPU bundles, each packed on
one node (``STRICT_PACK``). It checks only the cluster's total GPU count, so a cluster whose GPUs are spread
differently (say 2 nodes of 1 GPU for ``n_gpus_per_node=2``) waits forever for its placement groups.
:func:`check_cluster` connects first and fails at start-up naming the keys instead.

The run's actors on a cluster it joined are started by the cluster's raylets, not by the run: the ``/dev/shm``
clean-up of a CPU run (``agent_tune.cleanup_shm``) asks the GCS for those on this machine
(:func:`job_actor_pids_here`) and counts their processes (vLLM's engine among them) as the run's. Files left on
the other machines of the cluster are theirs to clean.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Callable, Iterable, Mapping

from omegaconf import DictConfig, OmegaConf, open_dict

logger = logging.getLogger(__name__)

LOCAL_ONLY_KEYS = ("num_cpus", "num_gpus")


def cluster_address(config: DictConfig, environ: Mapping[str, str] | None = None) -> str | None:
    """The address of the Ray cluster the run joins: ``ray_kwargs.ray_init.address``, else ``RAY_ADDRESS``;
    None when the run starts its own local cluster."""
    environ = os.environ if environ is None else environ
    address = OmegaConf.select(config, "ray_kwargs.ray_init.address", default=None)
    if address in (None, "", "local"):
        address = environ.get("RAY_ADDRESS") or None
    return None if address in (None, "", "local") else str(address)


def prepare_for_cluster(config: DictConfig, environ: Mapping[str, str] | None = None) -> str | None:
    """For a run joining an existing cluster, remove ``ray_kwargs.ray_init.num_cpus/num_gpus`` (Ray refuses
    them when connecting; the cluster's own ``ray start`` options count). Returns the address, or None."""
    address = cluster_address(config, environ)
    if address is None:
        return None
    ray_init = OmegaConf.select(config, "ray_kwargs.ray_init")
    with open_dict(config):
        for key in LOCAL_ONLY_KEYS:
            if ray_init is not None and ray_init.get(key) is not None:
                logger.info("joining the Ray cluster at %s: ray_kwargs.ray_init.%s=%s dropped (the cluster's "
                            "`ray start` options set its resources)", address, key, ray_init.get(key))
                ray_init[key] = None
    return address


def accelerator_key(device: str) -> str:
    """The Ray resource verl's workers ask for on ``device`` (``NPU`` on Ascend, ``GPU`` otherwise, CPU too)."""
    return "NPU" if device == "npu" else "GPU"


def nodes_that_fit(nodes: Iterable[Mapping], per_node: int, resource: str = "GPU") -> list[str]:
    """Ids of the alive nodes (``ray.nodes()`` entries) with at least ``per_node`` of ``resource``."""
    return [n["NodeID"] for n in nodes
            if n.get("Alive") and n.get("Resources", {}).get(resource, 0) >= per_node]


def check_placement(nodes: list[Mapping], nnodes: int, per_node: int, resource: str = "GPU") -> None:
    """Raise ``ValueError`` (naming ``trainer.nnodes`` / ``trainer.n_gpus_per_node``) when fewer than
    ``nnodes`` alive nodes hold ``per_node`` of ``resource`` each."""
    fit = nodes_that_fit(nodes, per_node, resource)
    if len(fit) < nnodes:
        have = ", ".join(f"{n['NodeID'][:8]}: {n.get('Resources', {}).get(resource, 0):g}"
                         for n in nodes if n.get("Alive")) or "no alive node"
        raise ValueError(
            f"config keys 'trainer.nnodes'={nnodes} / 'trainer.n_gpus_per_node'={per_node}: verl packs "
            f"{per_node} {resource} per node on {nnodes} nodes, but only {len(fit)} node(s) of the cluster have "
            f"{per_node} {resource} ({have}); start the nodes with `ray start ... --num-gpus={per_node}` or "
            f"lower the keys")


def check_cluster(config: DictConfig, address: str) -> list[dict]:
    """Connect to the cluster at ``address``, check it can place the trainer's workers, disconnect.

    Returns:
        The alive nodes (``ray.nodes()`` entries).

    Raises:
        ValueError: too few nodes with ``trainer.n_gpus_per_node`` accelerators (the message names the keys).
    """
    import ray

    ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
    try:
        nodes = [n for n in ray.nodes() if n.get("Alive")]
    finally:
        ray.shutdown()
    resource = accelerator_key(str(OmegaConf.select(config, "trainer.device", default="cuda")))
    check_placement(nodes, int(config.trainer.nnodes), int(config.trainer.n_gpus_per_node), resource)
    logger.info("Ray cluster at %s: %d nodes, %s per node: %s", address, len(nodes), resource,
                ", ".join(f"{n['NodeID'][:8]}={n.get('Resources', {}).get(resource, 0):g}" for n in nodes))
    return nodes


def actors_here(actors: Iterable[Mapping[str, Any]], ip: str, title: Callable[[int], bytes | None]) -> list[int]:
    """The pids of the alive actors among ``actors`` (entries of Ray's actor table: ``State``, ``Pid``,
    ``Address.IPAddress``) that run on this machine: their node's address is ``ip`` and the process with that pid
    here is titled as a Ray worker (``title(pid)``: its ``/proc/<pid>/cmdline``, ``ray::<Class>``; a pid alone
    could be another machine's, or reused since)."""
    pids = []
    for actor in actors:
        pid = int(actor.get("Pid") or 0)
        if (actor.get("State") == "ALIVE" and pid and (actor.get("Address") or {}).get("IPAddress") == ip
                and (title(pid) or b"").startswith(b"ray::")):
            pids.append(pid)
    return pids


def _title(pid: int) -> bytes | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read(64)
    except OSError:
        return None


def job_actor_pids_here() -> list[int]:
    """The pids of this process's Ray job's alive actors on this machine (:func:`actors_here`); none while this
    process has not joined Ray. A run that joined a cluster has them started by the cluster's raylet, not by itself:
    its ``/dev/shm`` clean-up roots them too (:attr:`verl_ext.cpu.shm.ShmSnapshot.roots_from`)."""
    import ray

    if not ray.is_initialized():
        return []
    from ray._private import state
    from ray.util import get_node_ip_address

    job = ray.JobID.from_hex(ray.get_runtime_context().get_job_id())
    return actors_here(state.actors(job_id=job, actor_state_name="ALIVE").values(), get_node_ip_address(), _title)
