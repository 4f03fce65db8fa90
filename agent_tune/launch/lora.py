"""Start-up checks of verl's LoRA settings (``lora_rank``, ``lora_alpha``, ``target_modules``...).

agent-tune trains LoRA through verl's own support (verl 0.9.1): the FSDP engine wraps the model in a PEFT
adapter when ``<model>.lora_rank > 0`` (``verl/workers/engine/fsdp/transformer_impl.py``,
``_build_lora_module``), the SFT trainer does the same through that engine, and the vLLM rollout starts
with ``enable_lora`` and receives only the adapter tensors after each update (``TensorLoRARequest`` in
``verl/workers/rollout/vllm_rollout/utils.py``) unless ``<model>.lora.merge`` is true (the adapter is
merged into the base weights and synced as a full model). ``config/lora/{grpo,sft}.yaml`` turn it on.

verl only warns on a zero alpha and fails late (inside PEFT, after Ray and the models started) on a
target module the model lacks; :func:`check_lora` fails at start-up naming the key. Module names are
checked against the model built on the ``meta`` device from its local config (no weights are read).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping

from omegaconf import DictConfig, OmegaConf

from agent_tune.errors import ConfigError

ALL_LINEAR = "all-linear"
# vLLM's max_lora_rank must be one of its allowed sizes; verl rounds the rank up to the next one.
VLLM_MAX_LORA_RANK = 512


def lora_rank(model: Mapping[str, Any]) -> int:
    """The LoRA rank the FSDP engine uses (``lora_rank``; 0: no LoRA)."""
    return int(model.get("lora_rank", 0) or 0)


def check_lora(model: DictConfig | Mapping[str, Any], prefix: str, rollout: bool = False) -> dict[str, Any] | None:
    """Check the LoRA keys of a model section (``prefix``: its config path, for messages).

    ``rollout``: the model is also served by vLLM (GRPO), whose adapter path has its own limits.
    Returns ``{"rank", "alpha", "target_modules", "merge"}`` when LoRA is on, else None.

    Raises:
        ConfigError: naming the key (rank/alpha not positive, a malformed or unknown target module, a
            rank vLLM cannot serve, the Megatron-only ``lora.rank`` set on the FSDP engine).
    """
    raw = OmegaConf.to_container(model, resolve=True) if isinstance(model, DictConfig) else dict(model)
    rank = raw.get("lora_rank", 0)
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 0:
        raise ConfigError(f"config key '{prefix}.lora_rank': a non-negative integer (0: no LoRA), got {rank!r}")
    megatron = raw.get("lora") or {}
    if rank == 0:
        if raw.get("lora_adapter_path"):
            raise ConfigError(f"config key '{prefix}.lora_rank': 0 with {prefix}.lora_adapter_path set; give the "
                              "adapter's rank (and +lora=grpo / +lora=sft for the other LoRA keys)")
        if int(megatron.get("rank", 0) or 0) > 0:
            raise ConfigError(f"config key '{prefix}.lora.rank': verl's FSDP engine reads '{prefix}.lora_rank' "
                              "(lora.rank is Megatron's); set lora_rank instead")
        return None
    alpha = raw.get("lora_alpha")
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool) or alpha <= 0:
        raise ConfigError(f"config key '{prefix}.lora_alpha': must be positive with lora_rank {rank} "
                          f"(the adapter's scale is alpha/rank), got {alpha!r}")
    targets = raw.get("target_modules")
    if isinstance(targets, str):
        if not targets:
            raise ConfigError(f"config key '{prefix}.target_modules': empty")
    elif isinstance(targets, list):
        if not targets or not all(isinstance(t, str) and t for t in targets):
            raise ConfigError(f"config key '{prefix}.target_modules': a non-empty list of module names, "
                              f"got {targets!r}")
    else:
        raise ConfigError(f"config key '{prefix}.target_modules': '{ALL_LINEAR}' or a list of module names, "
                          f"got {targets!r}")
    merge = bool(megatron.get("merge", False))
    if rollout and not merge and rank > VLLM_MAX_LORA_RANK:
        raise ConfigError(f"config key '{prefix}.lora_rank': vLLM serves adapters up to rank {VLLM_MAX_LORA_RANK}, "
                          f"got {rank} (or set {prefix}.lora.merge=true to sync merged weights)")
    path = raw.get("path")
    if path and Path(str(path)).expanduser().is_dir():
        folder = str(Path(str(path)).expanduser())
        linear = linear_module_names(folder, bool(raw.get("trust_remote_code", False)))
        check_targets(targets, linear, f"{prefix}.target_modules", rollout and not merge)
        if rollout and not merge and tied_embeddings(folder, bool(raw.get("trust_remote_code", False))):
            raise ConfigError(
                f"config key '{prefix}.lora.merge': false (vLLM serves the adapter), but {folder} ties its input "
                "and output embeddings; verl 0.9.1's first weight sync into a LoRA-enabled vLLM then fails "
                "('lm_head.weight' ... tied to 'model.embed_tokens.base_layer.weight' ... not found, docs/lora.md). "
                f"Set {prefix}.lora.merge=true (the adapter merged into the synced weights)")
    return {"rank": rank, "alpha": alpha, "target_modules": targets, "merge": merge}


def tied_embeddings(model_path: str, trust_remote_code: bool = False) -> bool:
    """Whether the model ties the output head to the input embedding (its config, defaults included)."""
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(model_path, trust_remote_code=trust_remote_code)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return bool(getattr(text, "tie_word_embeddings", False))


def linear_module_names(model_path: str, trust_remote_code: bool = False) -> list[str]:
    """Full names of the model's ``nn.Linear`` modules, the model built on the meta device (no weights read)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(model_path, trust_remote_code=trust_remote_code)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, trust_remote_code=trust_remote_code)
    return [name for name, module in model.named_modules() if isinstance(module, torch.nn.Linear)]


def check_targets(targets: str | list[str], linear: list[str], key: str, vllm_adapter: bool) -> list[str]:
    """The linear modules ``targets`` selects (PEFT's rules: ``all-linear`` = every linear layer but the
    output head; a string is a regular expression matched against full names; a list entry matches a
    module whose name is the entry or ends in ``.<entry>``). Every list entry must select a linear layer;
    with a vLLM adapter (``vllm_adapter``) the output head cannot be one (vLLM's LoRA covers the layers
    inside the model; set lora.merge=true to sync merged weights instead).

    Raises:
        ConfigError: naming ``key`` and the modules the model has.
    """
    leaves = sorted({n.rsplit(".", 1)[-1] for n in linear})
    if targets == ALL_LINEAR:
        chosen = [n for n in linear if n.rsplit(".", 1)[-1] != "lm_head"]
    elif isinstance(targets, str):
        chosen = [n for n in linear if re.fullmatch(targets, n)]
    else:
        chosen = []
        for t in targets:
            hits = [n for n in linear if n == t or n.endswith("." + t)]
            if not hits:
                raise ConfigError(f"config key '{key}': the model has no linear module {t!r} "
                                  f"(its linear modules: {', '.join(leaves)})")
            chosen += hits
    if not chosen:
        raise ConfigError(f"config key '{key}': {targets!r} selects no linear module "
                          f"(the model's: {', '.join(leaves)})")
    if vllm_adapter and any(n.rsplit(".", 1)[-1] == "lm_head" for n in chosen):
        raise ConfigError(f"config key '{key}': vLLM's LoRA does not adapt the output head (lm_head); "
                          "drop it or set lora.merge=true to sync merged weights")
    return chosen
