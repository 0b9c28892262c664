"""What a queue of waiting runs costs the API server, counted call by call.

The real RunReconciler behind the real Driver, against the fake Kubernetes of the unit
tests with a counter on every call: N runs queue behind a measuring one. Arrival reads each
run's inputs once; after that, however often the measuring run's status changes, nobody
waiting is looked at; when it finishes, only the next run is, and what that costs does not
grow with N.
"""

from __future__ import annotations

import asyncio
import copy
from collections import Counter
from typing import Any

import pytest

from testbed.fake_kube import FakeClock, FakeKube
from tidb_bench_operator.controller.driver import Driver
from tidb_bench_operator.domain.queue import QueueEntry, queue_entry
from tidb_bench_operator.domain.trust.reach import Reach
from tidb_bench_operator.reconcile.run import RunReconciler

JSON = dict[str, Any]
SPEC: JSON = {
    "cluster": {"name": "basic", "namespace": "tidb"},
    "credentials": {"secretRef": {"name": "db"}},
    "dataset": {"tables": 1, "tableSize": 1000},
    "workloads": ["oltp_point_select"],
    "threads": [1],
    "durationSeconds": 1,
    "reportIntervalSeconds": 1,
    "placement": {"nodeSelector": {"tidbbench.io/bench-node": "true"}},
    "preflight": {"policy": "Off"},
}


class Counted:
    """Counts every method call made on the wrapped object."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return attr(*args, **kwargs)

        return counted


class Store:
    """The stored runs (what the API server holds) and the status patches the Driver sends."""

    def __init__(self) -> None:
        self.runs: dict[str, JSON] = {}
        self.rv = 1

    def add(self, name: str, created: str, **status: Any) -> None:
        self.rv += 1
        self.runs[name] = {
            "metadata": {"name": name, "namespace": "bench", "uid": f"u-{name}", "generation": 1,
                         "creationTimestamp": created, "resourceVersion": str(self.rv)},
            "spec": copy.deepcopy(SPEC),
            "status": dict(status),
        }  # fmt: skip

    def index(self) -> dict[str, list[QueueEntry]]:
        out: dict[str, list[QueueEntry]] = {}
        for body in self.runs.values():
            found = queue_entry(body)
            if found:
                out.setdefault(found[0], []).append(found[1])
        return out

    def patch_benchmark_run_status(self, namespace: str, name: str, status: JSON) -> JSON:
        self.rv += 1
        run = self.runs[name]
        merged = {**run.get("status", {}), **status}
        run["status"] = {k: v for k, v in merged.items() if v is not None}
        run["metadata"]["resourceVersion"] = str(self.rv)
        return copy.deepcopy(run)

    def patch_benchmark_schedule_status(self, namespace: str, name: str, status: JSON) -> JSON:
        raise AssertionError("no schedules here")

    def pods(self, namespace: str | None, selector: str) -> list[JSON]:
        return []


def world(n: int) -> tuple[Driver, Store, Counted, Counted]:
    fake = FakeKube(FakeClock())
    fake.add_secret("bench", "db", {"user": "u", "password": "p"})
    fake.add_node("bench-1", {"tidbbench.io/bench-node": "true"})
    fake.add_tidb_cluster({"metadata": {"namespace": "tidb", "name": "basic"}, "spec": {}})
    kube = Counted(fake)
    store = Store()
    api = Counted(store)
    runs = RunReconciler(kube, image="t:1", reach=Reach(cluster_namespaces=frozenset({"tidb"})))
    driver = Driver(runs=runs, schedules=None, kube=api)  # type: ignore[arg-type]
    store.add("holder", "2024-06-01T00:00:00Z", phase="Running")
    for i in range(n):
        store.add(f"q-{i:03d}", f"2024-06-01T01:{i // 60:02d}:{i % 60:02d}Z")
    return driver, store, kube, api


def deliver(driver: Driver, store: Store, names: list[str], type_: str = "MODIFIED") -> None:
    for name in names:
        driver.run_event(type_, copy.deepcopy(store.runs[name]), store.index())


def drain(driver: Driver, store: Store) -> list[str]:
    """Look at whatever is due (the holder is someone else's concern here), feed back events."""
    looked: list[str] = []
    while due := [k for k in driver.due_keys() if k[2] != "holder"]:
        for key in due:
            asyncio.run(driver.look(key))
            looked.append(key[2])
            deliver(driver, store, [key[2]])
    return looked


@pytest.mark.parametrize("n", [20, 200])
def test_waiting_costs_nothing_and_each_completion_costs_the_same_whatever_the_queue(
    n: int,
) -> None:
    driver, store, kube, api = world(n)
    names = [f"q-{i:03d}" for i in range(n)]
    deliver(driver, store, ["holder", *names], "ADDED")
    assert set(drain(driver, store)) == set(names)
    assert kube.calls["secret_keys"] == n and kube.calls["nodes"] == n, "inputs read once each"
    assert store.runs["q-001"]["status"]["waitingFor"] == "bench/q-000"

    kube.calls.clear()
    api.calls.clear()
    for step in range(10):  # the holder measures: its status changes, the queue does not
        store.patch_benchmark_run_status("bench", "holder", {"currentStep": step})
        deliver(driver, store, ["holder"])
        assert drain(driver, store) == []
    assert sum(kube.calls.values()) == 0 and sum(api.calls.values()) == 0, "no call at all"

    costs = []
    for i in range(3):  # three completions: only the next run is looked at, at the same cost
        kube.calls.clear()
        holder = "holder" if i == 0 else f"q-{i - 1:03d}"
        store.patch_benchmark_run_status("bench", holder, {"phase": "Succeeded"})
        deliver(driver, store, [holder])
        assert set(drain(driver, store)) == {f"q-{i:03d}"}
        assert store.runs[f"q-{i:03d}"]["status"]["phase"] == "Preparing"
        costs.append(sum(kube.calls.values()))
    assert len(set(costs)) == 1 and costs[0] <= 12, costs
