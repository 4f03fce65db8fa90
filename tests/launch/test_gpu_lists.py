"""examples/run_grpo_tau2.sh's GPU lists: disjoint, the trainer's count the config's, no running Ray cluster."""

from __future__ import annotations

import pytest

pytest.importorskip("verl")
pytest.importorskip("hydra")

from agent_tune.errors import ConfigError  # noqa: E402
from agent_tune.launch.compose import compose_config  # noqa: E402
from agent_tune.launch.gpu_lists import check_gpu_lists, main, parse_gpus, running_cluster  # noqa: E402


@pytest.fixture(scope="module")
def tau2():
    return compose_config("agent_tune_tau2")


def test_parse_gpus():
    assert parse_gpus("0,1, 2,3", "TRAIN_GPUS") == [0, 1, 2, 3]
    with pytest.raises(ConfigError, match=r"TRAIN_GPUS='0,a'"):
        parse_gpus("0,a", "TRAIN_GPUS")
    with pytest.raises(ConfigError, match=r"USER_GPUS='4,4': a GPU is listed twice"):
        parse_gpus("4,4", "USER_GPUS")
    with pytest.raises(ConfigError, match="TRAIN_GPUS=''"):
        parse_gpus("", "TRAIN_GPUS")


def test_the_defaults_pass(tau2, tmp_path):
    check_gpu_lists(tau2, [0, 1, 2, 3], [4, 5], environ={}, address_file=tmp_path / "none")
    check_gpu_lists(tau2, [4, 5, 6, 7], [], environ={}, address_file=None)  # a user server elsewhere


def test_overlapping_lists_fail_naming_the_gpus(tau2):
    with pytest.raises(ConfigError, match=r"TRAIN_GPUS=0,1,2,3 and USER_GPUS=3,4 share GPU\(s\) 3"):
        check_gpu_lists(tau2, [0, 1, 2, 3], [3, 4], environ={})


def test_count_must_match_n_gpus_per_node(tau2):
    with pytest.raises(ConfigError, match=r"TRAIN_GPUS=0,1,2,3,4,5 holds 6 GPU\(s\) but config key "
                                          r"'trainer.n_gpus_per_node' is 4"):
        check_gpu_lists(tau2, [0, 1, 2, 3, 4, 5], [6, 7], environ={})
    with pytest.raises(ConfigError, match=r"'trainer.nnodes'=2"):
        check_gpu_lists(compose_config("agent_tune_tau2", ["trainer.nnodes=2"]), [0, 1, 2, 3], [4, 5], environ={})


def test_a_running_ray_cluster_is_refused(tau2, tmp_path):
    with pytest.raises(ConfigError, match=r"already running at 10.0.0.1:6379 \(RAY_ADDRESS"):
        check_gpu_lists(tau2, [0, 1, 2, 3], [4, 5], environ={"RAY_ADDRESS": "10.0.0.1:6379"})
    recorded = tmp_path / "ray_current_cluster"
    recorded.write_text("127.0.0.1:6379\n")
    with pytest.raises(ConfigError, match=r"127.0.0.1:6379 \(recorded by `ray start`"):
        check_gpu_lists(tau2, [0, 1, 2, 3], [4, 5], environ={}, address_file=recorded)
    assert running_cluster(tau2, {"RAY_ADDRESS": "local"}, tmp_path / "absent") is None


def test_main_composes_the_overrides_and_exits_2(capsys, tmp_path):
    absent = tmp_path / "absent"
    assert main(["--train-gpus", "0,1,2,3", "--user-gpus", "4,5", "--config-name", "agent_tune_tau2"],
                environ={}, address_file=absent) == 0
    # GPUS_PER_NODE=6 reaches the check as an override; options for the trainer are skipped
    argv = ["--train-gpus", "0,1,2,3", "--user-gpus", "", "--config-name", "agent_tune_tau2", "--",
            "trainer.n_gpus_per_node=6", "--verbose"]
    assert main(argv, environ={}, address_file=absent) == 2
    assert "'trainer.n_gpus_per_node' is 6" in capsys.readouterr().err
