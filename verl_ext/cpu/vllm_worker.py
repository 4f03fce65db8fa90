"""vLLM worker extensions for CPU rollouts: vLLM's CPU GEMM kernels on, and a weight sync that keeps working.

After loading, vLLM's CPU linear layers pack each weight for a faster kernel (``dispatch_cpu_unquantized_gemm``
in ``vllm/model_executor/layers/utils.py``): a oneDNN matmul handle on any x86 CPU, sgl-kernel's
``weight_packed_linear`` for small bf16 weights on CPUs with AMX, zentorch on AMD Zen with the zentorch
package. The packed copy lives in the kernel's closure, and vLLM then replaces the layer's ``weight`` by an
empty parameter to save memory. verl's weight sync loads new weights into that parameter through its
``weight_loader`` attribute, which the empty one lacks (``'Parameter' object has no attribute
'weight_loader'``, then a hang); and a packed copy would not see new weights anyway.

:class:`CPUWorkerExtension` keeps the kernels and the parameters: vLLM's dispatch runs as it is, except that
it never drops the weight (one more copy of the linear weights in memory, the packed one). verl's reload
writes the new weights into the live parameters, then calls vLLM's ``process_weights_after_loading`` once
after the last bucket (``vLLMColocateWorkerExtension.update_weights_from_ipc``), which dispatches every
layer again: each kernel is repacked from the new weights, and the old handle is freed with its closure.
The embedding/lm_head layer already keeps its weight in vLLM (it is read by the embedding lookup) and is
repacked the same way.

:class:`PlainLinearCPUWorkerExtension` is the earlier behaviour, kept for comparison
(``benchmarks/cpu_generation.py``) and as a fallback: no packing at all, every linear layer runs
``torch.nn.functional.linear`` on its live parameter.

The rollout config selects one with ``actor_rollout_ref.rollout.engine_kwargs.vllm.worker_extension_cls``;
vLLM imports it in its worker process and builds the worker (running ``__new__``) before it loads the
model, so the patch is in place for the first dispatch.
"""

from __future__ import annotations

from typing import Any

import torch
from verl.workers.rollout.vllm_rollout.utils import vLLMColocateWorkerExtension

# marks vLLM's dispatch function once wrapped, so that wrapping twice is a no-op
_KEEPS_WEIGHT = "_agent_tune_keeps_weight"


def keep_packed_layers_reloadable() -> None:
    """Make vLLM's CPU GEMM dispatch keep each layer's weight parameter next to the packed copy it makes.

    vLLM's linear layers call the dispatch with ``remove_weight=True``; the wrapper passes ``False`` and
    changes nothing else: the same kernel is chosen (oneDNN, sgl-kernel on AMX, zentorch), and a later call
    (vLLM's ``process_weights_after_loading`` after a weight sync) packs the reloaded weight again."""
    from vllm.model_executor.layers import utils as layer_utils

    dispatch = layer_utils.dispatch_cpu_unquantized_gemm
    if getattr(dispatch, _KEEPS_WEIGHT, False):
        return

    def dispatch_keeping_weight(layer: Any, remove_weight: bool) -> None:
        dispatch(layer, remove_weight=False)

    setattr(dispatch_keeping_weight, _KEEPS_WEIGHT, True)
    layer_utils.dispatch_cpu_unquantized_gemm = dispatch_keeping_weight


def disable_cpu_gemm_packing() -> None:
    """Make vLLM's CPU linear layers skip every packed kernel: no oneDNN handle, no sgl-kernel packing (bf16
    on AMX CPUs); each layer runs ``torch.nn.functional.linear`` on its live parameter."""
    import vllm._custom_ops as ops
    from vllm.model_executor.layers import utils as layer_utils

    ops._supports_onednn = False
    layer_utils.check_cpu_sgl_kernel = _no_sgl_kernel


def _no_sgl_kernel(n: int, k: int, dtype: object) -> bool:
    """vLLM's ``check_cpu_sgl_kernel``, answering no."""
    return False


# the op each of vLLM's CPU GEMM kernels calls (the names its dispatch's closures use)
_KERNEL_OPS = (("onednn", "onednn_mm"), ("sgl", "weight_packed_linear_cpu"), ("zentorch", "zentorch_linear_unary"))


def gemm_kernel(layer: Any) -> str | None:
    """The kernel vLLM's CPU dispatch chose for ``layer``: ``onednn``, ``sgl`` (sgl-kernel's
    ``weight_packed_linear``), ``zentorch``, ``torch`` (``F.linear`` on the live weight), ``other``; None for a
    layer it did not dispatch."""
    fn = getattr(layer, "cpu_linear", None)
    if fn is None:
        return None
    if fn is torch.nn.functional.linear:
        return "torch"
    names = set(getattr(getattr(fn, "__code__", None), "co_names", ()))
    for kernel, op in _KERNEL_OPS:
        if op in names:
            return kernel
    return "torch" if "linear" in names else "other"


def count_gemm_kernels(model: Any) -> dict[str, int]:
    """How many of ``model``'s layers run each CPU GEMM kernel (:func:`gemm_kernel`)."""
    counts: dict[str, int] = {}
    for module in model.modules():
        kernel = gemm_kernel(module)
        if kernel is not None:
            counts[kernel] = counts.get(kernel, 0) + 1
    return counts


class _KernelReport:
    """The collective RPC both extensions answer: which CPU GEMM kernels the loaded model runs."""

    def cpu_gemm_kernels(self) -> dict[str, int]:
        """{kernel: layers} of this worker's model (:func:`count_gemm_kernels`)."""
        return count_gemm_kernels(self.model_runner.model)


class CPUWorkerExtension(_KernelReport, vLLMColocateWorkerExtension):
    """verl's colocated vLLM worker extension with vLLM's CPU kernels on and weights kept reloadable: each
    weight sync repacks the kernels from the new weights (module doc)."""

    def __new__(cls, **kwargs):
        keep_packed_layers_reloadable()
        return super().__new__(cls, **kwargs)


class PlainLinearCPUWorkerExtension(_KernelReport, vLLMColocateWorkerExtension):
    """verl's colocated vLLM worker extension with vLLM's packed CPU kernels off (``F.linear`` everywhere)."""

    def __new__(cls, **kwargs):
        disable_cpu_gemm_packing()
        return super().__new__(cls, **kwargs)
