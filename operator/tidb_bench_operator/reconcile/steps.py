"""Running: one step at a time — start its client Jobs, watch them, record what they measured.

With spec.repeats > 1 the sweep runs in rounds: every step once, then every step again, so
drift during the run (caches, compaction, a neighbour's load) reaches every step alike
instead of falling on one step's trials; status.currentRound says which round runs.

A step is `spec.clients` Jobs (one per client pod) that start together at an agreed time
(START_LEAD_SECONDS ahead; a client that starts late makes the step invalid). Once every
Job finished, their StepReports are combined into the step's numbers, the interval series
go to the results ConfigMap, and the next step starts in the same reconcile.
"""

from __future__ import annotations

import json
from datetime import timedelta

from tidb_bench_operator.domain.jobs import (
    RUNNER_CONTAINER,
    client_index,
    job_failure_text,
    job_finished,
    run_selector,
    runner_report,
    start_at_of,
    unschedulable_reason,
)
from tidb_bench_operator.domain.manifests import (
    START_LEAD_SECONDS,
    build_results_configmap,
    build_runner_job,
    build_step_runner_args,
    object_name,
    step_job_name,
)
from tidb_bench_operator.domain.models import StepPhase, StepStatus, Trial
from tidb_bench_operator.domain.results import StepResult
from tidb_bench_operator.domain.runner_message import (
    RunnerFailure,
    StepReport,
    combine_clients,
    read_series,
)
from tidb_bench_operator.domain.status import condition_reason
from tidb_bench_operator.domain.trials import with_trial
from tidb_bench_operator.reconcile.context import JSON, RunContext

#: A step's Jobs may run this long beyond the start lead, warm-up and duration.
STEP_DEADLINE_SLACK_SECONDS = 300


def run_steps(ctx: RunContext) -> bool:
    """The Running phase until the last step is done; True once every step has its numbers."""
    st = ctx.st
    if st.current_step is None or not st.steps:
        ctx.fail("Internal", "status.steps is empty in phase Running")
        return False
    if st.current_step >= len(st.steps):
        return True
    step = st.steps[st.current_step]
    if step.phase == StepPhase.PENDING:
        start(ctx, step)
    elif step.phase == StepPhase.RUNNING:
        observe(ctx, step)
    return False


def start(ctx: RunContext, step: StepStatus) -> None:
    """Create the step's client Jobs (idempotent: their names are fixed)."""
    spec, run, st = ctx.spec, ctx.run, ctx.st
    round_ = st.current_round or 0
    existing = ctx.kube.jobs(run.namespace, run_selector(run, "step", step.index, round_))
    # After a restart some Jobs of this step may exist already: keep their start time so
    # all clients still start together. One client needs no rendezvous (and cannot be late
    # for one: a slow pod start under load must not make its step invalid); several get a
    # common start a few seconds ahead.
    start_at = start_at_of(existing)
    if start_at is None and spec.clients > 1:
        start_at = ctx.now + timedelta(seconds=START_LEAD_SECONDS)
    deadline = (
        START_LEAD_SECONDS
        + spec.warmup_seconds
        + spec.duration_seconds
        + STEP_DEADLINE_SLACK_SECONDS
    )
    names = []
    for c in range(spec.clients):
        name = step_job_name(run.name, step.index, c, round_)
        args = build_step_runner_args(
            spec, ctx.endpoint, workload=step.workload, threads=step.threads, start_at=start_at
        )
        job = build_runner_job(
            run, spec, ctx.endpoint, name=name, role="step", runner_args=args,
            step=step.index, client=c, round_=round_, active_deadline_seconds=deadline,
            image=ctx.deps.image,
        )  # fmt: skip
        ctx.kube.create_job(job)
        names.append(name)
    step.phase = StepPhase.RUNNING
    step.started_at = ctx.now
    step.job_names = names
    msg = (
        f"step {step.index + 1}/{len(st.steps)}: {step.workload} at {step.threads} threads"
        f" x {spec.clients} client(s)"
        + (f", trial {round_ + 1}/{spec.repeats}" if spec.repeats > 1 else "")
        + (f", starting together at {start_at.isoformat()}" if start_at else "")
    )
    ctx.condition("Progressing", "True", "StepRunning", msg)
    ctx.event("Normal", "StepStarted", msg)
    ctx.wait(1.0)


def observe(ctx: RunContext, step: StepStatus) -> None:
    """Look at a running step's Jobs: restart, wait, fail, or record it."""
    spec, run = ctx.spec, ctx.run
    selector = run_selector(run, "step", step.index, ctx.st.current_round or 0)
    jobs = ctx.kube.jobs(run.namespace, selector)
    pods = ctx.kube.pods(run.namespace, selector)
    if len(jobs) < spec.clients:
        _restart(ctx, step)
    elif unschedulable_reason(pods):
        _unschedulable(ctx, step, unschedulable_reason(pods))
    elif not all(job_finished(j) for j in jobs):
        if condition_reason(ctx.st.conditions, "Progressing") == "Unschedulable":
            ctx.condition("Progressing", "True", "StepRunning", f"step {step.index + 1}: scheduled")
        ctx.wait(1.0)
    else:
        reports = _reports(ctx, step, jobs, pods)
        if reports is not None:
            record(ctx, step, reports, pods)


def _restart(ctx: RunContext, step: StepStatus) -> None:
    """Someone deleted a Job mid-step: its clients cannot be re-synchronised, so the step
    starts over (a lost step would be worse than a repeated one)."""
    ctx.delete_jobs(role="step", step=step.index, round_=ctx.st.current_round or 0)
    step.phase = StepPhase.PENDING
    step.notes = [*step.notes, f"restarted at {ctx.now.isoformat()}: a client Job vanished"]
    ctx.event("Warning", "StepRestarted", f"step {step.index + 1}: a Job vanished")


def _unschedulable(ctx: RunContext, step: StepStatus, why: str) -> None:
    """A client pod the scheduler cannot place: say why, and fail after the timeout."""
    waited = ctx.now - (step.started_at or ctx.now)
    if waited >= ctx.deps.scheduling_timeout:
        ctx.delete_jobs(role="step", step=step.index, round_=ctx.st.current_round or 0)
        step.phase = StepPhase.FAILED
        ctx.fail(
            "Unschedulable",
            f"step {step.index + 1} ({step.workload}, {step.threads} threads): the "
            f"benchmark pod could not be scheduled for {waited.total_seconds():.0f}s: {why}",
        )
        return
    # One Warning when the pod is first seen waiting, not one per look (every 2 s).
    if condition_reason(ctx.st.conditions, "Progressing") != "Unschedulable":
        ctx.event("Warning", "Unschedulable", why)
    ctx.condition(
        "Progressing", "False", "Unschedulable",
        f"step {step.index + 1}: benchmark pod not scheduled yet: {why}",
    )  # fmt: skip
    ctx.wait(2.0)


def _reports(
    ctx: RunContext, step: StepStatus, jobs: list[JSON], pods: list[JSON]
) -> list[StepReport] | None:
    """Every client's report, in client order; None (and the run failed) if one has none."""
    reports = []
    for job in sorted(jobs, key=lambda j: j["metadata"]["name"]):
        report = runner_report(job, pods, StepReport)
        if not isinstance(report, StepReport):
            why = report.message if isinstance(report, RunnerFailure) else ""
            step.phase = StepPhase.FAILED
            step.finished_at = ctx.now
            ctx.fail(
                "StepFailed",
                f"step {step.index + 1} ({step.workload}, {step.threads} threads), Job "
                f"{job['metadata']['name']}: {why or job_failure_text(job, pods)}",
            )
            return None
        reports.append(report)
    return reports


def record(ctx: RunContext, step: StepStatus, reports: list[StepReport], pods: list[JSON]) -> None:
    """Put the combined numbers into the step, keep the series, and move to the next step."""
    spec, st = ctx.spec, ctx.st
    round_ = st.current_round or 0
    combined = combine_clients(reports)
    notes = list(combined.notes)
    if combined.late:
        latest = max(r.late_seconds for r in combined.late)
        notes.append(
            f"INVALID: {len(combined.late)} client(s) started late (max "
            f"{latest:.1f}s after the agreed start)"
        )
    if spec.repeats == 1:
        updated = step.with_result(combined.result)
        updated.valid = not combined.late
        updated.client_saturated = combined.saturated
        updated.notes = [*step.notes, *notes]
        updated.phase = StepPhase.SUCCEEDED
    else:
        trial = Trial(
            round=round_, result=combined.result, valid=not combined.late,
            client_saturated=combined.saturated, finished_at=ctx.now, notes=notes,
        )  # fmt: skip
        updated = with_trial(step, trial, spec.noisy_cv_percent)
        updated.notes = [*step.notes, *(f"trial {round_ + 1}: {n}" for n in notes)]
        done = len(updated.trials) >= spec.repeats
        updated.phase = StepPhase.SUCCEEDED if done else StepPhase.PENDING
    updated.finished_at = ctx.now
    st.steps[step.index] = updated
    save_series(ctx, updated, pods)
    ctx.event("Normal", "StepSucceeded", _recorded_text(ctx, updated, combined.result, round_))
    _advance(ctx, step.index)
    ctx.wait(0.5)
    ctx.again = True


def _recorded_text(ctx: RunContext, step: StepStatus, result: StepResult, round_: int) -> str:
    """`step 2/4: oltp_point_select at 2 threads: 41,234 QPS, p95 0.31 ms` (+ trial, interval)."""
    p = result.latency_ms
    pct = f"p{p.percentile} {p.value:.2f} ms" if p.value is not None else "no percentile"
    text = (
        f"step {step.index + 1}/{len(ctx.st.steps)}: {result.workload} at {result.threads} "
        f"threads: {result.qps:,.0f} QPS, {pct}"
    )
    if ctx.spec.repeats > 1:
        text += f" (trial {round_ + 1}/{ctx.spec.repeats})"
        summary = step.qps_trials
        if step.phase == StepPhase.SUCCEEDED and summary is not None and summary.ci_low is not None:
            text += (
                f"; median {summary.median:,.0f} QPS, 95% CI {summary.ci_low:,.0f}–"
                f"{summary.ci_high:,.0f}, CV {summary.cv_percent:.1f}%"
                + (" (NOISY)" if summary.noisy else "")
            )
    if not (step.trials[-1].valid if step.trials else step.valid):
        text += " (INVALID: late start)"
    return text


def _advance(ctx: RunContext, index: int) -> None:
    """The next step of this round, else the first step of the next round, else the end."""
    st = ctx.st
    round_ = st.current_round or 0
    if index + 1 < len(st.steps):
        st.current_step = index + 1
    elif round_ + 1 < ctx.spec.repeats:
        st.current_round = round_ + 1
        st.current_step = 0
    else:
        st.current_step = len(st.steps)


def save_series(ctx: RunContext, step: StepStatus, pods: list[JSON]) -> None:
    """Keep the per-interval series of every client in the results ConfigMap."""
    run, st = ctx.run, ctx.st
    name = object_name(run.name, "results")
    # Earlier steps' series are kept: the ConfigMap is rewritten whole after each step.
    current = ctx.kube.configmap_data(run.namespace, name) or {}
    try:
        series = dict(json.loads(current.get("series.json") or "{}"))
    except (TypeError, ValueError):  # hand-edited or truncated: start the series afresh
        series = {}
    per_client = {}
    for pod in pods:
        log = ctx.kube.pod_log(run.namespace, pod["metadata"]["name"], RUNNER_CONTAINER)
        found = read_series(log or "")
        if found is not None:
            per_client[client_index(pod)] = found
    round_ = st.current_round or 0
    series[str(step.index) if not round_ else f"{step.index}.{round_}"] = {
        "workload": step.workload,
        "threads": step.threads,
        "clients": per_client,
    }
    steps = [s.model_dump(by_alias=True, exclude_none=True, mode="json") for s in st.steps]
    ctx.kube.upsert_configmap(build_results_configmap(run, name, series, steps))
    st.results_config_map = name
