"""Joining an existing Ray cluster: the address, the local-only resources dropped, the placement check, the run's
actors on this machine (the /dev/shm clean-up's roots)."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from agent_tune.launch.cluster import (
    accelerator_key,
    actors_here,
    check_placement,
    cluster_address,
    nodes_that_fit,
    prepare_for_cluster,
)


def _config(address=None):
    ray_init = {"num_cpus": 16, "num_gpus": 1}
    if address is not None:
        ray_init["address"] = address
    return OmegaConf.create({"ray_kwargs": {"ray_init": ray_init}, "trainer": {"nnodes": 2, "n_gpus_per_node": 1}})


def test_address_from_config_then_ray_address() -> None:
    assert cluster_address(_config(), environ={}) is None
    assert cluster_address(_config("10.0.0.1:6379"), environ={"RAY_ADDRESS": "x:1"}) == "10.0.0.1:6379"
    assert cluster_address(_config(), environ={"RAY_ADDRESS": "127.0.0.1:6380"}) == "127.0.0.1:6380"
    assert cluster_address(_config("local"), environ={}) is None


def test_local_only_resources_dropped_when_joining() -> None:
    config = _config("auto")
    OmegaConf.set_struct(config, True)
    assert prepare_for_cluster(config, environ={}) == "auto"
    assert config.ray_kwargs.ray_init.num_cpus is None and config.ray_kwargs.ray_init.num_gpus is None
    local = _config()
    assert prepare_for_cluster(local, environ={}) is None
    assert local.ray_kwargs.ray_init.num_cpus == 16 and local.ray_kwargs.ray_init.num_gpus == 1


def _node(node_id: str, gpus: float, alive: bool = True) -> dict:
    return {"NodeID": node_id, "Alive": alive, "Resources": {"CPU": 8.0, "GPU": gpus}}


def test_placement_needs_nnodes_nodes_with_n_gpus_each() -> None:
    nodes = [_node("a" * 56, 1), _node("b" * 56, 1), _node("c" * 56, 2, alive=False)]
    assert nodes_that_fit(nodes, 1) == ["a" * 56, "b" * 56]
    check_placement(nodes, nnodes=2, per_node=1)
    # 2 GPUs in total, but not 2 on one node: verl's total-only check passes and its placement groups wait
    with pytest.raises(ValueError, match="trainer.nnodes'=1 / 'trainer.n_gpus_per_node'=2"):
        check_placement(nodes, nnodes=1, per_node=2)
    with pytest.raises(ValueError, match="only 2 node"):
        check_placement(nodes, nnodes=3, per_node=1)


def test_accelerator_resource_name() -> None:
    assert accelerator_key("cpu") == "GPU" and accelerator_key("cuda") == "GPU" and accelerator_key("npu") == "NPU"


def test_the_runs_actors_here_are_the_alive_ones_on_this_machines_address_titled_by_ray() -> None:
    def actor(pid, state="ALIVE", ip="10.0.0.1"):
        return {"ActorClassName": "vLLMHttpServer", "State": state, "Pid": pid, "Address": {"IPAddress": ip}}

    titles = {11: b"ray::vLLMHttpServer", 12: b"ray::WorkerDict", 13: b"/usr/bin/python x.py", 14: b"ray::Dead",
              15: b"ray::Elsewhere"}
    actors = [actor(11), actor(12), actor(13), actor(14, state="DEAD"), actor(15, ip="10.0.0.2"), actor(0),
              actor(16)]  # 13: a pid reused by another program; 16: no such process here; 0: not started yet
    assert actors_here(actors, "10.0.0.1", titles.get) == [11, 12]
    assert actors_here(actors, "10.0.0.9", titles.get) == []
