"""LoRA with ``lora.merge=true``: what verl's FSDP engine syncs to vLLM after an update, on agent-tune's CPU
platform (the ``lora`` config group and the start-up checks: tests/launch/test_lora.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("verl")


@pytest.fixture
def cpu_fsdp_mesh(tmp_path):
    """verl on agent-tune's CPU platform with a 1-rank gloo group and its device mesh, as the CPU trainer
    runs; the previous platform is put back and the group destroyed afterwards."""
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from verl.plugin.platform import platform_manager

    from verl_ext.cpu import platform as cpu_platform

    cpu_platform.register()
    previous = platform_manager._current_platform
    platform_manager.set_platform(cpu_platform.CPUPlatform())
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1)
    try:
        yield init_device_mesh("cpu", (1,), mesh_dim_names=("fsdp",))
    finally:
        dist.destroy_process_group()
        platform_manager._current_platform = previous


@pytest.mark.parametrize("tied, targets", [(True, "all-linear"), (False, ["q_proj", "v_proj", "down_proj"])])
def test_merged_lora_sync_sends_base_plus_scaled_adapter_under_hf_names(cpu_fsdp_mesh, tied, targets):
    """The tensors verl's FSDP engine streams to vLLM after an update with ``lora.merge=true``
    (``FSDPEngine._merged_lora_per_tensor_param``, run here on a tiny Llama wrapped as the engine wraps it:
    ``_build_lora_module`` then ``apply_fsdp2``): every weight under its Hugging Face name (what vLLM's
    ``load_weights`` reads from a checkpoint: no ``base_model.model.`` prefix, no ``base_layer``, no
    ``lora_`` tensors), equal to ``W + alpha/r * B @ A`` for adapted layers and to ``W`` elsewhere, cast to
    bf16 (docs/lora.md); and the model is left as it was (base weights and adapter), so the next sync is the
    same."""
    import types

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from verl.utils.fsdp_utils import apply_fsdp2, fsdp_version
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngine

    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
                         num_key_value_heads=1, vocab_size=64, tie_word_embeddings=tied)
    model = LlamaForCausalLM(config)
    base = {name: t.detach().clone() for name, t in model.state_dict().items()}  # the HF names
    rank, alpha = 4, 8
    model_config = types.SimpleNamespace(lora_rank=rank, lora_alpha=alpha, target_modules=targets,
                                         target_parameters=None, exclude_modules=None, lora_adapter_path=None)
    peft_model = FSDPEngine._build_lora_module(types.SimpleNamespace(model_config=model_config), model)
    with torch.no_grad():  # a trained adapter: B is zero at start (the identity), so give it values
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:
                param.normal_(0.0, 0.1)
    trained = {name: p.detach().clone() for name, p in peft_model.named_parameters()}
    apply_fsdp2(peft_model, {"mesh": cpu_fsdp_mesh}, {})
    assert fsdp_version(peft_model) == 2
    engine = types.SimpleNamespace(module=peft_model, _is_offload_param=False)

    synced = dict(FSDPEngine._merged_lora_per_tensor_param(engine))

    assert set(synced) == set(base)  # the HF checkpoint names, nothing else
    adapted = 0
    for name, weight in base.items():
        stem = "base_model.model." + name.removesuffix(".weight")
        a, b = trained.get(f"{stem}.lora_A.default.weight"), trained.get(f"{stem}.lora_B.default.weight")
        expected = weight if a is None else weight + (alpha / rank) * (b @ a)
        adapted += a is not None
        assert synced[name].dtype == torch.bfloat16, name
        assert torch.equal(synced[name], expected.to(torch.bfloat16)), name
        if a is not None:
            assert not torch.equal(synced[name], weight.to(torch.bfloat16)), name  # the adapter is in it
    layers = config.num_hidden_layers
    assert adapted == (7 * layers if targets == "all-linear" else len(targets) * layers)
    # the synced weights load into the plain model strictly (the names and shapes vLLM's loader maps)
    LlamaForCausalLM(config).load_state_dict({k: v.float() for k, v in synced.items()}, strict=True)
    # the trainer's model is left unmerged: base weights and adapter as before; a second sync is identical
    after = {name: (p.full_tensor() if hasattr(p, "full_tensor") else p).detach()
             for name, p in peft_model.named_parameters()}
    assert after.keys() == trained.keys()
    assert all(torch.equal(after[name], trained[name]) for name in trained)
    again = dict(FSDPEngine._merged_lora_per_tensor_param(engine))
    assert all(torch.equal(again[name], synced[name]) for name in synced)
