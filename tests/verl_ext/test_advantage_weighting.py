"""Task weighting, advantage mode (verl_ext/advantage_weighting.py): Tau2-RL-Pipeline's weights worked by hand
for a small table of task histories, verl's GRPO advantages before and after, the response mask, the hooks in
verl's v1 and legacy trainers, checkpointed counts, and the typed ``mode`` option."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any, get_args

import numpy as np
import pytest

pytest.importorskip("verl")

import torch  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402
from verl.protocol import DataProto  # noqa: E402
from verl.trainer.ppo import ray_trainer  # noqa: E402

from agent_tune.launch.run_config import RunConfig  # noqa: E402
from agent_tune.options import TaskWeightingConfig, TaskWeightingMode, parse_options  # noqa: E402
from agent_tune.utils.typed_config import OptionError  # noqa: E402
from verl_ext import advantage_weighting as adv  # noqa: E402
from verl_ext import task_weighting, task_weighting_runner  # noqa: E402
from verl_ext.task_weighting import task_key  # noqa: E402

CONFIG = TaskWeightingConfig(enable=True, mode="advantage")  # the pipeline's numbers: 5 / 0.75 / 0.25 / 0.1 / 0.5


def _extra(task_id: str) -> dict:
    return {"index": int(task_id), "split": "train",
            "env": {"name": "tau2", "kwargs": {"domain": "mock", "task_id": task_id}}}


SOLVED, HARD, NEW = "1", "2", "3"
S, H, N = (task_key(_extra(t)) for t in (SOLVED, HARD, NEW))

# one step's batch: a GRPO group of 4 per task, in verl's order (a group's samples side by side)
TASKS = [SOLVED] * 4 + [HARD] * 4
ACCS = [1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0]
# By hand, min_attempts 5, counting each sample before reading its weight (the pipeline's order):
#   SOLVED, 4/4 before: 5/5 = 1 > 0.75 -> 0.1; 6/6 -> 0.1; 6/7 = 0.857 (the failure) -> 0.1; 7/8 = 0.875 -> 0.1.
#   HARD, 0/3 before: 4 attempts < 5 -> 1; 0/5 = 0 < 0.25 -> 0.5; 1/6 = 0.167 -> 0.5; 1/7 = 0.143 -> 0.5.
WEIGHTS = [0.1, 0.1, 0.1, 0.1, 1.0, 0.5, 0.5, 0.5]
# GRPO (verl: (r - mean) / (std + 1e-6), unbiased std): SOLVED rewards 1, 1, 0, 1: mean 0.75, std 0.5;
# HARD rewards 0, 0, 1, 0: mean 0.25, std 0.5
BEFORE = [0.5, 0.5, -1.5, 0.5, -0.5, -0.5, 1.5, -0.5]
AFTER = [0.05, 0.05, -0.15, 0.05, -0.5, -0.25, 0.75, -0.25]


def _weighting(tmp_path: Any = None, config: TaskWeightingConfig = CONFIG) -> adv.AdvantageWeighting:
    weighting = adv.AdvantageWeighting(config, tmp_path / "task_weighting.json" if tmp_path else None)
    weighting.load_state_dict({"attempts": {S: 4, H: 3, N: 1}, "successes": {S: 4}})
    return weighting


def test_weights_of_a_table_of_histories(tmp_path) -> None:
    weighting = _weighting(tmp_path)
    assert weighting.weigh([task_key(_extra(t)) for t in TASKS], ACCS) == pytest.approx(WEIGHTS)
    assert (weighting.stats.attempts[S], weighting.stats.successes[S]) == (8, 7)
    assert (weighting.stats.attempts[H], weighting.stats.successes[H]) == (7, 1)
    # one more attempt for NEW (2 in all) is still under min_attempts; a result of None is not counted
    assert weighting.weigh([N, N], [1.0, None]) == [1.0, 1.0] and weighting.stats.attempts[N] == 2
    state = json.loads((tmp_path / "task_weighting.json").read_text())
    assert state["mode"] == "advantage"
    assert state["tasks"][S] == {"attempts": 8, "successes": 7, "weight": 0.1}
    assert state["tasks"][H]["weight"] == 0.5 and state["tasks"][N]["weight"] == 1.0


def test_a_sample_counts_before_its_weight_is_read() -> None:
    # the pipeline's order: the 5th attempt is the sample itself, so its weight already moves; a middle rate
    # (exactly 0.75 is not above solved_threshold) gives 1
    weighting = adv.AdvantageWeighting(CONFIG)
    weighting.load_state_dict({"attempts": {S: 4}, "successes": {S: 3}})
    assert weighting.weigh([S], [1.0]) == [0.1]  # 4/5 = 0.8
    assert weighting.weigh([S, S], [0.0, 0.0]) == [1.0, 1.0]  # 4/6 = 0.67, 4/7 = 0.57
    custom = TaskWeightingConfig(enable=True, mode="advantage", min_attempts=1, solved_weight=0.2, hard_weight=0.3)
    assert adv.AdvantageWeighting(custom).weigh([H, S], [0.0, 1.0]) == [0.3, 0.2]


def _grpo_batch(response_mask: torch.Tensor) -> DataProto:
    """A batch as verl's legacy trainer holds it at the advantage step: token-level rewards (the score on
    the last response token), the response mask, ``uid`` groups, the rows' ``extra_info`` and ``acc``."""
    rows, length = response_mask.shape
    rewards = torch.zeros(rows, length)
    last = response_mask.cumsum(-1).argmax(-1)
    rewards[torch.arange(rows), last] = torch.tensor(ACCS)  # the shaped reward is acc here
    return DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": response_mask},
        non_tensors={"uid": np.array(["g1"] * 4 + ["g2"] * 4, dtype=object),
                     "extra_info": np.array([_extra(t) for t in TASKS], dtype=object),
                     "acc": np.array(ACCS)},
    )


MASK = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 0, 0, 0], [1, 0, 0, 1, 1], [1, 1, 1, 1, 1],
                     [1, 1, 1, 1, 0], [1, 0, 0, 0, 0], [1, 1, 0, 1, 0], [1, 1, 1, 0, 0]], dtype=torch.float32)


def test_verl_grpo_advantages_before_and_after() -> None:
    data = ray_trainer.compute_advantage(_grpo_batch(MASK), adv_estimator="grpo", num_repeat=4)
    before = data.batch["advantages"].clone()
    assert before[:, 0].tolist() == pytest.approx(BEFORE, abs=1e-5)
    assert torch.equal(before != 0, MASK.bool())  # verl's GRPO: the row's advantage on its response tokens
    metrics = _weighting().apply(data)
    after = data.batch["advantages"]
    assert after[:, 0].tolist() == pytest.approx(AFTER, abs=1e-5)
    expected = torch.tensor(AFTER).unsqueeze(-1) * MASK
    assert torch.allclose(after, expected, atol=1e-5)
    assert metrics == pytest.approx({"task_weighting/adv_weight_mean": sum(WEIGHTS) / 8,
                                     "task_weighting/adv_weight_min": 0.1, "task_weighting/adv_weight_max": 1.0})


def test_only_response_tokens_are_scaled() -> None:
    advantages = torch.tensor([[2.0, 2.0, 7.0], [-1.0, 5.0, -1.0]])  # 7 and 5 sit where the mask is 0
    mask = torch.tensor([[1, 1, 0], [1, 0, 1]])
    out = adv.scale_advantages(advantages, mask, [0.5, 0.1])
    assert torch.allclose(out, torch.tensor([[1.0, 1.0, 7.0], [-0.1, 5.0, -0.1]]))
    nested = adv.scale_nested(torch.nested.as_nested_tensor([advantages[0], advantages[1, :2]], layout=torch.jagged),
                              torch.nested.as_nested_tensor([mask[0], mask[1, :2]], layout=torch.jagged), [0.5, 0.1])
    assert [t.tolist() for t in nested.unbind()] == [pytest.approx([1.0, 1.0, 7.0]), pytest.approx([-0.1, 5.0])]
    with pytest.raises(ValueError, match="1 weights for 2 rows"):
        adv.scale_advantages(advantages, mask, [1.0])


def test_batch_results_read_v1_and_legacy_columns() -> None:
    extra = [_extra(SOLVED), _extra(HARD), _extra(NEW)]
    fields = [{"reward_extra_info": {"acc": 1.0}}, {"reward_extra_info": {"acc": 0}}, {}]
    assert adv.batch_results({"extra_info": extra, "extra_fields": fields}) == ([S, H, N], [1.0, 0.0, None])
    assert adv.batch_results({"extra_info": np.array(extra, dtype=object), "acc": np.array([0.0, 1.0, 1.0])}) == (
        [S, H, N], [0.0, 1.0, 1.0])
    with pytest.raises(KeyError, match="extra_info"):
        adv.batch_results({"acc": [1.0]})


class _FakeTQ:
    """TransferQueue's ``kv_batch_get`` / ``kv_batch_put`` over one TensorDict, built as verl's agent loop
    puts rows (``list_of_dict_to_tensordict``: jagged responses, non-tensor ``extra_info`` / ``extra_fields``)."""

    def __init__(self, rows: list[dict]) -> None:
        from verl.utils.tensordict_utils import list_of_dict_to_tensordict

        self.keys = [f"uid{i // 4}_{i % 4}_0" for i in range(len(rows))]
        # as verl's seqlen balancing may leave them: groups interleaved, sessions out of order
        self.order = [5, 0, 3, 6, 1, 4, 7, 2, 8][: len(rows)]
        rows = [rows[i] for i in self.order]
        self.keys = [self.keys[i] for i in self.order]
        self.tags = [{"status": "success"} for _ in rows]
        self.data = list_of_dict_to_tensordict(rows)
        self.puts: list[dict] = []

    def kv_batch_get(self, keys: list[str], partition_id: str, select_fields: list[str]) -> Any:
        assert keys == self.keys and partition_id == "train"
        return self.data.select(*select_fields)

    def kv_batch_put(self, keys: list[str], partition_id: str, fields: Any) -> None:
        assert keys == self.keys and partition_id == "train"
        self.puts.append(dict(fields.items()))
        for key, value in fields.items():
            self.data[key] = value


def _v1_rows() -> list[dict]:
    rows = []
    for i, (task, acc) in enumerate(zip(TASKS, ACCS)):
        mask = MASK[i][: int(MASK[i].nonzero().max()) + 1]  # the response, without padding
        rows.append({"advantages": torch.full_like(mask, BEFORE[i]) * mask, "response_mask": mask,
                     "extra_info": _extra(task), "extra_fields": {"reward_extra_info": {"acc": acc}}})
    # verl's synthetic padding row (upsample_batch_to_divisible_size): the first row's fields, mask 0
    rows.append({**rows[0], "advantages": torch.zeros(1), "response_mask": torch.zeros(1)})
    return rows


def test_v1_hook_scales_transferqueue_advantages_and_logs(monkeypatch, tmp_path) -> None:
    import transfer_queue
    from transfer_queue import KVBatchMeta
    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    fake = _FakeTQ(_v1_rows())
    monkeypatch.setattr(transfer_queue, "kv_batch_get", fake.kv_batch_get)
    monkeypatch.setattr(transfer_queue, "kv_batch_put", fake.kv_batch_put)
    calls = []

    def verl_compute(self: Any, batch: Any, metrics: dict) -> Any:  # stands for verl's advantage step
        calls.append(batch)
        metrics["critic/advantages/mean"] = 0.0
        return batch

    for name in ("_compute_advantage", "_save_checkpoint", "_load_checkpoint"):
        monkeypatch.setattr(PPOTrainer, name, getattr(PPOTrainer, name))  # restored after the test
    monkeypatch.setitem(adv._ORIGINALS, "v1.compute_advantage", verl_compute)
    monkeypatch.setitem(adv._ORIGINALS, "v1.save_checkpoint", lambda self: None)
    monkeypatch.setitem(adv._ORIGINALS, "v1.load_checkpoint", lambda self: None)
    weighting = _weighting()
    adv.install_v1(weighting)
    adv.install_v1(weighting)  # installing twice wraps verl's function once

    fake.tags[-1]["is_padding"] = True
    batch = KVBatchMeta(keys=fake.keys, tags=fake.tags, partition_id="train")
    metrics: dict = {}
    assert PPOTrainer._compute_advantage(SimpleNamespace(), batch, metrics) is batch and calls == [batch]
    assert metrics["critic/advantages/mean"] == 0.0
    assert metrics["task_weighting/adv_weight_mean"] == pytest.approx(sum(WEIGHTS) / 8)
    assert (metrics["task_weighting/adv_weight_min"], metrics["task_weighting/adv_weight_max"]) == (0.1, 1.0)
    put = fake.puts[0]["advantages"]
    assert put.is_nested and len(fake.puts) == 1 and put.size(0) == 9
    assert put.unbind()[8].tolist() == [0.0]  # the padding row (last): not counted (S has 8 attempts, below)
    for i, row in zip(fake.order, put.unbind()):
        if i == 8:
            continue
        mask = MASK[i][: row.shape[0]]
        assert row.tolist() == pytest.approx((AFTER[i] * mask).tolist(), abs=1e-6)

    # the counts go into the step's checkpoint folder and come back on resume
    trainer = SimpleNamespace(global_steps=3, config=OmegaConf.create(
        {"trainer": {"default_local_dir": str(tmp_path), "resume_mode": "auto", "resume_from_path": None}}))
    PPOTrainer._save_checkpoint(trainer)
    saved = json.loads((tmp_path / "global_step_3" / adv.CHECKPOINT_FILE).read_text())
    assert saved["attempts"][S] == 8 and saved["successes"][H] == 1
    restored = adv.AdvantageWeighting(CONFIG)
    adv.install_v1(restored)
    PPOTrainer._load_checkpoint(trainer)
    assert restored.stats.attempts == weighting.stats.attempts
    assert restored.stats.successes == weighting.stats.successes


def test_legacy_hook_scales_and_reports_with_the_step_metrics(monkeypatch) -> None:
    monkeypatch.setattr(ray_trainer, "compute_advantage", ray_trainer.compute_advantage)
    monkeypatch.setattr(ray_trainer, "compute_data_metrics", ray_trainer.compute_data_metrics)
    monkeypatch.setitem(adv._ORIGINALS, "legacy.compute_data_metrics", lambda **kwargs: {"critic/score/mean": 0.5})
    adv.install_legacy(_weighting())
    data = ray_trainer.compute_advantage(_grpo_batch(MASK), adv_estimator="grpo", num_repeat=4)
    assert data.batch["advantages"][:, 0].tolist() == pytest.approx(AFTER, abs=1e-5)
    metrics = ray_trainer.compute_data_metrics(batch=data, use_critic=False)
    assert metrics["critic/score/mean"] == 0.5 and metrics["task_weighting/adv_weight_min"] == 0.1
    assert "task_weighting/adv_weight_min" not in ray_trainer.compute_data_metrics(batch=data, use_critic=False)


def test_mode_option_is_typed() -> None:
    assert get_args(TaskWeightingMode) == task_weighting.MODES == ("sample", "advantage")
    assert TaskWeightingConfig().mode == "sample"
    with pytest.raises(OptionError, match="'agent_tune.task_weighting.mode'.*'weights' is not one of 'sample', "
                                          "'advantage'"):
        parse_options({"task_weighting": {"enable": True, "mode": "weights"}})


def test_install_follows_the_mode(monkeypatch) -> None:
    seen = []
    monkeypatch.setattr(task_weighting_runner, "install_sampler", lambda config: seen.append("sample"))
    monkeypatch.setattr(task_weighting_runner, "install_advantage", lambda config: seen.append("advantage"))
    for mode in ("advantage", "sample"):
        task_weighting_runner.install(OmegaConf.create({"agent_tune": {"task_weighting": {"enable": True,
                                                                                        "mode": mode}}}))
    assert seen == ["advantage", "sample"]


def test_shipped_tau2_configs() -> None:
    from agent_tune.errors import ConfigError
    from agent_tune.launch.compose import compose_config

    gpu = RunConfig.parse(compose_config("agent_tune_tau2")).options.task_weighting
    assert gpu.enable and gpu.mode == "advantage" and gpu.min_attempts == 5
    cpu = compose_config("agent_tune_tau2_cpu")
    assert RunConfig.parse(cpu).options.task_weighting.mode == "sample"
    switched = compose_config("agent_tune_tau2", ["agent_tune.task_weighting.mode=sample"])
    assert RunConfig.parse(switched).options.task_weighting.mode == "sample"
    with pytest.raises(ConfigError, match="agent_tune.task_weighting.mode"):
        RunConfig.parse(compose_config("agent_tune_tau2_cpu", ["agent_tune.task_weighting.mode=advantages"]))
    weighting = adv.from_config(compose_config("agent_tune_tau2", ["trainer.default_local_dir=/tmp/x"]))
    assert weighting.config.mode == "advantage" and str(weighting.state_path) == "/tmp/x/task_weighting.json"


@pytest.mark.parametrize("successes,weight", [(1, 0.5), (2, 1.0), (6, 1.0), (7, 0.1)])
def test_advantage_weight_at_the_thresholds(successes: int, weight: float) -> None:
    """Advantage mode: after 8 samples of one task, a rate exactly at ``hard_threshold`` (2 of 8) or
    ``solved_threshold`` (6 of 8) leaves the last sample's weight 1 (strict: below / above); one success fewer
    or more crosses the threshold."""
    accs = [1.0] * successes + [0.0] * (8 - successes)
    weights = adv.AdvantageWeighting(CONFIG).weigh([S] * 8, accs)
    assert weights[-1] == weight


def test_advantage_weight_when_both_thresholds_meet() -> None:
    config = TaskWeightingConfig(enable=True, mode="advantage", hard_threshold=0.5, solved_threshold=0.5)
    weighting = adv.AdvantageWeighting(config)
    weights = weighting.weigh([S] * 8 + [H] * 8 + [N] * 8,
                              [1.0, 0.0] * 4 + [1.0] * 5 + [0.0] * 3 + [1.0] * 3 + [0.0] * 5)
    assert (weights[7], weights[15], weights[23]) == (1.0, 0.1, 0.5)
