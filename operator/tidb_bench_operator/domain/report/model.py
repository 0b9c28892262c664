"""The report model: a run's status parsed once, with what every renderer reads from it.

`run_report` validates the status (and the compared run's), reads the run's context from its
spec, decides the peak, recommended and knee points per workload and numbers the published
references; Markdown (markdown.py), the chart (chart.py, panel.py), and the HTML page
(html.py) render from the one `RunReport`. A schedule's report is a `ScheduleReport`
(trend.py renders it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from tidb_bench_operator.domain.api.results import StepResult
from tidb_bench_operator.domain.api.run_status import BenchmarkRunStatus, StepStatus
from tidb_bench_operator.domain.api.schedule import BenchmarkScheduleStatus

# spec[k1][k2]... or None: a saved spec is read leniently (any version's fields).
from tidb_bench_operator.domain.objects import get_path
from tidb_bench_operator.domain.report.reference import Reference, ReferenceResult
from tidb_bench_operator.domain.stats.analysis import compute_summary

#: Percentile assumed when no step of a workload reports one (spec.percentile's default).
DEFAULT_PERCENTILE = 95

StatusLike = BenchmarkRunStatus | Mapping[str, Any]


def _as_status(value: StatusLike) -> BenchmarkRunStatus:
    """A BenchmarkRunStatus from the model, its camelCase dict, or a whole BenchmarkRun dict."""
    if isinstance(value, BenchmarkRunStatus):
        return value
    if "steps" not in value and isinstance(value.get("status"), Mapping):
        value = value["status"]
    return BenchmarkRunStatus.model_validate(value)


# --------------------------------------------------------------------------- steps


def by_workload(steps: Sequence[StepStatus]) -> dict[str, list[StepStatus]]:
    """Steps grouped by workload (first-seen order), each group sorted by threads (a rate
    sweep's, at one thread count, by target rate)."""
    groups: dict[str, list[StepStatus]] = {}
    for step in steps:
        groups.setdefault(step.workload, []).append(step)
    return {
        name: sorted(group, key=lambda s: (s.threads, s.target_rate or 0))
        for name, group in groups.items()
    }


def percentile(steps: Sequence[StepStatus]) -> int:
    """The latency percentile the steps report (the first that says), else the default."""
    for step in steps:
        if step.latency_ms is not None:
            return step.latency_ms.percentile
    return DEFAULT_PERCENTILE


def latency(step: StepStatus) -> float | None:
    """The step's latency at its percentile, in ms (None when not measured)."""
    return step.latency_ms.value if step.latency_ms is not None else None


def is_failed(step: StepStatus) -> bool:
    return step.phase == "Failed"


# --------------------------------------------------------------------------- sweep points


@dataclass(frozen=True)
class SweepPoints:
    """The peak, recommended and knee of one workload, from status.summary or computed from
    the steps: the summary lines, the table's notes and the chart's marks."""

    peak_qps: float | None
    peak_threads: int | None
    peak_latency_ms: float | None
    recommended_threads: int | None
    recommended_qps: float | None
    saturation_threads: int | None
    slo_known: bool
    #: A rate sweep's recommended target rate (spec.rates), from status.summary.
    recommended_rate: int | None = None


def _sweep_points(status: BenchmarkRunStatus, slo: float | None) -> dict[str, SweepPoints]:
    """Per-workload points: the controller's own summary wins, else analysis on valid steps.

    Why prefer status.summary: it is what the controller decided with the run's spec.slo.
    Without it the SLO is known only when the spec came with the status (a saved
    BenchmarkRun); from a results ConfigMap alone the report names peak and knee only.
    """
    points: dict[str, SweepPoints] = {}
    if status.summary is not None:
        for item in status.summary.per_workload:
            points[item.workload] = SweepPoints(
                peak_qps=item.peak_qps,
                peak_threads=item.peak_threads,
                peak_latency_ms=item.peak_latency_ms,
                recommended_threads=item.recommended_threads,
                recommended_qps=item.recommended_qps,
                saturation_threads=_knee_only(item.saturation_threads, status, item.workload),
                slo_known=True,
                recommended_rate=item.recommended_rate,
            )
    results: list[StepResult] = []
    for step in status.steps:
        result = step.to_result()
        if step.workload not in points and result is not None and step.valid is not False:
            results.append(result)
    for computed in compute_summary(results, slo_latency_ms=slo).workloads:
        points[computed.workload] = SweepPoints(
            peak_qps=computed.peak_qps,
            peak_threads=computed.peak_threads,
            peak_latency_ms=computed.peak_latency_ms,
            recommended_threads=computed.recommended_threads if slo is not None else None,
            recommended_qps=computed.recommended_qps if slo is not None else None,
            saturation_threads=(
                computed.saturation_threads if computed.saturation_basis == "knee" else None
            ),
            slo_known=slo is not None,
        )
    return points


def is_rate_sweep(steps: Sequence[StepStatus]) -> bool:
    """Whether the steps are a rate sweep's (spec.rates): one thread count, a target each."""
    return any(s.target_rate is not None for s in steps)


def on_rate_axis(
    steps: Sequence[StepStatus], points: SweepPoints | None
) -> tuple[list[StepStatus], SweepPoints | None]:
    """A rate sweep's steps and points for a chart drawn against threads: each step placed
    at its target rate, the peak and recommendation at theirs, no knee (there is one thread
    count). A thread sweep comes back as it is."""
    if not is_rate_sweep(steps):
        return list(steps), points
    moved = [s.model_copy(update={"threads": s.target_rate or s.threads}) for s in steps]
    if points is None:
        return moved, None
    peak = next((s.target_rate for s in steps if s.qps == points.peak_qps), None)
    return moved, replace(
        points,
        peak_threads=peak,
        recommended_threads=points.recommended_rate,
        saturation_threads=None,
    )


def _knee_only(threads: int | None, status: BenchmarkRunStatus, workload: str) -> int | None:
    """The summary's saturation point when it is a knee. The controller falls back to the
    peak when QPS never stopped rising; at the sweep's last valid step nothing came after
    it, so it is that fallback, not a knee ("not reached")."""
    measured = [
        s.threads
        for s in status.steps
        if s.workload == workload and s.qps is not None and s.valid is not False
    ]
    if threads is None or not measured or threads >= max(measured):
        return None
    return threads


def _slo(spec: Mapping[str, Any] | None) -> float | None:
    value = get_path(spec, "slo", "latencyMs")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


# --------------------------------------------------------------------------- context


@dataclass(frozen=True)
class Context:
    """What a reader needs before the numbers: which system, when, with what load."""

    what: list[str]
    how: list[str]


def _run_context(run: BenchmarkRunStatus, spec: Mapping[str, Any] | None) -> Context:
    """The run's context from its spec (when the source had one) and its status."""
    what: list[str] = []
    name, ns = get_path(spec, "cluster", "name"), get_path(spec, "cluster", "namespace")
    host, port = get_path(spec, "target", "host"), get_path(spec, "target", "port")
    if name:
        what.append(f"cluster {ns}/{name}" if ns else f"cluster {name}")
    elif host:
        what.append(f"target {host}:{port or 4000}")
    env = run.environment
    if env is not None and env.tidb_version:
        what.append(f"TiDB {env.tidb_version}")
    elif env is not None and env.server_version:
        what.append(f"server {env.server_version} (not TiDB)")
    else:
        what.append("TiDB version not recorded")
    if run.started_at is not None:
        what.append(run.started_at.strftime("%Y-%m-%d %H:%M UTC"))
    sysbench = (env.sysbench_version if env else None) or next(
        (s.sysbench_version for s in run.steps if s.sysbench_version), None
    )
    if sysbench:
        what.append(f"sysbench {sysbench}")
    what.append(f"phase {run.phase}")

    how: list[str] = []
    if spec is None:
        how.append("no spec in this source: dataset, clients and SLO unknown")
        clients = max((s.clients or 1 for s in run.steps), default=None)
        if clients:
            how.append(f"{clients} client{'s' if clients > 1 else ''}")
        return Context(what, how)
    if isinstance(get_path(spec, "dataset"), Mapping):
        tables = get_path(spec, "dataset", "tables") or 1
        size = get_path(spec, "dataset", "tableSize") or 10000
        how.append(f"dataset {tables} table{'s' if tables != 1 else ''} × {size:,} rows")
    else:
        how.append("dataset not recorded")
    clients = get_path(spec, "clients") or 1
    how.append(f"{clients} client pod{'s' if clients != 1 else ''}, threads per client")
    duration, warmup = get_path(spec, "durationSeconds"), get_path(spec, "warmupSeconds")
    if duration:
        how.append(f"{duration} s per step" + (f" after {warmup} s warm-up" if warmup else ""))
    at = get_path(spec, "percentile") or DEFAULT_PERCENTILE
    slo = _slo(spec)
    how.append(f"SLO p{at} ≤ {slo:g} ms" if slo is not None else "no SLO set")
    return Context(what, how)


# --------------------------------------------------------------------------- the report


@dataclass(frozen=True)
class RefRow:
    """A published number with its label (R1, R2, ...) and the reference it belongs to."""

    label: str
    reference: Reference
    row: ReferenceResult


class ComparedRun(NamedTuple):
    """The run given with --compare: its name and status."""

    name: str
    status: BenchmarkRunStatus


@dataclass(frozen=True)
class RunReport:
    """One run's report, read once from its status (+ spec, compared run, references,
    interval series): what the Markdown, the chart and the HTML page render."""

    name: str
    status: BenchmarkRunStatus
    #: Whether the source had the run's spec (a saved BenchmarkRun; not a results ConfigMap).
    has_spec: bool
    context: Context
    slo: float | None
    points: dict[str, SweepPoints]
    compare: ComparedRun | None
    references: tuple[Reference, ...]
    ref_rows: tuple[RefRow, ...]
    #: The results ConfigMap's series.json (QPS over time per step), when the source had it.
    series: Mapping[str, Any] | None

    @property
    def title(self) -> str:
        return f"BenchmarkRun {self.name}"


def run_report(
    name: str,
    status: StatusLike,
    *,
    spec: Mapping[str, Any] | None = None,
    compare: tuple[str, StatusLike] | None = None,
    references: Sequence[Reference] = (),
    series: Mapping[str, Any] | None = None,
) -> RunReport:
    """The report of the run `name`: its status (the model, its camelCase dict or a whole
    BenchmarkRun dict; a ValueError when this version cannot read it), its spec when the
    source had one, another run to compare with, published numbers and interval series."""
    run = _as_status(status)
    other = ComparedRun(compare[0], _as_status(compare[1])) if compare is not None else None
    slo = _slo(spec)
    return RunReport(
        name=name,
        status=run,
        has_spec=spec is not None,
        context=_run_context(run, spec),
        slo=slo,
        points=_sweep_points(run, slo),
        compare=other,
        references=tuple(references),
        ref_rows=tuple(
            RefRow(f"R{i + 1}", ref, row) for i, ref in enumerate(references) for row in ref.results
        ),
        series=series,
    )


@dataclass(frozen=True)
class ScheduleReport:
    """A BenchmarkSchedule's report: its name and status (history, verdict, change points)."""

    name: str
    status: BenchmarkScheduleStatus

    @property
    def title(self) -> str:
        return f"BenchmarkSchedule {self.name}"


def schedule_report(
    name: str, status: BenchmarkScheduleStatus | Mapping[str, Any]
) -> ScheduleReport:
    """The report of the schedule `name`: its status from the model, its camelCase dict, or
    a whole BenchmarkSchedule dict (a ValueError when this version cannot read it)."""
    if not isinstance(status, BenchmarkScheduleStatus):
        if isinstance(status.get("status"), Mapping) and "history" not in status:
            status = status["status"]
        status = BenchmarkScheduleStatus.model_validate(status)
    return ScheduleReport(name, status)
