"""Shared test set-up: bfcl-eval must never write into site-packages."""

from agent_tune.envs.bfcl.data import ensure_bfcl_project_root

ensure_bfcl_project_root()
