"""verl rows for BFCL's single-turn entries, played by the ``toolcall`` env (``test_id`` kwarg).

Each row names its entry in ``extra_info.env = {name: "toolcall", kwargs: {test_id}}`` (the env loads
the question, tools and BFCL's possible answer itself and scores with BFCL's AST checker) and carries the
question as ``prompt``, what the env's ``reset()`` shows. ``data_source`` is ``bfcl/<category>``, so
validation metrics come out per category. The splits come from
:mod:`agent_tune.envs.bfcl.single_turn_splits` (seeded, by id, within each category).

``shots=K`` gives every row, in every split, K worked examples of the call format
(:mod:`agent_tune.envs.bfcl.single_turn_shots`): other entries' questions answered by their reference
calls, chosen per row from the seed among the TRAIN split's entries of the same categories (so no val/test
entry's answer is ever shown, in any row), written into the env kwargs (``shots``) and shown before the
question in ``prompt``, which is the env's ``reset()`` output with the default tool parser (Hermes).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from agent_tune.envs.bfcl.single_turn import load_single_turn
from agent_tune.envs.bfcl.single_turn_shots import choose_single_turn_shots
from agent_tune.envs.bfcl.single_turn_splits import SINGLE_TURN_SPLITS, single_turn_split_ids
from agent_tune.envs.toolcall import ToolCallToolEnv

AGENT_NAME = "agent_tune"
ENV_NAME = "toolcall"
SHOT_POOL_SPLIT = "train"  # every row's shots come from the train split's entries


def make_row(test_id: str, index: int, split: str = "train", shots: Sequence[str] = ()) -> dict[str, Any]:
    """One verl row for a BFCL single-turn entry, ``shots`` (test ids) shown before its question."""
    entry = load_single_turn(test_id)
    kwargs: dict[str, Any] = {"test_id": test_id, **({"shots": list(shots)} if shots else {})}
    prompt = ToolCallToolEnv(**kwargs).reset().messages if shots else [dict(m) for m in entry.messages]
    return {
        "data_source": f"bfcl/{entry.category}",
        "agent_name": AGENT_NAME,
        "prompt": prompt,
        "ability": "tool_use",
        "reward_model": {"style": "rule", "ground_truth": json.dumps(entry.possible_answer)},
        "extra_info": {
            "index": index,
            "split": split,
            "test_id": test_id,
            "category": entry.category,
            "env": {"name": ENV_NAME, "kwargs": kwargs},
        },
    }


def build_splits(categories: Sequence[str], seed: int, shots: int = 0) -> dict[str, list[dict[str, Any]]]:
    """Rows of train/val/test over ``categories``, each with ``shots`` worked examples from the train split."""
    pool = single_turn_split_ids(SHOT_POOL_SPLIT, categories, seed) if shots else []
    return {split: [make_row(t, i, split, choose_single_turn_shots(t, pool, shots, seed))
                    for i, t in enumerate(single_turn_split_ids(split, categories, seed))]
            for split in SINGLE_TURN_SPLITS}
