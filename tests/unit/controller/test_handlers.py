"""The thin kopf layer: the watch stream reaches the Driver and the queue index without
kopf's own status key, and nothing happens before startup built the controller."""

from __future__ import annotations

import asyncio
from typing import Any

import kopf

from tidb_bench_operator.controller import handlers
from tidb_bench_operator.domain.queue import QueueEntry

SPEC = {
    "cluster": {"name": "basic"},
    "credentials": {"secretRef": {"name": "db"}},
    "workloads": ["oltp_point_select"],
    "threads": [1],
}
BODY: dict[str, Any] = {
    "metadata": {
        "name": "r",
        "namespace": "ns",
        "uid": "u",
        "creationTimestamp": "2024-06-01T00:00:00Z",
    },
    "spec": SPEC,
    "status": {"phase": "Pending", "waitingFor": "ns/a", "kopf": {"progress": {}}},
}


class Driver:
    def __init__(self) -> None:
        self.events: list[tuple[str | None, dict[str, Any], Any]] = []

    def run_event(self, type_: str | None, body: dict[str, Any], index: Any) -> None:
        self.events.append((type_, body, index))


class Metrics:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def observe_run(self, body: dict[str, Any]) -> None:
        self.seen.append("observe")

    def forget_run(self, body: dict[str, Any]) -> None:
        self.seen.append("forget")


def test_the_queue_index_keys_a_run_by_its_cluster() -> None:
    assert handlers.run_queue(body=BODY) == {
        "cluster/ns/basic": QueueEntry(
            "2024-06-01T00:00:00Z", "ns", "r", "u", "Pending", waiting_for="ns/a"
        )
    }
    assert handlers.run_queue(body={**BODY, "spec": {"threads": "many"}}) == {}, (
        "invalid: not queued"
    )


def test_run_events_reach_the_metrics_and_the_driver_without_kopfs_key() -> None:
    driver, metrics = Driver(), Metrics()
    memo = kopf.Memo()
    memo["controller"] = handlers.Controller(driver=driver, metrics=metrics)  # type: ignore[arg-type]
    index = {"cluster/ns/basic": []}
    asyncio.run(
        handlers.on_event_benchmarkrun(body=BODY, memo=memo, type="MODIFIED", run_queue=index)
    )
    asyncio.run(
        handlers.on_event_benchmarkrun(body=BODY, memo=memo, type="DELETED", run_queue=index)
    )
    assert metrics.seen == ["observe", "forget"]
    assert [(t, b["status"], i) for t, b, i in driver.events] == [
        ("MODIFIED", {"phase": "Pending", "waitingFor": "ns/a"}, index),
        ("DELETED", {"phase": "Pending", "waitingFor": "ns/a"}, index),
    ]
    assert "kopf" in BODY["status"], "the object itself is left as it is"


def test_before_startup_built_the_controller_nothing_happens() -> None:
    asyncio.run(
        handlers.on_event_benchmarkrun(body=BODY, memo=kopf.Memo(), type="ADDED", run_queue={})
    )


def test_given_patterns_kopf_watches_the_cluster_and_the_handlers_keep_the_matching_namespaces(
    monkeypatch: Any,
) -> None:
    # kopf's per-namespace watchers for patterns held every new object's handlers for good
    # once a watcher stopped before its first listing (test_namespace_churn.py).
    ran: list[dict[str, Any]] = []
    monkeypatch.setattr(kopf, "run", lambda **kw: ran.append(kw))
    monkeypatch.setattr(handlers, "WATCHED", [])
    handlers.run_operator(["team-*", "!team-old"])
    assert ran[-1]["clusterwide"] is True and ran[-1]["namespaces"] == []
    driver, metrics = Driver(), Metrics()
    memo = kopf.Memo()
    memo["controller"] = handlers.Controller(driver=driver, metrics=metrics)  # type: ignore[arg-type]
    for ns in ("team-a", "team-old", "other"):
        body = {**BODY, "metadata": {**BODY["metadata"], "namespace": ns}}
        asyncio.run(
            handlers.on_event_benchmarkrun(body=body, memo=memo, type="ADDED", run_queue={})
        )
        assert (handlers.run_queue(body=body) != {}) == (ns == "team-a"), ns
    assert [b["metadata"]["namespace"] for _, b, _ in driver.events] == ["team-a"]
    assert metrics.seen == ["observe"]
    # Plain names: kopf watches each, and every object it sends is served.
    handlers.run_operator(["team-a", "team-b"])
    assert ran[-1]["clusterwide"] is False and ran[-1]["namespaces"] == ["team-a", "team-b"]
    handlers.run_operator(None)
    assert ran[-1]["clusterwide"] is True and ran[-1]["namespaces"] == []
