"""vLLM worker extension for CPU rollouts: keep weights in place so verl can reload them after each step.

vLLM's CPU linear layers repack each weight into a oneDNN handle after loading and replace the parameter
by an empty one. verl's weight sync then fails (``'Parameter' object has no attribute 'weight_loader'``,
then a hang): there is no parameter left to load into, and a repacked handle would not see new weights
anyway. With oneDNN packing disabled (and the sgl-kernel packing vLLM uses for bf16 on AMX CPUs), vLLM's
CPU layers fall back to ``torch.nn.functional.linear`` on the live parameter, which verl's reload updates in
place.

The rollout config selects this class with
``+actor_rollout_ref.rollout.engine_kwargs.vllm.worker_extension_cls=verl_ext.cpu.vllm_worker.CPUWorkerExtension``;
vLLM imports it in its worker process before it loads the model.
"""

from __future__ import annotations

from verl.workers.rollout.vllm_rollout.utils import vLLMColocateWorkerExtension


def disable_onednn_packing() -> None:
    """Make vLLM's CPU linear layers keep their weight parameters: no oneDNN repacking, and no sgl-kernel
    packing either (vLLM takes that path for bf16 weights on CPUs with AMX, and also drops the parameter)."""
    import vllm._custom_ops as ops
    from vllm.model_executor.layers import utils as layer_utils

    ops._supports_onednn = False
    layer_utils.check_cpu_sgl_kernel = _no_sgl_kernel


def _no_sgl_kernel(n: int, k: int, dtype: object) -> bool:
    """vLLM's ``check_cpu_sgl_kernel``, answering no: linear layers fall back to ``F.linear`` on the live
    parameter."""
    return False


class CPUWorkerExtension(vLLMColocateWorkerExtension):
    """verl's colocated vLLM worker extension with oneDNN weight packing disabled."""

    def __new__(cls, **kwargs):
        disable_onednn_packing()
        return super().__new__(cls, **kwargs)


# vLLM may process the weights before the first extension instance is built: disable it on import too.
disable_onednn_packing()
