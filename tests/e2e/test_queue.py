"""The one-run-per-cluster queue end to end: 20 runs on one target, one at a time, in order;
a deleted run whose pod is stuck Terminating holds the cluster only until its bound."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kubernetes import client

from testbed.agent import FAULT_ANNOTATION
from testbed.kube import wait_for
from testbed.runs import GROUP, PLURAL, VERSION, RunBed
from tidb_bench_operator.domain.manifests import RUNNER_GRACE_SECONDS
from tidb_bench_operator.domain.queue import GHOST_SLACK_SECONDS
from tidb_bench_operator.domain.status import parse_time

pytestmark = pytest.mark.e2e

RUNS = 20


def test_twenty_queued_runs_all_succeed_one_at_a_time_in_creation_order(
    bed: RunBed, controller: Any
) -> None:
    names = [f"q-{i:02d}" for i in range(RUNS)]
    for name in names:
        bed.create(bed.manifest(name, threads=[1], durationSeconds=1))
    custom = client.CustomObjectsApi(bed.api)

    def all_done() -> list[dict[str, Any]] | None:
        items = custom.list_namespaced_custom_object(GROUP, VERSION, bed.namespace, PLURAL)["items"]
        phases = [(r.get("status") or {}).get("phase") for r in items]
        return (
            items
            if len(items) == RUNS and all(p in ("Succeeded", "Failed") for p in phases)
            else None
        )

    runs = wait_for(all_done, 20 * 30, "all queued runs finished")
    by_name = {r["metadata"]["name"]: r for r in runs}
    assert [by_name[n]["status"]["phase"] for n in names] == ["Succeeded"] * RUNS, {
        n: by_name[n]["status"].get("message") for n in names
    }

    # The controller's Events, in etcd order (resourceVersion grows even within a second):
    # each run enters Preflight exactly once, only after the run before it has Succeeded.
    events = sorted(
        (
            e
            for e in bed.core.list_namespaced_event(bed.namespace).items
            if e.involved_object.kind == "BenchmarkRun" and e.reason in ("Preflight", "Succeeded")
        ),
        key=lambda e: int(e.metadata.resource_version),
    )
    sequence = [(e.involved_object.name, e.reason) for e in events]
    expected = [(n, reason) for n in names for reason in ("Preflight", "Succeeded")]
    assert sequence == expected, sequence
    # The status agrees: no two runs' [startedAt, finishedAt] overlap.
    for before, after in itertools.pairwise(names):
        assert by_name[after]["status"]["startedAt"] >= by_name[before]["status"]["finishedAt"]


def test_a_deleted_run_whose_pod_is_stuck_terminating_releases_the_cluster_at_its_bound(
    bed: RunBed, controller: Any
) -> None:
    bed.create(bed.manifest("stuck", threads=[1], durationSeconds=4))
    selector = "tidbbench.io/run=stuck,tidbbench.io/role=step"

    def client_pod() -> Any:
        pods = bed.core.list_namespaced_pod(bed.namespace, label_selector=selector).items
        return pods[0] if pods and pods[0].status.phase == "Running" else None

    pod = wait_for(client_pod, 180, "the client pod of stuck running")
    # Its node stops answering (testbed/agent.py): once deleted it stays listed, Running.
    bed.core.patch_namespaced_pod(
        pod.metadata.name, bed.namespace,
        {"metadata": {"annotations": {FAULT_ANNOTATION: "NodeUnreachable"}}},
    )  # fmt: skip
    run = bed.get("stuck")
    started = parse_time(run["status"]["steps"][0]["startedAt"])
    custom = client.CustomObjectsApi(bed.api)
    try:
        custom.delete_namespaced_custom_object(GROUP, VERSION, bed.namespace, PLURAL, "stuck")
        deleted = datetime.now(UTC)
        bed.create(bed.manifest("after", threads=[1], durationSeconds=1))
        bound = max(deleted, started + timedelta(seconds=4)) + timedelta(
            seconds=RUNNER_GRACE_SECONDS + GHOST_SLACK_SECONDS
        )
        after = bed.wait("after", phases=("Preflight", "Preparing", "Running", "Succeeded",
                                           "Failed"), timeout=300)  # fmt: skip
        moved = datetime.now(UTC)
        # The stuck pod is still there, Terminating: the ghost gave up on it at its bound.
        still = bed.core.read_namespaced_pod(pod.metadata.name, bed.namespace)
        assert still.metadata.deletion_timestamp is not None and still.status.phase == "Running"
        assert moved >= bound - timedelta(seconds=2), (moved, bound)
        assert (after["status"].get("startedAt") or "") != ""
        assert bed.wait("after", timeout=180)["status"]["phase"] == "Succeeded"
    finally:
        bed.core.delete_namespaced_pod(pod.metadata.name, bed.namespace, grace_period_seconds=0)
