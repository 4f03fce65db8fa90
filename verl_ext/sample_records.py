"""Reading the agent loop's per-episode records while a run appends to them.

The agent loop (:mod:`verl_ext.agent_loop`) appends one JSON record per episode, with the trainer step that
trains it (``global_steps``), the split of its row (``split``: ``val`` / ``test`` for validation rows) and
its metrics, to ``<agent_tune.sample_metrics_dir>/samples-<pid>.jsonl`` (one file per rollout worker
process). Two readers follow those files as they grow: the task curriculum's sampler, inside verl's trainer
(:mod:`verl_ext.task_curriculum`), and the per-step metrics writer of the training child
(:mod:`agent_tune.launch.step_metrics`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

# the ``split`` of validation rows' records: not training episodes
EVAL_SPLITS = ("val", "test")


def read_appended(samples_dir: Path, offsets: dict[str, int]) -> list[dict[str, Any]]:
    """The complete records appended to ``samples_dir/samples-*.jsonl`` since ``offsets`` (bytes read per
    file name, updated in place); a line still being written waits for the next call."""
    out: list[dict[str, Any]] = []
    for path in sorted(Path(samples_dir).glob("samples-*.jsonl")):
        start = offsets.get(path.name, 0)
        with path.open("rb") as f:
            f.seek(start)
            chunk = f.read()
        end = chunk.rfind(b"\n") + 1
        offsets[path.name] = start + end
        for line in chunk[:end].splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict):
                out.append(rec)
    return out
