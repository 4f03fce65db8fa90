"""The CPU run's compute precision: detected from the CPU's flags, spelled into the FSDP and vLLM dtypes."""

from __future__ import annotations

import pytest

pytest.importorskip("hydra")

from agent_tune.errors import ConfigError  # noqa: E402
from agent_tune.launch.compose import compose_config  # noqa: E402
from agent_tune.launch.launcher import describe_precision  # noqa: E402
from agent_tune.launch.run_config import RunConfig  # noqa: E402
from verl_ext.cpu import precision  # noqa: E402

AVX512_BF16 = ("processor\t: 0\nflags\t\t: fpu sse2 avx2 avx512f avx512_bf16 avx512_vnni\n\n"
               "processor\t: 1\nflags : fpu\n")
AMX = "flags\t: fpu avx512f amx_tile amx_bf16 avx512_bf16\n"
AVX2_ONLY = "flags\t: fpu sse2 avx2 fma\n"
# a flag that only contains the name is not the flag
LOOKALIKE = "flags\t: fpu avx512_bf16x something_amx_bf16\nbugs: avx512_bf16\n"


@pytest.mark.parametrize("cpuinfo, feature", [(AVX512_BF16, "AVX512_BF16"), (AMX, "AMX-BF16"), (AVX2_ONLY, None),
                                              (LOOKALIKE, None), ("", None)])
def test_bf16_feature_reads_the_flags(cpuinfo: str, feature: str | None) -> None:
    assert precision.bf16_feature(cpuinfo) == feature


@pytest.mark.parametrize("setting, cpuinfo, chosen", [
    ("auto", AVX512_BF16, "bf16"), ("auto", AMX, "bf16"), ("auto", AVX2_ONLY, "fp32"),
    ("bf16", AVX2_ONLY, "bf16"), ("fp32", AMX, "fp32"),
])
def test_resolve(setting: str, cpuinfo: str, chosen: str) -> None:
    assert precision.resolve(setting, cpuinfo) == chosen


def test_unknown_setting_names_the_key() -> None:
    with pytest.raises(ValueError, match="agent_tune.cpu_precision.*'bf32' is not one of auto, bf16, fp32"):
        precision.resolve("bf32")
    with pytest.raises(ValueError, match="kind 'sglang'"):
        precision.dtype_for("fp32", "sglang")


def test_describe_says_what_and_why() -> None:
    assert precision.describe("auto", AVX512_BF16) == "compute bf16 (auto: the CPU has AVX512_BF16)"
    assert precision.describe("auto", AVX2_ONLY) == "compute fp32 (auto: no AVX512_BF16 or AMX on this CPU)"
    assert precision.describe("fp32", AMX) == "compute fp32 (agent_tune.cpu_precision=fp32)"
    assert "slow" in precision.describe("bf16", AVX2_ONLY)


@pytest.mark.parametrize("setting, fsdp, vllm", [("bf16", "bf16", "bfloat16"), ("fp32", "fp32", "float32")])
def test_the_cpu_configs_follow_the_setting(setting: str, fsdp: str, vllm: str) -> None:
    for name in ("agent_tune_bfcl_cpu", "agent_tune_grpo_cpu"):
        cfg = compose_config(name, [f"agent_tune.cpu_precision={setting}"])
        actor = cfg.actor_rollout_ref.actor.fsdp_config
        assert actor.mixed_precision.param_dtype == fsdp and cfg.actor_rollout_ref.rollout.dtype == vllm
        # master weights, optimizer state and the gradient reduction stay fp32 either way
        assert actor.model_dtype == "fp32" and actor.mixed_precision.reduce_dtype == "fp32"
        expected = f"; CPU compute {setting} (agent_tune.cpu_precision={setting})"
        assert describe_precision(RunConfig.parse(cfg)) == expected


def test_auto_resolves_on_this_machine_when_composed() -> None:
    cfg = compose_config("agent_tune_bfcl_cpu")
    expected = precision.resolve("auto")
    assert cfg.actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype == expected
    assert "${" not in str(cfg.actor_rollout_ref.rollout.dtype)  # a plain value before verl's actors see it
    assert describe_precision(RunConfig.parse(cfg)).startswith(f"; CPU compute {expected} (auto: ")


def test_bad_setting_fails_at_compose_naming_the_key() -> None:
    with pytest.raises(ConfigError, match="agent_tune.cpu_precision"):
        compose_config("agent_tune_bfcl_cpu", ["agent_tune.cpu_precision=bf32"])


def test_gpu_configs_say_nothing_about_cpu_precision() -> None:
    assert describe_precision(RunConfig.parse(compose_config("agent_tune_grpo"))) == ""
