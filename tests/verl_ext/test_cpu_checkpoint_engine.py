"""The CPU checkpoint engine (cpu_tcp): verl's prepare / topology / init / send / receive protocol over
loopback TCP, one sender and two rollout receivers, every dtype byte-exact."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("verl")

import torch  # noqa: E402
from verl.checkpoint_engine import CheckpointEngineRegistry  # noqa: E402

from verl_ext.cpu.checkpoint_engine import BACKEND, CPUTCPCheckpointEngine, tensor_bytes, tensor_from, tensor_header  # noqa: E402,E501


def _weights() -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return {
        "model.embed_tokens.weight": torch.randn(64, 16, generator=gen),
        "model.layers.0.mlp.up_proj.weight": torch.randn(32, 16, generator=gen).to(torch.bfloat16),
        "model.norm.weight": torch.ones(16, dtype=torch.float16),
        "lm_head.bias": torch.arange(5, dtype=torch.int64),
        "empty": torch.empty(0, 3),
    }


def test_registered_under_its_backend_name() -> None:
    assert CheckpointEngineRegistry.get(BACKEND) is CPUTCPCheckpointEngine


def test_tensor_round_trip_is_byte_exact() -> None:
    for name, tensor in _weights().items():
        back = tensor_from(tensor_header(name, tensor), bytes(tensor_bytes(tensor)))
        assert back.dtype == tensor.dtype and back.shape == tensor.shape and torch.equal(back, tensor)


async def test_one_sender_two_trainer_ranks_two_receivers() -> None:
    weights = _weights()
    master = CPUTCPCheckpointEngine(bucket_size=1 << 20, is_master=True, timeout_s=30)
    other_rank = CPUTCPCheckpointEngine(bucket_size=1 << 20, is_master=False, timeout_s=30)
    receivers = [CPUTCPCheckpointEngine(bucket_size=1 << 20, timeout_s=30) for _ in range(2)]
    metadata = [master.prepare(), other_rank.prepare()] + [r.prepare() for r in receivers]
    actor_kwargs, rollout_kwargs = CPUTCPCheckpointEngine.build_topology(2, 2, metadata)
    assert actor_kwargs["rank"] == [0, -1] and rollout_kwargs["rank"] == [1, 2]
    for i, engine in enumerate([master, other_rank]):
        engine.init_process_group(**{k: v[i] for k, v in actor_kwargs.items()})
    for i, engine in enumerate(receivers):
        engine.init_process_group(**{k: v[i] for k, v in rollout_kwargs.items()})

    walked = []

    def other_rank_weights():  # the FSDP peer produces the same tensors (collectively) and sends nothing
        for item in weights.items():
            walked.append(item[0])
            yield item

    async def receive(engine):
        return [(name, tensor) async for name, tensor in engine.receive_weights()]

    _, _, *got = await asyncio.gather(master.send_weights(iter(weights.items())),
                                      other_rank.send_weights(other_rank_weights()),
                                      *[receive(r) for r in receivers])
    assert walked == list(weights)
    for received in got:
        assert [name for name, _ in received] == list(weights)
        for name, tensor in received:
            assert tensor.dtype == weights[name].dtype and torch.equal(tensor, weights[name])
    for engine in [master, other_rank, *receivers]:
        engine.finalize()
