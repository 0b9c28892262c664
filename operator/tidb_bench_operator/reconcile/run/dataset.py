"""Preparing: the dataset Job (`tidb-bench runner prepare`), then the sweep's steps are laid out.

The same Job machinery runs `cleanup` when the run finishes (reconcile/finish.py): one Job
per action, named after the run, whose runner reports a DatasetReport.
"""

from __future__ import annotations

from tidb_bench_operator.domain.api.common import RunPhase, StepPhase
from tidb_bench_operator.domain.api.run_status import StepStatus
from tidb_bench_operator.domain.api.runner_message import DatasetReport, RunnerFailure
from tidb_bench_operator.domain.jobs import (
    job_failure_text,
    job_finished,
    run_selector,
    runner_report,
    start_failure,
    unschedulable_reason,
)
from tidb_bench_operator.domain.manifests import (
    build_dataset_runner_args,
    build_runner_job,
    object_name,
)
from tidb_bench_operator.domain.queue import queue_key
from tidb_bench_operator.domain.stats.capacity import layout, planned_steps
from tidb_bench_operator.domain.status import parse_time
from tidb_bench_operator.reconcile.run.context import RunContext

#: A dataset Job may run this long (loading a large dataset takes hours).
DATASET_DEADLINE_SECONDS = 6 * 3600


def prepare(ctx: RunContext) -> None:
    """The Preparing phase: wait for the prepare Job, then lay out the steps and run them."""
    spec, st = ctx.spec, ctx.st
    report = dataset_job(ctx, "prepare", "dataset")
    if report is None:
        return
    text = {
        "reused": f"{spec.dataset.tables} table(s) of {spec.dataset.table_size} rows exist: reused",
        "prepared": f"loaded {spec.dataset.tables} table(s) of {spec.dataset.table_size} rows "
        f"({report.reason or 'missing'}) in {_seconds(report.seconds)}s",
        "verified": "dataset present (prepare: Never)",
    }.get(report.action, report.action)
    if not spec.builtin_workloads():
        text = "no built-in test: no sbtest tables"
    if report.scripts:
        text += f"; ran the prepare of custom workload(s) {', '.join(report.scripts)}"
    ctx.condition("DatasetReady", "True", report.action.capitalize(), text)
    ctx.event("Normal", "DatasetReady", text)
    practice(ctx, report)
    st.steps = [
        StepStatus(index=i, workload=w, threads=t, target_rate=r, phase=StepPhase.PENDING)
        for i, (w, t, r) in enumerate(layout(spec))
    ]
    st.current_step = 0
    st.current_round = 0 if spec.repeats > 1 else None
    search = spec.capacity_search
    if search is None:
        rounds = f" in {spec.repeats} rounds" if spec.repeats > 1 else ""
        ctx.enter(RunPhase.RUNNING, f"running {len(st.steps)} step(s){rounds}")
        return
    trials = f", each measured {spec.repeats} times" if spec.repeats > 1 else ""
    ctx.enter(
        RunPhase.RUNNING,
        f"searching the capacity between {search.min_threads} and {search.max_threads} "
        f"threads to {search.precision} (at most {planned_steps(spec)} step(s){trials})",
    )


def practice(ctx: RunContext, report: DatasetReport) -> None:
    """Say what the prepare Job did after loading or reusing: ANALYZE and the cache warm-up.

    Each is a condition and an Event: `DatasetAnalyzed` and `CacheWarmed`, True with the
    table count and time, or False with reason `Disabled` when spec.dataset switched it off
    (`NoSbtestTables` when the run has only custom workloads: they are the sbtest tables').
    """
    spec = ctx.spec
    builtin = bool(spec.builtin_workloads())
    for type_, enabled, done, seconds, what in (
        ("DatasetAnalyzed", spec.dataset.analyze, report.analyzed, report.analyze_seconds,
         "ANALYZE TABLE"),
        ("CacheWarmed", spec.dataset.warm_up, report.warmed, report.warm_up_seconds,
         "SELECT COUNT(pad) ... USE INDEX (k_N)"),
    ):  # fmt: skip
        if not enabled:
            ctx.condition(type_, "False", "Disabled", f"{what} switched off in spec.dataset")
            continue
        if not builtin:
            why = f"no {what}: the run has only custom workloads, no sbtest tables"
            ctx.condition(type_, "False", "NoSbtestTables", why)
            continue
        if done is None:  # a runner image that predates the switch did not do it
            ctx.condition(type_, "Unknown", "NotReported", f"the runner did not report {what}")
            continue
        text = f"{what} on {done} table(s) in {_seconds(seconds)}s ({report.action} dataset)"
        ctx.condition(type_, "True", "Done", text)
        ctx.event("Normal", type_, text)


def _seconds(value: float | None) -> str:
    return "?" if value is None else str(value)


def dataset_job(ctx: RunContext, action: str, what: str) -> DatasetReport | None:
    """Run the `action` Job (prepare or cleanup) to its end.

    Returns its report once it succeeded; None while it runs, or once it failed (the run
    is then failed, saying `what` failed and why).
    """
    spec, run = ctx.spec, ctx.run
    args = build_dataset_runner_args(spec, ctx.endpoint, action=action, namespace=run.namespace)
    job = build_runner_job(
        run, spec, ctx.endpoint, name=object_name(run.name, action), role=action,
        runner_args=args, active_deadline_seconds=DATASET_DEADLINE_SECONDS,
        queue=queue_key(spec, run.namespace),
        image=ctx.deps.image, workloads=spec.workloads,
    )  # fmt: skip
    created = ctx.kube.create_job(job)
    selector = run_selector(run, role=action)
    job = next(iter(ctx.kube.jobs(run.namespace, selector)), created)
    pods = ctx.kube.pods(run.namespace, selector)
    hopeless = start_failure(pods, ctx.now)
    if hopeless:
        ctx.fail(
            "ContainerCannotStart",
            f"the {what} container cannot start: {hopeless}; fix spec.image (or remove it to "
            "use the controller's runner image) or the Secret the pod reads",
        )
        return None
    unscheduled = unschedulable_reason(pods)
    since = parse_time(job["metadata"].get("creationTimestamp")) or ctx.now
    if unscheduled:
        if ctx.now - since >= ctx.deps.scheduling_timeout:
            ctx.delete_jobs(role=action)
            ctx.fail("Unschedulable", f"the {what} pod could not be scheduled: {unscheduled}")
            return None
        ctx.condition(
            "Progressing", "False", "Unschedulable", f"{what} pod not scheduled yet: {unscheduled}"
        )
        ctx.wait(2.0)
        return None
    if not job_finished(job):
        ctx.wait(1.0)
        return None
    report = runner_report(job, pods, DatasetReport)
    if not isinstance(report, DatasetReport):
        why = report.message if isinstance(report, RunnerFailure) else ""
        ctx.fail("DatasetFailed", f"{what} failed: {why or job_failure_text(job, pods)}")
        return None
    return report
