"""Task weighting (verl_ext/task_weighting.py): the pipeline's weight rule, draws that follow the agent loop's
episode records, checkpointing through torchdata's StatefulDataLoader, config validation, and how it is
plugged into verl's trainers."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("verl")

from omegaconf import OmegaConf  # noqa: E402

from verl_ext.task_weighting import (  # noqa: E402
    TaskStats,
    TaskWeightingConfig,
    TaskWeightingSampler,
    dataset_task_keys,
    install_sampler,
    make_sampler,
    task_key,
)
from verl_ext.task_weighting_runner import task_runner_class  # noqa: E402


def _extra(task_id: str, split: str = "train") -> dict:
    return {"index": int(task_id), "split": split, "env": {"name": "tau2", "kwargs": {"domain": "airline",
                                                                                        "task_id": task_id}}}


A, B, C = (task_key(_extra(t)) for t in ("0", "1", "2"))


def _records(path: Path, rows: list[tuple[str, float]], split: str = "train") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        for key, acc in rows:
            f.write(json.dumps({"global_steps": 1, "split": split, "task": key, "acc": acc, "reward": acc}) + "\n")


def test_task_key_is_the_env_spec() -> None:
    assert A == 'tau2:{"domain": "airline", "task_id": "0"}'
    assert task_key({"index": 7}) == "index:7"
    # parquet fills absent struct fields with None: they do not change the key
    assert task_key({"env": {"name": "tau2", "kwargs": {"domain": "airline", "task_id": "0", "task_set": None}}}) == A


def test_weight_rule() -> None:
    stats = TaskStats(TaskWeightingConfig(enable=True))
    for _ in range(4):
        stats.update(A, 1.0)
        stats.update(B, 0.0)
    assert stats.weight(A) == stats.weight(B) == 1.0  # 4 < min_attempts
    stats.update(A, 1.0)
    stats.update(B, 0.0)
    assert stats.weight(A) == 0.1 and stats.weight(B) == 0.5  # rate 1.0 > 0.75; rate 0.0 < 0.25
    for acc in (1.0, 0.0, 0.0, 1.0, 0.5):  # C: 2 of 5 (0.5 is no success at success_threshold 1.0)
        stats.update(C, acc)
    assert stats.rate(C) == 0.4 and stats.weight(C) == 1.0
    stats.update(A, 0.0)  # A: 5 of 6 = 0.83, still solved
    assert stats.weight(A) == 0.1
    assert stats.summary()[B] == {"attempts": 5, "successes": 0, "weight": 0.5}


def test_draws_follow_the_records(tmp_path: Path) -> None:
    records = tmp_path / "samples"
    sampler = TaskWeightingSampler([A, B, C], TaskWeightingConfig(enable=True), records, seed=3,
                                    state_path=tmp_path / "task_weighting.json")
    assert sampler.weights().tolist() == [1.0, 1.0, 1.0]  # no records yet (the folder does not exist)
    _records(records / "samples-1.jsonl", [(A, 1.0)] * 5 + [(B, 0.0)] * 5)
    _records(records / "samples-2.jsonl", [(C, 1.0)] * 9, split="val")  # validation: left out
    _records(records / "samples-2.jsonl", [("tau2:other", 0.0)] * 9)  # not a row of this dataset
    draws = Counter(sampler.draw() for _ in range(3200))
    assert sampler.weights().tolist() == [0.1, 0.5, 1.0]
    # expected shares 0.1 / 1.6, 0.5 / 1.6, 1.0 / 1.6 = 200, 1000, 2000 of 3200
    assert 120 < draws[0] < 290 and 880 < draws[1] < 1120 and 1850 < draws[2] < 2150
    state = json.loads((tmp_path / "task_weighting.json").read_text())
    assert state["tasks"][A] == {"attempts": 5, "successes": 5, "weight": 0.1} and C not in state["tasks"]
    # a half-written line waits; later records move the weights
    with (records / "samples-1.jsonl").open("a") as f:
        f.write('{"task": ')
    assert not sampler.refresh()
    with (records / "samples-1.jsonl").open("a") as f:
        f.write(json.dumps(B) + ', "acc": 1.0}\n')
    _records(records / "samples-1.jsonl", [(B, 1.0)] * 4)  # B: 5 of 10 -> 1.0
    assert sampler.refresh() and sampler.weights().tolist() == [0.1, 1.0, 1.0]


def test_draws_follow_records_built_by_the_agent_loop(tmp_path: Path) -> None:
    """The sampler counts what the agent loop's own record builder writes (validation rows left out)."""
    from agent_tune.rollout.dump import append_jsonl
    from tests.verl_ext.test_agent_loop import episode_result
    from verl_ext.agent_loop import sample_record

    def written(task_id: str, acc: float, split: str = "train") -> dict:
        kwargs = {"uid": task_id, "global_steps": 1, "extra_info": _extra(task_id, split)}
        return sample_record(episode_result(acc, reward=1.0 - acc), kwargs, {}).as_dict()  # shaped: not acc

    records = tmp_path / "samples"
    append_jsonl(records / "samples-1.jsonl", [written("0", 1.0)] * 5 + [written("1", 0.0)] * 4)
    append_jsonl(records / "samples-2.jsonl", [written("1", 0.5), written("2", 1.0, split="val")])
    sampler = TaskWeightingSampler([A, B, C], TaskWeightingConfig(enable=True), records)
    assert sampler.refresh()
    assert sampler.stats.attempts == {A: 5, B: 5} and sampler.stats.successes == {A: 5}  # acc, not the reward
    assert sampler.weights().tolist() == [0.1, 0.5, 1.0]


def test_epochs_and_checkpoint_through_stateful_dataloader(tmp_path: Path) -> None:
    from torchdata.stateful_dataloader import StatefulDataLoader

    records = tmp_path / "samples"
    _records(records / "samples-1.jsonl", [(A, 1.0)] * 5)
    keys = [A, B, C, A]

    def loader() -> StatefulDataLoader:
        sampler = TaskWeightingSampler(keys, TaskWeightingConfig(enable=True), records, seed=5)
        return StatefulDataLoader(list(range(4)), batch_size=2, sampler=sampler, drop_last=True)

    first = loader()
    it = iter(first)
    batch = next(it)
    assert len(batch) == 2 and len(first) == 2  # len(dataset) draws per epoch
    state = first.state_dict()
    rest = [next(it).tolist()]
    _records(records / "samples-1.jsonl", [(B, 0.0)] * 5)
    rest += [b.tolist() for b in iter(first)][:2]  # the next epoch
    resumed = loader()
    resumed.load_state_dict(state)
    again = iter(resumed)
    assert [next(again).tolist()] + [b.tolist() for b in iter(resumed)][:2] == rest
    assert resumed.sampler.stats.attempts == {A: 5, B: 5}


def test_config_validation() -> None:
    assert not TaskWeightingConfig.parse(None).enable
    for bad, key in (({"min_attempts": 0}, "min_attempts"), ({"solved_weight": 0}, "solved_weight"),
                     ({"hard_threshold": 0.9}, "hard_threshold"), ({"enable": "yes"}, "enable"),
                     ({"success_threshold": 2}, "success_threshold"), ({"minattempts": 3}, "unknown key")):
        with pytest.raises(ValueError, match=key):
            TaskWeightingConfig.parse(bad)


def test_launcher_checks_the_config() -> None:
    from agent_tune.errors import ConfigError
    from agent_tune.launch.compose import compose_config
    from agent_tune.launch.run_config import RunConfig

    config = compose_config("agent_tune_grpo_cpu", ["agent_tune.task_weighting.enable=true"])
    weighting = RunConfig.parse(config).options.task_weighting
    assert weighting.enable and weighting.min_attempts == 5
    config = compose_config("agent_tune_grpo_cpu", ["agent_tune.task_weighting.hard_weight=2"])
    with pytest.raises(ConfigError, match="agent_tune.task_weighting.hard_weight"):
        RunConfig.parse(config).options.task_weighting


class _Frame:
    column_names = ("prompt", "extra_info")

    def __init__(self, extras: list[dict]) -> None:
        self.extras = extras

    def __getitem__(self, column: str) -> list[dict]:
        assert column == "extra_info"
        return self.extras


class _Dataset:
    def __init__(self, extras: list[dict]) -> None:
        self.dataframe = _Frame(extras)

    def __len__(self) -> int:
        return len(self.dataframe.extras)


def test_installed_into_verls_trainers(tmp_path: Path, monkeypatch) -> None:
    import verl.trainer.main_ppo_v0 as v0
    import verl.trainer.ppo.v1.trainer_base as v1
    from verl.trainer import main_ppo

    monkeypatch.setattr(v1, "create_rl_sampler", v1.create_rl_sampler)  # restored after the test
    monkeypatch.setattr(v0, "create_rl_sampler", v0.create_rl_sampler)
    dataset = _Dataset([_extra("0"), _extra("1")])
    assert dataset_task_keys(dataset) == [A, B]
    config = OmegaConf.create({"agent_tune": {"task_weighting": {"enable": True, "min_attempts": 1},
                                              "sample_metrics_dir": str(tmp_path / "samples")},
                               "data": {"seed": 9}, "trainer": {"default_local_dir": str(tmp_path / "ckpt")}})
    assert isinstance(make_sampler(config, dataset), TaskWeightingSampler)
    install_sampler(config)
    for module in (v1, v0):
        sampler = module.create_rl_sampler(OmegaConf.create({"shuffle": True}), dataset)
        assert isinstance(sampler, TaskWeightingSampler) and sampler.config.min_attempts == 1
    runner = task_runner_class(main_ppo.TaskRunnerV1)
    cls = runner.__ray_actor_class__
    assert issubclass(cls, main_ppo.TaskRunnerV1.__ray_actor_class__) and cls.__name__ == "TaskWeightingTaskRunnerV1"


async def test_agent_loop_records_the_task(qwen_tok, tmp_path: Path) -> None:
    """The agent loop's episode record carries the row's task key, which the sampler then counts."""
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap

    from agent_tune.envs.bfcl.multi_turn.data import load_entry
    from agent_tune.envs.bfcl.multi_turn.replay import ground_truth_responses
    from agent_tune.parsing import get_tool_parser
    from tests.verl_ext.test_agent_loop import ScriptedServerManager
    from verl_ext.agent_loop import AgentTuneLoop
    from verl_ext.sample_records import SampleRecord

    entry = load_entry("multi_turn_base_5")
    cfg = OmegaConf.create({
        "actor_rollout_ref": {"rollout": {"prompt_length": 12000, "response_length": 6000}}, "data": {},
        "agent_tune": {"template": "tokenizer", "tool_parser": "hermes", "reasoning_parser": "none",
                       "env_kwargs": {}, "sample_metrics_dir": str(tmp_path)}})
    server = ScriptedServerManager(qwen_tok, ground_truth_responses(entry, get_tool_parser("hermes")), "<|im_end|>")
    loop = AgentTuneLoop(trainer_config=DictConfigWrap(cfg), server_manager=server, tokenizer=qwen_tok,
                         processor=None, dataset_cls=None, data_config=DictConfigWrap(cfg.data))
    extra = {"index": 0, "split": "train", "env": {"name": "bfcl", "kwargs": {"test_id": entry.id}}}
    await loop.run({"temperature": 1.0, "logprobs": True}, raw_prompt=[], extra_info=extra, global_steps=1)
    [record] = [json.loads(line) for p in tmp_path.glob("samples-*.jsonl") for line in p.read_text().splitlines()]
    assert record["task"] == task_key(extra) == 'bfcl:{"test_id": "multi_turn_base_5"}' and record["acc"] == 1.0
    assert SampleRecord.from_dict(record).as_dict() == record and SampleRecord.from_dict(record).extra == {}
    sampler = TaskWeightingSampler([task_key(extra)], TaskWeightingConfig(enable=True), tmp_path)
    assert sampler.refresh() and sampler.stats.attempts == {task_key(extra): 1}


# (successes of 8 attempts, weight) at the pipeline's thresholds: a rate exactly at a threshold is in between
BOUNDARY_RATES = [(1, 0.5), (2, 1.0), (6, 1.0), (7, 0.1)]  # 0.125 < 0.25 = hard, 0.75 = solved < 0.875


@pytest.mark.parametrize("successes,weight", BOUNDARY_RATES)
def test_sampling_weight_at_the_thresholds(tmp_path: Path, successes: int, weight: float) -> None:
    """Sample mode: a task whose rate equals ``hard_threshold`` (2 of 8) or ``solved_threshold`` (6 of 8) keeps
    weight 1 (the rule is strict: below / above); one success fewer or more crosses it."""
    records = tmp_path / "samples"
    _records(records / "samples-1.jsonl", [(A, 1.0)] * successes + [(A, 0.0)] * (8 - successes))
    sampler = TaskWeightingSampler([A, B], TaskWeightingConfig(enable=True), records)
    assert sampler.refresh() and sampler.stats.rate(A) == successes / 8
    assert sampler.weights().tolist() == [weight, 1.0]


def test_sampling_weight_when_both_thresholds_meet(tmp_path: Path) -> None:
    """hard_threshold == solved_threshold: only a rate on either side of it moves the weight."""
    config = TaskWeightingConfig(enable=True, hard_threshold=0.5, solved_threshold=0.5)
    records = tmp_path / "samples"
    _records(records / "samples-1.jsonl", [(A, 1.0)] * 4 + [(A, 0.0)] * 4 + [(B, 1.0)] * 5 + [(B, 0.0)] * 3
             + [(C, 1.0)] * 3 + [(C, 0.0)] * 5)
    sampler = TaskWeightingSampler([A, B, C], config, records)
    assert sampler.refresh() and sampler.weights().tolist() == [1.0, 0.1, 0.5]
