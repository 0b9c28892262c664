"""The guard over a measured step: a disturbance flagged, retried or aborting the run.

Driven through an in-memory Kubernetes and a fake clock (support.Bed).
"""

from __future__ import annotations

from collections.abc import Sequence

from unit.reconcile.run.support import (
    CLUSTER_NS,
    JSON,
    NS,
    Bed,
    checks,
    result_doc,
    run_spec,
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
    assert step["trials"][0]["disturbances"][0]["object"] == "basic-tikv-3"


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
