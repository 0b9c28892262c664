"""Conditions, timestamps and status patches, as both reconcilers use them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tidb_bench_operator.domain.api.common import RunPhase
from tidb_bench_operator.domain.api.run_status import BenchmarkRunStatus, Condition
from tidb_bench_operator.domain.status import (
    MAX_CONDITION_MESSAGE,
    condition_reason,
    parse_time,
    set_condition,
    status_patch,
)

T0 = datetime(2024, 6, 1, 2, 0, tzinfo=UTC)


def test_a_new_condition_is_added_with_its_transition_time() -> None:
    conditions: list[Condition] = []
    assert set_condition(conditions, "Waiting", "True", "ClusterBusy", "x", T0) is True
    assert conditions[0].last_transition_time == T0


def test_the_transition_time_moves_only_when_the_status_changes() -> None:
    conditions: list[Condition] = []
    set_condition(conditions, "Progressing", "True", "StepRunning", "step 1", T0)
    later = T0 + timedelta(seconds=30)
    assert set_condition(conditions, "Progressing", "True", "StepRunning", "step 2", later) is False
    assert (conditions[0].message, conditions[0].last_transition_time) == ("step 2", T0)
    assert set_condition(conditions, "Progressing", "True", "Other", "m", later) is True
    assert conditions[0].last_transition_time == T0, "a new reason is no status transition"
    set_condition(conditions, "Progressing", "False", "Unschedulable", "m", later)
    assert conditions[0].last_transition_time == later
    assert condition_reason(conditions, "Progressing") == "Unschedulable"
    assert condition_reason(conditions, "Missing") is None


def test_a_long_message_is_cut() -> None:
    conditions: list[Condition] = []
    set_condition(conditions, "Failed", "True", "StepFailed", "x" * 5000, T0)
    assert len(conditions[0].message) == MAX_CONDITION_MESSAGE


def test_kubernetes_timestamps_parse_and_nothing_is_none() -> None:
    assert parse_time("2024-06-01T02:00:00Z") == T0
    assert parse_time("") is None and parse_time(None) is None and parse_time(3) is None


def test_the_patch_holds_what_changed_and_nulls_what_went() -> None:
    old = {"phase": "Pending", "waitingFor": "ns/other", "message": "waiting", "steps": []}
    new = BenchmarkRunStatus(phase=RunPhase.PREFLIGHT, message="waiting")
    assert status_patch(old, new) == {"phase": "Preflight", "waitingFor": None, "conditions": []}
