"""The SFT dataset verl's SFT trainer loads through its custom-dataset hook (``data.custom_cls``).

verl's ``create_sft_dataset`` builds ``cls(parquet_files=..., tokenizer=..., config=data, processor=...,
max_samples=...)``; :class:`AgentTuneSFTDataset` renders every conversation of the files (``.parquet`` or
``.jsonl``: ``messages`` + ``tools``) with agent-tune's :class:`~agent_tune.rollout.ChatRenderer` and
:func:`~agent_tune.sft.rows.render_conversation`, so the ids and loss mask are exactly what the RL
rollout's trajectory holds for the same conversation. Its options live in the ``data`` section:

- ``chat_template``: template name (:mod:`agent_tune.rollout.templates`; ``tokenizer`` = the model's own),
  the same name the GRPO run's ``agent_tune.template`` uses;
- ``apply_chat_template_kwargs``: template variables (verl's key; ``agent_tune.chat_template_kwargs`` in GRPO);
- ``max_length``: longest row in tokens; longer conversations are never truncated;
- ``bad_rows``: ``skip`` (a conversation that does not render or is too long is left out, named with its
  row id and counted in the row summary, which is logged through ``logging``, never printed) or ``error``
  (any such row stops the run at start-up, the summary in the error);
- ``pad_mode``: ``no_padding`` (the only mode verl's FSDP engine trains on; without remove-padding it
  pads each micro batch itself);
- ``observation_pattern``: a regular expression; its matches inside assistant messages are raw-text env
  observations (ReTool's ``<interpreter>`` blocks: env tokens, mask 0), as the runner's trajectory of a
  raw-text episode holds them; null (the default) for chat envs;
- ``messages_key``, ``tools_key``, ``id_key``: the columns; ``input_ids_key``, ``loss_mask_key``: a row
  holding these (rejection-sampling rows, :mod:`agent_tune.eval.rft`) is trained on its own tokens as they
  are, after checks (equal lengths, ids in the vocabulary, within ``max_length``; else skipped/counted or
  fatal as ``bad_rows`` says).

All rows are rendered when the dataset is built, so bad rows are known before training starts.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Sequence

import torch
from torch.utils.data import Dataset

from agent_tune.errors import DataError
from agent_tune.rollout.chat_render import ChatRenderer
from agent_tune.sft.rows import RenderReport, SFTRow, read_sft_rows, render_rows

logger = logging.getLogger(__name__)

BAD_ROWS = ("skip", "error")
PAD_MODES = ("no_padding",)


class SFTDatasetError(DataError, ValueError):
    """SFT data that cannot be used as configured (the message names the key or the rows)."""


def _get(config: Any, key: str, default: Any = None) -> Any:
    value = config.get(key, default) if config is not None else default
    return default if value is None else value


def observation_pattern(config: Any) -> re.Pattern[str] | None:
    """``data.observation_pattern`` compiled (None when unset); a bad or empty one names the key."""
    raw = config.get("observation_pattern") if config is not None else None
    if raw is None:
        return None
    if not isinstance(raw, str) or not raw:
        raise SFTDatasetError(f"config key 'data.observation_pattern': {raw!r}, expected a regular expression or null")
    try:
        pattern = re.compile(raw)
    except re.error as exc:
        raise SFTDatasetError(f"config key 'data.observation_pattern': not a regular expression ({exc})") from exc
    if pattern.match(""):
        raise SFTDatasetError(f"config key 'data.observation_pattern': {raw!r} matches the empty string")
    return pattern


class AgentTuneSFTDataset(Dataset):
    """Conversations rendered like agent-tune's RL rollouts: ``input_ids``, ``loss_mask`` and
    ``position_ids`` per row, as verl's ``MultiTurnSFTDataset`` returns them with ``pad_mode=no_padding``."""

    def __init__(
        self,
        parquet_files: str | Sequence[str],
        tokenizer: Any,
        config: Any,
        processor: Any = None,
        max_samples: int = -1,
    ) -> None:
        files = [parquet_files] if isinstance(parquet_files, str) else [str(f) for f in parquet_files]
        self.pad_mode = str(_get(config, "pad_mode", "no_padding"))
        if self.pad_mode not in PAD_MODES:
            raise SFTDatasetError(f"config key 'data.pad_mode': {self.pad_mode!r}, expected one of {PAD_MODES}")
        self.bad_rows = str(_get(config, "bad_rows", "skip"))
        if self.bad_rows not in BAD_ROWS:
            raise SFTDatasetError(f"config key 'data.bad_rows': {self.bad_rows!r}, expected one of {BAD_ROWS}")
        self.max_length = int(_get(config, "max_length", 1024))
        kwargs = _get(config, "apply_chat_template_kwargs", {})
        kwargs = dict(kwargs.items()) if hasattr(kwargs, "items") else {}
        self.renderer = ChatRenderer(tokenizer, str(_get(config, "chat_template", "tokenizer")), kwargs)

        keys = {k: str(_get(config, f"{k}_key", k)) for k in ("messages", "tools", "id", "input_ids", "loss_mask")}
        conversations = [
            c for f in files
            for c in read_sft_rows(f, keys["messages"], keys["tools"], keys["id"], keys["input_ids"],
                                   keys["loss_mask"])
        ]
        if max_samples is not None and 0 < max_samples < len(conversations):
            conversations = conversations[:max_samples]
        self.report: RenderReport = render_rows(self.renderer, conversations, self.max_length,
                                                observation_pattern(config))
        summary = self.report.summary()
        # a library never prints: the summary is a log record (the launcher's child sends it to sft.log)
        logger.info("%s", summary)
        if self.report.skipped and self.bad_rows == "error":
            raise SFTDatasetError(f"{summary}\n(config key 'data.bad_rows' is 'error': fix or drop these rows, "
                               "or set data.bad_rows=skip)")
        if not self.report.rows:
            raise SFTDatasetError(f"no usable SFT rows in {files}")
        self.rows: list[SFTRow] = self.report.rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, item: int) -> dict[str, torch.Tensor]:
        row = self.rows[item]
        return {
            "input_ids": torch.tensor(row.input_ids, dtype=torch.long),
            "position_ids": torch.arange(len(row.input_ids), dtype=torch.long),
            "loss_mask": torch.tensor(row.loss_mask, dtype=torch.long),
        }
