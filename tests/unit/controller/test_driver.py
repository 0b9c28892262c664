"""The Driver: waiting costs nothing, the queue wakes only the run that starts, the
reconciler's hint sets the next look, TTL is one look at its deadline, a deleted holder
keeps its cluster until its pods are gone, idle schedules sleep until they are due."""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from testbed.clocks import SecondsClock
from tidb_bench_operator.controller.driver import SCHEDULE_RESYNC_SECONDS, Driver, Key
from tidb_bench_operator.domain import queue
from tidb_bench_operator.domain.api.resources import parse_run_spec
from tidb_bench_operator.domain.manifests import LABEL_SCHEDULE, RUNNER_GRACE_SECONDS
from tidb_bench_operator.domain.queue import (
    ADMITTED,
    GHOST_SLACK_SECONDS,
    QueueEntry,
    Turn,
    queue_entry,
)
from tidb_bench_operator.reconcile.run import Outcome
from tidb_bench_operator.reconcile.schedule.reconciler import ScheduleOutcome

JSON = dict[str, Any]
NOW = datetime(2024, 6, 1, 12, 0, tzinfo=UTC)
SPEC: JSON = {
    "cluster": {"name": "basic", "namespace": "tidb"},
    "credentials": {"secretRef": {"name": "db"}},
    "workloads": ["oltp_point_select"],
    "threads": [1],
}


def queue_index(runs: Iterable[JSON]) -> dict[str, list[QueueEntry]]:
    """kopf's index of the runs by queue key (handlers.run_queue)."""
    out: dict[str, list[QueueEntry]] = {}
    for obj in runs:
        found = queue_entry(obj)
        if found:
            out.setdefault(found[0], []).append(found[1])
    return out


class World:
    """The API server as the Driver sees it: stored objects, versions, pods."""

    def __init__(self) -> None:
        self.objects: dict[str, JSON] = {}
        self.rv = 100
        self.pod_list: list[JSON] = []
        self.pod_lists = 0

    def add(
        self,
        name: str,
        created: str = "2024-06-01T00:00:00Z",
        labels: JSON | None = None,
        **status: Any,
    ) -> JSON:
        self.rv += 1
        self.objects[name] = {
            "metadata": {"name": name, "namespace": "bench", "uid": f"u-{name}", "generation": 1,
                         "creationTimestamp": created, "resourceVersion": str(self.rv), "labels": labels or {}},
            "spec": copy.deepcopy(SPEC),
            "status": dict(status),
        }  # fmt: skip
        return copy.deepcopy(self.objects[name])

    def index(self) -> dict[str, list[QueueEntry]]:
        return queue_index(self.objects.values())

    # DriverKube
    def patch_benchmark_run_status(self, namespace: str, name: str, status: JSON) -> JSON:
        self.rv += 1
        obj = self.objects[name]
        obj["status"] = {**obj.get("status", {}), **status}
        obj["metadata"]["resourceVersion"] = str(self.rv)
        return copy.deepcopy(obj)

    def patch_benchmark_schedule_status(self, namespace: str, name: str, status: JSON) -> JSON:
        return {
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"},
            "status": status,
        }

    def pods(self, namespace: str | None, selector: str) -> list[JSON]:
        self.pod_lists += 1
        return list(self.pod_list)


class Runs:
    """A run reconciler that admits when told, waits when told, or answers a fixed hint."""

    def __init__(self, hint: float | None = None) -> None:
        self.calls: list[tuple[str, Turn]] = []
        self.hint = hint

    def reconcile(self, body: JSON, turn: Turn = ADMITTED) -> Outcome:
        self.calls.append((body["metadata"]["name"], turn))
        phase = (body.get("status") or {}).get("phase")
        if phase in (None, "Pending"):
            if turn.admitted:
                return Outcome(
                    status={"phase": "Preflight", "waitingFor": None}, requeue_seconds=0.2
                )
            return Outcome(status={"phase": "Pending", "waitingFor": turn.ahead}, parked=True)
        return Outcome(status={}, requeue_seconds=self.hint)

    def settled(self, body: JSON, status: JSON) -> JSON:
        return status

    def failed(self, body: JSON, exc: Exception) -> float:
        raise exc  # the Driver's own back-off takes it

    def forget(self, uid: str) -> None:
        pass

    def health(self) -> dict[str, str]:
        return {}

    def names(self) -> list[str]:
        return [n for n, _ in self.calls]


class Schedules:
    def __init__(self, next_in: float | None) -> None:
        self.next_in = next_in
        self.calls = 0

    def reconcile(self, body: JSON) -> ScheduleOutcome:
        self.calls += 1
        nxt = None if self.next_in is None else NOW + timedelta(seconds=self.next_in)
        return ScheduleOutcome(status={}, next_time=nxt)


def nightly_schedule() -> dict[str, Any]:
    """A BenchmarkSchedule event's object: what the Driver reads of it."""
    return {
        "metadata": {
            "name": "nightly",
            "namespace": "bench",
            "generation": 1,
            "resourceVersion": "5",
        }
    }


@pytest.fixture
def world() -> World:
    return World()


def make(
    world: World, runs: Runs | None = None, schedules: Schedules | None = None
) -> tuple[Driver, SecondsClock]:
    clock = SecondsClock()
    driver = Driver(
        runs=runs or Runs(), schedules=schedules or Schedules(None), kube=world,
        clock=clock, wall=lambda: NOW,
    )  # fmt: skip
    return driver, clock


def event(driver: Driver, world: World, name: str, type_: str = "MODIFIED") -> None:
    driver.run_event(type_, copy.deepcopy(world.objects[name]), world.index())


def look_due(driver: Driver) -> Iterator[tuple[Key, float | None]]:
    for key in driver.due_keys():
        yield key, asyncio.run(driver.look(key))


def settle(driver: Driver, world: World) -> list[str]:
    """Look at every due run, then feed back the resulting watch events; the names looked at."""
    looked = []
    for key, _ in list(look_due(driver)):
        looked.append(key[2])
        event(driver, world, key[2])
    return looked


def test_waiting_runs_are_looked_at_once_and_then_only_the_one_that_starts(world: World) -> None:
    runs = Runs()
    driver, _ = make(world, runs)
    world.add("busy", phase="Running")
    for i, name in enumerate(["a", "b", "c"]):
        world.add(name, created=f"2024-06-01T00:00:0{i + 1}Z")
    for name in ["busy", "a", "b", "c"]:
        event(driver, world, name, "ADDED")
    settle(driver, world)
    assert world.objects["b"]["status"]["waitingFor"] == "bench/a"
    assert world.objects["a"]["status"]["waitingFor"] == "bench/busy"
    runs.calls.clear()
    for _ in range(3):  # the holder's own progress: nobody waiting is looked at
        world.patch_benchmark_run_status("bench", "busy", {"currentStep": 1})
        event(driver, world, "busy")
        assert driver.due_keys() == []
    world.patch_benchmark_run_status("bench", "busy", {"phase": "Succeeded"})
    event(driver, world, "busy")
    assert settle(driver, world) == ["a"], "only the first waiting run is woken"
    assert runs.calls == [("a", Turn())], "and it is admitted"
    assert world.objects["a"]["status"]["phase"] == "Preflight"


def test_an_admitted_run_holds_its_cluster_before_the_watch_brings_its_new_phase(
    world: World,
) -> None:
    runs = Runs()
    driver, _ = make(world, runs)
    world.add("b")
    event(driver, world, "b", "ADDED")
    stale = world.index()  # b as the index still has it: Pending
    list(look_due(driver))  # b is admitted; its Preflight has not come back yet
    world.add("a")  # the same second, a smaller name: first in order, but b has started
    key, entry = queue_entry(world.objects["a"])  # type: ignore[misc]
    stale[key].append(entry)
    driver.run_event("ADDED", copy.deepcopy(world.objects["a"]), stale)
    list(look_due(driver))
    assert runs.calls == [("b", Turn()), ("a", Turn("bench/b"))]


def test_a_just_admitted_run_edited_before_its_new_phase_came_back_still_holds_its_cluster(
    world: World,
) -> None:
    runs = Runs()
    driver, _ = make(world, runs)
    world.add("b")
    event(driver, world, "b", "ADDED")
    list(look_due(driver))  # b is admitted on tidb/basic; its Preflight has not come back
    edited = copy.deepcopy(world.objects["b"])
    edited["spec"]["cluster"] = {"name": "other", "namespace": "tidb"}
    edited["status"] = {}  # the watch event of the edit, older than b's status patch
    edited["metadata"]["generation"] = 2
    stale = {"cluster/tidb/other": [queue_entry(edited)[1]]}  # type: ignore[index]
    driver.run_event("MODIFIED", edited, stale)
    world.add("a", created="2024-06-01T00:00:05Z")
    key, entry = queue_entry(world.objects["a"])  # type: ignore[misc]
    driver.run_event("ADDED", copy.deepcopy(world.objects["a"]), {**stale, key: [entry]})
    list(look_due(driver))
    assert runs.calls[-1] == ("a", Turn("bench/b")), "a waits: b measures tidb/basic"


def test_the_reconcilers_hint_sets_the_next_look(world: World) -> None:
    driver, clock = make(world, Runs(hint=7.0))
    world.add("r", phase="Running")
    event(driver, world, "r", "ADDED")
    [(key, delay)] = list(look_due(driver))
    assert delay == 7.0
    driver.schedule(key, delay)
    clock.now += 6.9
    assert driver.due_keys() == []
    clock.now += 0.2
    assert driver.due_keys() == [key]


class BrokenRuns(Runs):
    """A reconciler whose reconcile fails; its `failed` records the error and backs off."""

    def __init__(self) -> None:
        super().__init__()
        self.failures: list[str] = []

    def reconcile(self, body: JSON, turn: Turn = ADMITTED) -> Outcome:
        raise RuntimeError("503 Service Unavailable")

    def failed(self, body: JSON, exc: Exception) -> float:
        self.failures.append(f"{body['metadata']['name']}: {exc}")
        return 4.0


def test_a_failing_look_goes_to_the_reconcilers_failure_count_and_its_back_off(
    world: World,
) -> None:
    runs = BrokenRuns()
    driver, _ = make(world, runs)
    world.add("r", phase="Running")
    event(driver, world, "r", "ADDED")
    [(_, delay)] = list(look_due(driver))
    assert delay == 4.0, "looked at again after the reconciler's back-off, never dropped"
    assert runs.failures == ["r: 503 Service Unavailable"]


def test_a_finished_run_is_looked_at_once_when_its_ttl_expires(world: World) -> None:
    runs = Runs()
    driver, _ = make(world, runs)
    world.add("done", phase="Succeeded", finishedAt="2024-06-01T11:59:00Z")
    world.objects["done"]["spec"]["ttlSecondsAfterFinished"] = 120
    event(driver, world, "done", "ADDED")
    [(key, delay)] = list(look_due(driver))
    assert delay == 60.0 and runs.calls == [], "not before its deadline, and no tick meanwhile"
    driver.wall = lambda: NOW + timedelta(seconds=61)
    assert asyncio.run(driver.look(key)) is None
    assert runs.names() == ["done"]
    asyncio.run(driver.look(key))
    assert runs.names() == ["done"], "once"


def test_a_finished_run_without_ttl_is_never_looked_at(world: World) -> None:
    runs = Runs()
    driver, _ = make(world, runs)
    world.add("done", phase="Failed")
    event(driver, world, "done", "ADDED")
    assert [d for _, d in look_due(driver)] == [None]
    assert runs.calls == []


def delete_holder(
    driver: Driver, world: World, runs: Runs, pods: list[JSON], **status: Any
) -> None:
    """`busy` measures the cluster with `next` waiting; then `busy` is deleted, its pods listed."""
    world.add("busy", phase="Running", **status)
    world.add("next", created="2024-06-01T00:00:05Z", phase="Pending", waitingFor="bench/busy")
    event(driver, world, "busy", "ADDED")
    event(driver, world, "next", "ADDED")
    list(look_due(driver))
    runs.calls.clear()
    gone = world.objects.pop("busy")
    world.pod_list = pods
    driver.run_event("DELETED", gone, world.index())


def test_a_deleted_holder_keeps_its_cluster_until_its_pods_are_gone(world: World) -> None:
    runs = Runs()
    driver, _ = make(world, runs)
    delete_holder(driver, world, runs, [{"status": {"phase": "Running"}}])
    looked = list(look_due(driver))
    assert looked == [(("ghost", "cluster/tidb/basic", ""), 1.0)]
    assert runs.calls == [], "the next run does not start while the pods run"
    world.pod_list = [{"status": {"phase": "Succeeded"}}]
    assert asyncio.run(driver.look(("ghost", "cluster/tidb/basic", ""))) is None
    settle(driver, world)
    assert runs.calls == [("next", Turn())]


def test_an_idle_schedule_sleeps_until_it_is_due_and_its_runs_wake_it(world: World) -> None:
    schedules = Schedules(next_in=3600 * 24)
    driver, _ = make(world, schedules=schedules)
    sched = nightly_schedule()
    driver.schedule_event("ADDED", sched)
    assert [d for _, d in look_due(driver)] == [SCHEDULE_RESYNC_SECONDS]
    schedules.next_in = 10
    driver.schedule_event(
        "MODIFIED",
        {**sched, "metadata": {**sched["metadata"], "generation": 2, "resourceVersion": "6"}},
    )
    assert [d for _, d in look_due(driver)] == [10]
    driver.schedule_event(
        "MODIFIED",
        {**sched, "metadata": {**sched["metadata"], "generation": 2, "resourceVersion": "7"}},
    )
    assert driver.due_keys() == [], "its own status patch wakes nothing"
    world.add("nightly-1", labels={LABEL_SCHEDULE: "nightly"}, phase="Running")
    event(driver, world, "nightly-1", "ADDED")
    assert ("schedule", "bench", "nightly") in driver.due_keys()


def test_the_loop_runs_due_looks_and_sleeps_until_the_next_deadline(world: World) -> None:
    runs = Runs(hint=0.05)
    driver = Driver(runs=runs, schedules=Schedules(None), kube=world, wall=lambda: NOW)
    world.add("r", phase="Running")
    event(driver, world, "r", "ADDED")

    async def for_a_while() -> None:
        loop = asyncio.create_task(driver.run())
        await asyncio.sleep(0.5)
        loop.cancel()

    asyncio.run(for_a_while())
    assert 4 <= len(runs.calls) <= 12, "about one look per 0.05 s hint, not a busy loop"


def test_a_run_finished_by_the_drivers_own_patch_still_wakes_its_schedule(world: World) -> None:
    driver, _ = make(world, schedules=Schedules(next_in=3600))
    sched = nightly_schedule()
    driver.schedule_event("ADDED", sched)
    world.add("nightly-1", labels={LABEL_SCHEDULE: "nightly"}, phase="Running")
    event(driver, world, "nightly-1", "ADDED")
    list(look_due(driver))
    # The Driver's look patched it to Succeeded and kept the answer before the watch event.
    stored = world.patch_benchmark_run_status("bench", "nightly-1", {"phase": "Succeeded"})
    driver.bodies[("run", "bench", "nightly-1")] = stored
    event(driver, world, "nightly-1")
    assert ("schedule", "bench", "nightly") in driver.due_keys(), "it records and compares the run"


def test_a_deleted_holder_whose_pod_is_stuck_terminating_releases_its_cluster_at_the_bound(
    world: World,
) -> None:
    runs = Runs()
    wall = [NOW]
    driver = Driver(runs=runs, schedules=Schedules(None), kube=world, clock=SecondsClock(),
                    wall=lambda: wall[0])  # fmt: skip
    started = NOW - timedelta(seconds=5)
    # Its pod on a node that does not answer: listed, Running, forever.
    stuck = [{"metadata": {"name": "busy-s0-c0-x"}, "status": {"phase": "Running"}}]
    delete_holder(driver, world, runs, stuck,
                  steps=[{"index": 0, "phase": "Running", "startedAt": started.isoformat()}])  # fmt: skip
    spec = parse_run_spec(SPEC)  # the defaults: warm-up and duration of the step
    end = started + timedelta(seconds=spec.warmup_seconds + spec.duration_seconds)
    bound = end + timedelta(seconds=RUNNER_GRACE_SECONDS + GHOST_SLACK_SECONDS)
    assert driver.ghosts["cluster/tidb/basic"].until == bound
    assert list(look_due(driver)) == [(("ghost", "cluster/tidb/basic", ""), 1.0)]
    wall[0] = bound - timedelta(seconds=1)
    assert asyncio.run(driver.look(("ghost", "cluster/tidb/basic", ""))) == 1.0
    assert runs.calls == [], "held until the step's end plus the grace period and the slack"
    wall[0] = bound
    assert asyncio.run(driver.look(("ghost", "cluster/tidb/basic", ""))) is None
    settle(driver, world)
    assert runs.calls == [("next", Turn())], "released at the bound: the next run starts"


def test_a_ghost_without_a_running_step_is_bounded_by_its_deletion() -> None:
    body = {"spec": dict(SPEC), "status": {"phase": "Preparing"}}
    assert queue.ghost_release_at(body, NOW) == NOW + timedelta(
        seconds=RUNNER_GRACE_SECONDS + GHOST_SLACK_SECONDS
    )
    assert queue.ghost_release_at({"spec": {"threads": "x"}}, NOW) > NOW, "an invalid spec too"
