"""BenchmarkSchedule orchestration: fire runs on time, keep their history, flag regressions.

One call of `ScheduleReconciler.reconcile` lists the schedule's BenchmarkRuns (label
`tidbbench.io/schedule=<name>`), records every newly finished one in status.history and
compares its per-step QPS with the previous successful runs, deletes runs beyond the history
limits, and creates the run that is due (domain.schedule.decide says which). It returns the
status patch; the Driver writes it (controller/driver.py). Every action is idempotent: the
run name is derived from its fire time, so a controller killed between creating a run and
writing lastScheduleTime finds the same run again and does not make a second one.

Runs a person creates with the label (the equivalent of `kubectl create job --from=cronjob/x`)
count as runs of the schedule too: they are held back by Forbid, recorded and compared.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from pydantic import ValidationError

from tidb_bench_operator.domain.api.common import is_terminal
from tidb_bench_operator.domain.api.resources import parse_schedule_spec
from tidb_bench_operator.domain.api.run_status import BenchmarkRunStatus, Condition
from tidb_bench_operator.domain.api.schedule import (
    BenchmarkScheduleSpec,
    BenchmarkScheduleStatus,
    HistoryEntry,
)
from tidb_bench_operator.domain.fingerprint import describe_diff, diff_fingerprints
from tidb_bench_operator.domain.manifests import (
    ANNOTATION_SCHEDULED_AT,
    LABEL_SCHEDULE,
    RunRef,
    build_event,
    build_scheduled_run,
    label_value,
)
from tidb_bench_operator.domain.objects import JSON
from tidb_bench_operator.domain.schedule import (
    ActiveRun,
    ScheduleDecision,
    ScheduleState,
    compute_history_steps,
    count_invalid_trials,
    decide,
    history_entry,
    keep_fingerprints,
    step_trials,
    trim_history,
)
from tidb_bench_operator.domain.stats.efficiency import Efficiency, judge_efficiency
from tidb_bench_operator.domain.stats.inference import compare_runs
from tidb_bench_operator.domain.stats.trend import (
    describe_change_point,
    efficiency_condition,
    history_change_points,
    regression_condition,
)
from tidb_bench_operator.domain.status import (
    condition_reason,
    parse_time,
    set_condition,
    status_patch,
    utc_now,
)
from tidb_bench_operator.errors import SpecError

#: Failed/cancelled entries kept in status.history even when failedRunsHistoryLimit is lower,
#: so `kubectl get benchmarkschedule -o yaml` still shows why recent runs failed.
MIN_FAILED_HISTORY = 3
#: The condition of the efficiency verdict (server CPU per query against the baseline).
_EFFICIENCY = "EfficiencyRegressed"


class ScheduleKube(Protocol):
    """The Kubernetes operations the schedule reconciler uses (adapters.k8s.Kube has them).

    Failures other than "not found" raise errors.KubeError.
    """

    def benchmark_runs_in(self, namespace: str, selector: str) -> list[JSON]:
        """BenchmarkRuns in one namespace matching a label selector."""
        ...

    def create_benchmark_run(self, body: JSON) -> tuple[JSON, bool]:
        """Create a run; (the object, True), or (the existing one of that name, False)."""
        ...

    def delete_benchmark_run(self, namespace: str, name: str) -> bool:
        """Delete a run; False when it was already gone."""
        ...

    def patch_benchmark_run_status(self, namespace: str, name: str, status: JSON) -> JSON:
        """Merge-patch a run's status; returns the stored run."""
        ...

    def create_event(self, body: JSON) -> None:
        """Post an Event (best effort)."""
        ...


@dataclass
class ScheduleOutcome:
    """The result of one reconcile: a merge patch for .status."""

    status: dict[str, Any]
    #: The next fire time: nothing is due before it unless one of the schedule's runs or
    #: the schedule itself changes (the controller wakes it then).
    next_time: datetime | None = None


@dataclass
class _Ctx:
    ref: RunRef
    st: BenchmarkScheduleStatus
    now: datetime
    out: ScheduleOutcome
    unreadable: set[str] = field(default_factory=set)


class ScheduleReconciler:
    """Drives one BenchmarkSchedule: creates due runs, records finished ones, trims."""

    def __init__(self, kube: ScheduleKube, *, clock: Callable[[], datetime] = utc_now) -> None:
        self.kube = kube
        self.clock = clock

    # ------------------------------------------------------------------ entry point
    def reconcile(self, body: JSON) -> ScheduleOutcome:
        """One look at the schedule in `body` (a plain dict); returns the status patch."""
        meta = body["metadata"]
        ref = RunRef(meta["name"], meta["namespace"], meta["uid"])
        old = dict(body.get("status") or {})
        st = BenchmarkScheduleStatus.model_validate(old)
        ctx = _Ctx(ref=ref, st=st, now=self.clock(), out=ScheduleOutcome(status={}))
        st.observed_generation = meta.get("generation")
        try:
            spec = parse_schedule_spec(body.get("spec") or {})
        except SpecError as exc:
            self._invalid(ctx, str(exc))
            return self._finish(ctx, old)
        runs = self.kube.benchmark_runs_in(
            ref.namespace, f"{LABEL_SCHEDULE}={label_value(ref.name)}"
        )
        active = [r for r in runs if not is_terminal(_phase(r))]
        finished = [r for r in runs if is_terminal(_phase(r))]
        self._record(ctx, spec, finished)
        self._trim(ctx, spec, finished)
        try:
            self._fire(ctx, spec, body, active)
        except SpecError as exc:  # an expression the cron library rejects (e.g. minute 61)
            self._invalid(ctx, str(exc))
        return self._finish(ctx, old)

    # ------------------------------------------------------------------ history and regression
    def _record(self, ctx: _Ctx, spec: BenchmarkScheduleSpec, finished: Sequence[JSON]) -> None:
        """Append newly finished runs to history, oldest first, comparing successful ones."""
        st = ctx.st
        known = {e.name for e in st.history}
        recorded = False
        for run in sorted(finished, key=_finish_order):
            name = run["metadata"]["name"]
            if name in known:
                continue
            try:
                status = BenchmarkRunStatus.model_validate(run.get("status") or {})
            except ValidationError:
                # Written by something else: never let one bad object stop the schedule, and
                # never delete what we could not read.
                ctx.unreadable.add(name)
                continue
            entry = history_entry(name, status).model_copy(
                update={
                    "steps": compute_history_steps(status),
                    "invalid_trials": count_invalid_trials(status),
                    "fingerprint": status.fingerprint,
                }
            )
            if entry.outcome == "Succeeded":
                entry = self._compare(ctx, spec, run, entry)
                st.last_successful_run = name
                st.last_peak_qps = entry.peak_qps
                st.regressed = bool(entry.regressed)
                st.verdict = entry.verdict
                st.efficiency = entry.efficiency
                recorded = True
            st.history.append(entry)
            known.add(name)
        rules = spec.regression
        keep, _ = trim_history(
            st.history,
            max(rules.baseline_runs, spec.successful_runs_history_limit, rules.trend_runs),
            max(MIN_FAILED_HISTORY, spec.failed_runs_history_limit),
        )
        st.history = keep_fingerprints(keep, rules.baseline_runs)
        if recorded:
            self._trend(ctx)

    def _compare(
        self, ctx: _Ctx, spec: BenchmarkScheduleSpec, run: JSON, entry: HistoryEntry
    ) -> HistoryEntry:
        """Compare a successful run's trials with those of the previous `baselineRuns` ones.

        The verdict (domain.stats.compare_runs) goes on the run (condition `Regressed`,
        status.regression, status.fingerprintDiff) and the schedule, with an Event on each;
        so does the efficiency verdict on the server CPU per query (condition
        `EfficiencyRegressed`, status.efficiency), when the run has resource data.
        """
        rules = spec.regression
        previous = [e for e in ctx.st.history if e.outcome == "Succeeded" and e.steps]
        baseline = previous[-rules.baseline_runs :]
        excluded = (entry.invalid_trials or 0) + sum(e.invalid_trials or 0 for e in baseline)
        verdict = compare_runs(
            step_trials(entry.steps),
            [step_trials(e.steps) for e in baseline],
            rules.max_qps_drop_percent,
            excluded_invalid=excluded,
        )
        before = next((e.fingerprint for e in reversed(baseline) if e.fingerprint), None)
        diff = (
            diff_fingerprints(before, entry.fingerprint)
            if before is not None and entry.fingerprint is not None
            else None
        )
        text = verdict.message
        if diff is not None:
            text += "; " + describe_diff(diff)
        status, reason, type_, event = regression_condition(verdict)
        condition = Condition(
            type="Regressed",
            status=status,
            reason=reason,
            message=text[:2048],
            last_transition_time=ctx.now,
        )
        efficiency = judge_efficiency(
            entry, previous, rules.baseline_runs, rules.max_qps_drop_percent, excluded
        )
        conditions = [condition]
        fields: dict[str, Any] = {
            "regression": verdict.model_dump(by_alias=True, exclude_none=True, mode="json"),
            "fingerprintDiff": diff,
        }
        name = run["metadata"]["name"]
        run_ref = RunRef(name, ctx.ref.namespace, run["metadata"].get("uid", ""))
        self._event(ctx, run_ref, "BenchmarkRun", type_, event, text)
        self._event(ctx, ctx.ref, "BenchmarkSchedule", type_, event, f"{name}: {text}")
        set_condition(ctx.st.conditions, "Regressed", status, reason, f"{name}: {text}", ctx.now)
        if efficiency.verdict is not None:
            conditions.append(self._efficiency(ctx, run_ref, efficiency))
            fields["efficiency"] = efficiency.verdict.model_dump(
                by_alias=True, exclude_none=True, mode="json"
            )
        else:
            said = f"{name}: {efficiency.message}"
            set_condition(
                ctx.st.conditions, _EFFICIENCY, "Unknown", "NoResourceData", said, ctx.now
            )
        self._mark_run(ctx, run, conditions, fields)
        peaks = [e.peak_qps for e in baseline if e.peak_qps is not None]
        return entry.model_copy(
            update={
                "baseline_qps": round(statistics.median(peaks), 2) if peaks else None,
                "regressed": None if not baseline else verdict.verdict == "Regressed",
                "verdict": verdict.verdict,
                "efficiency": efficiency.verdict.verdict if efficiency.verdict else None,
            }
        )

    def _efficiency(self, ctx: _Ctx, run_ref: RunRef, efficiency: Efficiency) -> Condition:
        """The efficiency verdict's Events and the schedule's condition; the run's condition."""
        assert efficiency.verdict is not None
        status, reason, type_, event = efficiency_condition(efficiency.verdict)
        text = efficiency.message
        self._event(ctx, run_ref, "BenchmarkRun", type_, event, text)
        self._event(ctx, ctx.ref, "BenchmarkSchedule", type_, event, f"{run_ref.name}: {text}")
        said = f"{run_ref.name}: {text}"[:2048]
        set_condition(ctx.st.conditions, _EFFICIENCY, status, reason, said, ctx.now)
        return Condition(
            type=_EFFICIENCY,
            status=status,
            reason=reason,
            message=text[:2048],
            last_transition_time=ctx.now,
        )

    def _trend(self, ctx: _Ctx) -> None:
        """Change points over the successful runs in history; an Event for each new one."""
        succeeded = [e for e in ctx.st.history if e.outcome == "Succeeded" and e.steps]
        runs = [(e.name, {(s.workload, s.threads): s.qps for s in e.steps}) for e in succeeded]
        found = history_change_points(runs)
        known = {(p.workload, p.threads, p.run) for p in ctx.st.change_points}
        by_name = {e.name: e for e in succeeded}
        for point in found:
            if (point.workload, point.threads, point.run) in known:
                continue
            text = describe_change_point(point)
            old, new = by_name.get(point.previous_run or ""), by_name.get(point.run)
            if old is not None and new is not None and old.fingerprint and new.fingerprint:
                text += "; " + describe_diff(diff_fingerprints(old.fingerprint, new.fingerprint))
            self._event(ctx, ctx.ref, "BenchmarkSchedule", "Warning", "ChangePoint", text)
        ctx.st.change_points = found

    def _mark_run(
        self,
        ctx: _Ctx,
        run: JSON,
        new: Sequence[Condition],
        fields: Mapping[str, Any],
    ) -> None:
        """Put the verdicts on the run itself, so `kubectl describe benchmarkrun` shows them."""
        conditions = [
            Condition.model_validate(c) for c in (run.get("status") or {}).get("conditions") or []
        ]
        for condition in new:
            set_condition(
                conditions,
                condition.type,
                condition.status,
                condition.reason,
                condition.message,
                ctx.now,
            )
        self.kube.patch_benchmark_run_status(
            ctx.ref.namespace,
            run["metadata"]["name"],
            {
                "conditions": [
                    c.model_dump(by_alias=True, exclude_none=True, mode="json") for c in conditions
                ],
                **fields,
            },
        )

    def _trim(self, ctx: _Ctx, spec: BenchmarkScheduleSpec, finished: Sequence[JSON]) -> None:
        """Delete finished runs beyond the history limits (their entries stay in history)."""
        recorded = {e.name: e for e in ctx.st.history}
        present = [r["metadata"]["name"] for r in sorted(finished, key=_finish_order)]
        # A finished run whose entry was already dropped from history is older than every
        # entry kept there, so it is beyond the limits too.
        doomed = [n for n in present if n not in recorded and n not in ctx.unreadable]
        entries = [e for e in ctx.st.history if e.name in present]
        _, beyond = trim_history(
            entries, spec.successful_runs_history_limit, spec.failed_runs_history_limit
        )
        for name in doomed + beyond:
            self.kube.delete_benchmark_run(ctx.ref.namespace, name)

    # ------------------------------------------------------------------ firing
    def _fire(
        self, ctx: _Ctx, spec: BenchmarkScheduleSpec, body: JSON, active: Sequence[JSON]
    ) -> None:
        st, ref = ctx.st, ctx.ref
        created_at = parse_time(body["metadata"].get("creationTimestamp")) or ctx.now
        state = ScheduleState(
            name=ref.name,
            namespace=ref.namespace,
            created_at=created_at,
            last_schedule_time=st.last_schedule_time,
        )
        running = sorted(
            active,
            key=lambda r: (r["metadata"].get("creationTimestamp", ""), r["metadata"]["name"]),
        )
        decision = decide(spec, state, ctx.now, [_active_run(r) for r in running])
        ctx.out.next_time = decision.next_time
        names = [r["metadata"]["name"] for r in running]
        if decision.action in ("create", "replace"):
            names = self._create(ctx, body, decision, names)
        elif decision.action == "skip":
            self._hold(ctx, decision)
        elif spec.suspend:
            if set_condition(
                st.conditions, "Scheduling", "False", "Suspended", decision.reason, ctx.now
            ):
                self._event(ctx, ref, "BenchmarkSchedule", "Normal", "Suspended", decision.reason)
            st.message = decision.reason
        else:
            if condition_reason(st.conditions, "Scheduling") in (None, "Suspended", "InvalidSpec"):
                set_condition(
                    st.conditions, "Scheduling", "True", "Waiting", decision.reason, ctx.now
                )
        st.active = names

    def _create(
        self, ctx: _Ctx, body: JSON, decision: ScheduleDecision, names: list[str]
    ) -> list[str]:
        st, ref = ctx.st, ctx.ref
        assert decision.run_name is not None
        for name in decision.delete_runs:
            if self.kube.delete_benchmark_run(ref.namespace, name):
                self._event(
                    ctx,
                    ref,
                    "BenchmarkSchedule",
                    "Normal",
                    "Replaced",
                    f"deleted active run {name} (concurrencyPolicy Replace)",
                )
            names = [n for n in names if n != name]
        template = dict((body.get("spec") or {}).get("template") or {})
        manifest = build_scheduled_run(ref, decision.run_name, decision.scheduled_time, template)
        existing, new = self.kube.create_benchmark_run(manifest)
        if not new and not _owned_by(existing, ref.uid):
            self._name_taken(ctx, decision.run_name)
            return names
        st.last_schedule_time = decision.scheduled_time
        st.message = decision.reason
        if new:
            self._event(ctx, ref, "BenchmarkSchedule", "Normal", "Scheduled", decision.reason)
        set_condition(st.conditions, "Scheduling", "True", "Created", decision.reason, ctx.now)
        return [*names, decision.run_name] if decision.run_name not in names else names

    def _name_taken(self, ctx: _Ctx, name: str) -> None:
        """A run of that name exists and is not this schedule's: never adopted, reported."""
        st = ctx.st
        message = (
            f"BenchmarkRun {ctx.ref.namespace}/{name} exists and is not owned by this schedule "
            "(its ownerReferences name another uid); it is not adopted and no run was created "
            "for this time: delete or rename that run, or rename the schedule"
        )
        if condition_reason(st.conditions, "Scheduling") != "NameTaken" or st.message != message:
            self._event(ctx, ctx.ref, "BenchmarkSchedule", "Warning", "NameTaken", message)
        set_condition(st.conditions, "Scheduling", "False", "NameTaken", message, ctx.now)
        st.message = message

    def _hold(self, ctx: _Ctx, decision: ScheduleDecision) -> None:
        """Forbid: one event per held-back fire time, not one per look."""
        st = ctx.st
        due = (
            decision.scheduled_time.strftime("%Y-%m-%dT%H:%M:%SZ")
            if decision.scheduled_time
            else ""
        )
        old = next((c for c in st.conditions if c.type == "Scheduling"), None)
        if old is None or old.reason != "ConcurrencyForbid" or due not in old.message:
            self._event(ctx, ctx.ref, "BenchmarkSchedule", "Normal", "Skipped", decision.reason)
        set_condition(
            st.conditions, "Scheduling", "False", "ConcurrencyForbid", decision.reason, ctx.now
        )
        st.message = decision.reason

    # ------------------------------------------------------------------ helpers
    def _invalid(self, ctx: _Ctx, message: str) -> None:
        st = ctx.st
        if condition_reason(st.conditions, "Scheduling") != "InvalidSpec" or st.message != message:
            self._event(ctx, ctx.ref, "BenchmarkSchedule", "Warning", "InvalidSpec", message)
        set_condition(st.conditions, "Scheduling", "False", "InvalidSpec", message, ctx.now)
        st.message = message

    def _event(
        self, ctx: _Ctx, ref: RunRef, kind: str, type_: str, reason: str, message: str
    ) -> None:
        self.kube.create_event(
            build_event(
                ref,
                reason=reason,
                message=message,
                type_=type_,
                now=ctx.now,
                name_suffix=f"{reason.lower()}-{int(datetime.now(UTC).timestamp() * 1e6):x}",
                kind=kind,
            )
        )

    def _finish(self, ctx: _Ctx, old: dict[str, Any]) -> ScheduleOutcome:
        ctx.out.status = status_patch(old, ctx.st)
        return ctx.out


def _owned_by(run: Mapping[str, Any], uid: str) -> bool:
    """Whether one of `run`'s ownerReferences is the object with `uid`."""
    owners = (run.get("metadata") or {}).get("ownerReferences")
    return any(isinstance(o, dict) and o.get("uid") == uid for o in owners or [])


def _phase(run: Mapping[str, Any]) -> str:
    return str((run.get("status") or {}).get("phase") or "Pending")


def _finish_order(run: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = run["metadata"]
    finished = str((run.get("status") or {}).get("finishedAt") or "")
    return (finished, str(meta.get("creationTimestamp", "")), str(meta["name"]))


def _active_run(run: Mapping[str, Any]) -> ActiveRun:
    annotations = run["metadata"].get("annotations") or {}
    return ActiveRun(
        name=run["metadata"]["name"],
        scheduled_time=parse_time(annotations.get(ANNOTATION_SCHEDULED_AT)),
    )
