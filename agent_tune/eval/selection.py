"""Which BFCL entries an evaluation runs: a split, categories, a named suite, or explicit ids."""

from __future__ import annotations

from typing import Sequence

from agent_tune.envs.bfcl.data import ALL_CATEGORIES, SCORED_CATEGORIES, category_test_ids
from agent_tune.envs.bfcl.single_turn import SINGLE_TURN_CATEGORIES, single_turn_ids
from agent_tune.envs.bfcl.single_turn_splits import single_turn_split_ids
from agent_tune.envs.bfcl.splits import split_test_ids
from agent_tune.eval.targets import ENVS, SUITES, category_of, env_of_category, env_of_id

# What a run with no split, categories, suite or ids plays.
DEFAULT_CATEGORIES: dict[str, tuple[str, ...]] = {"bfcl": SCORED_CATEGORIES, "toolcall": SINGLE_TURN_CATEGORIES}


def infer_env(env: str | None = None, categories: Sequence[str] | None = None, ids: Sequence[str] | None = None,
              suite: str | None = None) -> str:
    """The env of a run: ``env`` if given, else the one the suite, categories or ids belong to (else ``bfcl``).

    Raises ValueError when they belong to different envs (one run plays one env)."""
    if env is not None and env not in ENVS:
        raise ValueError(f"--env must be one of {', '.join(ENVS)}, got {env!r}")
    found = set()
    if suite is not None:
        if suite not in SUITES:
            raise ValueError(f"unknown suite {suite!r}; known: {', '.join(SUITES)}")
        found.add(SUITES[suite][0])
    found |= {env_of_id(t) for t in ids or ()}
    found |= {_category_env(c) for c in categories or ()}
    if env is not None:
        found.add(env)
    if len(found) > 1:
        raise ValueError(f"one run plays one env; the entries asked for need {' and '.join(sorted(found))}")
    return found.pop() if found else "bfcl"


def _category_env(name: str) -> str:
    if name in SINGLE_TURN_CATEGORIES or name in ALL_CATEGORIES:
        return env_of_category(name)
    return "bfcl"  # a short multi-turn name (base, miss_func, ...), checked by _full_category


def select_test_ids(
    split: str | None = None,
    categories: Sequence[str] | None = None,
    ids: Sequence[str] | None = None,
    seed: int = 42,
    limit: int | None = None,
    env: str | None = None,
    suite: str | None = None,
) -> list[str]:
    """Test ids to evaluate, in a stable order. With none of split/categories/ids/suite: every category of
    the env (bfcl: the four scored multi-turn ones; toolcall: every Python single-turn one).

    ``categories`` accepts full names or, for multi-turn, short ones (``base``, ``miss_func``, ...);
    ``suite`` names a set of categories (:data:`~agent_tune.eval.targets.SUITES`); ``split`` may be combined
    with ``categories``/``suite`` for single-turn (the split is drawn per category); ``limit`` keeps the first
    N ids *per category* (so a limited run still covers every category).
    """
    env = infer_env(env, categories, ids, suite)
    if sum(bool(x) for x in (categories, ids, suite)) > 1:
        raise ValueError("choose one of --categories, --ids, --suite")
    if split is not None and (ids or (env == "bfcl" and (categories or suite))):
        raise ValueError("--split takes no --ids (and, for multi-turn, no --categories/--suite)")
    if ids:
        out = list(dict.fromkeys(ids))
    else:
        cats = [_full_category(c, env) for c in categories] if categories else None
        if cats is None:
            cats = list(SUITES[suite][1] if suite else DEFAULT_CATEGORIES[env])
        if split is not None:
            out = split_test_ids(split, seed) if env == "bfcl" else single_turn_split_ids(split, cats, seed)
        else:
            out = [t for c in cats for t in (category_test_ids(c) if env == "bfcl" else single_turn_ids(c))]
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


def _full_category(name: str, env: str = "bfcl") -> str:
    if env == "toolcall":
        if name not in SINGLE_TURN_CATEGORIES:
            raise ValueError(f"unknown single-turn category {name!r}; known: {', '.join(SINGLE_TURN_CATEGORIES)}")
        return name
    full = name if name.startswith("multi_turn_") else f"multi_turn_{name}"
    if full not in ALL_CATEGORIES:
        raise ValueError(f"unknown category {name!r}; known: {', '.join(ALL_CATEGORIES)}")
    return full
