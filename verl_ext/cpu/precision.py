"""The compute precision of a CPU run: bf16 where the CPU computes bf16 natively, fp32 elsewhere.

``agent_tune.cpu_precision`` (``config/device/cpu.yaml``) is ``auto``, ``bf16`` or ``fp32``. ``auto`` picks
bf16 when the CPU has AVX512_BF16 or AMX-BF16 (read from ``/proc/cpuinfo``'s flags), else fp32. The
dtypes that follow from it are written in the YAML as ``${agent_tune_cpu_dtype:${agent_tune.cpu_precision},KIND}``:

- ``fsdp``: the FSDP2 mixed-precision ``param_dtype`` (``bf16``/``fp32``): the actor keeps fp32 master
  weights and optimizer state (``model_dtype: fp32``) and reduces gradients in fp32 (``reduce_dtype``);
  forward and backward run on bf16 copies of the parameters under autocast;
- ``vllm``: the rollout's ``dtype`` (``bfloat16``/``float32``), so that vLLM samples with the precision the
  actor scores with (bypass mode takes vLLM's log-probs as the PPO old policy's).

The launcher resolves these values right after composing the config (:func:`agent_tune.launch.resolvers.resolve_own`)
and names the choice on the console's install-check line (:func:`describe`).
"""

from __future__ import annotations

from pathlib import Path
from typing import get_args

from agent_tune.options import CpuPrecision

KEY = "agent_tune.cpu_precision"
SETTINGS = get_args(CpuPrecision)  # the choices, written once (agent_tune/options.py)
BF16_FLAGS = {"amx_bf16": "AMX-BF16", "avx512_bf16": "AVX512_BF16"}  # in order of preference for the name
DTYPE_NAMES = {"fsdp": {"bf16": "bf16", "fp32": "fp32"}, "vllm": {"bf16": "bfloat16", "fp32": "float32"}}
CPUINFO = Path("/proc/cpuinfo")


def bf16_feature(cpuinfo: str | None = None) -> str | None:
    """The CPU's native bf16 feature (``AMX-BF16`` or ``AVX512_BF16``), or None; ``cpuinfo`` is the text of
    ``/proc/cpuinfo`` (read when not given; None where it does not exist)."""
    if cpuinfo is None:
        try:
            cpuinfo = CPUINFO.read_text(errors="replace")
        except OSError:
            return None
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "flags":
            flags.update(value.split())
    return next((label for flag, label in BF16_FLAGS.items() if flag in flags), None)


def resolve(setting: str, cpuinfo: str | None = None) -> str:
    """``bf16`` or ``fp32`` for an ``agent_tune.cpu_precision`` setting.

    Raises:
        ValueError: a setting other than auto / bf16 / fp32 (the message names the key).
    """
    if setting not in SETTINGS:
        raise ValueError(f"config key '{KEY}': {setting!r} is not one of {', '.join(SETTINGS)}")
    if setting == "auto":
        return "bf16" if bf16_feature(cpuinfo) else "fp32"
    return setting


def dtype_for(setting: str, kind: str) -> str:
    """The dtype name ``kind`` (``fsdp`` or ``vllm``) spells for ``setting``: the resolver
    ``agent_tune_cpu_dtype``."""
    if kind not in DTYPE_NAMES:
        raise ValueError(f"agent_tune_cpu_dtype: kind {kind!r} is not one of {', '.join(DTYPE_NAMES)}")
    return DTYPE_NAMES[kind][resolve(setting)]


def describe(setting: str, cpuinfo: str | None = None) -> str:
    """What the console's install-check line says, e.g. ``compute bf16 (auto: the CPU has AVX512_BF16)``."""
    chosen = resolve(setting, cpuinfo)
    feature = bf16_feature(cpuinfo)
    if setting != "auto":
        why = f"{KEY}={setting}" + ("" if chosen == "fp32" or feature else "; no native bf16 on this CPU: slow")
    else:
        why = f"auto: the CPU has {feature}" if feature else "auto: no AVX512_BF16 or AMX on this CPU"
    return f"compute {chosen} ({why})"
