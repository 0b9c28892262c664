"""The one-run-per-cluster queue: order, turns, and which waiting runs to wake."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tidb_bench_operator.domain.queue import (
    QueueEntry,
    Turn,
    expires_at,
    holder,
    queue_entry,
    to_wake,
    turn,
    waiting,
)

SPEC = {
    "cluster": {"name": "basic", "namespace": "tidb"},
    "credentials": {"secretRef": {"name": "db"}},
    "workloads": ["oltp_point_select"],
    "threads": [1],
}


def body(
    name: str, created: str = "2024-06-01T00:00:00Z", ns: str = "bench", **status: Any
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"u-{ns}-{name}",
            "creationTimestamp": created,
        },
        "spec": SPEC,
        "status": status,
    }


def entry(
    name: str, phase: str = "Pending", created: str = "2024-06-01T00:00:00Z", **kw: Any
) -> QueueEntry:
    return QueueEntry(
        created=created, namespace="bench", name=name, uid=f"u-{name}", phase=phase, **kw
    )


def test_the_queue_key_is_the_clusters_namespace_and_name_or_the_explicit_endpoint() -> None:
    found = queue_entry(body("a"))
    assert found is not None and found[0] == "cluster/tidb/basic"
    local = body("b")
    local["spec"] = {**SPEC, "cluster": {"name": "basic"}}
    assert queue_entry(local)[0] == "cluster/bench/basic"  # type: ignore[index]
    explicit = body("c")
    explicit["spec"] = {**SPEC, "cluster": None, "target": {"host": "10.0.0.5", "port": 4000}}
    assert queue_entry(explicit)[0] == "endpoint/10.0.0.5:4000"  # type: ignore[index]


def test_a_run_whose_spec_is_invalid_is_not_queued() -> None:
    bad = body("bad")
    bad["spec"] = {**SPEC, "threads": "many"}
    assert queue_entry(bad) is None


def test_a_run_not_yet_looked_at_counts_as_pending() -> None:
    found = queue_entry(body("new"))
    assert found is not None and found[1].phase == "Pending" and found[1].waits


def test_waiting_runs_are_oldest_first_then_by_namespace_then_name() -> None:
    runs = [
        entry("b", created="2024-06-01T00:00:01Z"),
        entry("z", created="2024-06-01T00:00:00Z"),
        entry("a", created="2024-06-01T00:00:01Z"),
    ]
    assert [e.name for e in waiting(runs)] == ["z", "a", "b"]


def test_the_first_waiting_run_starts_when_the_cluster_is_free() -> None:
    runs = [entry("a"), entry("b", created="2024-06-01T00:00:05Z")]
    assert turn(runs, "u-a").admitted
    assert turn(runs, "u-b") == Turn("bench/a"), "the second waits for the run just ahead"


def test_an_active_run_holds_the_cluster_even_when_newer_or_being_deleted() -> None:
    runs = [entry("old"), entry("busy", "Running", created="2024-06-02T00:00:00Z", deleting=True)]
    assert holder(runs) == "bench/busy"
    assert turn(runs, "u-old") == Turn("bench/busy")


def test_finished_runs_and_deleted_pending_runs_take_no_place() -> None:
    runs = [
        entry("done", "Succeeded"),
        entry("going", deleting=True),
        entry("me", created="2024-06-01T00:00:09Z"),
    ]
    assert turn(runs, "u-me").admitted


def test_a_claim_holds_the_cluster_until_the_watch_shows_the_new_phase() -> None:
    # "a" was admitted a moment ago; a run created in the same second with a smaller name
    # must not start beside it.
    runs = [entry("b"), entry("a")]
    assert turn(runs, "u-a", claimed="u-b") == Turn("bench/b")
    assert turn(runs, "u-b", claimed="u-b").admitted


def test_a_deleted_holder_whose_pods_remain_holds_the_cluster() -> None:
    assert turn([entry("next")], "u-next", ghost="bench/gone") == Turn("bench/gone")


def test_only_runs_whose_place_changed_are_woken() -> None:
    runs = [
        entry("busy", "Running"),
        entry("a", waiting_for="bench/busy"),
        entry("b", created="2024-06-01T00:00:01Z", waiting_for="bench/a"),
        entry("c", created="2024-06-01T00:00:02Z", waiting_for="bench/b"),
    ]
    assert to_wake(runs) == [], "a queue that did not change wakes nobody"
    finished = [entry("busy", "Succeeded"), *runs[1:]]
    assert [e.name for e in to_wake(finished)] == ["a"], "the holder finished: the first starts"
    b_deleted = [runs[0], runs[1], runs[3]]
    assert [e.name for e in to_wake(b_deleted)] == ["c"], "c's run ahead went away"


def test_once_the_first_run_starts_the_others_still_wait_for_the_same_run() -> None:
    runs = [
        entry("a", "Preflight"),
        entry("b", created="2024-06-01T00:00:01Z", waiting_for="bench/a"),
    ]
    assert to_wake(runs) == []


@pytest.mark.parametrize(
    ("ttl", "finished", "expected"),
    [
        (60, "2024-06-01T00:00:00Z", datetime(2024, 6, 1, 0, 1, tzinfo=UTC)),
        (None, "2024-06-01T00:00:00Z", None),
        (60, None, None),
    ],
)
def test_a_finished_runs_jobs_expire_at_finish_plus_ttl(
    ttl: int | None, finished: str | None, expected: datetime | None
) -> None:
    b = body("r", phase="Succeeded", finishedAt=finished)
    b["spec"] = {**SPEC, "ttlSecondsAfterFinished": ttl}
    assert expires_at(b) == expected
