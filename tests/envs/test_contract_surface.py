"""The contract as docs/envs.md shows it is the one the code has: BaseToolEnv's public surface, and every
registered env (built-ins and the one-file examples) overriding only the hooks the docs show."""

from __future__ import annotations

from pathlib import Path

import pytest

import examples.envs.calculator  # noqa: F401  (registers "calculator")
import examples.envs.guess  # noqa: F401  (registers "guess")
from agent_tune.envs import BaseToolEnv, CallToolEnv, WholeTextEnv, env_names, get_env_class

ROOT = Path(__file__).resolve().parents[2]
# docs/envs.md's contract: what an env declares, writes or may override (plus status, set per instance)
DECLARED = {"description", "sampler_hints", "catalogue", "report", "parser", "tools", "max_steps"}
WRITTEN = {"reset", "act", "outcome", "extract_tool_calls", "is_answer", "format_tool_response", "close",
           "check_kwargs", "reference_replies"}
TEMPLATE = {"step", "astep", "batch_step", "finalize"}
# the call-by-call tier: its hooks, the schemas its calls are checked against, the bound of a step of async calls
SIMPLE_TIER = {"call_tool", "on_answer", "refuse", "call_schemas", "call_timeout"}


def test_base_surface_is_the_documented_one_and_at_most_21_names() -> None:
    public = {n for n in dir(BaseToolEnv) if not n.startswith("_")} | {"status"}
    assert public == DECLARED | WRITTEN | TEMPLATE | {"status"}
    assert len(public) <= 21
    assert {n for n in dir(CallToolEnv) if not n.startswith("_")} - public == SIMPLE_TIER
    assert {n for n in dir(WholeTextEnv) if not n.startswith("_")} == public - {"status"}  # a tier adds no name


@pytest.mark.parametrize("name", sorted(env_names()))
def test_every_env_overrides_only_documented_hooks(name: str) -> None:
    cls = get_env_class(name)
    overridden: set[str] = set()
    for klass in cls.__mro__:
        if klass in (BaseToolEnv, CallToolEnv, WholeTextEnv):
            break
        overridden |= {n for n in vars(klass) if not n.startswith("_") and hasattr(CallToolEnv, n)}
    assert overridden <= DECLARED | WRITTEN | SIMPLE_TIER, f"{name} overrides {overridden - DECLARED - WRITTEN}"


def test_docs_show_every_hook() -> None:
    text = (ROOT / "docs" / "envs.md").read_text()
    contract = text[: text.index("## Playing an episode from a script")]
    missing = [n for n in sorted(DECLARED | WRITTEN | TEMPLATE | SIMPLE_TIER | {"status"}) if f"{n}" not in contract]
    assert not missing, f"docs/envs.md does not show {missing}"


def test_no_batched_acting_hook_or_step_bridge_is_left() -> None:
    sources = [p.read_text() for p in (ROOT / "agent_tune").rglob("*.py")]
    assert not any("def batch_act" in s or "StepBatcher" in s for s in sources)
    assert not (ROOT / "agent_tune" / "rollout" / "step_batcher.py").exists()
