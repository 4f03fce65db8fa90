"""The launch scripts pass paths and only the variables the user set: the YAML is the single source of values.

Each script runs with ``PYTHON`` pointing at a fake interpreter that prints its argv; no training starts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Keys a script may always pass: where data, checkpoints and the smoke run's reward function live.
PATH_KEYS = {
    "data.train_files",
    "data.val_files",
    "trainer.default_local_dir",
    "reward.custom_reward_function.path",
    "agent_tune.env_kwargs.tau2.user.base_url",  # where tau2's user simulator is served
}
# Every variable a script maps to a key (cleared from the environment before each run).
USER_VARIABLES = (
    "MODEL_PATH BATCH_SIZE MINI_BATCH_SIZE GROUP_SIZE LR MAX_PROMPT_LENGTH MAX_RESPONSE_LENGTH TP SP EPOCHS "
    "SAVE_FREQ TEST_FREQ REWARD EXPERIMENT NNODES GPUS_PER_NODE TOTAL_STEPS RESPONSE_LENGTH STEPS CONFIG_NAME "
    "WORK_DIR DATA_DIR TRAIN_FILE VAL_FILE CKPT_DIR INPUT DATASET SHOTS PYTHON RLLA_FILE VAL_SIZE REWARD_LENGTH "
    "REWARD_SCALE REWARD_GRANULARITY USER_MODEL USER_GPUS USER_PORT USER_BASE_URL TRAIN_GPUS ALPHA CURRICULUM"
).split()


def _run(script: str, tmp_path: Path, env_extra: dict[str, str], args: tuple[str, ...] = ()) -> list[list[str]]:
    """Run ``script`` with a fake PYTHON; return the argv of each interpreter call."""
    fake = tmp_path / "fake_python"
    log = tmp_path / "calls.txt"
    fake.write_text(f'#!/usr/bin/env bash\n{{ echo CALL; printf "%s\\n" "$@"; }} >> "{log}"\n')
    fake.chmod(0o755)
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    for name in ("train.parquet", "train_base.parquet", "val.parquet"):
        (data / name).write_bytes(b"")
    env = {k: v for k, v in os.environ.items() if k not in USER_VARIABLES}
    env.update(PYTHON=str(fake), DATA_DIR=str(data), WORK_DIR=str(tmp_path / "work"))
    env.update(env_extra)
    result = subprocess.run(
        ["bash", str(REPO / script), *args], env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    calls: list[list[str]] = []
    for line in log.read_text().splitlines():
        if line == "CALL":
            calls.append([])
        else:
            calls[-1].append(line)
    return calls


def _overrides(calls: list[list[str]]) -> dict[str, str]:
    """key -> value of the Hydra overrides given to ``-m verl_ext.train``."""
    (train,) = [c for c in calls if c[:2] == ["-m", "verl_ext.train"]]
    return dict(arg.split("=", 1) for arg in train if "=" in arg and not arg.startswith("-"))


@pytest.fixture(autouse=True)
def _needs_bash():
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")


TRAIN_SCRIPTS = [
    "examples/run_grpo_bfcl_cpu.sh",
    "examples/run_grpo_bfcl.sh",
    "examples/run_grpo_retool.sh",
    "examples/run_grpo_cpu_smoke.sh",
    "examples/run_grpo_toolrl.sh",
    "examples/run_grpo_tau2.sh",
    "benchmarks/learning_signal.sh",
    "benchmarks/learning_signal_bfcl_single.sh",
]


@pytest.mark.parametrize("script", TRAIN_SCRIPTS)
def test_nothing_but_paths_unless_exported(script, tmp_path):
    overrides = _overrides(_run(script, tmp_path, {}))
    assert set(overrides) <= PATH_KEYS, sorted(set(overrides) - PATH_KEYS)
    assert {"data.train_files", "data.val_files", "trainer.default_local_dir"} <= set(overrides)


@pytest.mark.parametrize(
    "script,variable,value,keys",
    [
        ("examples/run_grpo_bfcl.sh", "GROUP_SIZE", "8", ["actor_rollout_ref.rollout.n"]),
        ("examples/run_grpo_bfcl.sh", "LR", "3e-6", ["actor_rollout_ref.actor.optim.lr"]),
        ("examples/run_grpo_bfcl.sh", "NNODES", "2", ["trainer.nnodes"]),
        ("examples/run_grpo_bfcl.sh", "REWARD", "accuracy", ["agent_tune.env_kwargs.bfcl.reward"]),
        ("examples/run_grpo_bfcl.sh", "MODEL_PATH", "/models/q", ["actor_rollout_ref.model.path"]),
        (
            "examples/run_grpo_retool.sh",
            "BATCH_SIZE",
            "4",
            ["data.train_batch_size", "actor_rollout_ref.actor.ppo_mini_batch_size"],
        ),
        ("examples/run_grpo_retool.sh", "TOTAL_STEPS", "3", ["trainer.total_training_steps", "trainer.save_freq"]),
        ("examples/run_grpo_cpu_smoke.sh", "RESPONSE_LENGTH", "32", ["data.max_response_length"]),
        ("benchmarks/learning_signal.sh", "STEPS", "5", ["trainer.total_training_steps"]),
        ("benchmarks/learning_signal_bfcl_single.sh", "STEPS", "5", ["trainer.total_training_steps"]),
        ("benchmarks/learning_signal_bfcl_single.sh", "LR", "1e-5", ["actor_rollout_ref.actor.optim.lr"]),
        ("examples/run_grpo_bfcl_cpu.sh", "TOTAL_STEPS", "4", ["trainer.total_training_steps"]),
        ("examples/run_grpo_toolrl.sh", "MODEL_PATH", "Qwen/Qwen2.5-7B-Instruct", ["actor_rollout_ref.model.path"]),
        ("examples/run_grpo_toolrl.sh", "GROUP_SIZE", "8", ["actor_rollout_ref.rollout.n"]),
        ("examples/run_grpo_tau2.sh", "ALPHA", "0.5", ["agent_tune.env_kwargs.tau2.reward_shaping.alpha"]),
        ("examples/run_grpo_tau2.sh", "CURRICULUM", "false", ["agent_tune.task_curriculum.enable"]),
        ("examples/run_grpo_tau2.sh", "MODEL_PATH", "/ckpt/sft1", ["actor_rollout_ref.model.path"]),
        ("examples/run_grpo_toolrl.sh", "REWARD_SCALE", "two_stage", ["agent_tune.env_kwargs.toolcall.reward.scale"]),
        ("examples/run_grpo_toolrl.sh", "REWARD_LENGTH", "scheduled", ["agent_tune.env_kwargs.toolcall.reward.length"]),
        (
            "examples/run_grpo_toolrl.sh",
            "REWARD_GRANULARITY",
            "coarse",
            ["agent_tune.env_kwargs.toolcall.reward.granularity"],
        ),
    ],
)
def test_exported_variable_reaches_its_key(script, variable, value, keys, tmp_path):
    overrides = _overrides(_run(script, tmp_path, {variable: value}))
    for key in keys:
        assert overrides[key] == value
    assert set(overrides) - PATH_KEYS == set(keys)


def test_config_name_and_extra_arguments_pass_through(tmp_path):
    calls = _run("examples/run_grpo_retool.sh", tmp_path, {"CONFIG_NAME": "agent_tune_retool_cpu"}, ("a.b=1",))
    (train,) = [c for c in calls if c[:2] == ["-m", "verl_ext.train"]]
    assert train[train.index("--config-name") + 1] == "agent_tune_retool_cpu"
    assert train[-1] == "a.b=1"


def test_bfcl_single_benchmark_builds_shot_rows_trains_and_plots(tmp_path):
    calls = _run("benchmarks/learning_signal_bfcl_single.sh", tmp_path, {})
    work = tmp_path / "work"
    build, train, plot = calls
    assert build[0].endswith("data_preprocess/toolcall.py")
    assert build[1:] == ["--source", "bfcl", "--categories", "simple_python", "--shots", "2", "--out", f"{work}/data"]
    assert train[train.index("--config-name") + 1] == "agent_tune_toolcall_bfcl_cpu"
    assert _overrides(calls)["data.train_files"] == f"{work}/data/train.parquet"
    assert plot[0].endswith("benchmarks/plot_metrics.py") and plot[1] == f"{work}/checkpoints/metrics.jsonl"
    assert plot[plot.index("--out") + 1] == f"{work}/learning_signal_bfcl_single.png"
    keys = set(plot[plot.index("--keys") + 1:plot.index("--title")])
    assert {"reward", "acc", "format_errors", "num_calls"} <= keys
    # every plotted key is one the step-metrics writer logs
    from verl_ext.step_metrics import SAMPLE_KEYS, VERL_KEYS, collapse_metrics

    logged = set(VERL_KEYS.values()) | set(SAMPLE_KEYS)
    logged |= set(collapse_metrics([{"num_generations": 1, "num_calls": 1, "group": 0, "reward": 1.0}]))
    assert keys <= logged, keys - logged


def test_toolrl_builds_rlla_rows_once(tmp_path):
    rlla = tmp_path / "rlla_rl.json"
    rlla.write_text("[]")
    empty = tmp_path / "fresh"
    calls = _run("examples/run_grpo_toolrl.sh", tmp_path, {"RLLA_FILE": str(rlla), "DATA_DIR": str(empty)})
    build = [c for c in calls if c and c[0].endswith("data_preprocess/toolcall.py")]
    assert build == [[build[0][0], "--source", "rlla", str(rlla), "--val-size", "80", "--out", str(empty)]]
    assert _overrides(calls)["data.train_files"] == f"{empty}/train.parquet"


def test_toolrl_without_rows_or_rlla_file_explains(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in USER_VARIABLES}
    env.update(DATA_DIR=str(tmp_path / "none"), PYTHON="false")
    result = subprocess.run(["bash", str(REPO / "examples/run_grpo_toolrl.sh")], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2 and "set RLLA_FILE" in result.stderr


def test_stage2_uses_its_config_and_the_stage1_model(tmp_path):
    model = tmp_path / "stage1"
    model.mkdir()
    (model / "config.json").write_text("{}")
    calls = _run("examples/run_grpo_bfcl_stage2.sh", tmp_path, {"MODEL_PATH": str(model)})
    (train,) = [c for c in calls if c[:2] == ["-m", "verl_ext.train"]]
    assert train[train.index("--config-name") + 1] == "agent_tune_bfcl_stage2"
    overrides = _overrides(calls)
    assert overrides["actor_rollout_ref.model.path"] == str(model)
    assert overrides["data.train_files"].endswith("/train.parquet")
    assert set(overrides) - PATH_KEYS == {"actor_rollout_ref.model.path"}


def test_stage2_without_stage1_model_explains(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in USER_VARIABLES}
    result = subprocess.run(
        ["bash", str(REPO / "examples/run_grpo_bfcl_stage2.sh")], env=env, capture_output=True, text=True, timeout=60
    )
    if (REPO / "outputs/models/bfcl_stage1/config.json").exists():
        pytest.skip("a stage-1 model is exported in this checkout")
    assert result.returncode == 2 and "export it first" in result.stderr


def test_export_uses_the_common_python(tmp_path):
    step = tmp_path / "global_step_3"
    (step / "actor").mkdir(parents=True)
    calls = _run("examples/export_hf.sh", tmp_path, {}, (str(step), str(tmp_path / "hf")))
    assert calls == [
        ["-m", "verl.model_merger", "merge", "--backend", "fsdp", "--local_dir", f"{step}/actor", "--target_dir",
         str(tmp_path / "hf")]
    ]


def test_every_script_sources_the_common_settings():
    scripts = [p for p in (*REPO.glob("examples/*.sh"), *REPO.glob("benchmarks/*.sh")) if p.name != "_common.sh"]
    for script in scripts:
        text = script.read_text()
        assert "_common.sh" in text, script
        assert "PYTHON=" not in text, script  # one PYTHON default, in examples/_common.sh


def test_run_rft_chains_eval_with_sft_out_then_sft_on_the_kept_rows(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "rft_rows.jsonl").write_text('{"id": "a#0", "input_ids": [1, 2], "loss_mask": [0, 1]}\n')
    env = {"BASE_URL": "http://h:1/v1", "MODEL": "m", "TOKENIZER": "/tok", "ROWS": "/d/train.parquet",
           "TEMPLATE": "smollm2_tools", "MIN_REWARD": "0.5", "N": "8", "LIMIT": "3", "MIN_ACCURACY": "",
           "SFT_CONFIG": "", "SFT_MODEL": "", "TEMPERATURE": ""}
    calls = _run("examples/run_rft.sh", tmp_path, env, ("+lora=sft", "optim.lr=1e-5"))
    ev, sft = calls
    assert ev[:3] == ["-m", "agent_tune.cli", "eval"]
    flag = {ev[i]: ev[i + 1] for i in range(3, len(ev) - 1) if ev[i].startswith("--")}
    assert flag["--rows"] == "/d/train.parquet" and flag["--n"] == "8" and flag["--limit"] == "3"
    assert flag["--sft-out"] == str(work / "rft_rows.jsonl") and flag["--sft-min-reward"] == "0.5"
    assert "--sft-min-accuracy" not in ev and flag["--temperature"] == "1.0" and flag["--template"] == "smollm2_tools"
    assert sft[:4] == ["-m", "verl_ext.sft", "--config-name", "agent_tune_sft_cpu"]
    assert f"data.train_files={work / 'rft_rows.jsonl'}" in sft and "model.path=/tok" in sft
    assert "data.chat_template=smollm2_tools" in sft and sft[-2:] == ["+lora=sft", "optim.lr=1e-5"]


def test_run_rft_without_successes_stops_before_sft(tmp_path):
    fake = tmp_path / "fake_python"
    fake.write_text("#!/usr/bin/env bash\nexit 0\n")
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in USER_VARIABLES}
    env.update(PYTHON=str(fake), WORK_DIR=str(tmp_path / "w"), BASE_URL="u", MODEL="m", TOKENIZER="t", ROWS="r")
    result = subprocess.run(["bash", str(REPO / "examples/run_rft.sh")], env=env, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 1 and "no successful episode to train on" in result.stderr


def test_tau2_serves_the_user_on_its_own_gpus(tmp_path):
    calls = _run("examples/run_grpo_tau2.sh", tmp_path, {"USER_GPUS": "4,5,6,7", "USER_PORT": "31000"})
    server = [c for c in calls if c[:2] == ["-m", "vllm.entrypoints.openai.api_server"]]
    assert len(server) == 1
    args = server[0]
    assert args[args.index("--model") + 1] == "Qwen/Qwen3-4B-Instruct-2507"
    assert args[args.index("--served-model-name") + 1] == "user-simulator"
    assert args[args.index("--tensor-parallel-size") + 1] == "4" and args[args.index("--port") + 1] == "31000"
    overrides = _overrides(calls)
    assert overrides["agent_tune.env_kwargs.tau2.user.base_url"] == "http://127.0.0.1:31000/v1"
    assert overrides["data.val_files"].endswith("/test.parquet")
    (train,) = [c for c in calls if c[:2] == ["-m", "verl_ext.train"]]
    assert train[train.index("--config-name") + 1] == "agent_tune_tau2"


def test_tau2_uses_a_running_user_server(tmp_path):
    calls = _run("examples/run_grpo_tau2.sh", tmp_path, {"USER_BASE_URL": "http://10.0.0.5:30001/v1"})
    assert not [c for c in calls if c[:2] == ["-m", "vllm.entrypoints.openai.api_server"]]
    assert _overrides(calls)["agent_tune.env_kwargs.tau2.user.base_url"] == "http://10.0.0.5:30001/v1"
