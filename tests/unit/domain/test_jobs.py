"""Readings of Jobs and pods: finished, placed, what the runner reported, why it failed."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from tidb_bench_operator.domain.api.runner_message import DatasetReport, RunnerFailure
from tidb_bench_operator.domain.jobs import (
    job_failure_text,
    job_finished,
    node_names,
    pods_of,
    run_selector,
    runner_report,
    start_at_of,
    unschedulable_reason,
)
from tidb_bench_operator.domain.manifests import RunRef

JSON = dict[str, Any]
JOB: JSON = {"metadata": {"name": "r-prepare", "uid": "u1"}, "status": {}}


def pod(name: str = "p", uid: str = "u1", **status: Any) -> JSON:
    return {
        "metadata": {"name": name, "labels": {"controller-uid": uid}},
        "spec": {},
        "status": status,
    }


def terminated(message: str | None, code: int = 0) -> JSON:
    term: JSON = {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}
    if message is not None:
        term["message"] = message
    return pod(containerStatuses=[{"name": "runner", "state": {"terminated": term}}])


def test_the_selector_names_the_run_and_optionally_role_and_step() -> None:
    run = RunRef("sweep", "bench", "uid")
    assert run_selector(run) == "tidbbench.io/run=sweep"
    assert run_selector(run, "step", 2) == (
        "tidbbench.io/run=sweep,tidbbench.io/role=step,tidbbench.io/step=2"
    )


def test_a_job_is_finished_by_its_counts_or_its_conditions() -> None:
    assert not job_finished(JOB)
    assert job_finished({"status": {"succeeded": 1}})
    assert job_finished({"status": {"conditions": [{"type": "Failed", "status": "True"}]}})
    assert not job_finished({"status": {"conditions": [{"type": "Failed", "status": "False"}]}})


def test_the_schedulers_reason_is_given_for_a_pending_unbound_pod_only() -> None:
    waiting = pod(
        "p1",
        phase="Pending",
        conditions=[{"type": "PodScheduled", "status": "False", "message": "0/3 nodes"}],
    )
    assert unschedulable_reason([waiting]) == "pod p1: 0/3 nodes"
    bound = {**waiting, "spec": {"nodeName": "n1"}}
    assert unschedulable_reason([bound]) == ""


def test_only_the_jobs_own_pods_count() -> None:
    assert [p["metadata"]["name"] for p in pods_of(JOB, [pod("a"), pod("b", uid="u2")])] == ["a"]


def test_the_runner_report_comes_from_the_termination_message() -> None:
    doc = {"v": 1, "ok": True, "action": "reused", "tables": 2}
    assert runner_report(JOB, [terminated(json.dumps(doc))], DatasetReport) == DatasetReport(
        action="reused", tables=2
    )
    crashed = runner_report(JOB, [terminated("panic: boom", 2)], DatasetReport)
    assert isinstance(crashed, RunnerFailure) and crashed.message == "exit 2: panic: boom"
    assert runner_report(JOB, [terminated(None, 137)], DatasetReport) is None


def test_a_failure_without_a_report_is_explained_by_the_job_or_the_exit_code() -> None:
    failed = {
        **JOB,
        "status": {
            "conditions": [
                {"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": "m"}
            ]
        },
    }
    assert job_failure_text(failed, []) == "DeadlineExceeded: m"
    assert job_failure_text(JOB, [terminated(None, 137)]) == "runner exited 137 (Error)"
    assert job_failure_text(JOB, []) == "the Job failed without a result"


def test_the_agreed_start_is_read_back_from_a_jobs_args() -> None:
    job = {
        "spec": {
            "template": {
                "spec": {"containers": [{"args": ["step", "--start-at=2024-06-01T02:00:08+00:00"]}]}
            }
        }
    }
    assert start_at_of([job]) == datetime(2024, 6, 1, 2, 0, 8, tzinfo=UTC)
    assert start_at_of([]) is None


def test_nodes_are_listed_once_each() -> None:
    pods = [{"spec": {"nodeName": "b"}}, {"spec": {"nodeName": "a"}}, {"spec": {"nodeName": "b"}}]
    assert node_names([*pods, {"spec": {}}]) == ["a", "b"]
