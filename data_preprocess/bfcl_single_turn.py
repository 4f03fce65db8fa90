"""verl rows for BFCL's single-turn entries, played by the ``toolcall`` env (``test_id`` kwarg).

Each row names its entry in ``extra_info.env = {name: "toolcall", kwargs: {test_id}}`` (the env loads
the question, tools and BFCL's possible answer itself and scores with BFCL's AST checker) and carries the
question as ``prompt``, what the env's ``reset()`` shows. ``data_source`` is ``bfcl/<category>``, so
validation metrics come out per category. The splits come from
:mod:`agent_tune.envs.bfcl.single_turn_splits` (seeded, by id, within each category).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from agent_tune.envs.bfcl.single_turn import load_single_turn
from agent_tune.envs.bfcl.single_turn_splits import SINGLE_TURN_SPLITS, single_turn_split_ids

AGENT_NAME = "agent_tune"
ENV_NAME = "toolcall"


def make_row(test_id: str, index: int, split: str = "train") -> dict[str, Any]:
    """One verl row for a BFCL single-turn entry."""
    entry = load_single_turn(test_id)
    return {
        "data_source": f"bfcl/{entry.category}",
        "agent_name": AGENT_NAME,
        "prompt": [dict(m) for m in entry.messages],
        "ability": "tool_use",
        "reward_model": {"style": "rule", "ground_truth": json.dumps(entry.possible_answer)},
        "extra_info": {
            "index": index,
            "split": split,
            "test_id": test_id,
            "category": entry.category,
            "env": {"name": ENV_NAME, "kwargs": {"test_id": test_id}},
        },
    }


def build_splits(categories: Sequence[str], seed: int) -> dict[str, list[dict[str, Any]]]:
    """Rows of train/val/test over ``categories``."""
    return {split: [make_row(t, i, split) for i, t in enumerate(single_turn_split_ids(split, categories, seed))]
            for split in SINGLE_TURN_SPLITS}
