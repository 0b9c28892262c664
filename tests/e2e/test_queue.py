"""The one-run-per-cluster queue end to end: 20 runs on one target, one at a time, in order."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from kubernetes import client

from testbed.kube import wait_for
from testbed.runs import GROUP, PLURAL, VERSION, RunBed

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
