"""The CPU worker extensions: vLLM's packed CPU kernels stay on, the weights stay loadable, and a weight sync
repacks the kernels from the new weights (a real vLLM engine, loaded twice through verl's sync path)."""

from __future__ import annotations

import asyncio
import threading
import uuid

import pytest
import torch

pytest.importorskip("vllm")
pytest.importorskip("verl")


@pytest.fixture
def layer_utils(monkeypatch):
    """vLLM's CPU GEMM dispatch module, its patched functions restored after the test."""
    import vllm._custom_ops as ops
    from vllm.model_executor.layers import utils as layer_utils

    from verl_ext.cpu import vllm_metadata

    vllm_metadata.install()  # verl checks vLLM's version when the extension imports its base class
    monkeypatch.setattr(ops, "_supports_onednn", ops._supports_onednn)
    monkeypatch.setattr(layer_utils, "check_cpu_sgl_kernel", layer_utils.check_cpu_sgl_kernel)
    monkeypatch.setattr(layer_utils, "dispatch_cpu_unquantized_gemm", layer_utils.dispatch_cpu_unquantized_gemm)
    return layer_utils


def _linear(dtype: torch.dtype) -> torch.nn.Linear:
    """A layer with the attribute verl's reload needs (vLLM's parameters carry their ``weight_loader``)."""
    layer = torch.nn.Linear(64, 32, bias=False).to(dtype)
    layer.weight.weight_loader = lambda param, loaded: param.data.copy_(loaded)
    return layer


@pytest.mark.parametrize("amx", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_packed_layers_keep_their_weights_and_repack(monkeypatch, layer_utils, amx: bool, dtype: torch.dtype) -> None:
    """With the extension's patch vLLM still packs (oneDNN; sgl-kernel for bf16 on AMX CPUs) but keeps the
    parameter; the packed copy does not see an in-place reload, a second dispatch (vLLM's
    process_weights_after_loading after verl's sync) repacks from it."""
    from verl_ext.cpu import vllm_worker

    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    vllm_worker.keep_packed_layers_reloadable()
    vllm_worker.keep_packed_layers_reloadable()  # idempotent: one wrapper
    layer = _linear(dtype)
    param = layer.weight
    weight = param.detach().clone()
    layer_utils.dispatch_cpu_unquantized_gemm(layer, remove_weight=True)  # as vLLM's linear layers call it
    expected = "sgl" if amx and dtype == torch.bfloat16 else "onednn"
    assert vllm_worker.gemm_kernel(layer) == expected
    assert layer.weight is param and torch.equal(param.detach(), weight)  # the live, loadable parameter

    x = torch.randn(3, 64, dtype=dtype)
    tol = {"atol": 0.2, "rtol": 0.05} if dtype == torch.bfloat16 else {"atol": 1e-4, "rtol": 1e-4}
    new = -2 * weight
    param.weight_loader(param, new)  # verl's reload writes into the parameter
    before = layer_utils.cpu_unquantized_gemm(layer, x, layer.weight)
    assert torch.allclose(before.float(), (x @ weight.t()).float(), **tol)  # still the packed old weights
    layer_utils.dispatch_cpu_unquantized_gemm(layer, remove_weight=True)
    after = layer_utils.cpu_unquantized_gemm(layer, x, layer.weight)
    assert vllm_worker.gemm_kernel(layer) == expected
    assert torch.allclose(after.float(), (x @ new.t()).float(), **tol)


@pytest.mark.parametrize("amx", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_plain_linear_extension_packs_nothing(monkeypatch, layer_utils, amx: bool, dtype: torch.dtype) -> None:
    """The kernels-off extension (for comparison): no packing on either kind of CPU, ``F.linear`` on the live
    parameter, so a reload is seen without any repacking."""
    from verl_ext.cpu import vllm_worker

    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    vllm_worker.disable_cpu_gemm_packing()
    layer = _linear(dtype)
    weight = layer.weight.detach().clone()
    layer_utils.dispatch_cpu_unquantized_gemm(layer, remove_weight=True)
    assert vllm_worker.gemm_kernel(layer) == "torch"
    assert torch.equal(layer.weight.detach(), weight)
    with torch.no_grad():
        layer.weight.mul_(2)
        x = torch.randn(3, 64, dtype=dtype)
        assert torch.allclose(layer_utils.cpu_unquantized_gemm(layer, x, layer.weight), x @ (2 * weight).t())


# --------------------------------------------------------------------------- a real engine, synced twice

TINY = {"vocab_size": 512, "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 2, "num_key_value_heads": 1, "max_position_embeddings": 256,
        "tie_word_embeddings": True, "initializer_range": 0.3}


def _tiny_weights(seed: int) -> tuple[object, dict[str, torch.Tensor]]:
    """A tiny tied-embedding Llama (fp32) and its state dict; a wide init so each seed's next-token
    distributions are far apart."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    model = LlamaForCausalLM(LlamaConfig(**TINY)).eval()
    return model, {k: v.detach().clone() for k, v in model.state_dict().items()}


def _reference_logprobs(model, ids: list[int]) -> torch.Tensor:
    """log p(token_i | tokens < i) for i >= 1 under ``model`` (fp32)."""
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, :-1].float()
    return torch.log_softmax(logits, -1).gather(-1, torch.tensor(ids[1:])[:, None])[:, 0]


def _engine_logprobs(llm, ids: list[int]) -> torch.Tensor:
    from vllm import SamplingParams

    llm.reset_prefix_cache()
    out = llm.generate([{"prompt_token_ids": ids}], SamplingParams(max_tokens=1, prompt_logprobs=0))[0]
    return torch.tensor([next(iter(d.values())).logprob if tok not in d else d[tok].logprob
                         for tok, d in zip(ids[1:], out.prompt_logprobs[1:])])


def _sync(llm, weights: dict[str, torch.Tensor]) -> None:
    """verl's colocated weight sync: its bucketed sender over ZeroMQ + shared memory in this process, the
    extension's ``update_weights_from_ipc`` in vLLM's worker (as ``vLLMRollout.update_weights`` does)."""
    from verl.workers.rollout.vllm_rollout.bucketed_weight_transfer import BucketedWeightSender
    from verl.workers.rollout.vllm_rollout.utils import vLLMColocateWorkerExtension

    handle = vLLMColocateWorkerExtension._get_zmq_handle
    zmq_handle = handle(type("W", (), {"local_rank": 0, "model_runner": None})())
    errors: list[BaseException] = []

    def receive() -> None:
        try:
            llm.collective_rpc("update_weights_from_ipc", kwargs={"use_shm": True}, timeout=120)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            errors.append(exc)

    receiver = threading.Thread(target=receive)
    receiver.start()
    sender = BucketedWeightSender(zmq_handle=zmq_handle, bucket_size_mb=16, use_shm=True)
    asyncio.run(asyncio.wait_for(sender.async_send_weights(iter(weights.items())), timeout=120))
    receiver.join(timeout=120)
    assert not receiver.is_alive(), "the engine did not finish loading the weights"
    if errors:
        raise errors[0]


@pytest.mark.slow
def test_engine_with_packed_kernels_follows_each_weight_sync(tmp_path, monkeypatch) -> None:
    """A vLLM CPU engine (bf16, the main job's extension) starts on dummy weights, as verl starts it; two weight
    syncs through verl's path each make it score a token sequence as the synced model does, while its linear
    layers run vLLM's packed kernels (oneDNN here; sgl-kernel for small bf16 weights on AMX CPUs)."""
    from vllm import LLM

    from verl_ext.cpu import platform as cpu_platform
    from verl_ext.cpu import vllm_metadata

    vllm_metadata.install()  # before verl's vLLM version check (the extension's import)
    cpu_platform.register()
    from verl.plugin.platform import platform_manager

    from verl_ext.cpu.vllm_worker import CPUWorkerExtension

    previous = platform_manager._current_platform  # the sender in this process asks verl's platform
    platform_manager.set_platform(cpu_platform.CPUPlatform())
    monkeypatch.setenv("VERL_USE_EXTERNAL_MODULES", "verl_ext.cpu.plugin")  # vLLM's worker process, as in training
    monkeypatch.setenv("VERL_RAY_JOB_ID", f"test-{uuid.uuid4().hex[:8]}")  # this test's own socket path
    model_a, weights_a = _tiny_weights(0)
    model_b, weights_b = _tiny_weights(1)
    model_a.save_pretrained(tmp_path / "model")
    ids = [int(t) for t in torch.randint(0, TINY["vocab_size"], (48,), generator=torch.Generator().manual_seed(2))]
    ref_a, ref_b = _reference_logprobs(model_a, ids), _reference_logprobs(model_b, ids)
    assert (ref_a - ref_b).abs().mean() > 0.5  # the two models disagree: the test can tell which one vLLM runs

    llm = LLM(model=str(tmp_path / "model"), skip_tokenizer_init=True, dtype="bfloat16", load_format="dummy",
              enforce_eager=True, kv_cache_memory_bytes=64 << 20, max_model_len=128, max_num_seqs=4,
              worker_extension_cls=f"{CPUWorkerExtension.__module__}.{CPUWorkerExtension.__qualname__}", seed=0)
    try:
        kernels = llm.collective_rpc("cpu_gemm_kernels")[0]
        assert kernels.get("torch", 0) == 0 and kernels.get("onednn", 0) + kernels.get("sgl", 0) > 0, kernels
        for ref, weights in ((ref_a, weights_a), (ref_b, weights_b)):
            _sync(llm, weights)
            got = _engine_logprobs(llm, ids)
            other = ref_b if ref is ref_a else ref_a
            gap, other_gap = (got - ref).abs().mean().item(), (got - other).abs().mean().item()
            print(f"mean |log-prob - synced model's| {gap:.4f}, - the other model's {other_gap:.4f}")
            assert gap < 0.15 and other_gap > 10 * gap, (gap, other_gap)  # bf16 against the fp32 reference
        assert llm.collective_rpc("cpu_gemm_kernels")[0] == kernels  # still packed after the syncs
    finally:
        llm.llm_engine.engine_core.shutdown()
        platform_manager._current_platform = previous
