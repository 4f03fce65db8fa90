"""OmegaConf resolvers agent-tune's configs use, and their resolution before the config leaves the launcher.

``${agent_tune_sum:a,b,...}`` is the sum of its arguments, e.g. ``rollout.max_model_len`` as
``${agent_tune_sum:${data.max_prompt_length},${data.max_response_length}}`` (OmegaConf has no arithmetic
of its own). ``${agent_tune_cpu_dtype:SETTING,KIND}`` is the dtype a CPU run computes in
(:mod:`verl_ext.cpu.precision`). verl resolves the config inside Ray actors where these resolvers are not
registered, so :func:`resolve_own` replaces every such value by its result right after composition
(overrides included).
"""

from __future__ import annotations

from typing import Any, Iterator

from omegaconf import DictConfig, ListConfig, OmegaConf

SUM = "agent_tune_sum"
CPU_DTYPE = "agent_tune_cpu_dtype"
OWN = (SUM, CPU_DTYPE)


def _sum(*values: Any) -> int | float:
    """Sum of numbers (ints stay ints)."""
    if not values:
        raise ValueError(f"{SUM} needs at least one value")
    return sum(values)


def _cpu_dtype(setting: str, kind: str) -> str:
    """The dtype name of kind ``fsdp`` / ``vllm`` for ``agent_tune.cpu_precision`` = ``setting``."""
    from verl_ext.cpu.precision import dtype_for

    return dtype_for(str(setting), str(kind))


def register_resolvers() -> None:
    """Register agent-tune's resolvers (idempotent)."""
    if not OmegaConf.has_resolver(SUM):
        OmegaConf.register_new_resolver(SUM, _sum)
    if not OmegaConf.has_resolver(CPU_DTYPE):
        OmegaConf.register_new_resolver(CPU_DTYPE, _cpu_dtype)


def _own_interpolations(node: Any, prefix: str = "") -> Iterator[str]:
    """Full keys of the values that use one of agent-tune's resolvers."""
    if isinstance(node, dict):
        items = node.items()
    elif isinstance(node, list):
        items = enumerate(node)
    else:
        return
    for key, value in items:
        full = f"{prefix}{key}" if isinstance(key, str) else f"{prefix.rstrip('.')}[{key}]"
        if isinstance(value, str) and any("${" + name + ":" in value for name in OWN):
            yield full
        else:
            yield from _own_interpolations(value, full + ".")


def resolve_own(config: DictConfig | ListConfig) -> None:
    """Replace each value computed by an agent-tune resolver with its result, in place."""
    register_resolvers()
    raw = OmegaConf.to_container(config, resolve=False)
    for key in list(_own_interpolations(raw)):
        OmegaConf.update(config, key, OmegaConf.select(config, key, throw_on_missing=True), merge=False)


register_resolvers()
