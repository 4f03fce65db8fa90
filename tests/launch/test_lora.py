"""LoRA through verl's own support: the ``lora`` config group and the start-up checks of
``agent_tune.launch.lora`` (the merged-weight sync verl's engine does: tests/verl_ext/test_lora_sync.py)."""

from __future__ import annotations

import pytest

pytest.importorskip("verl")
pytest.importorskip("hydra")

from omegaconf import OmegaConf  # noqa: E402

from agent_tune.errors import ConfigError  # noqa: E402
from agent_tune.launch.compose import compose_config  # noqa: E402
from agent_tune.launch.lora import check_lora, check_targets, linear_module_names  # noqa: E402
from agent_tune.launch.sft import validate as validate_sft  # noqa: E402

LINEAR = [f"model.layers.{i}.{p}" for i in range(2) for p in
          ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")] + ["lm_head"]


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    """A Llama config folder (no weights): module names come from the model built on the meta device."""
    from transformers import LlamaConfig

    path = tmp_path_factory.mktemp("tiny_llama")
    LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
                num_key_value_heads=1, vocab_size=64).save_pretrained(path)
    return path


def test_lora_group_sets_verls_keys_for_grpo_and_sft():
    grpo = compose_config("agent_tune_bfcl_cpu", ["+lora=grpo"])
    model = grpo.actor_rollout_ref.model
    assert model.lora_rank == 16 and model.lora_alpha == 32 and model.target_modules == "all-linear"
    assert model.lora.merge is True  # merged-weights sync: adapter mode fails on tied embeddings (docs/lora.md)
    assert compose_config("agent_tune_bfcl_cpu").actor_rollout_ref.model.lora_rank == 0
    sft = compose_config("agent_tune_sft_cpu", ["+lora=sft", "data.train_files=x.parquet"])
    assert sft.model.lora_rank == 16 and sft.model.lora_alpha == 32
    validate_sft(sft)
    assert compose_config("agent_tune_bfcl", ["+lora=grpo"]).actor_rollout_ref.model.lora_rank == 16  # GPU too


def test_check_lora_off_and_on(tiny_llama):
    assert check_lora({"lora_rank": 0}, "m") is None
    spec = check_lora({"lora_rank": 8, "lora_alpha": 16, "target_modules": ["q_proj", "v_proj"],
                       "path": str(tiny_llama)}, "m", rollout=True)
    assert spec == {"rank": 8, "alpha": 16, "target_modules": ["q_proj", "v_proj"], "merge": False}


@pytest.mark.parametrize(
    "model, message",
    [
        ({"lora_rank": -1}, "m.lora_rank': a non-negative integer"),
        ({"lora_rank": 0, "lora": {"rank": 8}}, "m.lora.rank': verl's FSDP engine reads"),
        ({"lora_rank": 0, "lora_adapter_path": "/a"}, "m.lora_rank': 0 with m.lora_adapter_path set"),
        ({"lora_rank": 8, "lora_alpha": 0, "target_modules": "all-linear"}, "m.lora_alpha': must be positive"),
        ({"lora_rank": 8, "lora_alpha": 16, "target_modules": []}, "m.target_modules': a non-empty list"),
        ({"lora_rank": 8, "lora_alpha": 16, "target_modules": None}, "m.target_modules': 'all-linear' or"),
        ({"lora_rank": 1024, "lora_alpha": 16, "target_modules": "all-linear"}, "vLLM serves adapters up to"),
        ({"lora_rank": 8, "lora_alpha": 16, "target_modules": ["q_proj", "qkv_proj"], "PATH": 1},
         "no linear module 'qkv_proj'"),
        ({"lora_rank": 8, "lora_alpha": 16, "target_modules": ["lm_head"], "PATH": 1}, "output head"),
    ],
)
def test_bad_lora_settings_fail_naming_the_key(model, message, tiny_llama):
    if model.pop("PATH", None):
        model["path"] = str(tiny_llama)
    with pytest.raises(ConfigError, match=message):
        check_lora(OmegaConf.create(model), "m", rollout=True)


def test_adapter_mode_refuses_tied_embeddings_merge_mode_takes_them(tmp_path):
    from transformers import LlamaConfig

    LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2, vocab_size=64,
                tie_word_embeddings=True).save_pretrained(tmp_path)
    model = {"lora_rank": 8, "lora_alpha": 16, "target_modules": "all-linear", "path": str(tmp_path)}
    with pytest.raises(ConfigError, match="config key 'm.lora.merge': false .* ties its input and output"):
        check_lora(model, "m", rollout=True)
    assert check_lora({**model, "lora": {"merge": True}}, "m", rollout=True)["merge"] is True
    assert check_lora(model, "m", rollout=False) is not None  # SFT: no vLLM sync


def test_merge_mode_may_adapt_the_head_and_sft_checks_through_validate(tiny_llama):
    spec = check_lora({"lora_rank": 8, "lora_alpha": 16, "target_modules": ["lm_head"], "path": str(tiny_llama),
                       "lora": {"merge": True}}, "m", rollout=True)
    assert spec["merge"] is True
    sft = compose_config("agent_tune_sft_cpu", ["+lora=sft", "data.train_files=x.parquet",
                                                f"model.path={tiny_llama}", "model.target_modules=[bogus]"])
    with pytest.raises(ConfigError, match="config key 'model.target_modules'"):
        validate_sft(sft)


def test_target_selection_follows_peft_rules(tiny_llama):
    assert len(linear_module_names(str(tiny_llama))) == len(LINEAR)
    assert "lm_head" not in check_targets("all-linear", LINEAR, "k", True)
    assert len(check_targets("all-linear", LINEAR, "k", True)) == 14
    assert check_targets(r".*\.0\.self_attn\.q_proj", LINEAR, "k", True) == ["model.layers.0.self_attn.q_proj"]
    assert len(check_targets(["q_proj", "mlp.down_proj"], LINEAR, "k", True)) == 4
    with pytest.raises(ConfigError, match="selects no linear module"):
        check_targets("nothing.*", LINEAR, "k", True)
