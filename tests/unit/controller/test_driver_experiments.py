"""The Driver and BenchmarkExperiments: one experiment or run per cluster.

An experiment between its stash and its end holds its cluster's queue: only its own runs are
admitted, every other run waits naming it and is woken when it ends; before it starts, the
experiment is told which run of someone else measures the cluster.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from tidb_bench_operator.domain.queue import Turn
from tidb_bench_operator.reconcile.experiment.reconciler import ExperimentOutcome
from unit.controller.test_driver import SPEC, Runs, World, event, make, world

JSON = dict[str, Any]
__all__ = ["world"]  # the fixture, used by name


def settle(driver: Any, world: World) -> None:
    """Look at every due object; feed back the runs' new state as watch events."""
    for key in driver.due_keys():
        asyncio.run(driver.look(key))
        if key[0] == "run":
            event(driver, world, key[2])


class Experiments:
    """An experiment reconciler that records what the Driver told it."""

    def __init__(self) -> None:
        self.busy: list[str | None] = []

    def reconcile(self, body: JSON, busy: str | None = None) -> ExperimentOutcome:
        self.busy.append(busy)
        return ExperimentOutcome(None)


def experiment(phase: str | None, version: int = 7) -> JSON:
    return {
        "metadata": {"name": "what-if", "namespace": "bench", "uid": "u-x", "generation": 1,
                     "resourceVersion": str(version)},
        "spec": {
            "cluster": {"name": "basic", "namespace": "tidb", "kind": "TidbCluster"},
            "run": copy.deepcopy(SPEC),
            "variants": [{"name": "tikv-3", "patch": {"tikv": {"replicas": 3}}}],
        },
        "status": {"phase": phase} if phase else {},
    }  # fmt: skip


def test_an_experiment_changing_its_cluster_admits_only_its_own_runs_and_then_wakes_the_others(
    world: World,
) -> None:
    runs = Runs()
    driver, _ = make(world, runs)
    driver.experiments = Experiments()
    driver.experiment_event("ADDED", experiment("Settling"))
    world.add("nightly", created="2024-06-01T00:00:01Z")
    world.add("what-if-baseline", created="2024-06-01T00:00:02Z")
    event(driver, world, "nightly", "ADDED")
    event(driver, world, "what-if-baseline", "ADDED")
    settle(driver, world)
    assert ("nightly", Turn("BenchmarkExperiment bench/what-if")) in runs.calls
    assert ("what-if-baseline", Turn()) in runs.calls, "its own run is not behind the other"
    assert world.objects["nightly"]["status"]["waitingFor"] == "BenchmarkExperiment bench/what-if"
    world.patch_benchmark_run_status("bench", "what-if-baseline", {"phase": "Succeeded"})
    event(driver, world, "what-if-baseline")
    runs.calls.clear()
    driver.experiment_event("MODIFIED", experiment("Succeeded", version=8))
    settle(driver, world)
    assert runs.calls == [("nightly", Turn())], "the cluster is free again: the other goes"


def test_an_experiment_not_started_is_told_which_run_measures_its_cluster(world: World) -> None:
    driver, _ = make(world, Runs())
    experiments = Experiments()
    driver.experiments = experiments
    world.add("nightly", phase="Running")
    event(driver, world, "nightly", "ADDED")
    driver.experiment_event("ADDED", experiment(None))
    for key in driver.due_keys():
        if key[0] == "experiment":
            asyncio.run(driver.look(key))
    assert experiments.busy == ["BenchmarkRun bench/nightly is measuring the cluster"]
    world.patch_benchmark_run_status("bench", "nightly", {"phase": "Succeeded"})
    event(driver, world, "nightly")
    asyncio.run(driver.look(("experiment", "bench", "what-if")))
    assert experiments.busy[-1] is None
