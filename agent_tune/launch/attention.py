"""Start-up check of the attention kernel: flash-attention 2 must be importable when the config uses it.

verl builds the actor/reference (and critic) models with ``model.override_config.attn_implementation``,
``flash_attention_2`` when the key is absent (``verl/workers/config/model.py``); the GPU configs keep that
default. Without the ``flash_attn`` package the run would fail minutes later inside a Ray worker. So, before
anything starts, :func:`check_attention` either stops with a :class:`~agent_tune.errors.ConfigError` naming
the key and the fix, or falls back to PyTorch's SDPA with a warning, as ``agent_tune.attention_fallback``
says (``error`` | ``sdpa``, in ``config/base/agent_tune.yaml``).

The SDPA fallback also turns ``use_remove_padding`` off: verl's remove-padding path packs sequences for
flash-attention's variable-length kernels. Ulysses sequence parallelism has no SDPA path, so with
``ulysses_sequence_parallel_size > 1`` the fallback is refused.
"""

from __future__ import annotations

import importlib
import logging

from omegaconf import DictConfig, OmegaConf, open_dict

from agent_tune.errors import ConfigError
from agent_tune.options import AttentionFallback

logger = logging.getLogger(__name__)

FLASH_ATTENTION_2 = "flash_attention_2"
VERL_DEFAULT_ATTENTION = FLASH_ATTENTION_2  # verl.workers.config.model.HFModelConfig's default
INSTALL_HINT = "bash scripts/install_gpu.sh, or pip install flash-attn==2.8.3 --no-build-isolation (docs/gpu.md)"


def flash_attn_importable() -> bool:
    """Whether ``flash_attn`` imports here (a build against another torch fails at import, not at lookup)."""
    try:
        importlib.import_module("flash_attn")
    except (ImportError, OSError) as exc:
        logger.debug("flash_attn does not import: %s", exc)
        return False
    return True


def _models(config: DictConfig) -> list[tuple[str, str]]:
    """(model section, its actor section) for each model verl builds with a Hugging Face attention choice."""
    models = [("actor_rollout_ref.model", "actor_rollout_ref.actor")]
    critic = OmegaConf.select(config, "critic.enable", default=None)
    if critic is None:  # verl's need_critic: a critic for GAE only
        critic = OmegaConf.select(config, "algorithm.adv_estimator", default=None) == "gae"
    if critic and OmegaConf.select(config, "critic.model", default=None) is not None:
        models.append(("critic.model", "critic"))
    return models


def attn_implementation(config: DictConfig, model_key: str = "actor_rollout_ref.model") -> str:
    """The attention implementation verl will use for the model at ``model_key``."""
    value = OmegaConf.select(config, f"{model_key}.override_config.attn_implementation", default=None)
    return str(value) if value is not None else VERL_DEFAULT_ATTENTION


def check_attention(config: DictConfig, fallback: AttentionFallback = "error") -> None:
    """Fail, or fall back to SDPA, when the config uses flash-attention 2 and ``flash_attn`` does not import.

    ``fallback`` is ``agent_tune.attention_fallback`` (typed by :class:`agent_tune.options.AgentTuneOptions`).

    Raises:
        ConfigError: ``fallback`` is ``error``, or the SDPA fallback is impossible (Ulysses sequence
            parallelism); the message names the key and the fix.
    """
    users = [(m, actor) for m, actor in _models(config) if attn_implementation(config, m) == FLASH_ATTENTION_2]
    if not users or flash_attn_importable():
        return
    for model_key, actor_key in users:
        key = f"{model_key}.override_config.attn_implementation"
        if fallback == "error":
            raise ConfigError(
                f"config key '{key}' is {FLASH_ATTENTION_2} (verl's default when unset) but flash_attn cannot be "
                f"imported: install it ({INSTALL_HINT}), or set {key}=sdpa, or agent_tune.attention_fallback=sdpa"
            )
        sp_key = f"{actor_key}.ulysses_sequence_parallel_size"
        if (OmegaConf.select(config, sp_key, default=1) or 1) > 1:
            raise ConfigError(
                f"config key '{sp_key}': Ulysses sequence parallelism needs flash-attention, and flash_attn cannot "
                f"be imported: install it ({INSTALL_HINT}), or set {sp_key}=1"
            )
        logger.warning(
            "flash_attn cannot be imported: %s falls back from %s to sdpa and %s.use_remove_padding to false "
            "(slower, more memory; install flash-attn: %s)",
            key,
            FLASH_ATTENTION_2,
            model_key,
            INSTALL_HINT,
        )
        with open_dict(config):
            OmegaConf.update(config, key, "sdpa", force_add=True)
            OmegaConf.update(config, f"{model_key}.use_remove_padding", False, force_add=True)
