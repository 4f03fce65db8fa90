"""The SFT step budget as an upper bound (verl_ext/sft_trainer.py)."""

from __future__ import annotations

import pytest

from verl_ext.sft_trainer import bounded_steps


@pytest.mark.parametrize("asked, batches, epochs, steps", [
    (10, 8, 1, 8),      # 34 rows in batches of 4: the last step that exists saves
    (10, 50, 1, 10),    # room for all: unchanged
    (10, 4, 3, 10),     # several epochs hold it
    (13, 4, 3, 12),
    (None, 8, 2, None),  # no budget: verl runs every epoch
])
def test_the_budget_is_capped_at_the_steps_the_epochs_hold(asked, batches, epochs, steps):
    assert bounded_steps(asked, batches, epochs) == steps


def test_the_trainer_lowers_the_budget_before_building_the_schedule(monkeypatch):
    pytest.importorskip("verl")
    from omegaconf import OmegaConf
    from verl.trainer import sft_trainer as verl_sft

    from verl_ext import sft_trainer

    seen = {}

    def init_engine(self):  # verl's: reads the budget into the optimizer's schedule
        seen["steps"] = self.config.trainer.total_training_steps

    monkeypatch.setattr(verl_sft.SFTTrainer, "_init_engine", init_engine)
    trainer = sft_trainer._trainer_class().__new__(sft_trainer._trainer_class())
    trainer.config = OmegaConf.create({"trainer": {"total_training_steps": 10, "total_epochs": 1}})
    OmegaConf.set_struct(trainer.config, True)
    trainer.train_dataloader = list(range(8))
    trainer._init_engine()
    assert seen["steps"] == 8 and trainer.config.trainer.total_training_steps == 8
