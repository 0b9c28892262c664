"""An operations window's report: QPS and latency against time through the change, the
level and its tolerance band, the operator's events marked, and status.window's numbers."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from tidb_bench_operator.domain.api.experiment import (
    BenchmarkExperimentStatus,
    OperationWindow,
)
from tidb_bench_operator.domain.api.run_status import BenchmarkRunStatus
from tidb_bench_operator.domain.experiment.window import WindowPoint, window_points
from tidb_bench_operator.domain.report import svg
from tidb_bench_operator.domain.report.format import cell, rate

WIDTH = 980
LEFT, RIGHT = 76, 680
NUMBERS_X = 710
PLOT_HEIGHT = 200
QPS_COLOUR = "#1f77b4"
LATENCY_COLOUR = "#d62728"
CHANGE_COLOUR = "#d62728"
EVENT_COLOUR = "#7f7f7f"
RECOVERED_COLOUR = "#2ca02c"
BAND_COLOUR = "#2ca02c"


@dataclass
class WindowReport:
    """What the window's report shows."""

    name: str
    operation: str
    tolerance_percent: float
    window: OperationWindow
    points: list[WindowPoint]
    percentile: int | None
    notes: list[str]


def _operation_text(spec: Mapping[str, Any]) -> tuple[str, float]:
    """The operation's name and patch in one line, and its tolerance."""
    op = spec.get("operation") if isinstance(spec.get("operation"), Mapping) else {}
    assert isinstance(op, Mapping)
    patch = op.get("patch") if op.get("patch") is not None else op.get("groups")
    text = str(op.get("name", "operation"))
    if patch:
        text += f": {json.dumps(patch, sort_keys=True)}"
    tolerance = op.get("tolerancePercent", 10.0)
    return text, float(tolerance) if isinstance(tolerance, int | float) else 10.0


def _measured_from(run: BenchmarkRunStatus, spec: Mapping[str, Any]) -> tuple[datetime | None, str]:
    """Where the step's `t` counts from: resources.windowStart, else its start plus the
    warm-up (the same estimate, less exact); and a note when it was the latter."""
    if not run.steps:
        return None, ""
    step = run.steps[0]
    if step.resources is not None and step.resources.window_start is not None:
        return step.resources.window_start, ""
    if step.started_at is None:
        return None, ""
    warmup = spec.get("warmupSeconds", 0)
    warmup = warmup if isinstance(warmup, int | float) else 0
    return step.started_at + timedelta(seconds=warmup), (
        "the step has no resources.windowStart: its interval times count from its start "
        "plus the warm-up"
    )


def _percentile(clients: Mapping[str, Any]) -> int | None:
    """The latency percentile the interval lines carry (sysbench's `lat (ms,95%)`)."""
    for lines in clients.values():
        for line in lines if isinstance(lines, list) else []:
            value = line.get("percentile") if isinstance(line, Mapping) else None
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


def window_report(
    experiment: Mapping[str, Any],
    run: Mapping[str, Any] | None,
    series: Mapping[str, Any] | None,
) -> WindowReport:
    """The window of an experiment with spec.operation: its status.window, and the points of
    its run's one step from the stored series (`series` as the results store reads it:
    {"0": {"clients": {client: [points]}}})."""
    spec = experiment.get("spec") if isinstance(experiment.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)
    status = BenchmarkExperimentStatus.model_validate(experiment.get("status") or {})
    meta = experiment.get("metadata") if isinstance(experiment.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    operation, tolerance = _operation_text(spec)
    window = status.window or OperationWindow()
    notes: list[str] = []
    points: list[WindowPoint] = []
    pct = None
    if run is None:
        notes.append(f"the run {window.run or ''} was not given: no time series".replace("  ", " "))
    else:
        run_status = BenchmarkRunStatus.model_validate(run.get("status") or {})
        run_spec = run.get("spec") if isinstance(run.get("spec"), Mapping) else {}
        assert isinstance(run_spec, Mapping)
        start, note = _measured_from(run_status, run_spec)
        notes += [note] if note else []
        step = series.get("0") if isinstance(series, Mapping) else None
        clients = step.get("clients") if isinstance(step, Mapping) else None
        if start is None or not isinstance(clients, Mapping):
            notes.append("no interval series stored for the run's step (its results ConfigMaps)")
        else:
            points = window_points(clients, start)
            pct = _percentile(clients)
    return WindowReport(
        name=str(meta.get("name") or "experiment"),
        operation=operation,
        tolerance_percent=tolerance,
        window=window,
        points=points,
        percentile=pct,
        notes=notes,
    )


def _after(at: datetime | None, origin: datetime | None) -> str:
    if at is None:
        return "—"
    if origin is None:
        return f"{at:%H:%M:%S}"
    return f"{(at - origin).total_seconds():+,.1f} s"


def _numbers(report: WindowReport) -> list[tuple[str, str]]:
    """status.window's numbers as (label, value), times relative to the change."""
    w = report.window
    origin = w.applied_at
    dip = "—" if w.dip_percent is None else f"{w.dip_percent:,.1f}% below"
    recovery = "—" if w.recovery_seconds is None else f"{w.recovery_seconds:,.1f} s"
    return [
        ("change sent", "—" if origin is None else f"{origin:%Y-%m-%d %H:%M:%S}Z"),
        ("level before (median QPS)", rate(w.level_qps)),
        ("worst QPS", f"{rate(w.worst_qps)} at {_after(w.worst_at, origin)}"),
        ("dip", dip),
        (f"back within {report.tolerance_percent:g}%", f"{_after(w.recovered_at, origin)}"),
        ("recovery time", recovery if w.recovered_at is not None else "not recovered"),
        ("errors / reconnects", f"{w.errors if w.errors is not None else '—'} / "
                                f"{w.reconnects if w.reconnects is not None else '—'}"),
        ("cluster settled", _after(w.settled_at, origin)),
        ("run", w.run or "—"),
    ]  # fmt: skip


def render_window_markdown(report: WindowReport) -> str:
    """status.window's numbers, its message and the timeline of events."""
    w = report.window
    lines = [f"# Operations window of {report.name}", "", f"Operation `{report.operation}`", ""]
    if w.message:
        lines += [cell(w.message), ""]
    lines += ["| | |", "|---|---:|"]
    lines += [f"| {cell(k)} | {cell(v)} |" for k, v in _numbers(report)]
    lines += ["", "## Timeline", "", "| # | after the change | source | what | object | message |"]
    lines.append("|---:|---:|---|---|---|---|")
    for i, e in enumerate(w.events, 1):
        lines.append(
            f"| {i} | {_after(e.at, w.applied_at)} | {cell(e.source)} | {cell(e.what)} "
            f"| {cell(e.object)} | {cell(e.message)} |"
        )
    for note in report.notes:
        lines += ["", f"Note: {note}."]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- the chart


def _steps(points: Sequence[WindowPoint], value: str, x_at: Any, y_at: Any) -> str:
    """A polyline drawing each interval's value flat over the interval (gaps left open)."""
    runs: list[list[tuple[float, float]]] = []
    last_end: datetime | None = None
    for p in points:
        v = getattr(p, value)
        if v is None:
            last_end = None
            continue
        if last_end is None or p.start != last_end:
            runs.append([])
        runs[-1] += [(x_at(p.start), y_at(v)), (x_at(p.end), y_at(v))]
        last_end = p.end
    return svg.path(runs)


def _marks(report: WindowReport, x_at: Any, top: float, bottom: float, label: bool) -> list[str]:
    """The change, each event (numbered as in the list below), the recovery, the settle."""
    w = report.window
    out = []
    for i, e in enumerate(w.events, 1):
        x = x_at(e.at)
        out.append(svg.line(x, top, x, bottom, EVENT_COLOUR, stroke_dasharray="2 3"))
        if label:
            out.append(svg.text(x, top - 3 - 10 * (i % 2), str(i), text_anchor="middle",
                                font_size="10", fill=EVENT_COLOUR))  # fmt: skip
    for at, colour, name in (
        (w.applied_at, CHANGE_COLOUR, "change"),
        (w.recovered_at if w.recovery_seconds else None, RECOVERED_COLOUR, "recovered"),
    ):
        if at is None:
            continue
        x = x_at(at)
        out.append(svg.line(x, top, x, bottom, colour, stroke_width="1.5"))
        if label:
            out.append(svg.text(x + 3, bottom - 4, name, fill=colour, font_size="11"))
    return out


def render_window_svg(report: WindowReport) -> str:
    """QPS (top) and latency (below) against seconds from the change; the level and its
    tolerance band; the change, the events and the recovery marked; the numbers beside."""
    w = report.window
    title = f"Operations window of {report.name}"
    body = [
        svg.text(WIDTH / 2, 26, title, text_anchor="middle", font_size="17", font_weight="bold"),
        svg.text(WIDTH / 2, 46, report.operation[:140], text_anchor="middle", fill="#333333"),
    ]
    times = [t for p in report.points for t in (p.start, p.end)]
    times += [e.at for e in w.events] + [t for t in (w.applied_at, w.settled_at) if t]
    origin = w.applied_at or (min(times) if times else None)
    top = 80.0
    if origin is None or len(times) < 2:
        body.append(svg.text(WIDTH / 2, top + 40, "no time series and no events to draw",
                             text_anchor="middle"))  # fmt: skip
        return svg.document(title, WIDTH, int(top + 80), body)
    lo = (min(times) - origin).total_seconds()
    hi = max((max(times) - origin).total_seconds(), lo + 1)

    def x_at(at: datetime) -> float:
        return LEFT + ((at - origin).total_seconds() - lo) / (hi - lo) * (RIGHT - LEFT)

    level = w.level_qps
    qps_top = max([p.qps for p in report.points] + [level * 1.15 if level else 0.0, 1.0])
    q_at = svg.LinearScale(tuple(svg.nice_ticks(qps_top * 1.05)), top + PLOT_HEIGHT, top)
    body.append(svg.text(LEFT - 60, top - 18, "QPS (all clients, per report interval)",
                         font_weight="bold", fill=QPS_COLOUR))  # fmt: skip
    if level:
        band = (q_at(level * (1 + report.tolerance_percent / 100)),
                q_at(max(0.0, level * (1 - report.tolerance_percent / 100))))  # fmt: skip
        body.append(
            f'<rect class="tolerance" x="{svg.num(LEFT)}" y="{svg.num(band[0])}" '
            f'width="{svg.num(RIGHT - LEFT)}" height="{svg.num(band[1] - band[0])}" '
            f'fill="{BAND_COLOUR}" fill-opacity="0.12"/>'
        )
        body.append(svg.line(LEFT, q_at(level), RIGHT, q_at(level), "#555555",
                             stroke_dasharray="5 3"))  # fmt: skip
        body.append(svg.text(RIGHT - 4, q_at(level) - 4,
                             f"level {rate(level)} ± {report.tolerance_percent:g}%",
                             text_anchor="end", font_size="11", fill="#555555"))  # fmt: skip
    body += svg.y_grid(q_at, LEFT, RIGHT, QPS_COLOUR, grid="#eeeeee")
    body.append(f'<path class="qps" d="{_steps(report.points, "qps", x_at, q_at)}" '
                f'fill="none" stroke="{QPS_COLOUR}" stroke-width="2"/>')  # fmt: skip
    if w.worst_qps is not None and w.worst_at is not None:
        body.append(svg.marker(x_at(w.worst_at), q_at(w.worst_qps), QPS_COLOUR, "diamond",
                               tooltip=f"worst {rate(w.worst_qps)} QPS"))  # fmt: skip
    body += _marks(report, x_at, top, top + PLOT_HEIGHT, label=True)
    top2 = top + PLOT_HEIGHT + 46
    lats = [p.latency_ms for p in report.points if p.latency_ms is not None]
    l_at = svg.LinearScale(tuple(svg.nice_ticks(max(lats, default=1.0) * 1.05)),
                           top2 + PLOT_HEIGHT * 0.7, top2)  # fmt: skip
    pct = f"p{report.percentile}" if report.percentile else "percentile"
    body.append(svg.text(LEFT - 60, top2 - 14, f"{pct} latency, ms (the worst client's; "
                         "a gap: no query completed)", font_weight="bold",
                         fill=LATENCY_COLOUR))  # fmt: skip
    body += svg.y_grid(l_at, LEFT, RIGHT, LATENCY_COLOUR, grid="#eeeeee")
    body.append(f'<path class="latency" d="{_steps(report.points, "latency_ms", x_at, l_at)}" '
                f'fill="none" stroke="{LATENCY_COLOUR}" stroke-width="1.5"/>')  # fmt: skip
    bottom = top2 + PLOT_HEIGHT * 0.7
    body += _marks(report, x_at, top2, bottom, label=False)
    ticks = svg.nice_ticks(hi - lo, count=8)
    step = ticks[1] if len(ticks) > 1 else 1.0
    t = (lo // step) * step
    while t <= hi + 1e-9:
        if t >= lo - 1e-9:
            x = x_at(origin + timedelta(seconds=t))
            body.append(svg.text(x, bottom + 16, f"{t:+g}" if t else "0", text_anchor="middle"))
        t += step
    body.append(svg.text((LEFT + RIGHT) / 2, bottom + 34, "seconds from the change",
                         text_anchor="middle", fill="#333333"))  # fmt: skip
    y = top
    for label, value in _numbers(report):
        body.append(svg.text(NUMBERS_X, y, label, fill="#555555", font_size="11"))
        body.append(svg.text(NUMBERS_X, y + 14, value[:40], font_weight="bold"))
        y += 34
    for piece in svg.wrap(w.message or "", 42):
        body.append(svg.text(NUMBERS_X, y, piece, font_size="11"))
        y += 14
    y = bottom + 58
    if w.events:
        body.append(svg.text(LEFT - 60, y, "Events (numbered above the QPS plot)",
                             font_weight="bold"))  # fmt: skip
        y += 18
    for i, e in enumerate(w.events, 1):
        line = f"{i}. {_after(e.at, w.applied_at)}  {e.what}  {e.object}  {e.message}"
        body.append(svg.text(LEFT - 60, y, line[:150], font_size="11"))
        y += 15
    for note in report.notes:
        body.append(svg.text(LEFT - 60, y + 4, f"Note: {note}.", font_size="11", fill="#666666"))
        y += 15
    return svg.document(title, WIDTH, int(y + 12), body)
