"""The guard over a measured step: a disturbance flagged, retried or aborting the run.

Driven through an in-memory Kubernetes and a fake clock (support.Bed).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from tidb_bench_operator.domain.api.runner_message import SERIES_MARKER
from tidb_bench_operator.domain.guard import PdLook
from tidb_bench_operator.errors import KubeError
from unit.reconcile.run.support import (
    CLUSTER_NS,
    JSON,
    NS,
    Bed,
    checks,
    result_doc,
    run_spec,
    series_log,
    stored,
)


def cluster_pod(name: str, node: str, component: str = "tikv", restarts: int = 0) -> JSON:
    return {
        "metadata": {
            "name": name, "namespace": CLUSTER_NS, "uid": f"uid-{name}",
            "labels": {"app.kubernetes.io/instance": "basic", "app.kubernetes.io/component": component},
        },
        "spec": {"nodeName": node},
        "status": {"phase": "Running", "containerStatuses": [{"name": component, "restartCount": restarts}]},
    }  # fmt: skip


def guarded_bed(policy: str, threads: Sequence[int] = (8, 16)) -> Bed:
    bed = Bed(run_spec(threads=list(threads), guard={"policy": policy}))
    bed.kube.add_pod(cluster_pod("basic-tikv-0", "db-1"))
    bed.to_running()
    return bed


def test_a_tikv_pod_landing_on_the_bench_node_mid_step_flags_it_and_the_summary_skips_it() -> None:
    bed = guarded_bed("Flag")
    assert bed.status["guardLook"]["benchNodes"] == ["bench-1", "bench-2"]
    bed.kube.add_pod(cluster_pod("basic-tikv-3", "bench-1"))
    bed.clock.advance(1)
    bed.reconcile()
    landed = bed.step(0)["disturbances"]
    assert [(d["what"], d["object"]) for d in landed][:1] == [("PodOnBenchNode", "basic-tikv-3")]
    assert bed.kube.event_reasons().count("StepDisturbed") == 2  # landed, created
    bed.kube.pod_store.pop((CLUSTER_NS, "basic-tikv-3"))  # gone before step 2 starts
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 20_000.0, 2.0))
    bed.reconcile()
    step = bed.step(0)
    assert step["valid"] is False and step["disturbances"]
    assert any(
        n.startswith("INVALID: disturbed while measured: PodOnBenchNode basic-tikv-3")
        for n in step["notes"]
    )
    assert bed.kube.events_of(["StepSucceeded"])[0]["message"].endswith(
        "(INVALID: PodOnBenchNode basic-tikv-3: TiKV pod basic-tikv-3 on bench-1: a database pod on a "
        "node the benchmark clients use competes with them for CPU and I/O (+1 more))"
    )
    bed.kube.finish_job(NS, "sweep-s1-c0", result_doc(16, 9000.0, 4.0))
    bed.reconcile()
    assert bed.status["phase"] == "Succeeded"
    assert bed.step(1)["valid"] is True and not bed.step(1).get("disturbances")
    assert bed.status["summary"]["peakThreads"] == 16, "the disturbed 20k step is not the peak"
    assert bed.status["invalidSteps"] == 1


def test_under_retry_a_disturbed_step_waits_for_the_gate_then_is_measured_again() -> None:
    bed = guarded_bed("Retry", threads=(8,))
    bed.kube.add_pod(cluster_pod("basic-tikv-3", "bench-1"))
    bed.clock.advance(1)
    bed.reconcile()
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 20_000.0, 2.0))
    fail = checks(bench_node_isolation="Fail")
    bed.preflight.rounds = [checks()] * len(bed.preflight.calls) + [fail]
    bed.reconcile()
    step = bed.step(0)
    assert step["phase"] == "Pending" and step["guardWaitSince"] and step["guardRetries"] == 1
    assert [t["valid"] for t in step["trials"]] == [False]
    assert "StepMeasuredAgain" in bed.kube.event_reasons()
    assert bed.condition("Progressing")["reason"] == "GuardWaiting"
    assert "sweep-s0-c0-a1" not in bed.kube.job_names(NS)
    bed.kube.pod_store.pop((CLUSTER_NS, "basic-tikv-3"))
    bed.preflight.rounds = [*bed.preflight.rounds[: len(bed.preflight.calls)], checks()]
    bed.clock.advance(6)
    bed.reconcile()  # the gate passes now: measured again with new Jobs
    assert "sweep-s0-c0-a1" in bed.kube.job_names(NS)
    bed.kube.finish_job(NS, "sweep-s0-c0-a1", result_doc(8, 9000.0, 2.0))
    bed.reconcile()
    assert bed.status["phase"] == "Succeeded", bed.status
    step = bed.step(0)
    assert step["valid"] is True and step["qps"] == 9000.0
    assert [t["valid"] for t in step["trials"]] == [False, True]
    assert step["trials"][0]["disturbed"] >= 1, "status keeps the count"
    assert stored(bed).steps[0]["trials"][0]["disturbances"][0]["object"] == "basic-tikv-3"


def test_under_abort_a_disturbance_fails_the_run_naming_it_and_deletes_the_jobs() -> None:
    bed = guarded_bed("Abort")
    pod = bed.kube.pod_store[(CLUSTER_NS, "basic-tikv-0")]
    pod["status"]["containerStatuses"][0]["restartCount"] = 1
    bed.clock.advance(1)
    bed.reconcile()
    bed.failed_with("StepDisturbed")
    assert (
        "PodRestarted basic-tikv-0: TiKV pod basic-tikv-0 on db-1: restart count 0 → 1"
        in bed.status["message"]
    )
    assert bed.kube.job_names(NS) == []


def test_guard_off_watches_nothing() -> None:
    bed = guarded_bed("Off")
    bed.kube.add_pod(cluster_pod("basic-tikv-3", "bench-1"))
    bed.reconcile()
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 20_000.0, 2.0))
    bed.reconcile()
    assert bed.step(0)["valid"] is True and "guardLook" not in bed.status


# --- what the guard could not see is not valid (the blind spots) -------------------------


def with_pd(bed: Bed, leader: list[str]) -> list[int]:
    """A PD that answers with one Up store and `leader[0]` as its leader; the polls made."""
    polls: list[int] = []

    def look(spec: object, namespace: str, endpoint: object) -> PdLook:
        polls.append(1)
        return PdLook(stores=[], pending_operators=0, leader=leader[0])

    bed.reconciler.deps = dataclasses.replace(bed.reconciler.deps, pd_look=look)
    return polls


def test_a_client_log_that_cannot_be_read_leaves_the_step_unjudged_and_not_valid() -> None:
    bed = guarded_bed("Flag")
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 20_000.0, 2.0))
    pod = next(n for (ns, n, _) in bed.kube.logs if n.startswith("sweep-s0-c0"))
    del bed.kube.logs[(NS, pod, "runner")]  # the node cannot serve it: pod_log is None
    bed.reconcile()
    step = bed.step(0)
    assert step["valid"] is False, step
    [unjudged] = step["disturbances"]
    assert (unjudged["what"], unjudged["object"]) == ("Unjudged", pod)
    assert "could not be read (2 tries)" in unjudged["message"]
    assert any(f"the log of client pod {pod} could not be read" in n for n in step["notes"])
    assert "StepDisturbed" in bed.kube.event_reasons()


def test_a_garbled_series_is_unjudged_too_and_a_readable_one_is_judged() -> None:
    bed = guarded_bed("Flag")
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 20_000.0, 2.0), log=SERIES_MARKER + "{")
    bed.reconcile()
    assert [d["what"] for d in bed.step(0)["disturbances"]] == ["Unjudged"]
    bed.kube.finish_job(NS, "sweep-s1-c0", result_doc(16, 9000.0, 4.0), log=series_log([9e3] * 5))
    bed.reconcile()
    assert bed.step(1)["valid"] is True and not bed.step(1).get("disturbances")


def test_the_last_look_of_a_step_polls_pd_whatever_the_interval() -> None:
    bed = Bed(run_spec(threads=[8, 16], guard={"policy": "Flag", "pdIntervalSeconds": 10}))
    leader = ["pd-0"]
    polls = with_pd(bed, leader)
    bed.kube.add_pod(cluster_pod("basic-tikv-0", "db-1"))
    bed.to_running()
    first = len(polls)
    bed.clock.advance(3)
    bed.reconcile()
    assert len(polls) == first, "3 s into the step, under the 10 s interval: no poll"
    leader[0] = "pd-1"  # in the step's last seconds
    bed.clock.advance(2)
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 20_000.0, 2.0))
    bed.reconcile()
    changed = [d for d in bed.step(0)["disturbances"] if d["what"] == "PDLeaderChanged"]
    assert changed and changed[0]["message"] == "PD leader pd-0 → pd-1", bed.step(0)
    assert bed.step(0)["valid"] is False


def test_a_failed_first_look_is_no_empty_world_the_next_look_takes_the_baseline() -> None:
    bed = Bed(run_spec(threads=[8, 16], guard={"policy": "Abort"}))
    for i in range(3):
        bed.kube.add_pod(cluster_pod(f"basic-tikv-{i}", "db-1"))
    bed.to_running()
    real = bed.kube.tidb_cluster
    calls: list[int] = []

    def flaky(namespace: str, name: str) -> JSON | None:
        calls.append(1)
        if len(calls) == 1:
            raise KubeError("reading TidbCluster: 503 Service Unavailable")
        return real(namespace, name)

    bed.kube.tidb_cluster = flaky  # type: ignore[method-assign]
    # The step's first look fails once: the run must not see three created pods next.
    bed.body["status"]["guardLook"] = None
    bed.kube.add_run(bed.body)
    bed.reconcile()
    assert bed.status["guardLook"]["clusterRead"] is False
    assert "503" in bed.status["guardLook"]["clusterError"]
    bed.clock.advance(1)
    bed.reconcile()
    assert bed.status["phase"] == "Running", bed.status  # under Abort, a flood would fail it
    look = bed.status["guardLook"]
    assert look["clusterRead"] is True and len(look["pods"]) == 3
    assert any("baseline of the cluster was taken 1s into the step" in n
               for n in bed.step(0)["notes"])  # fmt: skip
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 20_000.0, 2.0))
    bed.reconcile()
    assert bed.step(0)["valid"] is True, bed.step(0)


def test_a_step_whose_cluster_no_look_could_read_is_unjudged() -> None:
    bed = guarded_bed("Flag")

    def down(namespace: str, name: str) -> JSON | None:
        raise KubeError("reading TidbCluster: 503 Service Unavailable")

    bed.kube.tidb_cluster = down  # type: ignore[method-assign]
    bed.body["status"]["guardLook"] = None
    bed.kube.add_run(bed.body)
    bed.reconcile()
    bed.clock.advance(1)
    bed.reconcile()
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 20_000.0, 2.0))
    bed.reconcile()
    found = [(d["what"], d["object"]) for d in bed.step(0)["disturbances"]]
    assert found == [("Unjudged", "basic")], bed.step(0)
    assert bed.step(0)["valid"] is False
