"""``agent_tune.worker_gc``: the agent loop applies it when the first loop of a worker process is built (not per
episode); the launcher refuses a bad value naming the key."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("verl")

from omegaconf import OmegaConf  # noqa: E402
from verl.experimental.agent_loop.agent_loop import DictConfigWrap  # noqa: E402

from agent_tune.errors import ConfigError  # noqa: E402
from agent_tune.launch.compose import compose_config  # noqa: E402
from agent_tune.launch.run_config import RunConfig  # noqa: E402
from agent_tune.rollout import worker_gc  # noqa: E402
from verl_ext.agent_loop import AgentTuneLoop  # noqa: E402


@pytest.fixture
def freezes(monkeypatch) -> list[str]:
    """The collector calls made, in a fresh process (the test process's own heap is left alone)."""
    calls: list[str] = []
    fake = SimpleNamespace(collect=lambda: calls.append("collect"), freeze=lambda: calls.append("freeze"),
                           get_threshold=lambda: (700, 10, 10), set_threshold=lambda *t: calls.append(t))
    monkeypatch.setattr(worker_gc, "gc", fake)
    monkeypatch.setattr(worker_gc, "_done", False)
    return calls


def _loop(tokenizer, options: dict) -> AgentTuneLoop:
    cfg = OmegaConf.create({"actor_rollout_ref": {"rollout": {"prompt_length": 1000, "response_length": 1000}},
                            "data": {}, "agent_tune": {"template": "tokenizer", **options}})
    return AgentTuneLoop(trainer_config=DictConfigWrap(cfg), server_manager=None, tokenizer=tokenizer,
                         processor=None, dataset_cls=None, data_config=DictConfigWrap(cfg.data))


def test_first_loop_of_the_process_applies_it_once(qwen_tok, freezes) -> None:
    for _ in range(3):  # verl builds one loop per episode
        _loop(qwen_tok, {"worker_gc": {"freeze": True, "gen2_threshold": 100}})
    assert freezes == [(700, 10, 100), "collect", "freeze"]


@pytest.mark.parametrize("options", [{"worker_gc": None}, {"worker_gc": {"freeze": False}}, {}])
def test_unset_leaves_the_collector_alone(qwen_tok, freezes, options) -> None:
    _loop(qwen_tok, options)
    assert freezes == []


def test_bad_value_fails_in_the_loop_naming_the_key(qwen_tok, freezes) -> None:
    with pytest.raises(ValueError, match=r"'agent_tune\.worker_gc\.gen2_threshold'"):
        _loop(qwen_tok, {"worker_gc": {"freeze": True, "gen2_threshold": -1}})
    assert freezes == []


def test_shipped_default_and_start_up_check() -> None:
    config = compose_config("agent_tune_grpo_cpu")
    assert OmegaConf.to_container(config.agent_tune.worker_gc) == {"freeze": True, "gen2_threshold": 100}
    RunConfig.parse(config)
    RunConfig.parse(compose_config("agent_tune_grpo_cpu", ["agent_tune.worker_gc=null"]))
    for override, key in [("agent_tune.worker_gc.freeze=sometimes", "freeze"),
                          ("agent_tune.worker_gc.gen2_threshold=0", "gen2_threshold")]:
        with pytest.raises(ConfigError, match=rf"config key 'agent_tune\.worker_gc\.{key}'"):
            RunConfig.parse(compose_config("agent_tune_grpo_cpu", [override]))
