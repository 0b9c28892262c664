"""Running: one step at a time — start its client Jobs, watch them, record what they measured.

With spec.repeats > 1 the sweep runs in rounds: every step once, then every step again, so
drift during the run (caches, compaction, a neighbour's load) reaches every step alike
instead of falling on one step's trials; status.currentRound says which round runs. A
capacity search (spec.capacitySearch) cannot run rounds, as its next step depends on the
last one's numbers: it measures each step's trials one after the other (currentRound counts
them) and, once the step has its median, appends the step the search chooses next
(domain/stats/capacity.py).

A step is `spec.clients` Jobs (one per client pod) that start together at an agreed time
(START_LEAD_SECONDS ahead; a client that starts late makes the step invalid). Once every
Job finished, their StepReports are combined into the step's numbers, the interval series
go to the run's results ConfigMaps (domain.results_store), and the next step starts in
the same reconcile.

Why over 500 lines: a step's life is one state machine (start, observe, retry, record,
take a recorded step back from the store, advance), and every part reads and writes the
same step and run status; split, each part would hand the step across modules.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from tidb_bench_operator.domain.api import load_shape
from tidb_bench_operator.domain.api.common import StepPhase
from tidb_bench_operator.domain.api.guard import Disturbance
from tidb_bench_operator.domain.api.results import RateOutcome, StepResult
from tidb_bench_operator.domain.api.run_status import StepStatus
from tidb_bench_operator.domain.api.runner_message import (
    RunnerFailure,
    StepReport,
    combine_clients,
    is_retried,
    read_series,
)
from tidb_bench_operator.domain.api.trial import (
    MAX_STATUS_DISTURBANCES,
    MAX_STATUS_TRIALS,
    STATUS_DISTURBANCES,
    Trial,
)
from tidb_bench_operator.domain.guard import series_disturbances
from tidb_bench_operator.domain.guard import summary as disturbance_summary
from tidb_bench_operator.domain.jobs import (
    JOB_CONTROLLER_UID,
    client_index,
    job_failure_text,
    job_finished,
    loss_cause,
    run_selector,
    runner_report,
    start_at_of,
    start_failure,
    unschedulable_reason,
    was_killed,
)
from tidb_bench_operator.domain.manifests import (
    START_LEAD_SECONDS,
    build_runner_job,
    build_step_runner_args,
    object_name,
    step_job_name,
)
from tidb_bench_operator.domain.objects import JSON
from tidb_bench_operator.domain.queue import queue_key
from tidb_bench_operator.domain.resources.bound import status_resources
from tidb_bench_operator.domain.results_store import StepSeries, step_series
from tidb_bench_operator.domain.stats.capacity import following, planned_steps
from tidb_bench_operator.domain.stats.trials import with_trial
from tidb_bench_operator.domain.status import condition_reason
from tidb_bench_operator.domain.sysbench.rate import client_rates, rate_outcome
from tidb_bench_operator.domain.sysbench.rate import describe as describe_rate
from tidb_bench_operator.reconcile.run import guard, usage
from tidb_bench_operator.reconcile.run.context import RunContext
from tidb_bench_operator.reconcile.run.logs import LOG_READS, read_logs
from tidb_bench_operator.reconcile.run.stored import (
    keep_nodes,
    save_results,
    stored_result,
    stored_step,
    stored_trials,
)

#: A step's Jobs may run this long beyond the start lead, warm-up and duration.
STEP_DEADLINE_SLACK_SECONDS = 300
#: A retried step starts again after this many seconds times its retry number (the database
#: that went away gets time to come back).
RETRY_DELAY_SECONDS = 3.0


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
    """Create the step's client Jobs (idempotent: their names are fixed per attempt)."""
    spec, run, st = ctx.spec, ctx.run, ctx.st
    if _pausing(ctx, step) or not guard.gate_passes(ctx, step):
        return
    round_ = st.current_round or 0
    names = [
        step_job_name(run.name, step.index, c, round_, step.attempt) for c in range(spec.clients)
    ]
    selector = run_selector(run, "step", step.index, round_)
    existing = _current(ctx.kube.jobs(run.namespace, selector), names)
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
    shares = client_rates(step.target_rate, spec.clients) if step.target_rate else None
    for c, name in enumerate(names):
        args = build_step_runner_args(
            spec, ctx.endpoint, workload=step.workload, threads=step.threads, start_at=start_at,
            rate=shares[c] if shares else None,
            namespace=run.namespace,
        )  # fmt: skip
        job = build_runner_job(
            run, spec, ctx.endpoint, name=name, role="step", runner_args=args,
            step=step.index, client=c, round_=round_, active_deadline_seconds=deadline,
            queue=queue_key(spec, run.namespace),
            image=ctx.deps.image, workloads=[step.workload],
        )  # fmt: skip
        ctx.kube.create_job(job)
    step.phase = StepPhase.RUNNING
    step.started_at = ctx.now
    step.job_names = names
    step.pod_names = []
    step.disturbances = []
    step.guard_wait_since = None
    guard.begin(ctx, step)
    msg = (
        f"{_place(ctx, step.index)}: {step.workload} at {step.threads} threads"
        f" x {spec.clients} client(s)"
        + (f", target {step.target_rate:,}/s (open loop)" if step.target_rate else "")
        + (f", trial {round_ + 1}/{spec.repeats}" if spec.repeats > 1 else "")
        + (f", starting together at {start_at.isoformat()}" if start_at else "")
        + (f" (retry {step.attempt} of {spec.step_retries})" if step.attempt else "")
    )
    ctx.condition("Progressing", "True", "StepRunning", msg)
    ctx.event("Normal", "StepStarted", msg)
    ctx.wait(1.0)


def _pausing(ctx: RunContext, step: StepStatus) -> bool:
    """Whether the pause before a step (spec.pauseSeconds) still runs: wait it out."""
    pause = load_shape.pause_seconds(ctx.spec)
    last = max((s.finished_at for s in ctx.st.steps if s.finished_at is not None), default=None)
    if not pause or last is None:
        return False
    until = last + timedelta(seconds=pause)
    if ctx.now >= until:
        return False
    ctx.condition(
        "Progressing", "True", "Pausing",
        f"step {step.index + 1}/{len(ctx.st.steps)} starts at {until.isoformat()}: a {pause}s "
        "pause after the last step (pauseSeconds)",
    )  # fmt: skip
    ctx.wait(min((until - ctx.now).total_seconds(), 30.0))
    return True


def _current(jobs: list[JSON], names: list[str]) -> list[JSON]:
    """The Jobs of this attempt (a retried step's old Jobs may still be going away)."""
    return [j for j in jobs if j["metadata"]["name"] in names]


def observe(ctx: RunContext, step: StepStatus) -> None:
    """Look at a running step's Jobs: retry, wait, fail, or record it."""
    spec, run = ctx.spec, ctx.run
    round_ = ctx.st.current_round or 0
    selector = run_selector(run, "step", step.index, round_)
    names = step.job_names or [
        step_job_name(run.name, step.index, c, round_, step.attempt) for c in range(spec.clients)
    ]
    jobs = _current(ctx.kube.jobs(run.namespace, selector), names)
    uids = {j["metadata"]["uid"] for j in jobs}
    pods = [
        p for p in ctx.kube.pods(run.namespace, selector)
        if (p["metadata"].get("labels") or {}).get(JOB_CONTROLLER_UID) in uids
    ]  # fmt: skip
    if len(jobs) < spec.clients:
        if not _recorded_already(ctx, step):
            retry(ctx, step, "a client Job was deleted")
        return
    finished = bool(jobs) and all(job_finished(j) for j in jobs)
    if guard.watch(ctx, step, pods, final=finished):
        return  # disturbed under guard policy Abort: the run has failed
    hopeless = start_failure(pods, ctx.now)
    if hopeless:
        ctx.delete_jobs(role="step", step=step.index)
        step.phase = StepPhase.FAILED
        ctx.fail(
            "ContainerCannotStart",
            f"step {step.index + 1} ({step.workload}, {step.threads} threads): the benchmark "
            f"container cannot start: {hopeless}; fix spec.image (or remove it to use the "
            "controller's runner image) or the Secret the pod reads",
        )
    elif unschedulable_reason(pods):
        _unschedulable(ctx, step, unschedulable_reason(pods))
    elif not finished:
        seen = {p["metadata"]["name"] for p in pods}
        gone = [n for n in step.pod_names if n not in seen]
        if gone:
            retry(ctx, step, f"client pod {gone[0]} was deleted mid-step")
            return
        step.pod_names = sorted(set(step.pod_names) | seen)
        usage.sample(ctx, pods)
        if condition_reason(ctx.st.conditions, "Progressing") == "Unschedulable":
            ctx.condition("Progressing", "True", "StepRunning", f"step {step.index + 1}: scheduled")
        ctx.wait(1.0)
    else:
        reports = _reports(ctx, step, jobs, pods)
        if reports is not None:
            record(ctx, step, reports, pods)


def retry(ctx: RunContext, step: StepStatus, cause: str) -> None:
    """A client was lost (`cause`): run the step again, or fail once spec.stepRetries are used.

    Its clients cannot be re-synchronised, so the whole step starts over with new Jobs (a
    lost step would be worse than a repeated one); steps already measured are kept.
    """
    what = f"step {step.index + 1} ({step.workload}, {step.threads} threads)"
    ctx.delete_jobs(role="step", step=step.index, round_=ctx.st.current_round or 0)
    lost = step.attempt - step.guard_retries  # attempts after a guard retry do not count
    if lost >= ctx.spec.step_retries:
        step.phase = StepPhase.FAILED
        step.finished_at = ctx.now
        step.notes = [*step.notes, f"attempt {step.attempt + 1}: {cause}"]
        ctx.fail(
            "StepFailed",
            f"{what}: {cause}; it ran {lost + 1} time(s) and spec.stepRetries is "
            f"{ctx.spec.step_retries}",
        )
        return
    step.notes = [*step.notes, f"attempt {step.attempt + 1} stopped at {ctx.now.isoformat()}: "
                  f"{cause}; run again"]  # fmt: skip
    step.attempt += 1
    step.phase = StepPhase.PENDING
    step.job_names = []
    step.pod_names = []
    ctx.event("Warning", "StepRetried", f"{what}: {cause}; retry {lost + 1} of "
              f"{ctx.spec.step_retries}")  # fmt: skip
    ctx.condition("Progressing", "True", "StepRetried", f"{what}: {cause}")
    ctx.wait(RETRY_DELAY_SECONDS * step.attempt)


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
    """Every client's report, in client order; None when the step was retried or failed.

    A client without a result (its pod killed or gone) or one that lost the database is
    retried; a runner that reports a failure of the step itself fails the run.
    """
    reports = []
    for job in sorted(jobs, key=lambda j: j["metadata"]["name"]):
        report = runner_report(job, pods, StepReport)
        unread = isinstance(report, RunnerFailure) and report.kind == "unreadable"
        if report is None or (unread and was_killed(job, pods)):
            retry(ctx, step, loss_cause(job, pods))
            return None
        if isinstance(report, RunnerFailure):
            if is_retried(report):
                retry(ctx, step, f"Job {job['metadata']['name']}: {report.message}")
                return None
            step.phase = StepPhase.FAILED
            step.finished_at = ctx.now
            ctx.fail(
                "StepFailed",
                f"step {step.index + 1} ({step.workload}, {step.threads} threads), Job "
                f"{job['metadata']['name']}: {report.message or job_failure_text(job, pods)}",
            )
            return None
        reports.append(report)
    return reports


def record(ctx: RunContext, step: StepStatus, reports: list[StepReport], pods: list[JSON]) -> None:
    """Put the combined numbers into the step, keep the series, and move to the next step.

    The guard judges the clients' interval series here; a disturbed step is invalid, and
    under guard policy Retry it is kept as an invalid trial and measured again.
    """
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
    if step.target_rate:
        measured = _rate(ctx, step, combined.result.tps, reports)
        notes.append(("" if measured.reached else "RATE NOT REACHED: ") + describe_rate(measured))
    series, series_notes, per_client, unread = read_step_series(ctx, step, pods)
    resources = usage.measure(ctx, step, reports, pods, combined.result)
    if guard.active(ctx):
        found = series_disturbances(
            per_client, spec.guard, started=usage.measured_from(ctx, step, reports)
        )
        found += [
            Disturbance(at=ctx.now, source="sysbench", what="Unjudged", object=name,
                        message=f"{why}: its interval series was not judged, so nothing "
                        "shows the step was undisturbed")
            for name, why in unread
        ]  # fmt: skip
        if guard.record(ctx, step, found):
            return  # Abort: the run has failed
    disturbed = list(step.disturbances)
    if disturbed:
        notes.append(f"INVALID: disturbed while measured: {disturbance_summary(disturbed)}")
    valid = not combined.late and not disturbed
    again = (
        bool(disturbed) and spec.guard.policy == "Retry" and step.guard_retries < spec.guard.retries
    )
    trial: Trial | None = None
    if spec.repeats == 1 and not step.trials and not again:
        updated = step.with_result(combined.result)
        updated.valid = valid
        updated.client_saturated = combined.saturated
        updated.notes = [*step.notes, *notes]
        updated.phase = StepPhase.SUCCEEDED
    else:
        trial = Trial(
            round=round_, qps=combined.result.qps, result=combined.result, valid=valid,
            client_saturated=combined.saturated, finished_at=ctx.now,
            notes=[*notes, *series_notes, *series.notes], disturbances=disturbed,
            cpu_ms_per_query=resources.cpu_ms_per_query if resources else None,
        )  # fmt: skip
        if (step.trials_stored or 0) > len(step.trials):  # status lists some: read them all
            step = step.model_copy(update={"trials": stored_trials(ctx, step)})
        updated = with_trial(
            step, trial, spec.noisy_cv_percent, stored=lambda m: stored_result(ctx, step, m)
        )
        updated.disturbances = []
        label = f"trial {round_ + 1}" if spec.repeats > 1 else f"measurement {len(updated.trials)}"
        updated.notes = [*step.notes, *(f"{label}: {n}" for n in notes)]
        rounds = {t.round for t in updated.trials}
        done = not again and len(rounds) >= spec.repeats
        updated.phase = StepPhase.SUCCEEDED if done else StepPhase.PENDING
        if not done:  # the next trial has spec.stepRetries of its own
            updated.attempt = updated.attempt + 1 if again else 0
    if again:
        updated.guard_retries += 1
        updated.guard_wait_since = ctx.now
    updated.notes = [*updated.notes, *series_notes, *series.notes]
    updated.finished_at = ctx.now
    updated.resources = resources or updated.resources
    if step.target_rate:  # the step's numbers are its median trial's: so is its rate
        updated.rate = _rate(ctx, step, updated.tps or 0.0, reports)
    keep_nodes(ctx, pods)
    save_results(ctx, updated, series, round_ if not again else _kept_round(updated), trial)
    _keep(ctx, step.index, updated)
    # Its results are stored: the trial's Jobs (and pods) go now, not at the run's TTL. Should
    # the controller stop before this look's status is written, the next look finds the
    # Jobs gone and takes the step from the store (_recorded_already), not measuring again.
    ctx.delete_jobs(role="step", step=step.index, round_=round_)
    text = _recorded_text(ctx, updated, combined.result, round_) + usage.event_text(resources)
    ctx.event("Normal", "StepSucceeded", text)
    if again:
        what = f"step {step.index + 1} ({step.workload}, {step.threads} threads)"
        ctx.event(
            "Warning", "StepMeasuredAgain",
            f"{what}: disturbed ({disturbance_summary(disturbed)}); kept as an invalid "
            f"measurement, measured again once the preflight checks pass (guard retry "
            f"{updated.guard_retries} of {spec.guard.retries})",
        )  # fmt: skip
        ctx.wait(0.5)
        ctx.again = True
        return
    _advance(ctx, step.index)
    ctx.wait(0.5)
    ctx.again = True


def _rate(ctx: RunContext, step: StepStatus, tps: float, reports: list[StepReport]) -> RateOutcome:
    """A rate step's outcome at `tps` events/s, with this trial's clients' queues."""
    assert step.target_rate is not None
    return rate_outcome(
        step.target_rate, tps, ctx.spec.rate_tolerance_percent,
        [r.queue_max for r in reports], [r.queue_last for r in reports],
    )  # fmt: skip


def _keep(ctx: RunContext, index: int, updated: StepStatus) -> None:
    """A recorded step into status, its trials and disturbances cut to the status bound."""
    st = ctx.st
    n = max(len(st.steps), planned_steps(ctx.spec))
    st.steps[index] = updated.bounded(
        max(1, MAX_STATUS_TRIALS // n), max(STATUS_DISTURBANCES, MAX_STATUS_DISTURBANCES // n)
    )
    if updated.resources is not None:  # whole in the results store (save_results)
        st.steps[index].resources = status_resources(updated.resources, n, index)
    st.invalid_steps = sum(1 for s in st.steps if s.valid is False)


def _recorded_already(ctx: RunContext, step: StepStatus) -> bool:
    """Whether a look recorded this attempt, deleted its Jobs and stopped before its status
    was written (a controller killed in between): the results store has the step as that look
    made it, finished after this attempt started. Then the step is taken from there, as
    recorded, rather than measured again beside what came after it (the run's cleanup Job
    may already be dropping the tables)."""
    found = stored_step(ctx, step)
    if (
        found is None
        or found.index != step.index
        or found.finished_at is None
        or step.started_at is None
        or found.finished_at <= step.started_at  # a round before, recorded as this started
    ):
        return False
    _keep(ctx, step.index, found)
    ctx.st.results_config_map = object_name(ctx.run.name, "results")
    what = f"step {step.index + 1} ({step.workload}, {step.threads} threads)"
    ctx.event(
        "Normal", "StepSucceeded",
        f"{what}: recorded before the controller restarted; taken from the results store",
    )  # fmt: skip
    if found.guard_wait_since is None:  # else it is measured again, as record left it
        _advance(ctx, step.index)
    ctx.wait(0.5)
    ctx.again = True
    return True


def _kept_round(step: StepStatus) -> int:
    """Where a measurement that will be repeated keeps its series: a round number of its own.

    Series objects are named by step and round; a disturbed measurement's series is kept
    under round 100 + n (n counting the step's measurements), beyond any real round.
    """
    return 100 + len(step.trials)


def _recorded_text(ctx: RunContext, step: StepStatus, result: StepResult, round_: int) -> str:
    """`step 2/4: oltp_point_select at 2 threads: 41,234 QPS, p95 0.31 ms` (+ trial, interval)."""
    p = result.latency_ms
    pct = f"p{p.percentile} {p.value:.2f} ms" if p.value is not None else "no percentile"
    text = (
        f"{_place(ctx, step.index)}: {result.workload} at {result.threads} "
        f"threads: {result.qps:,.0f} QPS, {pct}"
    )
    if step.rate is not None:
        text += f", target {step.rate.target:,}/s " + (
            "reached" if step.rate.reached else f"NOT REACHED ({step.rate.achieved:,.0f}/s)"
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
    last = step.trials[-1] if step.trials else None
    if not (last.valid if last is not None else step.valid):
        disturbed = last.disturbances if last is not None else step.disturbances
        text += (
            f" (INVALID: {disturbance_summary(disturbed, 1)})"
            if disturbed
            else " (INVALID: late start)"
        )
    return text


def _place(ctx: RunContext, index: int) -> str:
    """`step 2/4`; in a capacity search, whose steps are chosen as it goes, `search step 2
    (of at most 12)`."""
    if ctx.spec.capacity_search is None:
        return f"step {index + 1}/{len(ctx.st.steps)}"
    return f"search step {index + 1} (of at most {planned_steps(ctx.spec)})"


def _advance(ctx: RunContext, index: int) -> None:
    """The next step of this round, else the first step of the next round, else the end."""
    st = ctx.st
    round_ = st.current_round or 0
    if ctx.spec.capacity_search is not None:
        _advance_search(ctx, index)
    elif index + 1 < len(st.steps):
        st.current_step = index + 1
    elif round_ + 1 < ctx.spec.repeats:
        st.current_round = round_ + 1
        st.current_step = 0
    else:
        st.current_step = len(st.steps)


def _advance_search(ctx: RunContext, index: int) -> None:
    """The step's next trial, else the step the search chooses next, else the end."""
    st, spec = ctx.st, ctx.spec
    if st.steps[index].phase != StepPhase.SUCCEEDED:  # a trial of spec.repeats still to go
        st.current_round = (st.current_round or 0) + 1
        return
    chosen = following(spec, st.steps)
    if chosen is None:
        st.current_step = len(st.steps)
        return
    workload, threads = chosen
    st.steps.append(
        StepStatus(index=len(st.steps), workload=workload, threads=threads, phase=StepPhase.PENDING)
    )
    st.current_step = len(st.steps) - 1
    st.current_round = 0 if spec.repeats > 1 else None


def read_step_series(
    ctx: RunContext, step: StepStatus, pods: list[JSON]
) -> tuple[StepSeries, list[str], dict[str, list[dict[str, Any]]], list[tuple[str, str]]]:
    """Every client's interval series from its log; a log without a readable one is noted.

    Also each series as read, by client pod name, for the guard; and the clients whose
    series could not be read (pod name, why), which the guard cannot judge.
    """
    per_client = {}
    by_pod: dict[str, list[dict[str, Any]]] = {}
    notes = []
    unread: list[tuple[str, str]] = []
    logs = read_logs(ctx, [pod["metadata"]["name"] for pod in pods])
    for pod, log in zip(pods, logs, strict=True):
        name = pod["metadata"]["name"]
        if log is None:
            why = f"the log of client pod {name} could not be read ({LOG_READS} tries)"
            notes.append(f"client {client_index(pod)}: {why}: its interval series is not kept")
            unread.append((name, why))
            continue
        try:
            found = read_series(log)
        except ValueError as exc:  # a garbled or cut series line: the numbers stand without it
            notes.append(
                f"client {client_index(pod)}: the interval series in the log of pod "
                f"{name} could not be read ({exc}): not kept"
            )
            unread.append((name, f"the interval series in the log of pod {name} is garbled"))
            continue
        if found is not None:
            per_client[client_index(pod)] = found
            by_pod[name] = found
    return step_series(step.workload, step.threads, per_client), notes, by_pod, unread
