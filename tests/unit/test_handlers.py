"""The thin kopf layer: reconcilers come from kopf's memo, requeue hints are honoured, and
kopf's own status key never reaches a reconciler."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf
import pytest

from tidb_bench_operator import handlers

BODY: dict[str, Any] = {
    "metadata": {"name": "r", "namespace": "ns", "uid": "u"},
    "spec": {},
    "status": {"phase": "Preflight", "kopf": {"progress": {}}},
}


class Runs:
    """A run reconciler that records the bodies it got and answers with a fixed hint."""

    def __init__(self, hint: float | None) -> None:
        self.hint = hint
        self.bodies: list[dict[str, Any]] = []

    def tick(self, body: dict[str, Any]) -> float | None:
        """Reconcile and write the status (RunReconciler.tick): here, only recorded."""
        self.bodies.append(body)
        return self.hint


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def tick(memo: kopf.Memo) -> kopf.Patch:
    patch = kopf.Patch()
    asyncio.run(handlers.on_timer_benchmarkrun(body=BODY, patch=patch, memo=memo))
    assert patch == {}, "the reconciler writes the status, never kopf's patch"
    return patch


def memo_with(runs: Runs) -> kopf.Memo:
    memo = kopf.Memo()
    memo["controller"] = handlers.Controller(runs=runs, schedules=None, metrics=None)  # type: ignore[arg-type]
    return memo


def test_a_longer_hint_skips_the_ticks_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(handlers.time, "monotonic", clock)
    runs = Runs(hint=5.0)
    memo = memo_with(runs)
    tick(memo)
    for _ in range(4):
        clock.now += 1.0
        tick(memo)
    assert len(runs.bodies) == 1
    clock.now += 1.0
    tick(memo)
    assert len(runs.bodies) == 2, "looked at again once the hint has passed"


def test_a_short_hint_looks_every_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(handlers.time, "monotonic", clock)
    runs = Runs(hint=0.2)
    memo = memo_with(runs)
    for _ in range(3):
        tick(memo)
        clock.now += 1.0
    assert len(runs.bodies) == 3


def test_kopfs_status_key_is_taken_out_before_the_reconciler_sees_the_body() -> None:
    runs = Runs(hint=None)
    tick(memo_with(runs))
    assert runs.bodies[0]["status"] == {"phase": "Preflight"}
    assert "kopf" in BODY["status"], "the object itself is left as it is"


def test_before_startup_built_the_controller_nothing_is_reconciled() -> None:
    assert tick(kopf.Memo()) == {}
