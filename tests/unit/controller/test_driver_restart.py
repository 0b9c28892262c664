"""Ghosts survive a controller restart: a new Driver on the same API finds the pods of a
deleted run from their annotation and holds its cluster until they are gone or the bound."""

from __future__ import annotations

import asyncio
import copy
import logging
from datetime import timedelta
from typing import Any

import pytest

from testbed.fake_kube import FakeClock, FakeKube
from tidb_bench_operator.controller.driver import Driver
from tidb_bench_operator.controller.ghosts import watches
from tidb_bench_operator.domain.api.resources import parse_run_spec
from tidb_bench_operator.domain.manifests import (
    RUNNER_GRACE_SECONDS,
    START_LEAD_SECONDS,
    RunRef,
    build_runner_job,
    compute_endpoint,
    step_job_name,
)
from tidb_bench_operator.domain.queue import GHOST_SLACK_SECONDS, QueueEntry, Turn
from tidb_bench_operator.errors import KubeForbidden
from unit.controller.test_driver import SPEC, Runs, Schedules, queue_index

JSON = dict[str, Any]
QKEY = "cluster/tidb/basic"
#: The step Job's activeDeadlineSeconds (its pods' bound is their step's end, sooner).
DEADLINE = 668


class Api(FakeKube):
    """FakeKube with what the Driver also writes (schedules' status) and kopf's index."""

    def patch_benchmark_schedule_status(self, namespace: str, name: str, status: JSON) -> JSON:
        raise AssertionError("no schedule here")

    def index(self) -> dict[str, list[QueueEntry]]:
        return queue_index(self.runs.values())

    def run(self, name: str, created: str, **status: Any) -> JSON:
        body = {
            "metadata": {"name": name, "namespace": "bench", "uid": f"u-{name}", "generation": 1,
                         "creationTimestamp": created, "resourceVersion": "1"},
            "spec": copy.deepcopy(SPEC), "status": dict(status),
        }  # fmt: skip
        self.add_run(body)
        return body


def bed() -> tuple[Api, FakeClock]:
    """`busy` measures tidb/basic with its step's pod running, `next` waits; then `busy` is
    deleted (its pod is still listed: being deleted, or on a node that does not answer)."""
    clock = FakeClock()
    api = Api(clock)
    busy = api.run("busy", "2024-06-01T00:00:00Z", phase="Running")
    api.run("next", "2024-06-01T00:00:05Z")  # created while the controller was down
    spec = parse_run_spec(SPEC)
    name = step_job_name("busy", 0, 0)
    api.create_job(build_runner_job(
        RunRef("busy", "bench", busy["metadata"]["uid"]), spec, compute_endpoint(spec, "bench"),
        name=name, role="step", runner_args=["step"], queue=QKEY, step=0, client=0,
        active_deadline_seconds=DEADLINE,
    ))  # fmt: skip
    api.schedule("bench", name)
    api.runs.pop(("bench", "busy"))
    return api, clock


def restarted(api: Api, clock: FakeClock, runs: Runs) -> Driver:
    """A new controller: a new Driver, and the watch stream's initial listing."""
    driver = Driver(runs=runs, schedules=Schedules(None), kube=api, wall=clock)
    for run in api.runs.values():
        driver.run_event(None, copy.deepcopy(run), api.index())
    return driver


def loop_for(driver: Driver, seconds: float) -> None:
    async def for_a_while() -> None:
        task = asyncio.create_task(driver.run())
        await asyncio.sleep(seconds)
        task.cancel()

    asyncio.run(for_a_while())


def test_a_restarted_controller_admits_no_run_while_a_deleted_runs_pod_still_runs() -> None:
    api, clock = bed()
    runs = Runs()
    driver = restarted(api, clock, runs)
    loop_for(driver, 0.3)
    assert runs.calls == [("next", Turn("bench/busy"))], "it waits for the deleted run"
    assert api.runs[("bench", "next")]["status"]["waitingFor"] == "bench/busy"
    # The pod goes: the cluster is released, the next run starts.
    api.pod_store.clear()
    driver = restarted(api, clock, runs)
    loop_for(driver, 0.3)
    assert ("next", Turn()) in runs.calls
    assert api.runs[("bench", "next")]["status"]["phase"] == "Preflight"


def test_the_recovered_ghost_is_released_at_its_pods_known_end_plus_the_grace_period() -> None:
    api, clock = bed()
    created = clock()
    spec = parse_run_spec(SPEC)  # the step's lead, warm-up and duration from its start
    step = START_LEAD_SECONDS + spec.warmup_seconds + spec.duration_seconds
    bound = created + timedelta(seconds=step + RUNNER_GRACE_SECONDS + GHOST_SLACK_SECONDS)
    runs = Runs()
    driver = restarted(api, clock, runs)
    asyncio.run(driver.recover())
    ghost = driver.ghosts[QKEY]
    assert (ghost.ref, ghost.until) == ("bench/busy", bound)
    assert driver.turn(QKEY, "u-next") == Turn("bench/busy")
    clock.advance((bound - created).total_seconds() - 1)
    assert asyncio.run(driver.look(("ghost", QKEY, ""))) == 1.0, "still held a second before"
    clock.advance(1)
    assert asyncio.run(driver.look(("ghost", QKEY, ""))) is None, "released at the bound"
    assert driver.turn(QKEY, "u-next") == Turn()


def test_a_pod_of_a_live_run_or_a_stopped_pod_is_no_ghost() -> None:
    api, clock = bed()
    [pod] = api.pod_store.values()
    api.run("busy", "2024-06-01T00:00:00Z", phase="Running")  # the run is there after all
    driver = restarted(api, clock, Runs())
    asyncio.run(driver.recover())
    assert driver.ghosts == {}
    api.runs.pop(("bench", "busy"))
    pod["status"]["phase"] = "Succeeded"
    asyncio.run(driver.recover())
    assert driver.ghosts == {}


class RoleOnly(Api):
    """The namespaced install: rights in a Role of `bench`, none to list pods cluster-wide."""

    def pods(self, namespace: str | None, selector: str) -> list[JSON]:
        if namespace != "bench":
            raise KubeForbidden(f"listing pods {selector} in {namespace or 'all namespaces'}")
        return super().pods(namespace, selector)


def test_a_controller_watching_named_namespaces_finds_its_ghosts_with_the_rights_of_a_role() -> (
    None
):
    api, clock = bed()
    api.__class__ = RoleOnly
    driver = Driver(runs=Runs(), schedules=Schedules(None), kube=api, wall=clock,
                    namespaces=["bench"])  # fmt: skip
    asyncio.run(driver.recover())
    assert driver.ghosts[QKEY].ref == "bench/busy"


def test_a_controller_that_may_not_list_pods_still_admits_runs_and_says_what_to_grant(
    caplog: pytest.LogCaptureFixture,
) -> None:
    api, clock = bed()
    api.__class__ = RoleOnly
    runs = Runs()
    driver = restarted(api, clock, runs)  # watching the cluster (or a pattern): one list
    with caplog.at_level(logging.ERROR):
        loop_for(driver, 0.3)
    assert ("next", Turn()) in runs.calls, "nobody would ever be admitted otherwise"
    assert "grant `list` on pods in every watched namespace" in caplog.text


def test_a_controller_watching_a_pattern_takes_no_other_controllers_runs_for_its_ghosts() -> None:
    # Two controllers (e2e's two workers, or two teams' installs) watching `team-a-*` and
    # `team-b-*`: team-b's deleted run is not team-a's to wait for.
    api, clock = bed()
    elsewhere = Driver(runs=Runs(), schedules=Schedules(None), kube=api, wall=clock,
                       namespaces=["team-a-*", "other"])  # fmt: skip
    asyncio.run(elsewhere.recover())
    assert elsewhere.ghosts == {}
    mine = Driver(runs=Runs(), schedules=Schedules(None), kube=api, wall=clock,
                  namespaces=["b*", "!bx"])  # fmt: skip
    asyncio.run(mine.recover())
    assert mine.ghosts[QKEY].ref == "bench/busy"
    assert not watches(["!bench"], "bench") and watches(["!bx"], "bench")
