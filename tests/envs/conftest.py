"""Environment tests leave the registry as they found it."""

from __future__ import annotations

import pytest

from agent_tune.envs import registry


@pytest.fixture(autouse=True)
def clean_registry():
    """Unregister every name a test added and put back every entry it replaced or removed."""
    before = dict(registry._registered)
    loaded = registry._entry_points_loaded
    yield
    for name in set(registry._registered) - set(before):
        registry.unregister_env(name)
    registry._registered.update(before)
    registry._entry_points_loaded = loaded
