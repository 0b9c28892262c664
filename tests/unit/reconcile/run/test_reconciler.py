"""One reconcile as a whole: the full walk, restarts, patches, failures and bad status.

Driven through an in-memory Kubernetes and a fake clock (support.Bed).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from testbed.fake_kube import FakeKube
from tidb_bench_operator.errors import KubeError
from tidb_bench_operator.reconcile.run import RunReconciler
from unit.reconcile.run.support import (
    JSON,
    NS,
    PASSWORD,
    PREPARED,
    Bed,
    everything_written,
    result_doc,
    run_body,
    run_spec,
    series_log,
)


def test_a_run_walks_pending_preflight_preparing_running_and_succeeds() -> None:
    bed = Bed(run_spec(slo={"latencyMs": 20}))

    # Pending → Preflight → Preparing in one reconcile: nothing makes the run wait.
    bed.reconcile()
    assert bed.status["phase"] == "Preparing"
    assert bed.status["startedAt"] == "2024-06-01T02:00:00Z"
    assert bed.condition("Waiting")["status"] == "False"
    assert [c["status"] for c in bed.status["preflight"]["checks"]] == ["Pass"] * 7
    assert bed.condition("PreflightPassed")["reason"] == "Passed"
    assert bed.status["environment"]["tidbVersion"] == "v8.1.0"
    assert bed.preflight.calls[0][1].host == "basic-tidb.tidb-cluster"
    assert bed.kube.job_names(NS) == ["sweep-prepare"]

    bed.clock.advance(1)
    bed.reconcile()
    assert bed.status["phase"] == "Preparing", "an unfinished prepare Job keeps the run waiting"
    assert bed.kube.job_names(NS) == ["sweep-prepare"]
    bed.kube.finish_job(NS, "sweep-prepare", PREPARED)
    bed.reconcile()
    assert bed.status["phase"] == "Running"
    assert bed.condition("DatasetReady")["reason"] == "Prepared"
    assert [(s["workload"], s["threads"], s["phase"]) for s in bed.status["steps"]] == [
        ("oltp_point_select", 8, "Running"),
        ("oltp_point_select", 16, "Pending"),
        ("oltp_point_select", 32, "Pending"),
    ], "the reconcile that sees the dataset ready starts the first step"

    numbers = {8: (20_000.0, 5.0), 16: (36_000.0, 9.0), 32: (38_000.0, 25.0)}
    for index, threads in enumerate((8, 16, 32)):
        # Started by the reconcile that entered Running or finished the previous step.
        job = f"sweep-s{index}-c0"
        assert job in bed.kube.job_names(NS)
        assert bed.step(index)["phase"] == "Running"
        bed.clock.advance(30)
        bed.reconcile()
        assert bed.step(index)["phase"] == "Running", "the Job has not finished yet"
        qps, p95 = numbers[threads]
        bed.kube.finish_job(NS, job, result_doc(threads, qps, p95), log=series_log([qps]))
        bed.clock.advance(2)
        bed.reconcile()
        assert bed.step(index)["phase"] == "Succeeded"
        assert bed.step(index)["qps"] == qps
        assert bed.step(index)["valid"] is True

    st = bed.status
    assert st["phase"] == "Succeeded"
    assert st["currentStep"] == 3
    assert st["summary"]["peakQps"] == 38_000.0
    assert st["summary"]["peakThreads"] == 32
    assert st["summary"]["recommendedThreads"] == 16, "32 threads break the 20 ms SLO"
    assert st["summary"]["recommendedQps"] == 36_000.0
    assert st["summary"]["headline"] == st["message"]
    assert bed.condition("Complete")["reason"] == "Succeeded"
    env = st["environment"]
    assert env["sysbenchVersion"] == "1.0.20"
    assert env["nodes"] == ["bench-1"]
    assert env["images"] == {
        "pd": "pingcap/pd:v8.1.0",
        "tikv": "pingcap/tikv:v8.1.0",
        "tidb": "pingcap/tidb:v8.1.0",
    }
    assert env["replicas"] == {"pd": 3, "tikv": 4, "tidb": 2}
    reasons = bed.kube.event_reasons()
    phases = [r for r in reasons if r in ("Preflight", "Preparing", "DatasetReady", "Running")]
    assert phases == ["Preflight", "Preparing", "DatasetReady", "Running"]
    steps = [r for r in reasons if r in ("StepStarted", "StepSucceeded")]
    assert steps == ["StepStarted", "StepSucceeded"] * 3
    assert reasons.count("StepSucceeded") == 3
    assert reasons[-1] == "Succeeded"
    assert all(e["involvedObject"]["uid"] == "uid-bench-sweep" for e in bed.kube.events)


def test_the_password_appears_nowhere_the_reconciler_writes() -> None:
    bed = Bed(run_spec(threads=[8]))
    bed.to_running()
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 5000.0, 2.0))
    bed.reconcile()
    assert bed.status["phase"] == "Succeeded"
    assert PASSWORD not in everything_written(bed)


def test_the_status_patch_holds_only_what_changed() -> None:
    bed = Bed()
    bed.kube.add_run(run_body("older", created="2024-06-01T00:00:00Z"))
    bed.reconcile()
    out = bed.reconcile()
    assert "phase" not in out.status
    assert "waitingFor" not in out.status


def test_reconciling_twice_from_the_same_status_creates_no_duplicate_jobs() -> None:
    bed = Bed(run_spec(clients=2))
    bed.prepare()
    before = copy.deepcopy(bed.body)

    bed.reconcile()  # the dataset is ready: Running, and the first step's Jobs
    jobs = bed.kube.job_names(NS)
    assert jobs == ["sweep-prepare", "sweep-s0-c0", "sweep-s0-c1"]
    # The controller died before its status patch landed: the next one starts from `before`.
    bed.body = before
    bed.clock.advance(3)
    bed.reconcile()
    assert bed.kube.job_names(NS) == jobs
    assert bed.kube.created_jobs == jobs
    assert bed.kube.create_job_calls.count("sweep-s0-c0") == 2


def test_a_restart_reuses_the_start_at_of_a_job_created_before_it() -> None:
    bed = Bed(run_spec(clients=2))
    bed.prepare()
    before = copy.deepcopy(bed.body)
    bed.reconcile()  # the dataset is ready: Running, and the first step's Jobs

    def start_at(job: str) -> str:
        args = bed.kube.job(NS, job)["spec"]["template"]["spec"]["containers"][0]["args"]
        return next(a for a in args if a.startswith("--start-at="))

    first = start_at("sweep-s0-c0")
    assert first == "--start-at=2024-06-01T02:00:08+00:00", (
        "8 s ahead so both clients start together"
    )
    # Died after creating the first client's Job only; restarted 20 s later.
    bed.kube.job_store.pop((NS, "sweep-s0-c1"))
    bed.body = before
    bed.clock.advance(20)
    bed.reconcile()
    assert start_at("sweep-s0-c1") == first


def stored_status(bed: Bed) -> JSON:
    return dict(bed.kube.runs[(NS, bed.name)].get("status") or {})


def look(reconciler: RunReconciler, kube: FakeKube, body: JSON) -> float | None:
    """What the Driver's look does with a run: reconcile and write, or count the failure."""
    meta = body["metadata"]
    try:
        out = reconciler.reconcile(body)
        status = reconciler.settled(body, out.status)
        if status:
            kube.patch_benchmark_run_status(meta["namespace"], meta["name"], status)
        return out.requeue_seconds
    except Exception as exc:
        return reconciler.failed(body, exc)


def test_a_failing_reconcile_shows_in_status_and_health_and_fails_the_run_after_its_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bed = Bed(run_spec(threads=[8]))
    bed.to_running()

    def broken(*_: Any) -> list[JSON]:
        raise KubeError("listing Jobs in namespace bench: 503 Service Unavailable")

    monkeypatch.setattr(bed.kube, "jobs", broken)
    hint = look(bed.reconciler, bed.kube, bed.kube.runs[(NS, bed.name)])
    assert hint == 2.0
    cond = next(c for c in stored_status(bed)["conditions"] if c["type"] == "ReconcileFailing")
    assert cond["status"] == "True" and "503 Service Unavailable" in cond["message"]
    assert stored_status(bed)["phase"] == "Running"
    assert bed.reconciler.health() == {}, "not red at the first failure"
    bed.clock.advance(150)
    look(bed.reconciler, bed.kube, bed.kube.runs[(NS, bed.name)])
    assert "503 Service Unavailable" in bed.reconciler.health()[bed.body["metadata"]["uid"]]
    # A controller restarted meanwhile keeps counting from the condition's time.
    fresh = RunReconciler(bed.kube, clock=bed.clock, image="tidb-bench:test")
    bed.clock.advance(151)
    monkeypatch.undo()
    monkeypatch.setattr(bed.kube, "jobs", broken)
    look(fresh, bed.kube, bed.kube.runs[(NS, bed.name)])
    st = stored_status(bed)
    assert st["phase"] == "Failed"
    assert st["message"].startswith("the controller could not reconcile this run for 301s")
    assert fresh.health() == {}


def test_a_reconcile_that_recovers_clears_its_condition() -> None:
    bed = Bed(run_spec(threads=[8]))
    bed.to_running()
    real = bed.kube.jobs
    bed.kube.jobs = lambda *_: (_ for _ in ()).throw(KubeError("timed out"))  # type: ignore[method-assign]
    look(bed.reconciler, bed.kube, bed.kube.runs[(NS, bed.name)])
    bed.kube.jobs = real  # type: ignore[method-assign]
    look(bed.reconciler, bed.kube, bed.kube.runs[(NS, bed.name)])
    cond = next(c for c in stored_status(bed)["conditions"] if c["type"] == "ReconcileFailing")
    assert (cond["status"], cond["reason"]) == ("False", "Recovered")


def test_a_status_edited_by_hand_fails_the_run_naming_the_field_and_deletes_its_jobs() -> None:
    bed = Bed(run_spec(threads=[8, 16]))
    bed.to_running()
    bed.body["status"]["steps"][0]["threads"] = "many"
    bed.reconcile()
    st = bed.failed_with("InvalidStatus")
    assert st["message"].startswith("status.steps.0.threads: Input should be a valid integer")
    assert "'many'" in st["message"]
    assert bed.kube.job_names(NS) == []
    assert not st.get("steps"), "the unreadable status is replaced, not merged"


def test_a_finished_runs_unreadable_status_is_left_alone() -> None:
    bed = Bed(run_spec(threads=[8]))
    bed.body["status"] = {"phase": "Succeeded", "steps": [{"index": "x"}]}
    assert bed.reconcile().status == {}
