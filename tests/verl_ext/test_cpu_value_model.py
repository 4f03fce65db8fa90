"""verl's critic loads on CPU: the value model is built with the attention its config names, not flash-attention 2."""

from __future__ import annotations

import pytest

pytest.importorskip("verl")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from verl_ext.cpu import value_model  # noqa: E402


class _Config:
    def __init__(self, name):
        self._attn_implementation = name


@pytest.mark.parametrize(
    "name,expected",
    [(None, "sdpa"), ("flash_attention_2", "sdpa"), ("flash_attention_3", "sdpa"), ("sdpa", "sdpa"),
     ("eager", "eager")],
)
def test_attention_of_the_config(name, expected):
    assert value_model.attention_of(_Config(name)) == expected


def test_install_replaces_verls_loader_once(monkeypatch):
    import verl.utils.model as verl_model

    original = verl_model.load_valuehead_model
    monkeypatch.setattr(verl_model, "load_valuehead_model", original)
    assert not getattr(original, value_model._MARKER, False)
    value_model.install()
    assert verl_model.load_valuehead_model is value_model.load_valuehead_model
    value_model.install()
    assert verl_model.load_valuehead_model is value_model.load_valuehead_model


def test_plugin_installs_it():
    import inspect

    from verl_ext.cpu import plugin

    assert "_value_model.install()" in inspect.getsource(plugin)


def test_value_model_loads_with_sdpa_and_one_output(tmp_path):
    """A tiny Llama saved as a causal LM loads as verl's critic (one value per token) with SDPA: the attention
    the CPU configs name, where verl's own loader asks for flash-attention 2."""
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32)
    transformers.LlamaForCausalLM(config).save_pretrained(tmp_path)
    critic_config = transformers.AutoConfig.from_pretrained(tmp_path, attn_implementation="sdpa")
    critic_config.num_labels = 1  # as verl's FSDP engine sets it
    model = value_model.load_valuehead_model(str(tmp_path), torch.float32, critic_config, False)
    assert type(model).__name__ == "LlamaForTokenClassification"
    assert model.config._attn_implementation == "sdpa"
    values = model(input_ids=torch.tensor([[1, 2, 3, 4]])).logits
    assert values.shape == (1, 4, 1)
