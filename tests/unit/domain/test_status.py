"""Conditions, timestamps and status patches, as both reconcilers use them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from testbed.fake_kube import json_patch, merge_patch
from tidb_bench_operator.domain.api.common import RunPhase
from tidb_bench_operator.domain.api.run_status import BenchmarkRunStatus, Condition
from tidb_bench_operator.domain.status import (
    MAX_CONDITION_MESSAGE,
    condition_reason,
    parse_time,
    set_condition,
    status_patch,
    steps_json_patch,
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


def test_the_patch_removes_what_went_inside_an_object_too() -> None:
    # A merge patch merges objects: step 1's pods sent whole stayed beside step 2's, and the
    # next look of step 2 found them "deleted" (issue 25's e2e run saw them in guardLook).
    step1 = BenchmarkRunStatus.model_validate({"phase": "Running", "guardLook": {
        "step": "s0r0a0", "at": "2024-06-01T02:00:00Z",
        "pods": {"basic-tikv-abc": "u1 n1 0 tikv", "basic-tidb-0": "u2 n2 0 tidb"}}})  # fmt: skip
    step2 = BenchmarkRunStatus.model_validate({"phase": "Running", "guardLook": {
        "step": "s1r0a0", "at": "2024-06-01T02:01:00Z",
        "pods": {"basic-tikv-def": "u3 n1 0 tikv", "basic-tidb-0": "u2 n2 0 tidb"}}})  # fmt: skip
    stored = step1.model_dump(by_alias=True, exclude_none=True, mode="json")
    patch = status_patch(stored, step2)
    assert patch == {"guardLook": {"step": "s1r0a0", "at": "2024-06-01T02:01:00Z",
                                   "pods": {"basic-tikv-abc": None,
                                            "basic-tikv-def": "u3 n1 0 tikv"}}}  # fmt: skip
    assert merge_patch(stored, patch) == step2.model_dump(by_alias=True, exclude_none=True,
                                                          mode="json")  # fmt: skip


def test_a_patch_of_changed_steps_means_what_the_merge_patch_means() -> None:
    old = {"phase": "Running", "waitingFor": "ns/a", "guardLook": {"pods": {"a/b~c": "1", "d": "2"}},
           "steps": [{"index": 0, "qps": 1.0}, {"index": 1}]}  # fmt: skip
    merge = {"waitingFor": None, "guardLook": {"pods": {"a/b~c": None, "e": "3"}},
             "steps": [{"index": 0, "qps": 1.0}, {"index": 1, "qps": 2.0}]}  # fmt: skip
    ops = steps_json_patch(old, merge)
    assert ops is not None
    assert {"op": "remove", "path": "/status/guardLook/pods/a~1b~0c"} in ops
    assert json_patch({"status": old}, ops, "")["status"] == merge_patch(old, merge)
