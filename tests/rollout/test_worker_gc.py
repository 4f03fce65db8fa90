"""The worker's gc settings: applied once per process (threshold, then a collection and a freeze, as set);
bad values fail naming their config key."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agent_tune.rollout import worker_gc


class FakeGC:
    """Records the collector calls ``apply_worker_gc`` makes (the test process's own collector is left alone)."""

    def __init__(self) -> None:
        self.calls: list[object] = []

    def collect(self) -> int:
        self.calls.append("collect")
        return 0

    def freeze(self) -> None:
        self.calls.append("freeze")

    def get_threshold(self) -> tuple[int, int, int]:
        return (700, 10, 10)

    def set_threshold(self, *thresholds: int) -> None:
        self.calls.append(thresholds)


@pytest.fixture
def fake_gc(monkeypatch) -> FakeGC:
    fake = FakeGC()
    monkeypatch.setattr(worker_gc, "gc", fake)
    monkeypatch.setattr(worker_gc, "_done", False)  # a fresh process
    return fake


def test_applied_once_per_process(fake_gc) -> None:
    settings = {"freeze": True, "gen2_threshold": 100}
    assert worker_gc.apply_worker_gc(settings) is True
    assert fake_gc.calls == [(700, 10, 100), "collect", "freeze"]  # garbage collected before the heap is frozen
    assert worker_gc.apply_worker_gc(settings) is False
    assert worker_gc.apply_worker_gc({"freeze": True}) is False
    assert fake_gc.calls == [(700, 10, 100), "collect", "freeze"]


@pytest.mark.parametrize(("settings", "calls"), [
    (None, []),
    ({}, []),
    ({"freeze": False, "gen2_threshold": None}, []),
    ({"freeze": True}, ["collect", "freeze"]),
    ({"gen2_threshold": 50}, [(700, 10, 50)]),
])
def test_only_what_is_set(fake_gc, settings, calls) -> None:
    worker_gc.apply_worker_gc(settings)
    assert fake_gc.calls == calls


@pytest.mark.parametrize(("settings", "key"), [
    ("freeze", "agent_tune.worker_gc"),
    ({"freeze": "yes"}, "agent_tune.worker_gc.freeze"),
    ({"gen2_threshold": 0}, "agent_tune.worker_gc.gen2_threshold"),
    ({"gen2_threshold": "100"}, "agent_tune.worker_gc.gen2_threshold"),
    ({"gen2_threshold": True}, "agent_tune.worker_gc.gen2_threshold"),
    ({"frozen": True}, "agent_tune.worker_gc.frozen"),
])
def test_bad_value_fails_naming_the_key(fake_gc, settings, key) -> None:
    with pytest.raises(ValueError, match=f"config key '{key}'"):
        worker_gc.apply_worker_gc(settings)
    assert fake_gc.calls == []
    assert worker_gc.apply_worker_gc({"freeze": True}) is True  # a refused value applied nothing


def test_real_collector_in_a_fresh_process() -> None:
    code = ("import gc; from agent_tune.rollout.worker_gc import apply_worker_gc as f; "
            "assert gc.get_freeze_count() == 0; s = {'freeze': True, 'gen2_threshold': 100}; first = f(s); "
            "n = gc.get_freeze_count(); second = f(s); "
            "print(first, second, n > 0, gc.get_freeze_count() == n, gc.get_threshold()[2])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "False", "True", "True", "100"]
