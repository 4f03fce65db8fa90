"""The CPU worker extension keeps vLLM's linear weights as live parameters, so verl's weight sync can load them."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("vllm")
pytest.importorskip("verl")


@pytest.mark.parametrize("amx", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_linear_layers_keep_their_weights(monkeypatch, amx: bool, dtype: torch.dtype) -> None:
    """vLLM replaces a linear layer's weight by an empty parameter when it packs it: for oneDNN (any dtype) and
    for sgl-kernel (bf16 on AMX CPUs). After the extension's import neither happens, on either kind of CPU."""
    import vllm._custom_ops as ops
    from vllm.model_executor.layers import utils as layer_utils

    from verl_ext.cpu import vllm_metadata

    vllm_metadata.install()  # verl checks vLLM's version when the extension imports its base class
    import verl_ext.cpu.vllm_worker as worker

    monkeypatch.setattr(ops, "_supports_onednn", ops._supports_onednn)  # restored after the test
    monkeypatch.setattr(layer_utils, "check_cpu_sgl_kernel", layer_utils.check_cpu_sgl_kernel)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    worker.disable_onednn_packing()
    layer = torch.nn.Linear(64, 32, bias=False).to(dtype)
    weight = layer.weight.detach().clone()
    layer_utils.dispatch_cpu_unquantized_gemm(layer, remove_weight=True)
    assert torch.equal(layer.weight.detach(), weight)  # still the live parameter
    with torch.no_grad():  # verl's reload writes into it; the layer computes with what it holds now
        layer.weight.mul_(2)
        x = torch.randn(3, 64, dtype=dtype)
        assert torch.allclose(layer_utils.cpu_unquantized_gemm(layer, x, layer.weight), x @ (2 * weight).t())
