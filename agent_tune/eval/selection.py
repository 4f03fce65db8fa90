"""Which BFCL entries an evaluation runs: a split, categories, or explicit ids."""

from __future__ import annotations

from typing import Sequence

from agent_tune.envs.bfcl.data import ALL_CATEGORIES, SCORED_CATEGORIES, category_of, category_test_ids
from agent_tune.envs.bfcl.splits import split_test_ids


def select_test_ids(
    split: str | None = None,
    categories: Sequence[str] | None = None,
    ids: Sequence[str] | None = None,
    seed: int = 42,
    limit: int | None = None,
) -> list[str]:
    """Test ids to evaluate, in a stable order. With none of split/categories/ids: all four scored categories.

    ``categories`` accepts full names or short ones (``base``, ``miss_func``, ...); ``limit`` keeps the first
    N ids *per category* (so a limited run still covers every category).
    """
    chosen = sum(x is not None and len(x) > 0 for x in (categories, ids)) + (split is not None)
    if chosen > 1:
        raise ValueError("choose one of --split, --categories, --ids")
    if ids:
        out = list(dict.fromkeys(ids))
        for t in out:
            category_of(t)  # raises a clear error on a bad id
    elif split is not None:
        out = split_test_ids(split, seed)
    else:
        cats = [_full_category(c) for c in (categories or SCORED_CATEGORIES)]
        out = [t for c in cats for t in category_test_ids(c)]
    if limit is not None:
        if limit < 1:
            raise ValueError(f"--limit must be >= 1, got {limit}")
        per_cat: dict[str, int] = {}
        kept = []
        for t in out:
            c = category_of(t)
            if per_cat.get(c, 0) < limit:
                per_cat[c] = per_cat.get(c, 0) + 1
                kept.append(t)
        out = kept
    return out


def _full_category(name: str) -> str:
    full = name if name.startswith("multi_turn_") else f"multi_turn_{name}"
    if full not in ALL_CATEGORIES:
        raise ValueError(f"unknown category {name!r}; known: {', '.join(ALL_CATEGORIES)}")
    return full
