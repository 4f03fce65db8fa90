"""Let verl build a critic (value model) on CPU.

verl 0.9.1 loads the critic with ``verl.utils.model.load_valuehead_model``, which passes
``attn_implementation="flash_attention_2"`` to ``AutoModelForTokenClassification.from_pretrained`` whatever the
model's config says; without the ``flash_attn`` package (never on CPU) transformers refuses, and verl then asks
for ``trl`` (measured: ``model(...) is not a value head model, please install trl to make it valid``). The
critic's config already carries the attention verl was told to use (``critic.model.override_config
.attn_implementation``, ``sdpa`` in the CPU configs, read into the Hugging Face config by verl's
``HFModelConfig``). :func:`install` replaces the loader, in the processes that load the CPU plugin only, by
:func:`load_valuehead_model`: the same token-classification model (one label: the value) built with that
attention. verl's FSDP engine imports the loader when it builds the critic, so the replacement is what it calls.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)

_MARKER = "_agent_tune_cpu_value_model"
FALLBACK_ATTENTION = "sdpa"  # what the CPU configs use; flash-attention 2 does not exist on CPU


def attention_of(model_config: Any) -> str:
    """The attention implementation the critic's Hugging Face config names, ``sdpa`` where it names none or
    flash-attention 2."""
    name = getattr(model_config, "_attn_implementation", None)
    return FALLBACK_ATTENTION if not name or name.startswith("flash_attention") else str(name)


def load_valuehead_model(local_path: str, torch_dtype: Any, model_config: Any, trust_remote_code: bool) -> Any:
    """verl's critic model (``AutoModelForTokenClassification``, ``num_labels`` set to 1 by verl) with the
    attention of its config (:func:`attention_of`) instead of flash-attention 2."""
    from transformers import AutoModelForTokenClassification

    return AutoModelForTokenClassification.from_pretrained(
        pretrained_model_name_or_path=local_path,
        torch_dtype=torch_dtype,
        config=model_config,
        attn_implementation=attention_of(model_config),
        trust_remote_code=trust_remote_code,
    )


setattr(load_valuehead_model, _MARKER, True)


def install() -> None:
    """Replace ``verl.utils.model.load_valuehead_model`` by :func:`load_valuehead_model` (idempotent)."""
    import verl.utils.model as verl_model

    if not getattr(verl_model.load_valuehead_model, _MARKER, False):
        verl_model.load_valuehead_model = load_valuehead_model
