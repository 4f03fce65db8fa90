"""What an evaluation plays: which env runs an entry, its category, its turns, and the named suites.

Two envs run BFCL entries: ``bfcl`` (multi-turn, in ``eval_mode``: the leaderboard's rules) and
``toolcall`` (single-turn, ``test_id`` kwarg, scored by BFCL's AST checker). Test ids tell them apart
(``multi_turn_base_12`` vs ``simple_python_12`` / ``live_multiple_3-1-0``), so everything downstream
(categories, reports, result files) works from the id alone. tau2-bench entries are ``tau2/<domain>/<task_id>``,
played by the ``tau2`` env; their category is the domain (:mod:`agent_tune.eval.tau2_results`).
"""

from __future__ import annotations

from typing import Any

from agent_tune.envs.bfcl.data import ALL_CATEGORIES, SCORED_CATEGORIES, load_entry
from agent_tune.envs.bfcl.data import category_of as multi_turn_category
from agent_tune.envs.bfcl.single_turn import LIVE, NON_LIVE, SINGLE_TURN_CATEGORIES, category_of_single
from agent_tune.eval.tau2_results import is_tau2_id, parse_tau2_id

ENVS: tuple[str, ...] = ("bfcl", "toolcall", "tau2")
# Named sets of categories: --suite NAME (the env follows from the suite).
SUITES: dict[str, tuple[str, tuple[str, ...]]] = {
    "multi_turn": ("bfcl", SCORED_CATEGORIES),
    "single_turn_python": ("toolcall", SINGLE_TURN_CATEGORIES),
    "non_live": ("toolcall", NON_LIVE),
    "live": ("toolcall", LIVE),
}


def env_of_id(test_id: str) -> str:
    """``bfcl`` for a multi-turn id, ``toolcall`` for a single-turn one, ``tau2`` for ``tau2/...`` (ValueError
    otherwise)."""
    if is_tau2_id(test_id):
        parse_tau2_id(test_id)
        return "tau2"
    if test_id.startswith("multi_turn_"):
        multi_turn_category(test_id)  # raises a clear error on a bad id
        return "bfcl"
    category_of_single(test_id)
    return "toolcall"


def env_of_category(category: str) -> str:
    """The env that plays a category (full name)."""
    if category in ALL_CATEGORIES:
        return "bfcl"
    if category in SINGLE_TURN_CATEGORIES:
        return "toolcall"
    raise ValueError(f"unknown BFCL category {category!r}; known: {', '.join(ALL_CATEGORIES + SINGLE_TURN_CATEGORIES)}")


def category_of(test_id: str) -> str:
    """The BFCL category of a multi-turn or single-turn test id; a tau2 entry's domain."""
    env = env_of_id(test_id)
    if env == "tau2":
        return parse_tau2_id(test_id)[0]
    return multi_turn_category(test_id) if env == "bfcl" else category_of_single(test_id)


def num_turns(test_id: str) -> int:
    """User turns of an entry (1 for single-turn entries; tau2's conversations have no fixed count: 1)."""
    return load_entry(test_id).num_turns if env_of_id(test_id) == "bfcl" else 1


def env_kwargs(env: str, test_id: str) -> dict[str, Any]:
    """The kwargs that make ``env`` play ``test_id`` as the leaderboard scores it."""
    if env_of_id(test_id) != env:
        raise ValueError(f"{test_id} is not an entry of the {env!r} env (it is played by {env_of_id(test_id)!r})")
    if env == "tau2":
        domain, task_id = parse_tau2_id(test_id)
        return {"domain": domain, "task_id": task_id}
    return {"test_id": test_id, "eval_mode": True} if env == "bfcl" else {"test_id": test_id}
