"""BFCL v4 multi-turn: data access, backends, the scoring rule and the environment."""

from agent_tune.envs.bfcl.data import ALL_CATEGORIES, SCORED_CATEGORIES, BFCLEntry, category_test_ids, load_entry

__all__ = ["ALL_CATEGORIES", "SCORED_CATEGORIES", "BFCLEntry", "category_test_ids", "load_entry"]
