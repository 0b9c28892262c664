"""BenchmarkSchedule decisions: fire times, what to do now, and which finished runs to delete."""

# Cron library: cronsim (https://github.com/cuu508/cronsim), not croniter.
# - croniter's original author declared it unmaintained and abandoned in December 2024 (PyPI
#   still carried "DO NOT USE" well into 2025/2026); pallets-eco adopted it, but projects such
#   as buildbot, salt and django-q2 were already moving off it, and its DST handling with
#   zoneinfo needed fixes after the move.
# - cronsim is maintained by the Healthchecks author for Healthchecks' production use, has no
#   dependencies, ships type hints (py.typed), supports zoneinfo natively (2.0+), and aims to
#   match Debian cron exactly, DST transitions included, with tests for them.
#
# What cronsim (so this module) does at DST transitions, as Debian cron does (cron(8)):
# - Expressions naming a specific minute AND hour (e.g. `0 2 * * *`): a wall time that does
#   not exist in spring-forward fires once, at the first valid minute after the gap (02:30 in
#   America/New_York on 2026-03-08 fires at 03:00 EDT); a wall time repeated in fall-back
#   fires once, at its first occurrence (01:30 EDT, not again at 01:30 EST).
# - Expressions with `*` (or `*/n`) in the minute or hour field run "more frequently" and are
#   scheduled in real elapsed time: `0 * * * *` fires at both 01:00 EDT and 01:00 EST, because
#   two real hours pass. Nightly benchmark schedules are of the first kind.

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError
from pydantic import BaseModel, ConfigDict, Field

from tidb_bench_operator.domain.api.common import TERMINAL_PHASES
from tidb_bench_operator.domain.api.results import StepKey
from tidb_bench_operator.domain.api.run_status import BenchmarkRunStatus, StepStatus
from tidb_bench_operator.domain.api.schedule import BenchmarkScheduleSpec, HistoryEntry, HistoryStep
from tidb_bench_operator.domain.stats.trials import valid_trial_qps
from tidb_bench_operator.errors import SpecError

#: Macros accepted by the spec (models._CRON_MACROS), spelled out; cronsim has no macros.
CRON_MACROS: dict[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

#: Kubernetes object names used as label values must fit in 63 characters.
MAX_RUN_NAME = 63

#: Missed fire times are counted up to this many (for the message only; still one catch-up).
MAX_MISSED_COUNT = 100

#: Look-back windows for the latest missed fire time, so a long downtime with an every-minute
#: schedule never walks millions of fire times: the first window that holds one is walked.
_LOOKBACK = (
    timedelta(hours=1),
    timedelta(days=1),
    timedelta(days=32),
    timedelta(days=367),
    timedelta(days=366 * 5),
)


class _Model(BaseModel):
    """Base of this module's value objects: immutable, snake_case."""

    model_config = ConfigDict(frozen=True)


class ScheduleState(_Model):
    """What decide() needs from a BenchmarkSchedule object (metadata and status)."""

    name: str = Field(description="metadata.name of the BenchmarkSchedule; prefixes run names.")
    namespace: str = Field(
        default="", description="metadata.namespace: with the name, the hash of a cut run name."
    )
    created_at: datetime = Field(
        description="metadata.creationTimestamp: fire times before it were never due."
    )
    last_schedule_time: datetime | None = Field(
        default=None,
        description="status.lastScheduleTime: the latest fire time a run was made for.",
    )


class ActiveRun(_Model):
    """A BenchmarkRun of this schedule that has not finished yet."""

    name: str = Field(description="BenchmarkRun name.")
    scheduled_time: datetime | None = Field(
        default=None, description="The fire time it was created for, when known."
    )


class ScheduleDecision(_Model):
    """What the controller should do now for one schedule, and why."""

    action: Literal["create", "replace", "skip", "nothing"] = Field(
        description="create: make `run_name`; replace: delete `delete_runs`, then make "
        "`run_name`; skip: a run is due but concurrencyPolicy Forbid holds it back; "
        "nothing: suspended, not yet due, the due run already exists, or it is past "
        "startingDeadlineSeconds."
    )
    reason: str = Field(description="One sentence for events and status.message.")
    run_name: str | None = Field(
        default=None,
        description="Deterministic name of the run to create (`<schedule>-<unix-minutes>`): "
        "AlreadyExists on create means an earlier controller made it; record and move on.",
    )
    scheduled_time: datetime | None = Field(
        default=None,
        description="The fire time the run is for (UTC); record it as lastScheduleTime.",
    )
    delete_runs: tuple[str, ...] = Field(
        default=(), description="Active runs to delete before creating (Replace)."
    )
    missed: int = Field(
        default=0,
        description="Fire times passed since the last run that get no run of their own (capped "
        "at MAX_MISSED_COUNT).",
    )
    next_time: datetime | None = Field(
        default=None, description="The next fire time after `now` (UTC): when to look again."
    )


# --------------------------------------------------------------------------- fire times


def compute_cron_expression(schedule: str) -> str:
    """The 5-field expression for a spec's `schedule` (macros spelled out)."""
    text = schedule.strip()
    return CRON_MACROS.get(text.lower(), text)


def compute_zone(time_zone: str | None) -> ZoneInfo | None:
    """The schedule's ZoneInfo; None means UTC (cronsim skips DST handling for it)."""
    if time_zone is None or time_zone in ("UTC", "Etc/UTC"):
        return None
    try:
        return ZoneInfo(time_zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise SpecError(
            "timeZone",
            f"unknown time zone {time_zone!r}",
            "use an IANA name such as UTC or Asia/Shanghai",
        ) from None


def _require_aware(name: str, value: datetime) -> None:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware, got naive {value.isoformat()}")


def iter_fire_times(spec: BenchmarkScheduleSpec, after: datetime) -> Iterator[datetime]:
    """Fire times strictly after `after`, ascending, as UTC datetimes.

    Raises SpecError for an expression or time zone cronsim rejects.
    """
    _require_aware("after", after)
    zone = compute_zone(spec.time_zone)
    start = after.astimezone(zone if zone is not None else UTC)
    try:
        times = CronSim(compute_cron_expression(spec.schedule), start)
    except CronSimError as exc:
        raise SpecError(
            "schedule",
            f"{spec.schedule!r} is not a valid cron expression: {exc}",
            "use 5 fields (minute hour day-of-month month day-of-week), e.g. '0 2 * * *'",
        ) from None
    previous = after.astimezone(UTC)
    for local in times:
        fire = local.astimezone(UTC)
        # cronsim walks wall-clock time for fixed-time jobs; starting inside the second pass of
        # a fall-back hour it can yield that hour's first pass, which is already in the past.
        # Dropping anything not after the previous instant keeps the sequence strictly
        # increasing and makes the repeated hour fire once.
        if fire <= previous:
            continue
        previous = fire
        yield fire


def next_fire_time(spec: BenchmarkScheduleSpec, after: datetime) -> datetime:
    """The first fire time strictly after `after` (UTC), honouring spec.timeZone and DST.

    Raises SpecError for a bad expression or zone, or one that never fires (within 50 years).
    """
    for fire in iter_fire_times(spec, after):
        return fire
    raise SpecError(
        "schedule",
        f"{spec.schedule!r} never fires in the 50 years after {after.isoformat()}",
        "check the day-of-month and month fields",
    )


def period_seconds(spec: BenchmarkScheduleSpec, at: datetime) -> float:
    """Seconds between the next two fire times after `at`: how often the schedule should
    produce a run (a day for a nightly schedule), for "no success within its period" alerts.

    Raises SpecError like next_fire_time.
    """
    first = next_fire_time(spec, at)
    return (next_fire_time(spec, first) - first).total_seconds()


def compute_run_name(schedule_name: str, scheduled_time: datetime, namespace: str = "") -> str:
    """`<schedule>-<unix-minutes>`: the same fire time always gives the same name.

    When the name would pass MAX_RUN_NAME characters, the schedule part is cut and followed by
    8 hex digits of the SHA-256 of `namespace/schedule`, so two schedules whose names share
    their beginning still get names of their own.
    """
    _require_aware("scheduled_time", scheduled_time)
    suffix = f"-{int(scheduled_time.timestamp()) // 60}"
    if len(schedule_name) + len(suffix) <= MAX_RUN_NAME:
        return schedule_name + suffix
    digest = hashlib.sha256(f"{namespace}/{schedule_name}".encode()).hexdigest()[:8]
    prefix = schedule_name[: MAX_RUN_NAME - len(suffix) - len(digest) - 1].rstrip("-.")
    return f"{prefix}-{digest}{suffix}"


def _latest_due(
    spec: BenchmarkScheduleSpec, since: datetime, now: datetime
) -> tuple[datetime | None, int]:
    """The latest fire time in (since, now] and how many there are (capped), or (None, 0)."""
    latest: datetime | None = None
    for window in (*_LOOKBACK, now - since):
        start = max(since, now - window)
        found = list(_take_until(iter_fire_times(spec, start), now))
        if found:
            latest = found[-1]
            break
        if start == since:
            break
    if latest is None:
        return None, 0
    count = 0
    for _ in _take_until(iter_fire_times(spec, since), now):
        count += 1
        if count >= MAX_MISSED_COUNT:
            break
    return latest, count


def _take_until(times: Iterator[datetime], end: datetime) -> Iterator[datetime]:
    for fire in times:
        if fire > end:
            return
        yield fire


def _fmt(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def decide(
    spec: BenchmarkScheduleSpec,
    state: ScheduleState,
    now: datetime,
    active_runs: Sequence[ActiveRun],
) -> ScheduleDecision:
    """What to do at `now`: create, replace, skip or nothing, with the reason.

    Missed fire times (controller downtime) never cause a storm: only the latest one gets a
    run, and only within startingDeadlineSeconds when that is set. Under Forbid a due run
    waits while another is active and is made once that finishes (as Kubernetes CronJob does),
    unless the deadline or the next fire time comes first.
    """
    _require_aware("now", now)
    _require_aware("state.created_at", state.created_at)
    now = now.astimezone(UTC)
    upcoming = next_fire_time(spec, now)
    if spec.suspend:
        return ScheduleDecision(
            action="nothing",
            reason="suspended (spec.suspend is true): no runs are created",
            next_time=upcoming,
        )
    since = (state.last_schedule_time or state.created_at).astimezone(UTC)
    if since >= now:
        return ScheduleDecision(
            action="nothing", reason=f"not due until {_fmt(upcoming)}", next_time=upcoming
        )
    due, count = _latest_due(spec, since, now)
    if due is None:
        return ScheduleDecision(
            action="nothing", reason=f"not due until {_fmt(upcoming)}", next_time=upcoming
        )
    missed = count - 1
    late = now - due
    plus = "+" if count >= MAX_MISSED_COUNT else ""
    passed = f"{count}{plus} fire times passed since {_fmt(since)}"
    missed_text = f"{passed}; only the latest, {_fmt(due)}, gets a run" if missed else ""
    deadline = spec.starting_deadline_seconds
    if deadline is not None and late > timedelta(seconds=deadline):
        reason = (
            f"run due at {_fmt(due)} is {int(late.total_seconds())}s late, past "
            f"startingDeadlineSeconds ({deadline}s): skipped"
        )
        if missed:
            reason += f" ({passed}, none gets a run)"
        return ScheduleDecision(
            action="nothing",
            reason=f"{reason}; next run at {_fmt(upcoming)}",
            scheduled_time=due,
            missed=count,
            next_time=upcoming,
        )
    name = compute_run_name(state.name, due, state.namespace)
    others = [run for run in active_runs if run.name != name]
    if len(others) < len(active_runs):
        return ScheduleDecision(
            action="nothing",
            reason=f"run {name} for {_fmt(due)} already exists and is active",
            run_name=name,
            scheduled_time=due,
            next_time=upcoming,
        )
    what = missed_text or f"run due at {_fmt(due)}"
    if late >= timedelta(minutes=1):
        what += f" ({int(late.total_seconds())}s late)"
    names = ", ".join(run.name for run in others)
    if others and spec.concurrency_policy == "Forbid":
        until = (
            f"startingDeadlineSeconds ({deadline}s) passes"
            if deadline is not None
            else f"the next fire time ({_fmt(upcoming)})"
        )
        return ScheduleDecision(
            action="skip",
            reason=f"{what} held back: concurrencyPolicy Forbid and {names} still active; it "
            f"starts when they finish, unless {until} comes first",
            scheduled_time=due,
            missed=missed,
            next_time=upcoming,
        )
    if others and spec.concurrency_policy == "Replace":
        return ScheduleDecision(
            action="replace",
            reason=f"{what}: concurrencyPolicy Replace, deleting {names} and creating {name}",
            run_name=name,
            scheduled_time=due,
            delete_runs=tuple(run.name for run in others),
            missed=missed,
            next_time=upcoming,
        )
    reason = f"{what}: creating {name}"
    if others:
        reason += f" beside {names} (concurrencyPolicy Allow)"
    return ScheduleDecision(
        action="create",
        reason=reason,
        run_name=name,
        scheduled_time=due,
        missed=missed,
        next_time=upcoming,
    )


# --------------------------------------------------------------------------- history


def history_entry(run_name: str, status: BenchmarkRunStatus | Mapping[str, Any]) -> HistoryEntry:
    """The history record of a finished run; peak QPS from its summary, else its valid steps.

    Raises ValueError while the run is not finished. baselineQps/regressed are left unset for
    the regression check to fill in.
    """
    run = (
        status
        if isinstance(status, BenchmarkRunStatus)
        else BenchmarkRunStatus.model_validate(status)
    )
    if run.phase not in TERMINAL_PHASES:
        raise ValueError(f"run {run_name} is {run.phase}, not finished: it has no history yet")
    peak = run.summary.peak_qps if run.summary is not None else None
    if peak is None:
        values = [s.qps for s in run.steps if s.qps is not None and s.valid is not False]
        peak = max(values) if values else None
    return HistoryEntry(
        name=run_name,
        outcome=run.phase,
        peak_qps=peak,
        started_at=run.started_at,
        finished_at=run.finished_at,
    )


def trim_history(
    entries: Sequence[HistoryEntry], successful_limit: int, failed_limit: int
) -> tuple[list[HistoryEntry], list[str]]:
    """Split finished runs (oldest first) into those to keep and names of runs to delete.

    The newest `successful_limit` Succeeded and `failed_limit` Failed-or-Cancelled runs are
    kept; older ones are deleted, oldest first. Only BenchmarkRun objects are meant: the
    caller keeps history entries longer, as the regression baseline.
    """
    if successful_limit < 0 or failed_limit < 0:
        raise ValueError("history limits must be >= 0")
    succeeded = [e for e in entries if e.outcome == "Succeeded"]
    failed = [e for e in entries if e.outcome != "Succeeded"]
    doomed = {
        id(e)
        for group, limit in ((succeeded, successful_limit), (failed, failed_limit))
        for e in group[: max(len(group) - limit, 0)]
    }
    keep = [e for e in entries if id(e) not in doomed]
    delete = [e.name for e in entries if id(e) in doomed]
    return keep, delete


# ------------------------------------------------------------- what a run leaves in history
def compute_history_steps(status: BenchmarkRunStatus) -> list[HistoryStep]:
    """The numbers of a run's steps worth comparing later: finished, valid, with a QPS.

    Invalid steps and invalid trials never enter: a baseline holds only numbers that
    were measured fairly. Nor do rate steps (spec.rates): their QPS is the rate asked for
    while it is reached, not what the cluster can do, so comparing it would hide a regression.
    """
    return [
        HistoryStep(
            workload=s.workload,
            threads=s.threads,
            qps=s.qps,
            latency_ms=s.latency_ms.value if s.latency_ms is not None else None,
            trials=valid_trial_qps(s),
            cpu_ms_per_query=valid_trial_cpu(s),
        )
        for s in status.steps
        if s.qps is not None
        and s.phase == "Succeeded"
        and s.valid is not False
        and s.target_rate is None
    ]


def valid_trial_cpu(step: StepStatus) -> list[float]:
    """Server CPU ms per query of the step's valid trials that have it; a step measured once
    gives its resources' own. Empty when the step has no resource data."""
    if step.trials:
        return [
            t.cpu_ms_per_query for t in step.trials if t.valid and t.cpu_ms_per_query is not None
        ]
    own = step.resources.cpu_ms_per_query if step.resources is not None else None
    return [own] if own is not None and step.valid is not False else []


def count_invalid_trials(status: BenchmarkRunStatus) -> int:
    """How many measurements of a run were left out as invalid (trials, or whole steps)."""
    return sum(
        sum(1 for t in s.trials if not t.valid) if s.trials else int(s.valid is False)
        for s in status.steps
    )


def step_trials(steps: Sequence[HistoryStep]) -> dict[StepKey, list[float]]:
    """(workload, threads) -> the valid trials' QPS (one value for a run measured once)."""
    return {(s.workload, s.threads): list(s.trials) or [s.qps] for s in steps}


def step_cpu_trials(steps: Sequence[HistoryStep]) -> dict[StepKey, list[float]]:
    """(workload, threads) -> the valid trials' CPU ms per query, for steps that have any."""
    return {(s.workload, s.threads): list(s.cpu_ms_per_query) for s in steps if s.cpu_ms_per_query}


def keep_fingerprints(entries: list[HistoryEntry], baseline_runs: int) -> list[HistoryEntry]:
    """Drop the fingerprints of successful entries older than the newest baselineRuns + 1.

    Only those can be a baseline's (or the latest run's) fingerprint; the trend keeps
    its numbers, and the schedule's status stays small.
    """
    succeeded = [e.name for e in entries if e.outcome == "Succeeded"]
    keep = set(succeeded[-(baseline_runs + 1) :])
    return [
        e if e.name in keep or e.fingerprint is None else e.model_copy(update={"fingerprint": None})
        for e in entries
    ]
