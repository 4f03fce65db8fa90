"""examples/run_grpo_tau2.sh checks its GPU lists before serving the user simulator, and sizes the server."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.scripts.test_launch_scripts import REPO, USER_VARIABLES, _read_calls, _run

CHECK = ["-m", "agent_tune.launch.gpu_lists"]
SERVER = ["-m", "vllm.entrypoints.openai.api_server"]


@pytest.fixture(autouse=True)
def _needs_bash():
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")


def _value(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def test_the_check_runs_first_with_the_lists_and_overrides(tmp_path):
    calls = _run("examples/run_grpo_tau2.sh", tmp_path, {"GPUS_PER_NODE": "2", "TRAIN_GPUS": "0,1"})
    names = [c[:2] for c in calls if c[:1] == ["-m"]]
    assert names.index(CHECK) < names.index(SERVER) < names.index(["-m", "agent_tune.launch.train"])
    (check,) = [c for c in calls if c[:2] == CHECK]
    assert _value(check, "--train-gpus") == "0,1" and _value(check, "--user-gpus") == "4,5"
    assert _value(check, "--config-name") == "agent_tune_tau2"
    assert "trainer.n_gpus_per_node=2" in check[check.index("--"):]  # what the trainer gets, checked


def test_the_user_server_gets_a_memory_share_and_a_context(tmp_path):
    calls = _run("examples/run_grpo_tau2.sh", tmp_path, {"USER_GPU_MEMORY": "0.5", "USER_MAX_MODEL_LEN": "16384"})
    (server,) = [c for c in calls if c[:2] == SERVER]
    assert _value(server, "--gpu-memory-utilization") == "0.5" and _value(server, "--max-model-len") == "16384"
    assert _value(server, "--tensor-parallel-size") == "2"  # USER_GPUS 4,5
    (tmp_path / "defaults").mkdir()
    calls = _run("examples/run_grpo_tau2.sh", tmp_path / "defaults", {})
    (server,) = [c for c in calls if c[:2] == SERVER]
    assert _value(server, "--gpu-memory-utilization") == "0.85" and _value(server, "--max-model-len") == "32768"


def test_a_running_user_server_leaves_no_user_gpus_to_check(tmp_path):
    calls = _run("examples/run_grpo_tau2.sh", tmp_path, {"USER_BASE_URL": "http://10.0.0.5:30001/v1"})
    (check,) = [c for c in calls if c[:2] == CHECK]
    assert _value(check, "--user-gpus") == ""


def test_a_failed_check_stops_before_the_server(tmp_path):
    log = tmp_path / "calls.txt"
    fake = tmp_path / "fake_python"
    fake.write_text(f'#!/usr/bin/env bash\nprintf "%s\\n" CALL "$@" >> "{log}"\n'
                    '[[ "$2" == agent_tune.launch.gpu_lists ]] && { echo "error: share GPU(s) 4" >&2; exit 2; }\n'
                    "exit 0\n")
    fake.chmod(0o755)
    data = tmp_path / "data"
    data.mkdir()
    for name in ("train.parquet", "test.parquet"):
        (data / name).write_bytes(b"")
    env = {k: v for k, v in os.environ.items() if k not in USER_VARIABLES}
    env.update(PYTHON=str(fake), DATA_DIR=str(data), WORK_DIR=str(tmp_path / "work"), TRAIN_GPUS="0,1,2,4")
    result = subprocess.run(["bash", str(REPO / "examples/run_grpo_tau2.sh")], env=env, capture_output=True,
                            text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 2 and "share GPU(s) 4" in result.stderr
    assert [c[:2] for c in _read_calls(log)] == [CHECK]
