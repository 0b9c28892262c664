"""Preparing: the dataset Job, its failures, and what it reports (analyze, warm-up).

Driven through an in-memory Kubernetes and a fake clock (support.Bed).
"""

from __future__ import annotations

from unit.reconcile.run.support import (
    NS,
    PREPARED,
    SCHEDULER_SAYS,
    Bed,
    run_spec,
)


def test_a_new_run_with_nothing_in_its_way_gets_its_prepare_job_from_the_first_reconcile() -> None:
    bed = Bed()
    out = bed.reconcile()
    assert bed.status["phase"] == "Preparing"
    assert bed.kube.job_names(NS) == ["sweep-prepare"]
    assert bed.kube.create_job_calls == ["sweep-prepare"]
    assert len(bed.preflight.calls) == 1
    assert [(e["type"], e["reason"]) for e in bed.kube.events] == [
        ("Normal", "Pending"),
        ("Normal", "Preflight"),
        ("Normal", "Preparing"),
    ]
    assert out.requeue_seconds is not None


def test_an_unschedulable_prepare_pod_fails_the_run_after_the_timeout() -> None:
    bed = Bed()
    bed.reconcile_until("Preparing")
    bed.kube.leave_unschedulable(NS, "sweep-prepare", SCHEDULER_SAYS)
    bed.reconcile()
    assert bed.condition("Progressing")["reason"] == "Unschedulable"
    bed.clock.advance(121)
    bed.reconcile()
    assert bed.status["phase"] == "Failed"
    assert bed.status["message"] == (
        f"the dataset pod could not be scheduled: pod sweep-prepare-pod: {SCHEDULER_SAYS}"
    )
    assert bed.kube.job_names(NS) == []


def test_a_failed_prepare_job_fails_the_run_with_the_runners_message() -> None:
    bed = Bed()
    bed.reconcile_until("Preparing")
    bed.kube.finish_job(
        NS, "sweep-prepare",
        {"v": 1, "ok": False, "kind": "TidbBenchError", "message": "database 'sbtest' does not exist"},
    )  # fmt: skip
    bed.reconcile()
    bed.failed_with("DatasetFailed")
    assert bed.status["message"] == "dataset failed: database 'sbtest' does not exist"
    assert bed.kube.job_names(NS) == []


def test_analyze_and_warm_up_reported_by_the_prepare_job_become_conditions_and_events() -> None:
    bed = Bed(run_spec(threads=[4]))
    bed.reconcile_until("Preparing")
    args = bed.kube.job(NS, "sweep-prepare")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--analyze=on" in args and "--warm-up=on" in args
    done = {**PREPARED, "action": "reused", "analyzed": 2, "analyzeSeconds": 0.4,
            "warmed": 2, "warmUpSeconds": 1.25}  # fmt: skip
    bed.kube.finish_job(NS, "sweep-prepare", done)
    bed.reconcile_until("Running")
    analyzed, warmed = bed.condition("DatasetAnalyzed"), bed.condition("CacheWarmed")
    assert (analyzed["status"], warmed["status"]) == ("True", "True")
    assert analyzed["message"] == "ANALYZE TABLE on 2 table(s) in 0.4s (reused dataset)"
    assert (
        "USE INDEX (k_N)" in warmed["message"] and "in 1.25s (reused dataset)" in warmed["message"]
    )
    reasons = [e["reason"] for e in bed.kube.events]
    assert (
        reasons.index("DatasetReady")
        < reasons.index("DatasetAnalyzed")
        < reasons.index("CacheWarmed")
    )


def test_switched_off_analyze_and_warm_up_say_so() -> None:
    bed = Bed(run_spec(threads=[4], dataset={"analyze": False, "warmUp": False}))
    bed.reconcile_until("Preparing")
    args = bed.kube.job(NS, "sweep-prepare")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--analyze=off" in args and "--warm-up=off" in args
    bed.kube.finish_job(NS, "sweep-prepare", PREPARED)
    bed.reconcile_until("Running")
    assert bed.condition("DatasetAnalyzed")["reason"] == "Disabled"
    assert bed.condition("CacheWarmed")["status"] == "False"
    assert "CacheWarmed" not in [e["reason"] for e in bed.kube.events]
