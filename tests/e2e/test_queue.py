"""The one-run-per-cluster queue end to end: 20 runs on one target, one at a time, in order;
a deleted run whose pod is stuck Terminating holds the cluster only until its bound."""

from __future__ import annotations

import itertools
import json
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


def unreachable_client(run: str, bed: RunBed) -> Any:
    """`run` (one 4-s step) created; its client pod once Running, on a node that stops
    answering (testbed/agent.py): once deleted it stays listed, Running."""
    bed.create(bed.manifest(run, threads=[1], durationSeconds=4))
    selector = f"tidbbench.io/run={run},tidbbench.io/role=step"

    def client_pod() -> Any:
        pods = bed.core.list_namespaced_pod(bed.namespace, label_selector=selector).items
        return pods[0] if pods and pods[0].status.phase == "Running" else None

    pod = wait_for(client_pod, 180, f"the client pod of {run} running")
    bed.core.patch_namespaced_pod(
        pod.metadata.name, bed.namespace,
        {"metadata": {"annotations": {FAULT_ANNOTATION: "NodeUnreachable"}}},
    )  # fmt: skip
    return pod


def test_a_deleted_run_whose_pod_is_stuck_terminating_releases_the_cluster_at_its_bound(
    bed: RunBed, controller: Any
) -> None:
    pod = unreachable_client("stuck", bed)
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


def test_a_deleted_runs_stuck_pod_still_holds_the_cluster_after_a_controller_restart(
    bed: RunBed, controller: Any
) -> None:
    """The run is deleted while the controller is down (no deletion event ever reaches
    it): the restarted controller finds the pod by its annotation, holds the cluster until
    the pod's step end (or its deletion) plus the grace period and the slack, then releases it."""
    pod = unreachable_client("held", bed)
    custom = client.CustomObjectsApi(bed.api)
    controller.kill()
    try:
        custom.delete_namespaced_custom_object(GROUP, VERSION, bed.namespace, PLURAL, "held")
        bed.create(bed.manifest("after-restart", threads=[1], durationSeconds=1))

        def deleting() -> Any:
            found = bed.core.read_namespaced_pod(pod.metadata.name, bed.namespace)
            return found if found.metadata.deletion_timestamp is not None else None

        gone = wait_for(deleting, 60, "the garbage collector deleting the stuck pod")
        holds = json.loads(gone.metadata.annotations["tidbbench.io/holds"])
        bound = max(
            gone.metadata.deletion_timestamp,
            gone.status.start_time + timedelta(seconds=holds["stepSeconds"]),
        ) + timedelta(seconds=RUNNER_GRACE_SECONDS + GHOST_SLACK_SECONDS)
        controller.start()
        waiting = bed.wait("after-restart", phases=("Pending",), timeout=30)
        assert waiting["status"].get("waitingFor") == f"{bed.namespace}/held", waiting["status"]
        after = bed.wait("after-restart", phases=("Preflight", "Preparing", "Running",
                                                  "Succeeded", "Failed"), timeout=180)  # fmt: skip
        moved = datetime.now(UTC)
        assert moved >= bound - timedelta(seconds=2), (moved, bound)
        assert (after["status"].get("startedAt") or "") != ""
        assert bed.wait("after-restart", timeout=180)["status"]["phase"] == "Succeeded"
    finally:
        if controller.proc is None or controller.proc.poll() is not None:
            controller.start()
        bed.core.delete_namespaced_pod(pod.metadata.name, bed.namespace, grace_period_seconds=0)
