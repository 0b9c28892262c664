"""`tidb-bench report`: a run as Markdown tables, a hand-written SVG chart, or one HTML file.

The chart shows, per workload, throughput (QPS; TPS too for transactional workloads) and the
percentile latency against threads on a log2 axis, the SLO line, the peak, recommended and
knee steps, failed and invalid steps on the axis, another run overlaid (`--compare RUN`),
published numbers beside it (`--compare REFERENCE.yaml`, domain/reference.py), and QPS over
time per step from the interval series of the results ConfigMap.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import quoteattr

from tidb_bench_operator.domain import svg
from tidb_bench_operator.domain.analysis import compute_summary
from tidb_bench_operator.domain.models import BenchmarkRunStatus, StepStatus

# spec[k1][k2]... or None: a saved spec is read leniently (any version's fields).
from tidb_bench_operator.domain.preflight import _get
from tidb_bench_operator.domain.reference import Reference, ReferenceResult
from tidb_bench_operator.domain.results import StepResult

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


def _rate(value: float | None) -> str:
    """QPS/TPS as people write them (docs/field-story.md): thousands separators, decimals < 100."""
    if value is None:
        return "—"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}"


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
    lines = [
        f"| threads | QPS | TPS | {label} (ms) | errors/s | notes |",
        "| ------: | --: | --: | ---: | ---: | :--- |",
    ]
    for step in steps:
        errors = "—" if step.errors_per_sec is None else f"{step.errors_per_sec:,.2f}"
        lines.append(
            f"| {step.threads} | {_rate(step.qps)} | {_rate(step.tps)} | "
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
    value = _get(spec, "slo", "latencyMs")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class Context:
    """What a reader needs before the numbers: which system, when, with what load."""

    what: list[str]
    how: list[str]


def run_context(run: BenchmarkRunStatus, spec: Mapping[str, Any] | None) -> Context:
    """The run's context from its spec (when the source had one) and its status."""
    what: list[str] = []
    name, ns = _get(spec, "cluster", "name"), _get(spec, "cluster", "namespace")
    host, port = _get(spec, "target", "host"), _get(spec, "target", "port")
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
    if isinstance(_get(spec, "dataset"), Mapping):
        tables = _get(spec, "dataset", "tables") or 1
        size = _get(spec, "dataset", "tableSize") or 10000
        how.append(f"dataset {tables} table{'s' if tables != 1 else ''} × {size:,} rows")
    else:
        how.append("dataset not recorded")
    clients = _get(spec, "clients") or 1
    how.append(f"{clients} client pod{'s' if clients != 1 else ''}, threads per client")
    duration, warmup = _get(spec, "durationSeconds"), _get(spec, "warmupSeconds")
    if duration:
        how.append(f"{duration} s per step" + (f" after {warmup} s warm-up" if warmup else ""))
    percentile = _get(spec, "percentile") or DEFAULT_PERCENTILE
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
    if compare is not None:
        other_name, other_status = compare
        lines += _compare_table(run_name, run, other_name, _as_status(other_status))
        lines.append("")
    if references:
        lines += _reference_tables(run, references, verdicts)
    return "\n".join(lines)


# --------------------------------------------------------------------------- svg chart

WIDTH = 760
PLOT_LEFT = 84
PLOT_RIGHT = WIDTH - 84
HEADER_HEIGHT = 84
QPS_COLOUR = "#1f77b4"
TPS_COLOUR = "#2ca02c"
LATENCY_COLOUR = "#d62728"
SLO_COLOUR = "#8c1c13"
OTHER_COLOUR = "#7f7f7f"
REF_COLOUR = "#9467bd"
FAILED_COLOUR = "#d62728"
VERDICT_COLOUR = "#444444"
GRID_COLOUR = "#e6e6e6"
#: A workload is drawn with TPS too when a transaction is several queries (read-write: 20).
TPS_WORTH_DRAWING = 1.5


@dataclass
class _PanelInput:
    workload: str
    steps: list[StepStatus]
    verdict: _Verdict | None
    slo: float | None
    other_name: str | None = None
    other: list[StepStatus] = field(default_factory=list)
    refs: list[_RefRow] = field(default_factory=list)


def _is_failed(step: StepStatus) -> bool:
    return step.phase == "Failed"


def _draws_tps(data: _PanelInput) -> bool:
    ratios = [s.qps / s.tps for s in data.steps + data.other if s.qps and s.tps and s.tps > 0]
    if ratios and max(ratios) >= TPS_WORTH_DRAWING:
        return True
    return any(r.row.tps is not None and r.row.qps is None for r in data.refs)


def _top(value: float | tuple[float, float] | None) -> float:
    if value is None:
        return 0.0
    return value[1] if isinstance(value, tuple) else value


def _curve(
    steps: Sequence[StepStatus],
    value_of: Any,
    x_at: svg.LogScale,
    y_at: svg.LinearScale,
) -> tuple[list[list[tuple[float, float]]], list[list[tuple[float, float]]]]:
    """(solid runs, dashed runs) of points: a failed or unmeasured step breaks the line (no
    bridging across it); a segment touching an invalid step is dashed."""
    solid: list[list[tuple[float, float]]] = [[]]
    dashed: list[list[tuple[float, float]]] = []
    previous: tuple[StepStatus, tuple[float, float]] | None = None
    for step in sorted(steps, key=lambda s: s.threads):
        value = value_of(step)
        if value is None:
            solid.append([])
            previous = None
            continue
        point = (x_at(step.threads), y_at(value))
        if previous is not None and (previous[0].valid is False or step.valid is False):
            dashed.append([previous[1], point])
            solid.append([point])
        else:
            solid[-1].append(point)
        previous = (step, point)
    return [run for run in solid if run], dashed


def _legend(items: Sequence[tuple[str, str, str, bool]], x: float, y: float) -> list[str]:
    """One row of legend entries (colour, marker shape, label, dashed line)."""
    out = []
    for colour, shape, label, dashed in items:
        dash = {"stroke_dasharray": "5 3"} if dashed else {}
        out.append(svg.line(x, y - 4, x + 22, y - 4, colour, stroke_width="2", **dash))
        out.append(svg.marker(x + 11, y - 4, colour, shape, hollow=dashed))
        out.append(svg.text(x + 27, y, label))
        x += 27 + 6.6 * len(label) + 16
    return out


@dataclass(frozen=True)
class _Plot:
    """One plot of a panel: a value per step on a linear axis, sharing the threads axis."""

    kind: str  # qps, tps or latency: also the class of its curves
    title: str
    colour: str
    shape: str
    scale: svg.LinearScale
    value_of: Any
    fmt: Any


QPS_PLOT_HEIGHT = 160
TPS_PLOT_HEIGHT = 110
LATENCY_PLOT_HEIGHT = 130
PLOT_GAP = 22
PANEL_TOP = 72  # workload name, legend and verdict labels above the first plot
PANEL_BOTTOM = 62  # tick labels, step states, axis title and notes below the last plot
#: The SLO line is drawn inside the latency plot unless it would squash the curve flat.
SLO_STRETCH_LIMIT = 3.0


def _panel_height(data: _PanelInput) -> float:
    plots = QPS_PLOT_HEIGHT + LATENCY_PLOT_HEIGHT + PLOT_GAP
    if _draws_tps(data):
        plots += TPS_PLOT_HEIGHT + PLOT_GAP
    return PANEL_TOP + plots + PANEL_BOTTOM + 12


def _plots(data: _PanelInput, top: float, label: str) -> list[_Plot]:
    steps_all = data.steps + data.other
    draws_tps = _draws_tps(data)
    y = top + PANEL_TOP
    qps_top = max([s.qps or 0.0 for s in steps_all] + [_top(r.row.qps) for r in data.refs])
    plots = [
        _Plot(
            "qps",
            "QPS",
            QPS_COLOUR,
            "circle",
            svg.LinearScale(tuple(svg.nice_ticks(qps_top * 1.08)), y + QPS_PLOT_HEIGHT, y),
            lambda s: s.qps,
            _rate,
        )
    ]
    y += QPS_PLOT_HEIGHT + PLOT_GAP
    if draws_tps:
        tps_top = max([s.tps or 0.0 for s in steps_all] + [_top(r.row.tps) for r in data.refs])
        plots.append(
            _Plot(
                "tps",
                "TPS",
                TPS_COLOUR,
                "triangle",
                svg.LinearScale(tuple(svg.nice_ticks(tps_top * 1.08)), y + TPS_PLOT_HEIGHT, y),
                lambda s: s.tps,
                _rate,
            )
        )
        y += TPS_PLOT_HEIGHT + PLOT_GAP
    lat_top = max(
        [_latency(s) or 0.0 for s in steps_all]
        + [r.row.latency_ms or 0.0 for r in data.refs if r.row.threads]
    )
    if data.slo is not None and (lat_top == 0 or data.slo <= lat_top * SLO_STRETCH_LIMIT):
        lat_top = max(lat_top, data.slo)
    plots.append(
        _Plot(
            "latency",
            f"{label} latency (ms)",
            LATENCY_COLOUR,
            "square",
            svg.LinearScale(tuple(svg.nice_ticks(lat_top * 1.08)), y + LATENCY_PLOT_HEIGHT, y),
            _latency,
            _ms,
        )
    )
    return plots


def _panel(data: _PanelInput, top: float) -> list[str]:
    """One workload: QPS, TPS (transactional workloads) and latency stacked, one log2 axis
    of threads shared by all three."""
    steps, other = data.steps, data.other
    label = f"p{_percentile(steps or other)}"
    plots = _plots(data, top, label)
    first, last = plots[0].scale, plots[-1].scale
    all_threads = [s.threads for s in steps + other] + [
        r.row.threads for r in data.refs if r.row.threads
    ]
    x_at = svg.LogScale.over(all_threads, PLOT_LEFT + 12, PLOT_RIGHT - 12)
    bottom = last.bottom

    out = [
        f'<g class="panel" data-workload={quoteattr(data.workload)}>',
        svg.text(PLOT_LEFT - 60, top + 20, data.workload, font_size="15", font_weight="bold"),
    ]
    legend: list[tuple[str, str, str, bool]] = [
        (plot.colour, plot.shape, plot.title.removesuffix(" (ms)"), False) for plot in plots
    ]
    if data.other_name is not None:
        legend.append((OTHER_COLOUR, "circle", f"{data.other_name} (compared)", True))
    out += _legend(legend, PLOT_LEFT - 60, top + 42)
    if data.refs:
        out.append(svg.marker(PLOT_RIGHT - 130, top + 38, REF_COLOUR, "diamond"))
        out.append(svg.text(PLOT_RIGHT - 121, top + 42, "published (see R…)", fill=REF_COLOUR))

    # Grid, axes, tick labels and titles of each plot.
    for plot in plots:
        scale = plot.scale
        for tick in scale.ticks:
            y = scale(tick)
            out.append(svg.line(PLOT_LEFT, y, PLOT_RIGHT, y, GRID_COLOUR))
            out.append(
                svg.text(
                    PLOT_LEFT - 6,
                    y + 4,
                    svg.tick_label(tick, scale.step),
                    text_anchor="end",
                    fill=plot.colour,
                )
            )
        out.append(svg.line(PLOT_LEFT, scale.top, PLOT_LEFT, scale.bottom, plot.colour))
        out.append(svg.line(PLOT_LEFT, scale.bottom, PLOT_RIGHT, scale.bottom, "#333"))
        mid = (scale.top + scale.bottom) / 2
        out.append(
            svg.text(
                20,
                mid,
                plot.title,
                text_anchor="middle",
                fill=plot.colour,
                transform=f"rotate(-90 20 {svg.num(mid)})",
            )
        )
    ticked = sorted({s.threads for s in steps + other})
    last_label_x = -1e9
    for threads in ticked:
        x = x_at(threads)
        for plot in plots:
            out.append(svg.line(x, plot.scale.top, x, plot.scale.bottom, GRID_COLOUR))
            out.append(svg.line(x, plot.scale.bottom, x, plot.scale.bottom + 4, "#333"))
        if x - last_label_x >= 24:
            out.append(svg.text(x, bottom + 17, str(threads), text_anchor="middle"))
            last_label_x = x
    out.append(
        svg.text(
            (PLOT_LEFT + PLOT_RIGHT) / 2,
            bottom + 48,
            "threads (log scale: each doubling is the same distance)",
            text_anchor="middle",
        )
    )

    # Published numbers without a thread count: bands (ranges) or lines across a plot.
    by_kind = {plot.kind: plot.scale for plot in plots}
    out += _reference_spans(data.refs, by_kind["qps"], by_kind.get("tps"))

    # The SLO on the latency axis (or, when far above every step, said in words).
    if data.slo is not None:
        lat = plots[-1].scale
        text = f"SLO {label} ≤ {data.slo:g} ms"
        if data.slo <= lat.ticks[-1]:
            y = lat(data.slo)
            out.append(
                svg.line(
                    PLOT_LEFT,
                    y,
                    PLOT_RIGHT,
                    y,
                    SLO_COLOUR,
                    stroke_width="1.5",
                    stroke_dasharray="7 4",
                    **{"class": "slo"},
                )
            )
            out.append(svg.text(PLOT_RIGHT - 4, y - 5, text, text_anchor="end", fill=SLO_COLOUR))
        else:
            out.append(
                svg.text(
                    PLOT_RIGHT,
                    lat.top - 6,
                    f"↑ {text}: far above every step",
                    text_anchor="end",
                    fill=SLO_COLOUR,
                    **{"class": "slo-above"},
                )
            )

    # Peak, recommended and knee: a vertical line through all plots, named above.
    verdict = data.verdict
    if verdict is not None:
        marks: dict[int, list[str]] = {}
        candidates: tuple[tuple[str, int | None], ...] = (
            ("peak", verdict.peak_threads),
            ("recommended", verdict.recommended_threads if verdict.slo_known else None),
            ("knee", verdict.saturation_threads),
        )
        for name, at in candidates:
            if at is not None:
                marks.setdefault(at, []).append(name)
        for at, names in sorted(marks.items()):
            x = x_at(at)
            out.append(
                f'<g class="verdict" data-threads="{at}">'
                + svg.line(
                    x,
                    first.top - 4,
                    x,
                    bottom,
                    VERDICT_COLOUR,
                    stroke_width="1",
                    stroke_dasharray="2 3",
                )
                + svg.text(
                    x,
                    first.top - 8,
                    " · ".join(names),
                    text_anchor="middle",
                    fill=VERDICT_COLOUR,
                    font_weight="bold",
                )
                + "</g>"
            )

    # The compared run first (behind), then this run with its values written beside.
    for compared, group in ((True, other), (False, steps)):
        if not group:
            continue
        for plot in plots:
            colour = OTHER_COLOUR if compared else plot.colour
            cls = f"compare-{plot.kind}" if compared else plot.kind
            solid, dashed = _curve(group, plot.value_of, x_at, plot.scale)
            style = ' stroke-dasharray="5 3"' if compared else ""
            out.append(
                f'<path class="{cls}" d="{svg.path(solid)}" fill="none" stroke="{colour}" '
                f'stroke-width="2"{style}/>'
            )
            if dashed:
                out.append(
                    f'<path class="{cls} invalid-segment" d="{svg.path(dashed)}" fill="none" '
                    f'stroke="{colour}" stroke-width="1.5" stroke-dasharray="2 3"/>'
                )
            for step in group:
                value = plot.value_of(step)
                if value is None:
                    continue
                x, y = x_at(step.threads), plot.scale(value)
                tip = f"{step.threads} threads: {plot.fmt(value)}"
                if step.valid is False:
                    tip += " (invalid step)"
                hollow = compared or step.valid is False
                out.append(svg.marker(x, y, colour, plot.shape, hollow=hollow, tooltip=tip))
                if not compared:
                    shown = svg.short_number(value) if plot.kind != "latency" else _ms(value)
                    out.append(
                        svg.text(
                            x + 6, y - 7, shown, fill=colour, font_size="10", **{"class": "value"}
                        )
                    )

    # Published numbers at a thread count (labels of coinciding points stacked).
    taken: list[tuple[float, float]] = []
    for ref in data.refs:
        out += _reference_points(ref, x_at, by_kind, label, taken)

    # Failed and invalid steps stay on the axis, named under their thread count.
    for step in steps:
        x = x_at(step.threads)
        if _is_failed(step):
            why = "; ".join(step.notes) or "the step failed"
            for plot in plots:
                out.append(
                    svg.cross(
                        x,
                        plot.scale.bottom,
                        FAILED_COLOUR,
                        f"{step.threads} threads: failed: {why}",
                    )
                )
            out.append(
                svg.text(
                    x,
                    bottom + 31,
                    "failed",
                    text_anchor="middle",
                    fill=FAILED_COLOUR,
                    font_weight="bold",
                )
            )
        elif step.valid is False:
            out.append(
                svg.text(
                    x,
                    bottom + 31,
                    "invalid",
                    text_anchor="middle",
                    fill="#666666",
                    font_style="italic",
                )
            )
    notes = []
    if any(s.valid is False for s in steps):
        notes.append("hollow marker, dotted line: invalid step")
    if any(_is_failed(s) for s in steps):
        notes.append("✕ on the axis: failed step (no number; no line drawn across it)")
    if notes:
        out.append(
            svg.text(PLOT_LEFT - 60, bottom + 64, "; ".join(notes), fill="#666666", font_size="11")
        )
    out.append("</g>")
    return out


def _reference_points(
    ref: _RefRow,
    x_at: svg.LogScale,
    scales: Mapping[str, svg.LinearScale],
    label: str,
    taken: list[tuple[float, float]],
) -> list[str]:
    """A published number at a thread count: a diamond (a bar for a range) and its label."""
    row = ref.row
    if row.threads is None:
        return []
    out = []
    x = x_at(row.threads)
    for kind, value in (("qps", row.qps), ("tps", row.tps), ("latency", row.latency_ms)):
        scale = scales.get(kind)
        if value is None or scale is None:
            continue
        unit = {"qps": "QPS", "tps": "TPS", "latency": f"ms {label}"}[kind]
        tip = f"{ref.label} {ref.reference.name}: {_amount(value)} {unit} at {row.threads} threads"
        if isinstance(value, tuple):
            out.append(
                svg.line(x, scale(value[0]), x, scale(value[1]), REF_COLOUR, stroke_width="3")
            )
            y = scale((value[0] + value[1]) / 2)
        else:
            y = scale(value)
        out.append(svg.marker(x, y, REF_COLOUR, "diamond", tooltip=tip))
        text_y = y + 4
        while any(abs(tx - x) < 20 and abs(ty - text_y) < 11 for tx, ty in taken):
            text_y += 11
        taken.append((x, text_y))
        out.append(svg.text(x + 8, text_y, ref.label, fill=REF_COLOUR, font_size="11"))
    return out


def _reference_spans(
    refs: Sequence[_RefRow], qps_y: svg.LinearScale, tps_y: svg.LinearScale | None
) -> list[str]:
    out = []
    for ref in refs:
        row = ref.row
        if row.threads is not None:
            continue
        for value, scale, unit in ((row.qps, qps_y, "QPS"), (row.tps, tps_y, "TPS")):
            if value is None or scale is None:
                continue
            low, high = value if isinstance(value, tuple) else (value, value)
            y_low, y_high = scale(low), scale(high)
            tip = (
                f"{ref.label} {ref.reference.name}: {_amount(value)} {unit}, threads not published"
            )
            if high > low:
                out.append(
                    f'<rect class="reference-band" x="{PLOT_LEFT}" y="{svg.num(y_high)}" '
                    f'width="{PLOT_RIGHT - PLOT_LEFT}" height="{svg.num(y_low - y_high)}" '
                    f'fill="{REF_COLOUR}" fill-opacity="0.12">'
                    f"<title>{html.escape(tip)}</title></rect>"
                )
            else:
                out.append(
                    svg.line(
                        PLOT_LEFT, y_low, PLOT_RIGHT, y_low, REF_COLOUR, stroke_dasharray="1 3"
                    )
                )
            text = (
                f"{ref.label} {svg.short_number(low)}"
                + (f"–{svg.short_number(high)}" if high > low else "")
                + f" {unit}"
            )
            out.append(svg.text(PLOT_LEFT + 4, y_high + 11, text, fill=REF_COLOUR, font_size="11"))
    return out


# --------------------------------------------------------------------------- QPS over time

CELL_COLUMNS = 4
CELL_WIDTH = (WIDTH - 2 * 40) / CELL_COLUMNS
CELL_HEIGHT = 128


def _step_series(series: Mapping[str, Any], step: StepStatus) -> list[tuple[float, float]]:
    """(t, QPS of all clients) of one step's interval lines, in time order."""
    entry = series.get(str(step.index))
    if not isinstance(entry, Mapping):
        return []
    totals: dict[float, float] = {}
    clients = entry.get("clients")
    for lines in clients.values() if isinstance(clients, Mapping) else []:
        for item in lines if isinstance(lines, list) else []:
            if not isinstance(item, Mapping):
                continue
            t, qps = item.get("t"), item.get("qps")
            if isinstance(t, int | float) and isinstance(qps, int | float):
                totals[float(t)] = totals.get(float(t), 0.0) + float(qps)
    return sorted(totals.items())


def _multiples(
    workload: str, steps: Sequence[StepStatus], series: Mapping[str, Any], top: float
) -> tuple[list[str], float]:
    """Small multiples of QPS over time, one per step with interval lines; (svg, height)."""
    cells = [(s, _step_series(series, s)) for s in steps]
    cells = [(s, points) for s, points in cells if points]
    if not cells:
        return [], 0.0
    y_top = max(q for _, points in cells for _, q in points)
    ticks = svg.nice_ticks(y_top * 1.05, count=2)
    rows = (len(cells) + CELL_COLUMNS - 1) // CELL_COLUMNS
    out = [
        f'<g class="multiples" data-workload={quoteattr(workload)}>',
        svg.text(
            PLOT_LEFT - 60,
            top + 20,
            f"{workload}: QPS over time in each step "
            "(all clients, per report interval; same QPS scale)",
            font_size="13",
            font_weight="bold",
        ),
    ]
    for i, (step, points) in enumerate(cells):
        cx = 40 + (i % CELL_COLUMNS) * CELL_WIDTH
        cy = top + 34 + (i // CELL_COLUMNS) * CELL_HEIGHT
        x0, x1 = cx + 34, cx + CELL_WIDTH - 10
        y0, y1 = cy + 22, cy + CELL_HEIGHT - 30
        y_at = svg.LinearScale(tuple(ticks), y1, y0)
        t_end = max(t for t, _ in points)

        def x_at(t: float, x0: float = x0, x1: float = x1, t_end: float = t_end) -> float:
            return x0 + (t / t_end if t_end else 0.5) * (x1 - x0)

        state = " — failed" if _is_failed(step) else " — invalid" if step.valid is False else ""
        out.append(
            svg.text(
                cx + 34,
                cy + 12,
                f"{step.threads} threads: {_rate(step.qps)} QPS{state}",
                font_size="11",
                fill=FAILED_COLOUR if state else "#222222",
            )
        )
        out.append(
            f'<rect x="{svg.num(x0)}" y="{svg.num(y0)}" width="{svg.num(x1 - x0)}" '
            f'height="{svg.num(y1 - y0)}" fill="none" stroke="#cccccc"/>'
        )
        for tick in ticks:
            out.append(
                svg.text(
                    x0 - 4,
                    y_at(tick) + 4,
                    svg.short_number(tick) if tick else "0",
                    text_anchor="end",
                    font_size="10",
                    fill=QPS_COLOUR,
                )
            )
        if step.qps is not None:
            y = y_at(step.qps)
            out.append(svg.line(x0, y, x1, y, "#999999", stroke_dasharray="3 3"))
        # Each interval line is the rate over the interval that ends at t: drawn as a step.
        steps_xy: list[tuple[float, float]] = []
        start = 0.0
        for t, q in points:
            steps_xy += [(start, q), (t, q)]
            start = t
        coords = " ".join(f"{svg.num(x_at(t))},{svg.num(y_at(q))}" for t, q in steps_xy)
        out.append(
            f'<polyline class="interval-qps" points="{coords}" fill="none" '
            f'stroke="{QPS_COLOUR}" stroke-width="1.5"/>'
        )
        out.append(svg.text(x0, y1 + 13, "0", font_size="10", text_anchor="middle"))
        out.append(svg.text(x1, y1 + 13, f"{t_end:g} s", font_size="10", text_anchor="middle"))
    out.append(
        svg.text(
            PLOT_LEFT - 60,
            top + 34 + rows * CELL_HEIGHT + 4,
            "dashed: the step's reported QPS (its whole-run average); "
            "a dip is a stall, a slow start is warm-up",
            font_size="11",
            fill="#666666",
        )
    )
    out.append("</g>")
    return out, 34 + rows * CELL_HEIGHT + 20


# --------------------------------------------------------------------------- the whole chart


def _footnotes(refs: Sequence[Reference], drawn: set[str], top: float) -> tuple[list[str], float]:
    """The drawn references (numbered as in the Markdown tables) with conditions and source."""
    if not drawn:
        return [], 0.0
    out = [
        '<g class="references">',
        svg.text(
            PLOT_LEFT - 60,
            top + 16,
            "Published numbers (◇, bands): measured elsewhere, under their own conditions",
            font_weight="bold",
            fill=REF_COLOUR,
        ),
    ]
    y = top + 34
    for i, ref in enumerate(refs):
        if f"R{i + 1}" not in drawn:
            continue
        first = True
        for piece in svg.wrap(f"R{i + 1} {ref.name}. {ref.conditions} Source: {ref.source}", 110):
            out.append(svg.text(PLOT_LEFT - 60 + (0 if first else 24), y, piece, font_size="11"))
            y += 15
            first = False
    out.append("</g>")
    return out, y - top + 6


def _header_lines(context: Context, width: int = 108) -> list[str]:
    """The context facts joined with ' · ', wrapped between facts to fit the chart."""
    lines: list[str] = []
    current = ""
    for fact in [*context.what, *context.how]:
        joined = f"{current} · {fact}" if current else fact
        if current and len(joined) > width:
            lines.append(current)
            current = fact
        else:
            current = joined
    return [*lines, current]


def render_svg(
    status: StatusLike,
    title: str,
    *,
    spec: Mapping[str, Any] | None = None,
    compare: tuple[str, StatusLike] | None = None,
    references: Sequence[Reference] = (),
    series: Mapping[str, Any] | None = None,
) -> str:
    """A self-contained SVG: a header with the run's context; per workload (stacked) QPS
    (and TPS), latency with the SLO, and the verdicts against threads; the compared run and
    published numbers overlaid; QPS over time per step when `series` (the results
    ConfigMap's series.json) is given. Deterministic output."""
    run = _as_status(status)
    other = _as_status(compare[1]) if compare is not None else None
    drawn = [s for s in run.steps if s.qps is not None or _latency(s) is not None or _is_failed(s)]
    groups = _by_workload(drawn)
    if other is not None:
        for workload in _by_workload([s for s in other.steps if s.qps is not None]):
            groups.setdefault(workload, [])
    verdicts = _verdicts(run, spec)
    ref_rows = _ref_rows(references)
    context = run_context(run, spec)
    body: list[str] = [
        svg.text(WIDTH / 2, 28, title, text_anchor="middle", font_size="17", font_weight="bold"),
    ]
    y = 50.0
    for line in _header_lines(context):
        body.append(svg.text(WIDTH / 2, y, line, text_anchor="middle", fill="#333333"))
        y += 18
    y += HEADER_HEIGHT - 86
    if not groups:
        body.append(svg.text(WIDTH / 2, y + 40, "no finished steps", text_anchor="middle"))
        y += 80
    for workload, steps in groups.items():
        data = _PanelInput(
            workload=workload,
            steps=steps,
            verdict=verdicts.get(workload),
            slo=_slo(spec),
            other_name=compare[0] if compare is not None else None,
            other=[s for s in other.steps if s.workload == workload] if other is not None else [],
            refs=[r for r in ref_rows if r.row.workload == workload],
        )
        body += _panel(data, y)
        y += _panel_height(data)
    if series:
        for workload, steps in groups.items():
            cells, height = _multiples(workload, steps, series, y)
            body += cells
            y += height
    labels = {r.label for r in ref_rows if r.row.workload in groups}
    notes, height = _footnotes(references, labels, y)
    body += notes
    y += height
    total = int(y + 10)
    head = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{total}" '
        f'viewBox="0 0 {WIDTH} {total}" font-family="sans-serif" font-size="12">',
        f"<title>{html.escape(title, quote=False)}</title>",
        f'<rect x="0" y="0" width="{WIDTH}" height="{total}" fill="#ffffff"/>',
    ]
    return "\n".join([*head, *body, "</svg>"]) + "\n"


# --------------------------------------------------------------------------- html


def _inline(text: str) -> str:
    """Markdown inline markup this module writes (**bold**, `code`, escaped pipes) as HTML."""
    escaped = html.escape(text.replace("\\|", "|"), quote=False)
    escaped = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", escaped)
    return re.sub(r"`(.+?)`", r"<code>\1</code>", escaped)


def _split_row(line: str) -> list[str]:
    cells = re.split(r"(?<!\\)\|", line.strip().strip("|"))
    return [c.strip() for c in cells]


def markdown_to_html(markdown: str) -> str:
    """The Markdown render_markdown writes (headings, paragraphs, lists, tables) as HTML."""
    out: list[str] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{_inline(line[level:].strip())}</h{level}>")
        elif line.startswith("| "):
            header = _split_row(line)
            aligns = [
                "right" if c.endswith(":") and not c.startswith(":") else "left"
                for c in _split_row(lines[i + 1])
            ]
            i += 2
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(_split_row(lines[i]))
                i += 1
            out.append("<table>")
            out.append(
                "<tr>"
                + "".join(
                    f'<th class="{a}">{_inline(c)}</th>'
                    for c, a in zip(header, aligns, strict=False)
                )
                + "</tr>"
            )
            for row in rows:
                out.append(
                    "<tr>"
                    + "".join(
                        f'<td class="{a}">{_inline(c)}</td>'
                        for c, a in zip(row, aligns, strict=False)
                    )
                    + "</tr>"
                )
            out.append("</table>")
            continue
        elif line.startswith("- "):
            out.append("<ul>")
            while i < len(lines) and lines[i].startswith("- "):
                out.append(f"<li>{_inline(lines[i][2:])}</li>")
                i += 1
            out.append("</ul>")
            continue
        elif line.strip():
            out.append(f"<p>{_inline(line)}</p>")
        i += 1
    return "\n".join(out)


_CSS = """
body { font-family: sans-serif; max-width: 800px; margin: 2em auto; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 14px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; }
th { background: #f3f3f3; }
td.right, th.right { text-align: right; }
figure { margin: 1em 0; }
code { background: #f3f3f3; padding: 0 3px; }
"""


def render_html(
    run_name: str,
    status: StatusLike,
    compare: tuple[str, StatusLike] | None = None,
    *,
    spec: Mapping[str, Any] | None = None,
    references: Sequence[Reference] = (),
    series: Mapping[str, Any] | None = None,
) -> str:
    """One self-contained HTML file (no external resources): the chart inline, then the
    tables — for attaching to a ticket."""
    markdown = render_markdown(run_name, status, compare, spec=spec, references=references)
    chart = render_svg(
        status,
        f"BenchmarkRun {run_name}",
        spec=spec,
        compare=compare,
        references=references,
        series=series,
    )
    title = html.escape(f"BenchmarkRun {run_name}")
    return (
        "<!DOCTYPE html>\n"
        f'<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{title}</title>\n'
        f"<style>{_CSS}</style>\n</head>\n<body>\n"
        f"<figure>\n{chart}</figure>\n"
        f"{markdown_to_html(markdown)}\n"
        "</body>\n</html>\n"
    )
