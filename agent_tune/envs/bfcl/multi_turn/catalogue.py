"""The ``bfcl`` env's task catalogue: BFCL v4's multi-turn entries as tasks.

Splits (:mod:`agent_tune.envs.bfcl.multi_turn.splits`, drawn over scenario numbers from ``seed``): ``train``,
``train_base``, ``train_hard``, ``val``, ``test``; ``all`` is every entry of every multi-turn category (the four
scored ones and ``multi_turn_composite``). A task's id is its test id, its category the BFCL category, its reset kwargs
``{"test_id": ...}``. ``val`` and ``test`` tasks set ``eval_mode`` (validation during training scores as the
leaderboard does). ``shots=K`` gives each ``train`` / ``train_base`` task K worked examples of the call format,
first turns of other train scenarios (``train_base`` entries) played by their ground truth, drawn per task from
the seed (:mod:`agent_tune.envs.bfcl.multi_turn.shots`); validation and test tasks never get shots.
"""

from __future__ import annotations

import json

from agent_tune.envs.bfcl.multi_turn.data import ALL_CATEGORIES, category_test_ids, load_entry
from agent_tune.envs.bfcl.multi_turn.shots import choose_shots
from agent_tune.envs.bfcl.multi_turn.splits import SPLITS, split_test_ids
from agent_tune.envs.catalogue import Task

ALL_SPLIT = "all"
CATALOGUE_SPLITS = (*SPLITS, ALL_SPLIT)
EVAL_SPLITS = ("val", "test")  # their tasks play in eval mode
SHOT_SPLITS = ("train", "train_base")
SHOT_POOL_SPLIT = "train_base"  # shots come from the base entries of the train scenarios


def multi_turn_tasks(split: str, seed: int = 42, shots: int = 0) -> list[Task]:
    """The tasks of ``split`` (see the module docstring)."""
    if split == ALL_SPLIT:
        ids = [t for category in ALL_CATEGORIES for t in category_test_ids(category)]
    else:
        ids = split_test_ids(split, seed)
    pool = split_test_ids(SHOT_POOL_SPLIT, seed) if shots and split in SHOT_SPLITS else []
    tasks = []
    for test_id in ids:
        entry = load_entry(test_id)
        env_kwargs: dict = {"eval_mode": True} if split in EVAL_SPLITS else {}
        if pool:
            env_kwargs["shots"] = choose_shots(test_id, shots, pool, seed)
        tasks.append(Task(test_id, {"test_id": test_id}, entry.category, env_kwargs,
                          json.dumps(entry.ground_truth)))
    return tasks
