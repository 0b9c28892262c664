"""`tidb-bench report`: a run as Markdown — its context, per workload a step table and the
peak, recommended and knee lines, the schedule's verdict, the compared run and published
numbers — rendered from the report model (model.py)."""

from __future__ import annotations

from collections.abc import Sequence

from tidb_bench_operator.domain.api.run_status import BenchmarkRunStatus, StepStatus
from tidb_bench_operator.domain.report.format import amount, cell, delta, ms, rate
from tidb_bench_operator.domain.report.model import (
    RunReport,
    SweepPoints,
    by_workload,
    is_rate_sweep,
    latency,
    percentile,
)
from tidb_bench_operator.domain.report.reference import Reference
from tidb_bench_operator.domain.report.resources import qps_per_core, resource_lines, with_resources
from tidb_bench_operator.domain.report.stats import has_trials, regression_lines, trial_cells

# --------------------------------------------------------------------------- workloads


def _summary_lines(
    points: SweepPoints | None,
    label: str,
    steps: Sequence[StepStatus],
    has_spec: bool,
) -> list[str]:
    if points is None or points.peak_qps is None or points.peak_threads is None:
        return ["- No valid finished step: no peak, recommendation or saturation point."]
    if is_rate_sweep(steps):
        return _rate_summary_lines(points, label, steps, has_spec)
    peak = f"- Peak: {rate(points.peak_qps)} QPS at {points.peak_threads} threads"
    if points.peak_latency_ms is not None:
        peak += f" ({label} {ms(points.peak_latency_ms)} ms)"
    at = points.recommended_threads
    recommended = _recommended(points, has_spec, None if at is None else f"{at} threads", "step")
    if points.saturation_threads is None:
        top = max(step.threads for step in steps)
        saturation = f"- Saturation: not reached up to {top} threads."
    else:
        saturation = (
            f"- Saturation: {points.saturation_threads} threads (beyond it QPS stops rising "
            f"while {label} keeps growing)."
        )
    return [peak + ".", recommended, saturation]


def _recommended(points: SweepPoints, has_spec: bool, at: str | None, what: str) -> str:
    """The "Recommended under SLO" line: `at` is the recommended step (None: no `what` met)."""
    if not points.slo_known and has_spec:
        return "- Recommended under SLO: none (the run sets no spec.slo.latencyMs)."
    if not points.slo_known:
        return "- Recommended under SLO: not known (the run's status has no summary)."
    if at is None:
        return f"- Recommended under SLO: none (no {what} meets the SLO)."
    line = f"- Recommended under SLO: {at}"
    if points.recommended_qps is not None:
        line += f" ({rate(points.recommended_qps)} QPS)"
    return line


def _rate_summary_lines(
    points: SweepPoints, label: str, steps: Sequence[StepStatus], has_spec: bool
) -> list[str]:
    """A rate sweep's lines: the peak's target, the recommended rate, the rates reached."""
    peak_step = next((s for s in steps if s.qps == points.peak_qps), None)
    peak = f"- Peak: {rate(points.peak_qps)} QPS"
    if peak_step is not None and peak_step.target_rate is not None:
        peak += f" at a {peak_step.target_rate:,}/s target"
    if points.peak_latency_ms is not None:
        peak += f" ({label} {ms(points.peak_latency_ms)} ms)"
    at = points.recommended_rate
    recommended = _recommended(
        points, has_spec, None if at is None else f"{at:,}/s", "reached rate"
    )
    done = [s for s in steps if s.rate is not None]
    reached = [s.rate.target for s in done if s.rate is not None and s.rate.reached]
    short = [s.rate for s in done if s.rate is not None and not s.rate.reached]
    line = f"- Rates reached: up to {max(reached):,}/s" if reached else "- Rates reached: none"
    if short:
        line += "; not reached: " + ", ".join(
            f"{r.target:,}/s ({rate(r.achieved)}/s)" for r in short
        )
    return [peak + ".", recommended, line + "."]


# --------------------------------------------------------------------------- markdown


def _step_notes(step: StepStatus, points: SweepPoints | None) -> str:
    notes: list[str] = []
    if step.valid is False:
        notes.append("**invalid**")
    if step.qps is None:
        notes.append(step.phase)
    if points is not None and step.target_rate is not None:  # a rate sweep's step
        if step.qps is not None and step.qps == points.peak_qps:
            notes.append("peak")
        if step.target_rate == points.recommended_rate and points.slo_known:
            notes.append("recommended")
    elif points is not None:
        if step.threads == points.peak_threads:
            notes.append("peak")
        if step.threads == points.recommended_threads and points.slo_known:
            notes.append("recommended")
        if step.threads == points.saturation_threads:
            notes.append("knee")
    if step.client_saturated:
        notes.append("client saturated")
    notes.extend(step.notes)
    return cell("; ".join(notes))


def _workload_table(
    steps: Sequence[StepStatus], points: SweepPoints | None, label: str
) -> list[str]:
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
    per_core = bool(with_resources(steps))
    if per_core:  # QPS per server core beside QPS (issue 26)
        head, rule = head + " QPS/core |", rule + " --: |"
    rated = is_rate_sweep(steps)
    first, first_rule = ("threads", "------:")
    if rated:
        first, first_rule = ("target/s | reached | threads", "-------: | :--: | ------:")
    lines = [
        f"| {first} | {head} TPS | {label} (ms) | errors/s | notes |",
        f"| {first_rule} | {rule} --: | ---: | ---: | :--- |",
    ]
    for step in steps:
        errors = "—" if step.errors_per_sec is None else f"{step.errors_per_sec:,.2f}"
        qps = rate(step.qps)
        if trials:
            qps += " | " + " | ".join(trial_cells(step))
        if per_core:
            qps += f" | {qps_per_core(step)}"
        where = str(step.threads)
        if rated:
            r = step.rate
            reached = (
                "—" if r is None else "yes" if r.reached else f"**no** (−{r.shortfall_percent:g}%)"
            )
            where = f"{step.target_rate or 0:,} | {reached} | {step.threads}"
        lines.append(
            f"| {where} | {qps} | {rate(step.tps)} | "
            f"{ms(latency(step))} | {errors} | {_step_notes(step, points)} |"
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
    label = f"p{percentile(status.steps or other.steps)}"
    a, b = cell(name), cell(other_name)
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
        lx, ly = (latency(x) if x else None), (latency(y) if y else None)
        lines.append(
            f"| {key[0]} | {key[1]} | {rate(qx)} | {rate(qy)} | {delta(qx, qy)} | "
            f"{ms(lx)} | {ms(ly)} | {delta(lx, ly)} |"
        )
    return lines


def _against(mine: float | None, theirs: float | tuple[float, float] | None) -> str:
    """This run's number against a published one: a delta, or where it lies in a range."""
    if mine is None or theirs is None:
        return "—"
    if isinstance(theirs, tuple):
        low, high = theirs
        if mine < low:
            return f"{delta(mine, low)} below the range"
        if mine > high:
            return f"{delta(mine, high)} above the range"
        return "within the range"
    return delta(mine, theirs)


def _reference_tables(
    run: BenchmarkRunStatus, references: Sequence[Reference], points: dict[str, SweepPoints]
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
        lines += [f"### {label}: {cell(ref.name)}", "", f"Source: {cell(ref.source)}"]
        if ref.conditions:
            lines += ["", f"Conditions: {cell(ref.conditions)}"]
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
            sweep = points.get(row.workload)
            if step is not None:
                ours = f"{rate(step.qps)} QPS, {rate(step.tps)} TPS at {step.threads} threads"
                qps, tps = step.qps, step.tps
            elif sweep is not None and sweep.peak_qps is not None:
                peak = next(
                    (
                        s
                        for s in run.steps
                        if s.workload == row.workload and s.threads == sweep.peak_threads
                    ),
                    None,
                )
                qps, tps = sweep.peak_qps, peak.tps if peak else None
                ours = f"peak {rate(qps)} QPS, {rate(tps)} TPS at {sweep.peak_threads} threads"
            else:
                qps = tps = None
                ours = "no finished step"
            versus = (
                _against(qps, row.qps) if row.qps is not None else _against(tps, row.tps) + " (TPS)"
            )
            latency = "—" if row.latency_ms is None else f"p{row.percentile} {ms(row.latency_ms)}"
            lines.append(
                f"| {row.workload} | {row.threads or '—'} | {amount(row.qps)} | "
                f"{amount(row.tps)} | {latency} | {cell(ours)} | {versus} |"
            )
        if skipped:
            lines += ["", f"({skipped} published row(s) for workloads this run did not measure.)"]
        lines.append("")
    return lines


# --------------------------------------------------------------------------- markdown


def render_markdown(report: RunReport) -> str:
    """The run as Markdown: its context, per workload a step table and summary lines;
    optionally a side-by-side comparison with another run (deltas in % per workload and
    threads) and with published numbers (their source beside them)."""
    run = report.status
    lines = [f"# BenchmarkRun {cell(report.name)}", ""]
    context = report.context
    lines += [cell(", ".join(context.what)), "", cell(", ".join(context.how)), ""]
    if run.summary is not None and run.summary.headline:
        lines += [cell(run.summary.headline), ""]
    groups = by_workload(run.steps)
    capacity = {c.workload: c for c in (run.summary.capacity if run.summary else [])}
    if not groups:
        lines += ["No steps recorded.", ""]
    for workload, steps in groups.items():
        label = f"p{percentile(steps)}"
        points = report.points.get(workload)
        lines += [f"## {workload}", ""]
        lines += _workload_table(steps, points, label)
        lines += ["", *_summary_lines(points, label, steps, report.has_spec)]
        if workload in capacity:
            lines.append(f"- Capacity search ({capacity[workload].verdict}): "
                         f"{cell(capacity[workload].headline)}.")  # fmt: skip
        lines.append("")
        lines += resource_lines(steps)
    lines += regression_lines(run)
    if report.compare is not None:
        lines += _compare_table(report.name, run, report.compare.name, report.compare.status)
        lines.append("")
    if report.references:
        lines += _reference_tables(run, report.references, report.points)
    return "\n".join(lines)
