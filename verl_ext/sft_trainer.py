"""verl's SFT trainer with one fix agent-tune's ``agent-tune sft`` needs: a step budget the data cannot fill.

verl's trainer runs ``trainer.total_epochs`` passes over the data and saves its final checkpoint only at step
``trainer.total_training_steps``. When that number is larger than the epochs hold (``len(dataloader) *
total_epochs``, e.g. 10 steps asked of 34 rows in batches of 4), its loop ends after the last epoch without
ever reaching that step: nothing is saved and no Hugging Face folder is exported. Here the budget is read as an
upper bound: it is lowered to the steps the epochs hold before the optimizer's schedule is built (so a decaying
rate still reaches its end), and the change is logged on the launcher's console (``SFT steps: ...``).
"""

from __future__ import annotations

import logging

from omegaconf import DictConfig, open_dict

logger = logging.getLogger(__name__)


def bounded_steps(asked: int | None, batches_per_epoch: int, epochs: int) -> int | None:
    """``trainer.total_training_steps`` as the run can fill it: ``asked`` (None: every epoch) capped at the steps
    ``epochs`` passes over ``batches_per_epoch`` batches hold."""
    if asked is None:
        return None
    return min(int(asked), batches_per_epoch * int(epochs))


def _trainer_class() -> type:
    from verl.trainer.sft_trainer import SFTTrainer

    class BoundedSFTTrainer(SFTTrainer):
        """verl's SFTTrainer whose step budget is capped at what its epochs hold (module docstring)."""

        def _init_engine(self) -> None:
            trainer = self.config.trainer
            asked = trainer.total_training_steps
            steps = bounded_steps(asked, len(self.train_dataloader), trainer.total_epochs)
            if steps != asked:
                logger.info("SFT steps: %d (trainer.total_training_steps=%s is more than %d epoch(s) of %d "
                            "batches hold; the last of them saves the checkpoint)", steps, asked,
                            trainer.total_epochs, len(self.train_dataloader))
                with open_dict(self.config):
                    trainer.total_training_steps = steps
            super()._init_engine()

    return BoundedSFTTrainer


def run_sft(config: DictConfig) -> None:
    """verl's ``run_sft`` with :class:`BoundedSFTTrainer`: the process group, fit, teardown."""
    from verl.utils.distributed import destroy_global_process_group, initialize_global_process_group

    initialize_global_process_group()
    trainer = _trainer_class()(config=config)
    trainer.fit()
    destroy_global_process_group()
