"""Preflight: the policy applied to the gate's checks (wait, warn, skip, fail).

Driven through an in-memory Kubernetes and a fake clock (support.Bed).
"""

from __future__ import annotations

from tidb_bench_operator.reconcile.run.preflight import RETRY as PREFLIGHT_RETRY
from unit.reconcile.run.support import (
    NS,
    Bed,
    ScriptedPreflight,
    checks,
    run_spec,
)


def test_a_failing_enforced_preflight_waits_rechecks_and_fails_after_its_timeout() -> None:
    failing = checks(leader_size_balance="Fail")
    bed = Bed(preflight=ScriptedPreflight(failing))
    # The reconcile that enters Preflight also runs the first check.
    out = bed.reconcile()
    assert bed.status["phase"] == "Preflight"
    assert len(bed.preflight.calls) == 1
    cond = bed.condition("PreflightPassed")
    assert (cond["status"], cond["reason"]) == ("False", "Waiting")
    assert "leader-size-balance" in cond["message"]
    assert out.requeue_seconds == PREFLIGHT_RETRY.total_seconds()
    assert bed.kube.event_reasons() == ["Pending", "Preflight", "PreflightWaiting"]

    out = bed.reconcile()
    assert len(bed.preflight.calls) == 1, "re-checked no sooner than PREFLIGHT_RETRY"
    assert out.requeue_seconds == PREFLIGHT_RETRY.total_seconds()

    bed.clock.advance(2)
    bed.reconcile()
    assert len(bed.preflight.calls) == 1, "re-checked no sooner than PREFLIGHT_RETRY"

    bed.clock.advance(3)
    bed.reconcile()
    assert len(bed.preflight.calls) == 2
    assert bed.status["preflight"]["attempts"] == 2
    assert bed.status["phase"] == "Preflight"
    assert bed.kube.event_reasons().count("PreflightWaiting") == 1, "one Warning, not one per try"

    bed.clock.advance(56)
    bed.reconcile()
    st = bed.failed_with("PreflightFailed")
    assert st["message"] == (
        "preflight still failing after 61s (timeoutSeconds 60): leader-size-balance: "
        "leader-size-balance is not fair: leader_size 689 vs 120"
    )
    assert bed.kube.create_job_calls == []


def test_a_preflight_that_recovers_while_waiting_lets_the_run_proceed() -> None:
    bed = Bed(preflight=ScriptedPreflight(checks(pending_operators="Fail"), checks()))
    bed.reconcile()
    assert bed.status["phase"] == "Preflight"
    bed.clock.advance(5)
    bed.reconcile()
    assert len(bed.preflight.calls) == 2
    assert bed.status["phase"] == "Preparing"
    assert bed.kube.job_names(NS) == ["sweep-prepare"]
    assert bed.condition("PreflightPassed")["status"] == "True"


def test_a_warn_preflight_proceeds_and_posts_a_warning_event_per_failing_check() -> None:
    found = checks(leader_size_balance="Fail", topology_spread="Warn")
    spec = run_spec(preflight={"policy": "Warn"})
    bed = Bed(spec, preflight=ScriptedPreflight(found))
    bed.reconcile_until("Preparing")
    warnings = [(e["reason"], e["message"]) for e in bed.kube.events if e["type"] == "Warning"]
    assert warnings == [
        ("PreflightWarn", "topology-spread: topology-spread is not fair: leader_size 689 vs 120"),
        (
            "PreflightFail",
            "leader-size-balance: leader-size-balance is not fair: leader_size 689 vs 120",
        ),
    ]
    cond = bed.condition("PreflightPassed")
    assert (cond["status"], cond["reason"]) == ("False", "ProceededFail")
    assert [c["status"] for c in bed.status["preflight"]["checks"]].count("Fail") == 1


def test_preflight_off_skips_the_gate() -> None:
    bed = Bed(run_spec(preflight={"policy": "Off"}))
    bed.reconcile_until("Preparing")
    assert bed.preflight.calls == []
    assert bed.condition("PreflightPassed")["reason"] == "Skipped"
