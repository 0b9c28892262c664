"""Preflight: is the cluster fair to measure? Ask the gate, apply the policy, wait or go on.

The gate (reconcile/gate.py) observes PD, Kubernetes and the database and judges them with
the checks of domain/preflight.py. Here the phase decides what follows: every check passes,
or the policy is Warn → Preparing; a failing check under Enforce → look again every
RETRY until spec.preflight.timeoutSeconds, then fail the run naming the checks.
"""

from __future__ import annotations

from datetime import timedelta

from tidb_bench_operator.domain.api.common import RunPhase
from tidb_bench_operator.domain.api.run_status import Environment, PreflightCheck, PreflightStatus
from tidb_bench_operator.reconcile.run.context import RunContext

#: Preflight is evaluated at most this often while it waits (PD calls are not free).
RETRY = timedelta(seconds=5)


def check(ctx: RunContext) -> None:
    """The Preflight phase."""
    spec, st = ctx.spec, ctx.st
    gate = ctx.deps.preflight
    if spec.preflight.policy == "Off" or gate is None:
        st.preflight = PreflightStatus(checks=[], last_evaluated=ctx.now, attempts=0)
        ctx.condition("PreflightPassed", "True", "Skipped", "preflight policy is Off")
        ctx.enter(RunPhase.PREPARING, "preparing the dataset")
        return
    last = st.preflight.last_evaluated if st.preflight else None
    if last is not None and ctx.now - last < RETRY:
        ctx.wait((RETRY - (ctx.now - last)).total_seconds())
        return
    out = gate(spec, ctx.run.namespace, ctx.endpoint)
    attempts = (st.preflight.attempts if st.preflight else 0) + 1
    st.preflight = PreflightStatus(
        checks=[
            PreflightCheck(name=c.name, status=c.status, message=c.message, stores=c.stores)
            for c in out.checks
        ],
        last_evaluated=ctx.now,
        attempts=attempts,
    )
    env = st.environment or Environment()
    env.tidb_version = out.tidb_version or env.tidb_version
    env.server_version = out.server_version or env.server_version
    st.environment = env
    verdict = out.verdict
    if verdict.proceed:
        for c in out.checks:
            if c.status != "Pass":
                ctx.event("Warning", f"Preflight{c.status}", f"{c.name}: {c.message}")
        ctx.condition(
            "PreflightPassed", "True" if verdict.status != "Fail" else "False",
            "Passed" if verdict.status == "Pass" else f"Proceeded{verdict.status}",
            verdict.message,
        )  # fmt: skip
        ctx.enter(RunPhase.PREPARING, "preparing the dataset")
        return
    failing = [c for c in out.checks if c.status == "Fail"]
    detail = "; ".join(f"{c.name}: {c.message}" for c in failing)
    waited = (ctx.now - (st.started_at or ctx.now)).total_seconds()
    if waited >= spec.preflight.timeout_seconds:
        ctx.fail(
            "PreflightFailed",
            f"preflight still failing after {waited:.0f}s (timeoutSeconds "
            f"{spec.preflight.timeout_seconds}): {detail}",
        )
        return
    if attempts == 1:
        ctx.event("Warning", "PreflightWaiting", detail)
    ctx.condition(
        "PreflightPassed", "False", "Waiting",
        f"attempt {attempts}, re-checking until {spec.preflight.timeout_seconds}s have "
        f"passed: {detail}",
    )  # fmt: skip
    ctx.wait(RETRY.total_seconds())
