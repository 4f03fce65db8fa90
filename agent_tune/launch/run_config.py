"""The typed run description every launcher passes on: :class:`RunConfig`.

A launcher composes the Hydra config, then parses it once here: ``agent-tune``'s own block becomes
:class:`~agent_tune.options.AgentTuneOptions` (an unknown key or a bad value fails at once, naming the key),
and the few verl keys every command reads become properties. The composed config stays beside it, since it is
what verl reads; a change a launcher makes to agent-tune's options goes through :meth:`RunConfig.set_options`,
which checks it as parsing does and writes it back to that config, so the training child and verl's workers
read the same values.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict
from pydantic import BaseModel

from agent_tune.options import PREFIX, AgentTuneOptions, options_of


@dataclass(frozen=True)
class RunConfig:
    """A composed config (``config``, as verl reads it) and its ``agent_tune`` block, parsed (``options``)."""

    config: DictConfig
    options: AgentTuneOptions

    @classmethod
    def parse(cls, config: DictConfig) -> RunConfig:
        """Parse ``config``'s ``agent_tune`` block; :class:`~agent_tune.utils.typed_config.OptionError` (a
        ``ConfigError``) names the key."""
        return cls(config, options_of(config))

    def set_options(self, **changes: Any) -> RunConfig:
        """This run with ``changes`` to its options (checked as parsing checks them), also written to ``config``
        (``agent_tune.<key>``)."""
        options = AgentTuneOptions(**{**dict(self.options), **changes})
        with open_dict(self.config):
            for key, value in changes.items():
                plain = value.model_dump() if isinstance(value, BaseModel) else value
                OmegaConf.update(self.config, f"{PREFIX}.{key}", plain, force_add=True, merge=False)
        return replace(self, options=options)

    # --- verl's keys every command reads (verl's own config: read where verl's keys are read) -----------------
    @property
    def device(self) -> str:
        """``trainer.device`` (``cuda`` when absent, verl's default)."""
        return str(OmegaConf.select(self.config, "trainer.device", default="cuda"))

    @property
    def on_cpu(self) -> bool:
        return self.device == "cpu"

    @property
    def run_dir(self) -> Path:
        """The run folder, ``trainer.default_local_dir``, as an absolute path."""
        return Path(str(OmegaConf.select(self.config, "trainer.default_local_dir"))).expanduser().resolve()

    @property
    def total_steps(self) -> int | None:
        """``trainer.total_training_steps`` (``None``: verl's epochs decide)."""
        return OmegaConf.select(self.config, "trainer.total_training_steps", default=None)
