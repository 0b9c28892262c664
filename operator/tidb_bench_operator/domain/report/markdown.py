"""`tidb-bench report`: a run as Markdown tables (the chart is domain/report_chart.py, one
HTML file of both domain/report_html.py).

The chart shows, per workload, throughput (QPS; TPS too for transactional workloads) and the
percentile latency against threads on a log2 axis, the SLO line, the peak, recommended and
knee steps, failed and invalid steps on the axis, another run overlaid (`--compare RUN`),
published numbers beside it (`--compare REFERENCE.yaml`, domain/reference.py), and QPS over
time per step from the interval series of the results ConfigMap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tidb_bench_operator.domain.api.results import StepResult
from tidb_bench_operator.domain.api.run_status import BenchmarkRunStatus, StepStatus

# spec[k1][k2]... or None: a saved spec is read leniently (any version's fields).
from tidb_bench_operator.domain.objects import get_path
from tidb_bench_operator.domain.report.reference import Reference, ReferenceResult
from tidb_bench_operator.domain.report.stats import has_trials, regression_lines, trial_cells
from tidb_bench_operator.domain.report.stats import rate as _rate
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


def _by_workload(steps: Sequence[StepStatus]) -> dict[str, list[StepStatus]]:
    """Steps grouped by workload (first-seen order), each group sorted by threads."""
    groups: dict[str, list[StepStatus]] = {}
    for step in steps:
        groups.setdefault(step.workload, []).append(step)
    return {name: sorted(group, key=lambda s: s.threads) for name, group in groups.items()}


def _percentile(steps: Sequence[StepStatus]) -> int:
    for step in steps:
        if step.latency_ms is not None:
            return step.latency_ms.percentile
    return DEFAULT_PERCENTILE


def _latency(step: StepStatus) -> float | None:
    return step.latency_ms.value if step.latency_ms is not None else None


# --------------------------------------------------------------------------- number formats


def _ms(value: float | None) -> str:
    """Milliseconds with 2 decimals, as sysbench prints them."""
    return "—" if value is None else f"{value:,.2f}"


def _delta(current: float | None, other: float | None) -> str:
    """(current - other) / other in percent, signed; a dash when either side is missing."""
    if current is None or other is None or other == 0:
        return "—"
    return f"{(current - other) / other * 100:+.1f}%"


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


# --------------------------------------------------------------------------- verdicts


@dataclass(frozen=True)
class _Verdict:
    """The summary lines of one workload, from status.summary or computed from the steps."""

    peak_qps: float | None
    peak_threads: int | None
    peak_latency_ms: float | None
    recommended_threads: int | None
    recommended_qps: float | None
    saturation_threads: int | None
    slo_known: bool


def _verdicts(
    status: BenchmarkRunStatus, spec: Mapping[str, Any] | None = None
) -> dict[str, _Verdict]:
    """Per-workload verdicts: the controller's own summary wins, else analysis on valid steps.

    Why prefer status.summary: it is what the controller decided with the run's spec.slo.
    Without it the SLO is known only when the spec came with the status (a saved
    BenchmarkRun); from a results ConfigMap alone the report names peak and knee only.
    """
    verdicts: dict[str, _Verdict] = {}
    if status.summary is not None:
        for item in status.summary.per_workload:
            verdicts[item.workload] = _Verdict(
                peak_qps=item.peak_qps,
                peak_threads=item.peak_threads,
                peak_latency_ms=item.peak_latency_ms,
                recommended_threads=item.recommended_threads,
                recommended_qps=item.recommended_qps,
                saturation_threads=_knee_only(item.saturation_threads, status, item.workload),
                slo_known=True,
            )
    results: list[StepResult] = []
    for step in status.steps:
        result = step.to_result()
        if step.workload not in verdicts and result is not None and step.valid is not False:
            results.append(result)
    slo = _slo(spec)
    for computed in compute_summary(results, slo_latency_ms=slo).workloads:
        verdicts[computed.workload] = _Verdict(
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
    return verdicts


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


def _summary_lines(
    verdict: _Verdict | None,
    label: str,
    steps: Sequence[StepStatus],
    spec: Mapping[str, Any] | None = None,
) -> list[str]:
    if verdict is None or verdict.peak_qps is None or verdict.peak_threads is None:
        return ["- No valid finished step: no peak, recommendation or saturation point."]
    peak = f"- Peak: {_rate(verdict.peak_qps)} QPS at {verdict.peak_threads} threads"
    if verdict.peak_latency_ms is not None:
        peak += f" ({label} {_ms(verdict.peak_latency_ms)} ms)"
    if not verdict.slo_known and spec is not None:
        recommended = "- Recommended under SLO: none (the run sets no spec.slo.latencyMs)."
    elif not verdict.slo_known:
        recommended = "- Recommended under SLO: not known (the run's status has no summary)."
    elif verdict.recommended_threads is None:
        recommended = "- Recommended under SLO: none (no step meets the SLO)."
    else:
        recommended = f"- Recommended under SLO: {verdict.recommended_threads} threads"
        if verdict.recommended_qps is not None:
            recommended += f" ({_rate(verdict.recommended_qps)} QPS)"
    if verdict.saturation_threads is None:
        top = max(step.threads for step in steps)
        saturation = f"- Saturation: not reached up to {top} threads."
    else:
        saturation = (
            f"- Saturation: {verdict.saturation_threads} threads (beyond it QPS stops rising "
            f"while {label} keeps growing)."
        )
    return [peak + ".", recommended, saturation]


# --------------------------------------------------------------------------- markdown


def _step_notes(step: StepStatus, verdict: _Verdict | None) -> str:
    notes: list[str] = []
    if step.valid is False:
        notes.append("**invalid**")
    if step.qps is None:
        notes.append(step.phase)
    if verdict is not None:
        if step.threads == verdict.peak_threads:
            notes.append("peak")
        if step.threads == verdict.recommended_threads and verdict.slo_known:
            notes.append("recommended")
        if step.threads == verdict.saturation_threads:
            notes.append("knee")
    if step.client_saturated:
        notes.append("client saturated")
    notes.extend(step.notes)
    return _cell("; ".join(notes))


def _workload_table(steps: Sequence[StepStatus], verdict: _Verdict | None, label: str) -> list[str]:
    """One row per step; with repeated trials QPS is their median, with its 95% interval
    and CV beside it."""
    trials = has_trials(steps)
    head, rule = (
        ("QPS (median) | QPS 95% interval | CV |", "--: | :--: | --: |")
        if trials
        else (
            "QPS |",
            "--: |",
        )
    )
    lines = [
        f"| threads | {head} TPS | {label} (ms) | errors/s | notes |",
        f"| ------: | {rule} --: | ---: | ---: | :--- |",
    ]
    for step in steps:
        errors = "—" if step.errors_per_sec is None else f"{step.errors_per_sec:,.2f}"
        qps = _rate(step.qps)
        if trials:
            qps += " | " + " | ".join(trial_cells(step))
        lines.append(
            f"| {step.threads} | {qps} | {_rate(step.tps)} | "
            f"{_ms(_latency(step))} | {errors} | {_step_notes(step, verdict)} |"
        )
    return lines


def _compare_table(
    name: str, status: BenchmarkRunStatus, other_name: str, other: BenchmarkRunStatus
) -> list[str]:
    mine = {(s.workload, s.threads): s for s in status.steps}
    theirs = {(s.workload, s.threads): s for s in other.steps}
    keys = list(mine) + [k for k in theirs if k not in mine]
    order = {w: i for i, w in enumerate(dict.fromkeys(w for w, _ in keys))}
    keys.sort(key=lambda k: (order[k[0]], k[1]))
    label = f"p{_percentile(status.steps or other.steps)}"
    a, b = _cell(name), _cell(other_name)
    lines = [
        f"## Compared with {b}",
        "",
        f"Δ = ({a} − {b}) / {b}; a QPS drop or a {label} rise is worse.",
        "",
        f"| workload | threads | QPS {a} | QPS {b} | Δ QPS | {label} (ms) {a} | "
        f"{label} (ms) {b} | Δ {label} |",
        "| :--- | ------: | --: | --: | --: | ---: | ---: | --: |",
    ]
    for key in keys:
        x, y = mine.get(key), theirs.get(key)
        qx, qy = (x.qps if x else None), (y.qps if y else None)
        lx, ly = (_latency(x) if x else None), (_latency(y) if y else None)
        lines.append(
            f"| {key[0]} | {key[1]} | {_rate(qx)} | {_rate(qy)} | {_delta(qx, qy)} | "
            f"{_ms(lx)} | {_ms(ly)} | {_delta(lx, ly)} |"
        )
    return lines


def _slo(spec: Mapping[str, Any] | None) -> float | None:
    value = get_path(spec, "slo", "latencyMs")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Context:
    """What a reader needs before the numbers: which system, when, with what load."""

    what: list[str]
    how: list[str]


def run_context(run: BenchmarkRunStatus, spec: Mapping[str, Any] | None) -> Context:
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
    percentile = get_path(spec, "percentile") or DEFAULT_PERCENTILE
    slo = _slo(spec)
    how.append(f"SLO p{percentile} ≤ {slo:g} ms" if slo is not None else "no SLO set")
    return Context(what, how)


# --------------------------------------------------------------------------- references


@dataclass(frozen=True)
class _RefRow:
    """A published number with its label (R1, R2, ...) and the reference it belongs to."""

    label: str
    reference: Reference
    row: ReferenceResult


def _ref_rows(references: Sequence[Reference]) -> list[_RefRow]:
    return [
        _RefRow(f"R{i + 1}", ref, row) for i, ref in enumerate(references) for row in ref.results
    ]


def _amount(value: float | tuple[float, float] | None) -> str:
    if value is None:
        return "—"
    if isinstance(value, tuple):
        return f"{_rate(value[0])}–{_rate(value[1])}"
    return _rate(value)


def _against(mine: float | None, theirs: float | tuple[float, float] | None) -> str:
    """This run's number against a published one: a delta, or where it lies in a range."""
    if mine is None or theirs is None:
        return "—"
    if isinstance(theirs, tuple):
        low, high = theirs
        if mine < low:
            return f"{_delta(mine, low)} below the range"
        if mine > high:
            return f"{_delta(mine, high)} above the range"
        return "within the range"
    return _delta(mine, theirs)


def _reference_tables(
    run: BenchmarkRunStatus, references: Sequence[Reference], verdicts: dict[str, _Verdict]
) -> list[str]:
    workloads = {s.workload for s in run.steps}
    lines = [
        "## Compared with published numbers",
        "",
        "Published numbers were measured elsewhere, under the conditions quoted with them; "
        "a row is compared with this run's step at the same threads, else with its peak.",
        "",
    ]
    mine = {(s.workload, s.threads): s for s in run.steps if s.qps is not None}
    for ref_index, ref in enumerate(references):
        label = f"R{ref_index + 1}"
        lines += [f"### {label}: {_cell(ref.name)}", "", f"Source: {_cell(ref.source)}"]
        if ref.conditions:
            lines += ["", f"Conditions: {_cell(ref.conditions)}"]
        lines += [
            "",
            "| workload | threads | published QPS | published TPS | published latency (ms) "
            "| this run | QPS or TPS vs published |",
            "| :--- | ------: | --: | --: | ---: | :--- | :--- |",
        ]
        skipped = 0
        for row in ref.results:
            if row.workload not in workloads:
                skipped += 1
                continue
            step = mine.get((row.workload, row.threads)) if row.threads else None
            verdict = verdicts.get(row.workload)
            if step is not None:
                ours = f"{_rate(step.qps)} QPS, {_rate(step.tps)} TPS at {step.threads} threads"
                qps, tps = step.qps, step.tps
            elif verdict is not None and verdict.peak_qps is not None:
                peak = next(
                    (
                        s
                        for s in run.steps
                        if s.workload == row.workload and s.threads == verdict.peak_threads
                    ),
                    None,
                )
                qps, tps = verdict.peak_qps, peak.tps if peak else None
                ours = f"peak {_rate(qps)} QPS, {_rate(tps)} TPS at {verdict.peak_threads} threads"
            else:
                qps = tps = None
                ours = "no finished step"
            versus = (
                _against(qps, row.qps) if row.qps is not None else _against(tps, row.tps) + " (TPS)"
            )
            latency = "—" if row.latency_ms is None else f"p{row.percentile} {_ms(row.latency_ms)}"
            lines.append(
                f"| {row.workload} | {row.threads or '—'} | {_amount(row.qps)} | "
                f"{_amount(row.tps)} | {latency} | {_cell(ours)} | {versus} |"
            )
        if skipped:
            lines += ["", f"({skipped} published row(s) for workloads this run did not measure.)"]
        lines.append("")
    return lines


# --------------------------------------------------------------------------- markdown


def render_markdown(
    run_name: str,
    status: StatusLike,
    compare: tuple[str, StatusLike] | None = None,
    *,
    spec: Mapping[str, Any] | None = None,
    references: Sequence[Reference] = (),
) -> str:
    """The run as Markdown: its context, per workload a step table and summary lines;
    optionally a side-by-side comparison with another run (deltas in % per workload and
    threads) and with published numbers (their source beside them)."""
    run = _as_status(status)
    lines = [f"# BenchmarkRun {_cell(run_name)}", ""]
    context = run_context(run, spec)
    lines += [_cell(", ".join(context.what)), "", _cell(", ".join(context.how)), ""]
    if run.summary is not None and run.summary.headline:
        lines += [_cell(run.summary.headline), ""]
    groups = _by_workload(run.steps)
    if not groups:
        lines += ["No steps recorded.", ""]
    verdicts = _verdicts(run, spec)
    for workload, steps in groups.items():
        label = f"p{_percentile(steps)}"
        verdict = verdicts.get(workload)
        lines += [f"## {workload}", ""]
        lines += _workload_table(steps, verdict, label)
        lines += ["", *_summary_lines(verdict, label, steps, spec), ""]
    lines += regression_lines(run)
    if compare is not None:
        other_name, other_status = compare
        lines += _compare_table(run_name, run, other_name, _as_status(other_status))
        lines.append("")
    if references:
        lines += _reference_tables(run, references, verdicts)
    return "\n".join(lines)
