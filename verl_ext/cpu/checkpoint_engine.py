"""A verl checkpoint engine for CPU-only clusters: trainer rank 0 streams the weights to the rollout workers
over ZeroMQ TCP.

verl's trainers that keep rollout and training in separate resource pools (``one_step_off_policy``,
``fully_async_policy``, v1 ``separate_async``) move the weights with a checkpoint engine other than
``naive``; verl 0.9.1 ships NCCL, HCCL, NIXL, Mooncake and Kimi engines, all for accelerators (NCCL needs
cupy and CUDA). This engine, registered as ``cpu_tcp``, is the same protocol on plain sockets:

- ``prepare``: the trainer's rank 0 (``is_master``) binds a ROUTER socket and reports its address;
- ``build_topology``: rank 0 sends, the other trainer ranks only walk the weight generator (producing each
  full tensor is collective over the FSDP ranks), rollout workers get ranks 1..R;
- ``init_process_group``: each rollout worker connects a DEALER socket and says hello;
- ``send_weights``: rank 0 waits for the R hellos, then sends every tensor (name, dtype, shape + raw
  bytes) to every rollout worker, and a last message;
- ``receive_weights``: yields ``(name, tensor)`` until the last message; verl's rollout worker hands them to
  vLLM through its server adapter (on CPU: POSIX shared memory, :mod:`verl_ext.cpu.platform`);
- ``finalize``: closes the sockets.

Load it with ``actor_rollout_ref.rollout.checkpoint_engine.custom_backend_module=verl_ext.cpu.checkpoint_engine``
(verl's own hook: it imports the module in the trainer and in every rollout worker before building the
engine) and select it with ``checkpoint_engine.backend=cpu_tcp``. ``bucket_size`` is accepted for the
engine interface; tensors go one per message (ZeroMQ frames need no bucket).
"""

from __future__ import annotations

import asyncio
import logging
import pickle
from dataclasses import dataclass
from typing import Any, AsyncGenerator, Generator

import torch
from verl.checkpoint_engine.base import CheckpointEngine, CheckpointEngineRegistry

logger = logging.getLogger(__name__)

BACKEND = "cpu_tcp"
HELLO = b"hello"


@dataclass
class MasterAddress:
    """Where the sending rank listens."""

    host: str
    port: int


def tensor_header(name: str, tensor: torch.Tensor) -> dict[str, Any]:
    """What a receiver needs besides the bytes to rebuild ``tensor``."""
    return {"name": name, "dtype": str(tensor.dtype).removeprefix("torch."), "shape": list(tensor.shape)}


def tensor_bytes(tensor: torch.Tensor) -> memoryview:
    """The raw bytes of ``tensor`` (any dtype, bf16 included), on CPU and contiguous."""
    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    return memoryview(flat.view(torch.uint8).numpy())


def tensor_from(header: dict[str, Any], payload: bytes | bytearray | memoryview) -> torch.Tensor:
    """Rebuild the tensor a sender described with :func:`tensor_header` (a copy: it owns its memory)."""
    dtype = getattr(torch, header["dtype"])
    raw = torch.frombuffer(bytearray(payload), dtype=torch.uint8) if len(payload) else torch.empty(0, dtype=torch.uint8)
    return raw.view(dtype).reshape(header["shape"])


@CheckpointEngineRegistry.register(BACKEND)
class CPUTCPCheckpointEngine(CheckpointEngine):
    """Checkpoint engine over ZeroMQ TCP for trainers and rollouts without accelerators (see module doc).

    Args:
        bucket_size: accepted for verl's interface (unused: one message per tensor).
        is_master: True in the trainer's rank 0, the only sender.
        timeout_s: how long a socket operation may wait before the sync fails instead of hanging.
    """

    def __init__(self, bucket_size: int = 0, is_master: bool = False, timeout_s: float = 600.0, **_: Any) -> None:
        self.bucket_size = bucket_size
        self.is_master = is_master
        self.timeout_ms = int(timeout_s * 1000)
        self.rank: int | None = None
        self.world_size: int | None = None
        self._context = None
        self._socket = None
        self._address: MasterAddress | None = None

    # --- topology ---
    def prepare(self) -> MasterAddress | None:
        """The sender binds its socket and returns its address; the other ranks return None."""
        if not self.is_master:
            return None
        import zmq
        from verl.utils.net_utils import get_free_port

        host = _node_ip()
        port, _ = get_free_port(host)
        self._context = zmq.Context()
        self._socket = self._context.socket(zmq.ROUTER)
        self._socket.setsockopt(zmq.RCVTIMEO, self.timeout_ms)
        self._socket.setsockopt(zmq.SNDTIMEO, self.timeout_ms)
        self._socket.bind(f"tcp://{_bracket(host)}:{port}")
        self._address = MasterAddress(host=host, port=port)
        return self._address

    @classmethod
    def build_topology(cls, actor_wg_world_size: int, rollout_world_size: int, metadata: list[Any]):
        """Rank 0 of the trainer sends; other trainer ranks get -1; rollout workers 1..R."""
        master = metadata[0]
        assert isinstance(master, MasterAddress), "the trainer's rank 0 must be the checkpoint engine master"
        world_size = rollout_world_size + 1
        actor = {
            "rank": [0] + [-1] * (actor_wg_world_size - 1),
            "world_size": [world_size] * actor_wg_world_size,
            "master": [master] * actor_wg_world_size,
        }
        rollout = {
            "rank": list(range(1, world_size)),
            "world_size": [world_size] * rollout_world_size,
            "master": [master] * rollout_world_size,
        }
        return actor, rollout

    def init_process_group(self, rank: int, world_size: int, master: MasterAddress) -> None:
        """Receivers connect to the sender and say hello (so the sender knows their socket identities)."""
        self.rank, self.world_size = rank, world_size
        if rank <= 0:
            return
        import zmq

        self._context = zmq.Context()
        self._socket = self._context.socket(zmq.DEALER)
        self._socket.setsockopt(zmq.RCVTIMEO, self.timeout_ms)
        self._socket.setsockopt(zmq.SNDTIMEO, self.timeout_ms)
        self._socket.connect(f"tcp://{_bracket(master.host)}:{master.port}")
        self._socket.send(HELLO)

    def finalize(self) -> None:
        """Close this rank's socket (a new one is made by the next ``prepare``/``init_process_group``)."""
        if self._socket is not None:
            self._socket.close(linger=0)
        if self._context is not None:
            self._context.term()
        self._socket = self._context = None

    # --- transfer ---
    @torch.no_grad()
    async def send_weights(self, weights: Generator[tuple[str, torch.Tensor], None, None],
                           global_steps: int | None = None) -> dict:
        """Rank 0 sends every tensor to every receiver; other trainer ranks only walk the generator."""
        from verl.workers.rollout.utils import ensure_async_iterator

        if self.rank != 0:
            async for _ in ensure_async_iterator(weights):
                pass
            return {}
        receivers = await asyncio.to_thread(self._await_hellos, int(self.world_size) - 1)
        count = total = 0
        async for name, tensor in ensure_async_iterator(weights):
            header = pickle.dumps(tensor_header(name, tensor))
            payload = tensor_bytes(tensor)
            for identity in receivers:
                self._socket.send_multipart([identity, header, payload], copy=False)
            count += 1
            total += payload.nbytes
        for identity in receivers:
            self._socket.send_multipart([identity, pickle.dumps({"last": True, "count": count})])
        logger.info("cpu_tcp: sent %d tensors (%.1f MB) to %d rollout workers", count, total / 2**20, len(receivers))
        return {}

    def _await_hellos(self, n: int) -> list[bytes]:
        identities = []
        while len(identities) < n:
            identity, message = self._socket.recv_multipart()
            if message == HELLO:
                identities.append(identity)
        return identities

    async def receive_weights(self, global_steps: int | None = None) -> AsyncGenerator[tuple[str, torch.Tensor], None]:
        """Yield ``(name, tensor)`` as they arrive, until the sender's last message."""
        received = 0
        while True:
            frames = await asyncio.to_thread(self._socket.recv_multipart)
            header = pickle.loads(frames[0])
            if header.get("last"):
                if header["count"] != received:
                    raise RuntimeError(f"cpu_tcp: received {received} tensors, the sender sent {header['count']}")
                return
            received += 1
            yield header["name"], tensor_from(header, frames[1])


def _node_ip() -> str:
    import ray

    return ray.util.get_node_ip_address().strip("[]") if ray.is_initialized() else "127.0.0.1"


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host
