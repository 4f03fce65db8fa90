"""The Hydra configs compose on verl's ppo_trainer with the intended values, and bad keys fail by name."""

from __future__ import annotations

import dataclasses

import pytest
from omegaconf import OmegaConf

pytest.importorskip("verl")
pytest.importorskip("hydra")

from agent_tune.errors import ConfigError  # noqa: E402
from agent_tune.launch.compose import compose_config  # noqa: E402
from agent_tune.launch.run_config import RunConfig  # noqa: E402
from agent_tune.launch.train import MODEL_KEYS, TrainLauncher  # noqa: E402

# Keys our configs add to verl's ppo_trainer YAML, each checked below against what reads it.
ADDED_KEYS = {
    "agent_tune",  # read by agent_tune.launch
    "actor_rollout_ref.actor.fsdp_config.mixed_precision",  # FSDPEngineConfig field
    "actor_rollout_ref.actor.fsdp_config.shared_prefix",  # verl_ext.cpu.engine.CPUFSDPEngineConfig field
    "actor_rollout_ref.ref.fsdp_config.shared_prefix",  # the same, for the reference model
    "actor_rollout_ref.actor.fsdp_config.torch_threads",  # verl_ext.cpu.engine.CPUFSDPEngineConfig field
    "actor_rollout_ref.ref.fsdp_config.torch_threads",  # the same, for the reference model
    "actor_rollout_ref.rollout.enable_sleep_mode",  # RolloutConfig field
    "actor_rollout_ref.rollout.engine_kwargs.vllm.worker_extension_cls",  # vLLM engine argument
    "actor_rollout_ref.rollout.engine_kwargs.vllm.kv_cache_memory_bytes",  # vLLM engine argument
    "actor_rollout_ref.model.override_config.attn_implementation",  # HF config override
    "ray_kwargs.ray_init.num_gpus",  # ray.init argument
    "trainer.v1.sampler.sampler_kwargs",  # read by verl_ext.bounded_sampler (verl's custom sampler)
}


def _verl_base():
    from hydra import compose, initialize_config_module
    from hydra.core.global_hydra import GlobalHydra

    GlobalHydra.instance().clear()
    with initialize_config_module("verl.trainer.config", version_base=None):
        cfg = compose("ppo_trainer")
    GlobalHydra.instance().clear()
    return cfg


def _keys(node, prefix=""):
    for key in node:
        full = f"{prefix}{key}"
        yield full
        child = node._get_node(key)
        if OmegaConf.is_dict(child):
            yield from _keys(child, full + ".")


def _has(cfg, full):
    node = cfg
    for part in full.split("."):
        if not OmegaConf.is_dict(node) or part not in node._content:
            return False
        node = node._get_node(part)
    return True


@pytest.fixture(scope="module")
def grpo():
    return compose_config("agent_tune_grpo")


@pytest.fixture(scope="module")
def grpo_cpu():
    return compose_config("agent_tune_grpo_cpu")


def test_grpo_defaults(grpo):
    a = grpo.actor_rollout_ref.actor
    assert grpo.algorithm.adv_estimator == "grpo"
    assert grpo.actor_rollout_ref.rollout.n == 16
    assert grpo.algorithm.use_kl_in_reward is False and a.use_kl_loss is False
    assert (a.clip_ratio_low, a.clip_ratio_high) == (0.2, 0.28)
    assert a.entropy_coeff == 0.001
    assert a.optim.lr == 1e-6
    assert grpo.algorithm.rollout_correction.rollout_is == "token"
    assert grpo.algorithm.rollout_correction.rollout_is_threshold == 2.0
    assert grpo.actor_rollout_ref.rollout.calculate_log_probs is True
    assert grpo.algorithm.filter_groups.enable is True and grpo.algorithm.filter_groups.metric == "reward"
    assert grpo.actor_rollout_ref.rollout.name == "vllm"
    assert grpo.trainer.device == "cuda"  # GPU recipes untouched by the CPU settings


def test_cpu_settings(grpo_cpu):
    c = grpo_cpu
    arr = c.actor_rollout_ref
    assert c.trainer.device == "cpu" and c.trainer.n_gpus_per_node == 1
    assert arr.actor.strategy == "fsdp2" and arr.ref.strategy == "fsdp2"
    assert arr.model.override_config.attn_implementation == "sdpa"
    assert arr.model.use_remove_padding is False
    assert arr.model.path == "smollm2"
    assert c.ray_kwargs.ray_init.num_gpus == 1
    assert c.transfer_queue.backend.SimpleStorage.num_data_storage_units == 1
    # bf16 where this CPU has it, else fp32 (tests/verl_ext/test_cpu_precision.py)
    from verl_ext.cpu.precision import dtype_for

    assert arr.rollout.dtype == dtype_for("auto", "vllm") and arr.rollout.enforce_eager is True
    assert arr.actor.fsdp_config.mixed_precision.param_dtype == dtype_for("auto", "fsdp")
    assert arr.rollout.enable_sleep_mode is False
    assert arr.rollout.tensor_model_parallel_size == 1
    assert c.data.dataloader_num_workers == 0
    assert arr.rollout.engine_kwargs.vllm.worker_extension_cls == "verl_ext.cpu.vllm_worker.CPUWorkerExtension"
    # one bucket holds the fp32 model (SmolLM2-135M: 538 MB) so tied embeddings stay together
    assert arr.rollout.checkpoint_engine.update_weights_bucket_megabytes * 2**20 >= 134_515_008 * 4
    # GRPO defaults still there, group size reduced for CPU
    assert c.algorithm.adv_estimator == "grpo" and arr.actor.clip_ratio_high == 0.28
    assert arr.rollout.n == 4
    # the CPU engine's config (shared-prefix packing on) for the actor and the reference
    for fsdp in (arr.actor.fsdp_config, arr.ref.fsdp_config):
        assert fsdp._target_ == "verl_ext.cpu.engine.CPUFSDPEngineConfig" and fsdp.shared_prefix is True
        assert fsdp.torch_threads == 0  # every core: Ray's OMP_NUM_THREADS=1 would leave the update on one


@pytest.mark.parametrize("name", ["agent_tune_grpo", "agent_tune_grpo_cpu"])
def test_every_key_exists_in_verl_or_is_a_known_addition(name):
    base = _verl_base()
    cfg = compose_config(name)
    added = {k for k in _keys(cfg) if not _has(base, k) and not any(k.startswith(a + ".") for a in ADDED_KEYS)}
    assert added <= ADDED_KEYS, sorted(added - ADDED_KEYS)


def test_added_dataclass_fields_exist():
    from verl.workers.config import FSDPEngineConfig, RolloutConfig

    assert "mixed_precision" in {f.name for f in dataclasses.fields(FSDPEngineConfig)}
    from verl_ext.cpu.engine import CPUFSDPEngineConfig

    assert {"shared_prefix", "torch_threads"} <= {f.name for f in dataclasses.fields(CPUFSDPEngineConfig)}
    assert "enable_sleep_mode" in {f.name for f in dataclasses.fields(RolloutConfig)}


def test_cpu_rollout_config_builds_verl_dataclass(grpo_cpu):
    from verl.utils.config import omega_conf_to_dataclass

    rollout = omega_conf_to_dataclass(grpo_cpu.actor_rollout_ref.rollout)
    assert rollout.enable_sleep_mode is False and rollout.n == 4


def test_overrides_apply():
    cfg = compose_config("agent_tune_grpo_cpu", ["actor_rollout_ref.rollout.n=2", "+trainer.new_thing=1"])
    assert cfg.actor_rollout_ref.rollout.n == 2 and cfg.trainer.new_thing == 1


def test_unknown_key_fails_naming_the_key():
    with pytest.raises(ConfigError) as info:
        compose_config("agent_tune_grpo_cpu", ["actor_rollout_ref.actor.optim.lrr=1e-5"])
    message = str(info.value)
    assert "actor_rollout_ref.actor.optim.lrr" in message
    assert "+actor_rollout_ref.actor.optim.lrr" in message  # says how to add a new key


def test_unknown_config_name():
    with pytest.raises(ConfigError, match="nope"):
        compose_config("nope")


def test_parse_args():
    parse_args = TrainLauncher().parse_args
    args = parse_args(["--config-name", "agent_tune_grpo_cpu", "a.b=1", "+c=2"])
    assert args.config_name == "agent_tune_grpo_cpu" and args.overrides == ["a.b=1", "+c=2"]
    with pytest.raises(SystemExit):
        parse_args(["--bogus"])
    with pytest.raises(SystemExit):
        parse_args(["not_an_override"])


def test_verl_loggers_write_into_the_run_folder(tmp_path, monkeypatch):
    from agent_tune.launch.train import prepare_outputs

    monkeypatch.delenv("TENSORBOARD_DIR", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    config = compose_config("agent_tune_grpo_cpu", [f"trainer.default_local_dir={tmp_path}",
                                                    "trainer.logger=[console,tensorboard,mlflow]"])
    run = prepare_outputs(RunConfig.parse(config))
    env = run.config.ray_kwargs.ray_init.runtime_env.env_vars
    assert list(run.config.trainer.logger) == ["console", "tensorboard", "mlflow", "file"]
    assert env.TENSORBOARD_DIR == str(tmp_path / "tensorboard")
    assert env.MLFLOW_TRACKING_URI == (tmp_path / "mlruns").as_uri()
    assert env.VERL_FILE_LOGGER_PATH == str(tmp_path / "verl_metrics.jsonl")
    # a location the user chose stays theirs
    monkeypatch.setenv("TENSORBOARD_DIR", "/elsewhere")
    config = compose_config("agent_tune_grpo_cpu", [f"trainer.default_local_dir={tmp_path}",
                                                    "trainer.logger=[console,tensorboard]"])
    env = prepare_outputs(RunConfig.parse(config)).config.ray_kwargs.ray_init.runtime_env.env_vars
    assert "TENSORBOARD_DIR" not in env and "MLFLOW_TRACKING_URI" not in env


def test_smollm2_alias_resolves_to_cache(tmp_path, monkeypatch):
    from agent_tune.launch.compose import resolve_model_paths
    from agent_tune.models import smollm2

    calls = []
    monkeypatch.setattr(smollm2, "ensure_smollm2", lambda out: calls.append(out) or out)
    cfg = compose_config("agent_tune_grpo_cpu", [f"agent_tune.model_cache_dir={tmp_path}"])
    resolve_model_paths(cfg, MODEL_KEYS, RunConfig.parse(cfg).options.model_cache_dir)
    expected = str(tmp_path / "SmolLM2-135M-Instruct")
    assert cfg.actor_rollout_ref.model.path == expected
    assert calls == [tmp_path / "SmolLM2-135M-Instruct"]


def test_other_model_paths_untouched(monkeypatch):
    from agent_tune.launch.compose import resolve_model_paths
    from agent_tune.models import smollm2

    monkeypatch.setattr(smollm2, "ensure_smollm2", lambda out: pytest.fail("must not convert"))
    cfg = compose_config("agent_tune_grpo_cpu", ["actor_rollout_ref.model.path=/models/qwen"])
    resolve_model_paths(cfg, MODEL_KEYS, RunConfig.parse(cfg).options.model_cache_dir)
    assert cfg.actor_rollout_ref.model.path == "/models/qwen"


def test_missing_data_file_named(tmp_path):
    from agent_tune.launch.compose import check_data_files

    (tmp_path / "train.parquet").write_bytes(b"")
    cfg = compose_config(
        "agent_tune_grpo_cpu",
        [f"data.train_files={tmp_path / 'train.parquet'}", f"data.val_files={tmp_path / 'val.parquet'}"],
    )
    with pytest.raises(ConfigError, match=r"data\.val_files.*val\.parquet"):
        check_data_files(cfg)
    cfg.data.val_files = "hdfs://somewhere/val.parquet"  # remote: left to verl
    check_data_files(cfg)


def test_validate_rejects_unknown_rollout_field_and_fsdp1_on_cpu():
    from agent_tune.launch.train import validate

    with pytest.raises(ConfigError, match="bogus"):
        validate(RunConfig.parse(compose_config("agent_tune_grpo_cpu", ["+actor_rollout_ref.rollout.bogus=1"])))
    with pytest.raises(ConfigError, match="actor_rollout_ref.actor.strategy"):
        validate(RunConfig.parse(compose_config("agent_tune_grpo_cpu", ["actor_rollout_ref.actor.strategy=fsdp"])))
    validate(RunConfig.parse(compose_config("agent_tune_grpo_cpu")))  # the shipped config passes verl's own checks


@pytest.mark.parametrize("key", ["algorithm.use_kl_in_reward", "actor_rollout_ref.actor.use_kl_loss"])
def test_a_kl_term_validates_on_cpu(key):
    """The CPU engine builds the reference policy (verl_ext/cpu/engine.py), so a KL term is accepted on CPU."""
    from agent_tune.launch.train import validate

    validate(RunConfig.parse(compose_config("agent_tune_grpo_cpu", [f"{key}=true"])))


def test_main_exit_code_on_bad_key(capsys):
    from agent_tune.launch.train import main

    assert main(["--config-name", "agent_tune_grpo_cpu", "trainer.bogus=1"]) == 2
    assert "trainer.bogus" in capsys.readouterr().err


def test_validate_does_not_provoke_verls_critic_warning():
    """verl's need_critic warns "Disabled critic" for every GRPO config; the start-up check asks without it."""
    import warnings

    from agent_tune.launch.train import validate

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        validate(RunConfig.parse(compose_config("agent_tune_grpo_cpu")))
    assert not [w for w in caught if "Disabled critic" in str(w.message)]
    from verl.trainer.ppo.utils import need_critic  # the warning is verl's, as it was: the test can fail

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        need_critic(compose_config("agent_tune_grpo_cpu"))
    assert any("Disabled critic" in str(w.message) for w in caught)
