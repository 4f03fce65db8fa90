"""The launch scripts pass paths and only the variables the user set: the YAML is the single source of values.

Each script runs with ``PYTHON`` pointing at a fake interpreter that prints its argv; no training starts.
"""

from __future__ import annotations

import json
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
    "REWARD_SCALE REWARD_GRANULARITY USER_MODEL USER_GPUS USER_PORT USER_BASE_URL TRAIN_GPUS ALPHA CURRICULUM "
    "TASK_WEIGHTING SFT_CONFIG GRPO_CONFIG SFT_DATA SFT_STEPS RECIPES TIMEOUT_S PROTOCOL "
    # ToolRL's reward switches (examples/run_grpo_toolrl.sh maps them)
    "WITHLENGTH SCHEDULELENGTH CORRECTMAX1 MAX1STEP30MAX3 SCHEDULEREWARD REFINEDREWARD INTERMEDIATEREWARD COARSEREWARD"
).split()


# The fake interpreter: it logs each call (CALL, then one argument a line) to LOG with one write, so that the
# calls of a vLLM server the script starts in the background never interleave with the script's own; a
# server ignores the script's kill until its call is logged; wait_openai's probe of a server's URL returns
# once that server's call is logged, as a real probe returns once the server is up (calls log in order).
FAKE = r'''#!/usr/bin/env bash
trap '' TERM
record=$(printf "%s\n" CALL "$@"; echo .)
printf "%s" "${record%.}" >> "LOG"
if [[ "$1" == -c && "$2" == *urllib.request* && "$3" == http://127.0.0.1:* ]]; then
  port=${3#http://127.0.0.1:}
  for _ in $(seq 1200); do grep -qx -- "${port%%/*}" "LOG" && break; sleep 0.05; done
fi
'''


def _run(script: str, tmp_path: Path, env_extra: dict[str, str], args: tuple[str, ...] = ()) -> list[list[str]]:
    """Run ``script`` with a fake PYTHON; return the argv of each interpreter call."""
    fake = tmp_path / "fake_python"
    log = tmp_path / "calls.txt"
    fake.write_text(FAKE.replace("LOG", str(log)))
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
    return _read_calls(log)


def _read_calls(log: Path) -> list[list[str]]:
    """The argument lists the fake python logged, one per call."""
    calls: list[list[str]] = []
    for line in log.read_text().splitlines():
        if line == "CALL":
            calls.append([])
        else:
            calls[-1].append(line)
    return calls


def _overrides(calls: list[list[str]]) -> dict[str, str]:
    """key -> value of the Hydra overrides given to ``-m agent_tune.launch.train``."""
    (train,) = [c for c in calls if c[:2] == ["-m", "agent_tune.launch.train"]]
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
    "examples/cpu/learning_signal.sh",
    "examples/cpu/learning_signal_bfcl_single.sh",
    "examples/cpu/learning_signal_mcp.sh",
    "examples/cpu/ppo_cpu.sh",
]
# What a script is, beyond paths: the recipe it selects and a benchmark's run length (asserted exactly).
SCRIPT_KEYS = {"examples/cpu/ppo_cpu.sh": {"+recipe": "ppo", "trainer.total_training_steps": "2"}}


@pytest.mark.parametrize("script", TRAIN_SCRIPTS)
def test_nothing_but_paths_unless_exported(script, tmp_path):
    overrides = _overrides(_run(script, tmp_path, {}))
    fixed = SCRIPT_KEYS.get(script, {})
    assert {key: overrides.get(key) for key in fixed} == fixed
    assert set(overrides) - set(fixed) <= PATH_KEYS, sorted(set(overrides) - set(fixed) - PATH_KEYS)
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
        ("examples/cpu/learning_signal.sh", "STEPS", "5", ["trainer.total_training_steps"]),
        ("examples/cpu/learning_signal_bfcl_single.sh", "STEPS", "5", ["trainer.total_training_steps"]),
        ("examples/cpu/learning_signal_bfcl_single.sh", "LR", "1e-5", ["actor_rollout_ref.actor.optim.lr"]),
        ("examples/cpu/learning_signal_mcp.sh", "STEPS", "20", ["trainer.total_training_steps"]),
        ("examples/cpu/ppo_cpu.sh", "STEPS", "5", ["trainer.total_training_steps"]),
        ("examples/run_grpo_bfcl_cpu.sh", "TOTAL_STEPS", "4", ["trainer.total_training_steps"]),
        ("examples/run_grpo_toolrl.sh", "MODEL_PATH", "Qwen/Qwen2.5-7B-Instruct", ["actor_rollout_ref.model.path"]),
        ("examples/run_grpo_toolrl.sh", "GROUP_SIZE", "8", ["actor_rollout_ref.rollout.n"]),
        ("examples/run_grpo_tau2.sh", "ALPHA", "0.5", ["agent_tune.env_kwargs.tau2.reward_shaping.alpha"]),
        ("examples/run_grpo_tau2.sh", "TASK_WEIGHTING", "false", ["agent_tune.task_weighting.enable"]),
        ("examples/run_grpo_tau2.sh", "MODEL_PATH", "/ckpt/sft1", ["actor_rollout_ref.model.path"]),
        ("examples/run_grpo_tau2.sh", "PROTOCOL", "pipeline", ["agent_tune.env_kwargs.tau2.protocol"]),
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
    assert set(overrides) - PATH_KEYS == set(keys) | set(SCRIPT_KEYS.get(script, {}))


def test_config_name_and_extra_arguments_pass_through(tmp_path):
    calls = _run("examples/run_grpo_retool.sh", tmp_path, {"CONFIG_NAME": "agent_tune_retool_cpu"}, ("a.b=1",))
    (train,) = [c for c in calls if c[:2] == ["-m", "agent_tune.launch.train"]]
    assert train[train.index("--config-name") + 1] == "agent_tune_retool_cpu"
    assert train[-1] == "a.b=1"


def test_bfcl_single_benchmark_builds_shot_rows_trains_and_plots(tmp_path):
    calls = _run("examples/cpu/learning_signal_bfcl_single.sh", tmp_path, {})
    work = tmp_path / "work"
    build, train, plot = calls
    assert build[0].endswith("data_preprocess/toolcall.py")
    assert build[1:] == ["--source", "bfcl", "--categories", "simple_python", "--shots", "2", "--out", f"{work}/data"]
    assert train[train.index("--config-name") + 1] == "agent_tune_toolcall_bfcl_cpu"
    assert _overrides(calls)["data.train_files"] == f"{work}/data/train.parquet"
    assert plot[:3] == ["-m", "agent_tune.cli", "plot"] and plot[3] == f"{work}/checkpoints/metrics.jsonl"
    assert plot[plot.index("--out") + 1] == f"{work}/learning_signal_bfcl_single.png"
    keys = set(plot[plot.index("--keys") + 1:plot.index("--title")])
    assert {"reward", "acc", "format_errors", "num_calls"} <= keys
    # every plotted key is one the step-metrics writer logs
    from agent_tune.launch.step_metrics import SAMPLE_KEYS, VERL_KEYS, collapse_metrics
    from verl_ext.sample_records import SampleRecord

    logged = set(VERL_KEYS.values()) | set(SAMPLE_KEYS)
    group = [SampleRecord.from_dict({"num_generations": 1, "num_calls": 1, "group": "0", "reward": r}) for r in (0, 1)]
    logged |= set(collapse_metrics(group))
    assert keys <= logged, keys - logged


def test_mcp_benchmark_writes_catalogue_rows_trains_and_plots_first_and_last_5(tmp_path):
    calls = _run("examples/cpu/learning_signal_mcp.sh", tmp_path, {})
    work = tmp_path / "work"
    build, train, plot = calls
    assert build[:3] == ["-m", "agent_tune.cli", "data"] and build[build.index("--env") + 1] == "mcp"
    assert build[build.index("--out") + 1] == f"{work}/data"
    assert train[train.index("--config-name") + 1] == "agent_tune_mcp_notes_cpu"
    assert _overrides(calls)["data.val_files"] == f"{work}/data/test.parquet"
    assert plot[plot.index("--window") + 1] == "5"
    assert plot[plot.index("--out") + 1] == f"{work}/learning_signal_mcp.png"
    keys = set(plot[plot.index("--keys") + 1:plot.index("--out")])
    assert keys == {"reward", "acc", "valid_call_rate"}


def test_ppo_benchmark_builds_rows_trains_the_recipe_and_prints_its_metrics(tmp_path):
    fresh = tmp_path / "fresh"
    calls = _run("examples/cpu/ppo_cpu.sh", tmp_path, {"DATA_DIR": str(fresh)}, ("a.b=1",))
    build, train, report = calls
    assert build[0].endswith("data_preprocess/toolcall.py") and build[1:3] == ["--synthetic", "arith"]
    assert build[build.index("--out") + 1] == str(fresh)
    assert train[train.index("--config-name") + 1] == "agent_tune_toolrl_cpu" and train[-1] == "a.b=1"
    assert _overrides(calls)["data.train_files"] == f"{fresh}/train.parquet"
    assert report[:4] == ["-m", "agent_tune.cli", "plot", "--table"]
    assert report[4] == f"{tmp_path}/work/checkpoints/verl_metrics.jsonl"
    assert {"critic/vf_loss", "critic/vpred_mean", "actor/pg_loss", "critic/grad_norm"} <= set(report[6:])
    again = tmp_path / "again"
    again.mkdir()
    rlla = again / "rlla_rl.json"
    rlla.write_text("[]")
    calls = _run("examples/cpu/ppo_cpu.sh", again, {"DATA_DIR": str(again / "rows"), "RLLA_FILE": str(rlla)})
    assert calls[0][1:4] == ["--source", "rlla", str(rlla)]


def test_gpu_recipes_on_cpu_runs_each_recipe_with_the_overlay_only(tmp_path):
    calls = _run("examples/cpu/gpu_recipes_on_cpu.sh", tmp_path, {}, ("a.b=1",))
    work = tmp_path / "work"
    trains = [c for c in calls if c[:2] == ["-m", "agent_tune.launch.train"]]
    recipes = ["agent_tune_bfcl", "agent_tune_toolrl", "agent_tune_tau2", "agent_tune_retool"]
    assert [t[t.index("--config-name") + 1] for t in trains] == recipes
    for recipe, train in zip(recipes, trains):
        assert train[train.index("--config-name") + 2] == "+device=cpu_probe" and train[-1] == "a.b=1"
        overrides = dict(arg.split("=", 1) for arg in train[5:-1])
        assert set(overrides) <= PATH_KEYS, sorted(set(overrides) - PATH_KEYS)  # paths only: the overlay sizes it
        assert overrides["trainer.default_local_dir"] == f"{work}/{recipe}/checkpoints"
        assert overrides["data.train_files"].startswith(f"{work}/data/{recipe}/")
    assert "agent_tune.env_kwargs.tau2.user.base_url=http://127.0.0.1:30001/v1" in trains[2]
    builds = [c[0].rsplit("/", 1)[1] for c in calls if c and c[0].endswith(".py")]
    assert builds == ["bfcl.py", "toolcall.py", "tau2.py", "retool.py"]
    (retool,) = [c for c in calls if c and c[0].endswith("retool.py")]
    assert retool[retool.index("--answer-marker") + 1] == "####"  # the fixture has a GSM8K-style answer
    (server,) = [c for c in calls if c[:2] == ["-m", "vllm.entrypoints.openai.api_server"]]
    assert server[server.index("--served-model-name") + 1] == "user-simulator"
    assert calls.index(server) < calls.index(trains[2])  # the user is up before tau2 trains
    again = tmp_path / "again"
    again.mkdir()
    only = _run("examples/cpu/gpu_recipes_on_cpu.sh", again, {"RECIPES": "agent_tune_retool"})
    assert [c[c.index("--config-name") + 1] for c in only if c[:2] == ["-m", "agent_tune.launch.train"]] == [
        "agent_tune_retool"]


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
    (train,) = [c for c in calls if c[:2] == ["-m", "agent_tune.launch.train"]]
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
    scripts = [p for p in (*REPO.glob("examples/*.sh"), *REPO.glob("examples/cpu/*.sh")) if p.name != "_common.sh"]
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
    assert sft[:4] == ["-m", "agent_tune.launch.sft", "--config-name", "agent_tune_sft_cpu"]
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
    (train,) = [c for c in calls if c[:2] == ["-m", "agent_tune.launch.train"]]
    assert train[train.index("--config-name") + 1] == "agent_tune_tau2"


def test_tau2_uses_a_running_user_server(tmp_path):
    calls = _run("examples/run_grpo_tau2.sh", tmp_path, {"USER_BASE_URL": "http://10.0.0.5:30001/v1"})
    assert not [c for c in calls if c[:2] == ["-m", "vllm.entrypoints.openai.api_server"]]
    assert _overrides(calls)["agent_tune.env_kwargs.tau2.user.base_url"] == "http://10.0.0.5:30001/v1"


def _sft_checkpoint(work: Path, step: int, lora: bool = False) -> Path:
    ckpt = work / "sft" / f"global_step_{step}"
    (ckpt / "huggingface").mkdir(parents=True)
    (ckpt / "huggingface" / "config.json").write_text("{}")
    if lora:
        (ckpt / "lora_train_meta.json").write_text("{}")
    return ckpt


def test_retool_sft_then_grpo_from_the_latest_sft_export(tmp_path):
    work = tmp_path / "work"
    _sft_checkpoint(work, 2)
    latest = _sft_checkpoint(work, 10)
    env = {"SFT_CONFIG": "agent_tune_sft_cpu", "GRPO_CONFIG": "agent_tune_retool_cpu"}
    calls = _run("examples/run_retool_sft_grpo.sh", tmp_path, env, ("optim.lr=1e-5", "--", "a.b=1"))
    synth, sft, train = calls
    assert synth[0].endswith("data_preprocess/retool_sft_synthetic.py") and synth[1:] == ["--out", f"{work}/sft_data"]
    assert sft == ["-m", "agent_tune.launch.sft", "--config-name", "agent_tune_sft_cpu", "+sft_format=retool",
                   f"data.train_files={work}/sft_data/train.parquet", f"trainer.default_local_dir={work}/sft",
                   "optim.lr=1e-5"]
    assert train[train.index("--config-name") + 1] == "agent_tune_retool_cpu" and train[-1] == "a.b=1"
    overrides = _overrides(calls)
    assert overrides["actor_rollout_ref.model.path"] == f"{latest}/huggingface"
    assert overrides["trainer.default_local_dir"] == f"{work}/grpo/checkpoints"
    assert not {k for k in overrides if k not in PATH_KEYS} - {"actor_rollout_ref.model.path", "a.b"}


def test_retool_sft_grpo_with_own_data_and_sft_steps(tmp_path):
    work = tmp_path / "work"
    _sft_checkpoint(work, 3)
    calls = _run("examples/run_retool_sft_grpo.sh", tmp_path, {"SFT_DATA": "/d/conv.jsonl", "SFT_STEPS": "3"})
    sft, train = calls
    assert sft[3] == "agent_tune_sft" and "data.train_files=/d/conv.jsonl" in sft
    assert "trainer.total_training_steps=3" in sft
    assert train[train.index("--config-name") + 1] == "agent_tune_retool"


def test_retool_sft_grpo_stops_after_a_lora_sft(tmp_path):
    _sft_checkpoint(tmp_path / "work", 2, lora=True)
    fake = tmp_path / "fake_python"
    fake.write_text("#!/usr/bin/env bash\nexit 0\n")
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in USER_VARIABLES}
    env.update(PYTHON=str(fake), WORK_DIR=str(tmp_path / "work"), SFT_DATA="/d/c.jsonl")
    result = subprocess.run(["bash", str(REPO / "examples/run_retool_sft_grpo.sh")], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 1 and "model merger" in result.stderr


CHAIN_FAKE = FAKE + r"""
if [[ "$2" == agent_tune.launch.config_value ]]; then
  case "$5" in
    agent_tune.template) echo smollm2_tools ;;
    agent_tune.tool_parser) echo hermes ;;
    *) echo '{"max_steps": 12, "user": {"base_url": "from-override"}}' ;;
  esac
fi
prev=""
for a in "$@"; do
  if [[ "$2" == agent_tune.launch.sft && "$a" == trainer.default_local_dir=* ]]; then
    mkdir -p "${a#*=}/global_step_2/huggingface"
  fi
  if [[ "$2" == agent_tune.cli && "$prev" == --sft-out ]]; then echo '{"id": "r#0"}' >> "$a"; fi
  prev="$a"
done
exit 0
"""


def _chain(tmp_path: Path, env_extra: dict[str, str], args: tuple[str, ...] = ()) -> list[list[str]]:
    fake = tmp_path / "fake_python"
    log = tmp_path / "calls.txt"
    log.unlink(missing_ok=True)
    fake.write_text(CHAIN_FAKE.replace("LOG", str(log)))
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in USER_VARIABLES + CHAIN_VARIABLES}
    env.update(PYTHON=str(fake), WORK_DIR=str(tmp_path / "work"), CONVERSATIONS="/d/conv.parquet", **env_extra)
    result = subprocess.run(["bash", str(REPO / "examples/run_tau2_chain.sh"), *args], env=env, capture_output=True,
                            text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    return _read_calls(log)


CHAIN_VARIABLES = ("CONVERSATIONS SFT_CONFIG GRPO_CONFIG DOMAINS POLICY_GPUS POLICY_PORT VLLM_ARGS SFT_ARGS N LIMIT "
                   "MIN_REWARD MIN_ACCURACY MAX_TOKENS TEMPERATURE ENV_KWARGS TOOL_PARSER RFT_STAGES TEMPLATE").split()


def test_tau2_chain_runs_sft_then_rft_then_grpo_each_from_the_last_model(tmp_path):
    env = {"SFT_CONFIG": "agent_tune_sft_cpu", "GRPO_CONFIG": "agent_tune_tau2_cpu", "DOMAINS": "airline",
           "USER_MODEL": "/m/smol", "VLLM_ARGS": "--dtype float32 --enforce-eager", "N": "1", "MIN_REWARD": "0",
           "SFT_ARGS": "trainer.total_training_steps=2 data.max_length=4096"}
    calls = _chain(tmp_path, env, ("trainer.total_training_steps=1",))
    work = tmp_path / "work"
    sft1, sft2 = [c for c in calls if c[:2] == ["-m", "agent_tune.launch.sft"]]
    user, policy = [c for c in calls if c[:2] == ["-m", "vllm.entrypoints.openai.api_server"]]
    (ev,) = [c for c in calls if c[:3] == ["-m", "agent_tune.cli", "eval"]]
    (train,) = [c for c in calls if c[:2] == ["-m", "agent_tune.launch.train"]]
    order = [calls.index(c) for c in (sft1, user, policy, ev, sft2, train)]
    assert order == sorted(order)
    hf1, hf2 = work / "sft" / "global_step_2" / "huggingface", work / "rft" / "sft" / "global_step_2" / "huggingface"
    # stage 1: the given conversations, the GRPO config's template, the SFT config's model
    assert sft1[sft1.index("--config-name") + 1] == "agent_tune_sft_cpu"
    assert "data.train_files=/d/conv.parquet" in sft1 and "data.chat_template=smollm2_tools" in sft1
    assert not [a for a in sft1 if a.startswith("model.path=")]
    assert sft1[-2:] == ["trainer.total_training_steps=2", "data.max_length=4096"]
    # the servers: the user model as user-simulator, stage 1's folder as the policy; VLLM_ARGS on both
    assert user[user.index("--model") + 1] == "/m/smol"
    assert user[user.index("--served-model-name") + 1] == "user-simulator"
    assert policy[policy.index("--model") + 1] == str(hf1) and policy[-3:] == ["--dtype", "float32", "--enforce-eager"]
    assert user[-3:] == policy[-3:]
    # stage 2: eval on the train rows with the GRPO config's env options and user, then SFT from stage 1's folder
    flag = {ev[i]: ev[i + 1] for i in range(3, len(ev) - 1) if ev[i].startswith("--")}
    assert flag["--tokenizer"] == str(hf1) and flag["--model"] == "policy" and flag["--template"] == "smollm2_tools"
    assert flag["--tool-parser"] == "hermes" and flag["--rows"].endswith("data/train.parquet")
    assert json.loads(flag["--env-kwargs"])["max_steps"] == 12 and flag["--sft-min-reward"] == "0"
    (env_value,) = [c for c in calls if "agent_tune.env_kwargs.tau2" in c]
    assert "agent_tune.env_kwargs.tau2.user.base_url=http://127.0.0.1:30001/v1" in env_value
    assert f"model.path={hf1}" in sft2 and f"trainer.default_local_dir={work / 'rft' / 'sft'}" in sft2
    assert "data.max_length=4096" in sft2
    # stage 3: GRPO from the RFT folder, the same user server, the GRPO config, this script's arguments
    overrides = _overrides(calls)
    assert overrides["actor_rollout_ref.model.path"] == str(hf2)
    assert overrides["agent_tune.env_kwargs.tau2.user.base_url"] == "http://127.0.0.1:30001/v1"
    assert train[train.index("--config-name") + 1] == "agent_tune_tau2_cpu"
    assert train[-1] == "trainer.total_training_steps=1"

    again = _chain(tmp_path, env)  # rerun: both exported models exist, only GRPO runs
    assert not [c for c in again
                if c[:2] == ["-m", "agent_tune.launch.sft"] or c[:3] == ["-m", "agent_tune.cli", "eval"]]
    assert _overrides(again)["actor_rollout_ref.model.path"] == str(hf2)


def test_tau2_chain_in_the_pipeline_protocol(tmp_path):
    """PROTOCOL=pipeline reaches the rows (their prompt), the RFT episodes' env options and the GRPO run."""
    env = {"GRPO_CONFIG": "agent_tune_tau2_cpu", "DOMAINS": "airline", "N": "1", "PROTOCOL": "pipeline"}
    calls = _chain(tmp_path, env)
    rows = [c for c in calls if c and c[0].endswith("data_preprocess/tau2.py")]  # the chain's, and stage 3's
    assert rows and all(c[c.index("--protocol") + 1] == "pipeline" and c[c.index("--out") + 1].endswith(
        "data_pipeline") for c in rows)
    (env_value,) = [c for c in calls if "agent_tune.env_kwargs.tau2" in c]
    assert "agent_tune.env_kwargs.tau2.protocol=pipeline" in env_value
    assert _overrides(calls)["agent_tune.env_kwargs.tau2.protocol"] == "pipeline"


def test_tau2_chain_needs_conversations(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in USER_VARIABLES + CHAIN_VARIABLES}
    env.update(PYTHON="false", WORK_DIR=str(tmp_path / "w"))
    result = subprocess.run(["bash", str(REPO / "examples/run_tau2_chain.sh")], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode != 0 and "set CONVERSATIONS" in result.stderr


def test_et_handoff_builds_shot_rows_runs_the_cpu_curriculum_and_plots_both_stages(tmp_path):
    calls = _run("examples/cpu/et_handoff_cpu.sh", tmp_path, {}, ("a.b=1",))
    work = tmp_path / "work"
    build, curriculum, plot = calls
    assert build[0].endswith("data_preprocess/bfcl.py") and build[1:] == ["--out", f"{work}/data", "--shots", "3"]
    assert curriculum[:2] == ["-m", "agent_tune.launch.curriculum"]
    assert curriculum[curriculum.index("--curriculum") + 1] == "bfcl_cpu"
    assert curriculum[curriculum.index("--run-dir") + 1] == f"{work}/run"
    assert curriculum[-2:] == [f"curriculum.data_dir={work}/data", "a.b=1"]
    stages = [s["name"] for s in _curriculum_stages("bfcl_cpu")]
    metrics = [a for a in plot if a.endswith("metrics.jsonl")]
    assert metrics == [f"{work}/run/{name}/checkpoints/metrics.jsonl" for name in stages]
    assert plot[plot.index("--out") + 1] == f"{work}/et_handoff_cpu.png"
    keys = set(plot[plot.index("--keys") + 1:plot.index("--out")])
    assert {"reward", "progress", "acc"} <= keys


def _curriculum_stages(name: str) -> list[dict]:
    import yaml

    return yaml.safe_load((REPO / "config" / "curriculum" / f"{name}.yaml").read_text())["stages"]


STOP_SERVED = r'''
. examples/_common.sh
SERVED_GRACE_S=1
bash -c 'sleep 30' & obeys=$!
bash -c 'trap "" TERM; echo ready > "$1"; sleep 30' _ "$READY" & ignores=$!
until [[ -s "$READY" ]]; do sleep 0.05; done
started=$SECONDS
stop_served "$obeys" "$ignores"
echo "took $((SECONDS - started))"
for pid in "$obeys" "$ignores"; do
  if kill -0 "$pid" 2>/dev/null; then echo "alive $pid"; fi
done
'''


def test_stop_served_ends_each_server_and_kills_one_that_ignores_sigterm(tmp_path):
    result = subprocess.run(["bash", "-c", STOP_SERVED], cwd=REPO, env={**os.environ, "READY": str(tmp_path / "r")},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    took = int(result.stdout.split("took ")[1].split()[0])
    assert 1 <= took <= 10 and "alive" not in result.stdout  # the grace period, then SIGKILL
