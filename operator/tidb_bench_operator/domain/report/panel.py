"""One workload's panel of the report chart: QPS, TPS (transactional workloads) and latency
stacked over one log2 axis of threads, with the SLO, verdicts, failed and invalid steps, the
compared run and published numbers (chart.py puts the panels together)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import quoteattr

from tidb_bench_operator.domain.api.run_status import StepStatus
from tidb_bench_operator.domain.report import svg
from tidb_bench_operator.domain.report.format import ms, rate
from tidb_bench_operator.domain.report.model import (
    RefRow,
    SweepPoints,
    is_failed,
    latency,
    percentile,
)
from tidb_bench_operator.domain.report.references import (
    REF_COLOUR,
    reference_points,
    reference_spans,
)
from tidb_bench_operator.domain.report.stats import has_trials, interval_marks
from tidb_bench_operator.domain.report.stats import qps_top as trials_top

WIDTH = 760
PLOT_LEFT = 84
PLOT_RIGHT = WIDTH - 84
HEADER_HEIGHT = 84
QPS_COLOUR = "#1f77b4"
TPS_COLOUR = "#2ca02c"
LATENCY_COLOUR = "#d62728"
SLO_COLOUR = "#8c1c13"
OTHER_COLOUR = "#7f7f7f"
FAILED_COLOUR = "#d62728"
VERDICT_COLOUR = "#444444"
GRID_COLOUR = "#e6e6e6"
#: A workload is drawn with TPS too when a transaction is several queries (read-write: 20).
TPS_WORTH_DRAWING = 1.5


@dataclass
class PanelInput:
    """What one panel draws: a workload's steps and points, the SLO, the compared run's
    steps of the workload and the published numbers for it."""

    workload: str
    steps: list[StepStatus]
    points: SweepPoints | None
    slo: float | None
    other_name: str | None = None
    other: list[StepStatus] = field(default_factory=list)
    refs: list[RefRow] = field(default_factory=list)
    #: The x axis: threads, or a rate sweep's target rates (model.on_rate_axis).
    x_label: str = "threads (log scale: each doubling is the same distance)"


def _draws_tps(data: PanelInput) -> bool:
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


def panel_height(data: PanelInput) -> float:
    plots = QPS_PLOT_HEIGHT + LATENCY_PLOT_HEIGHT + PLOT_GAP
    if _draws_tps(data):
        plots += TPS_PLOT_HEIGHT + PLOT_GAP
    return PANEL_TOP + plots + PANEL_BOTTOM + 12


def _plots(data: PanelInput, top: float, label: str) -> list[_Plot]:
    steps_all = data.steps + data.other
    draws_tps = _draws_tps(data)
    y = top + PANEL_TOP
    qps_top = max(
        [s.qps or 0.0 for s in steps_all]
        + [_top(r.row.qps) for r in data.refs]
        + [trials_top(data.steps)]
    )
    plots = [
        _Plot(
            "qps",
            "QPS",
            QPS_COLOUR,
            "circle",
            svg.LinearScale(tuple(svg.nice_ticks(qps_top * 1.08)), y + QPS_PLOT_HEIGHT, y),
            lambda s: s.qps,
            rate,
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
                rate,
            )
        )
        y += TPS_PLOT_HEIGHT + PLOT_GAP
    lat_top = max(
        [latency(s) or 0.0 for s in steps_all]
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
            latency,
            ms,
        )
    )
    return plots


def draw_panel(data: PanelInput, top: float) -> list[str]:
    """One workload: QPS, TPS (transactional workloads) and latency stacked, one log2 axis
    of threads shared by all three."""
    steps, other = data.steps, data.other
    label = f"p{percentile(steps or other)}"
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
        out += svg.y_grid(scale, PLOT_LEFT, PLOT_RIGHT, plot.colour, GRID_COLOUR)
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
            data.x_label,
            text_anchor="middle",
        )
    )

    # Published numbers without a thread count: bands (ranges) or lines across a plot.
    by_kind = {plot.kind: plot.scale for plot in plots}
    out += reference_spans(data.refs, by_kind["qps"], by_kind.get("tps"), PLOT_LEFT, PLOT_RIGHT)

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
    points = data.points
    if points is not None:
        marks: dict[int, list[str]] = {}
        candidates: tuple[tuple[str, int | None], ...] = (
            ("peak", points.peak_threads),
            ("recommended", points.recommended_threads if points.slo_known else None),
            ("knee", points.saturation_threads),
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
                if plot.kind == "qps" and not compared:
                    out += interval_marks(step, x, plot.scale)
                tip = f"{step.threads} threads: {plot.fmt(value)}"
                if step.valid is False:
                    tip += " (invalid step)"
                hollow = compared or step.valid is False
                out.append(svg.marker(x, y, colour, plot.shape, hollow=hollow, tooltip=tip))
                if not compared:
                    shown = svg.short_number(value) if plot.kind != "latency" else ms(value)
                    out.append(
                        svg.text(
                            x + 6, y - 7, shown, fill=colour, font_size="10", **{"class": "value"}
                        )
                    )

    # Published numbers at a thread count (labels of coinciding points stacked).
    taken: list[tuple[float, float]] = []
    for ref in data.refs:
        out += reference_points(ref, x_at, by_kind, label, taken)

    # Failed and invalid steps stay on the axis, named under their thread count.
    for step in steps:
        x = x_at(step.threads)
        if is_failed(step):
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
    if has_trials(steps):
        notes.append("QPS: median of the trials (dots), bar: 95% interval of the mean")
    if any(s.valid is False for s in steps):
        notes.append("hollow marker, dotted line: invalid step")
    if any(is_failed(s) for s in steps):
        notes.append("✕ on the axis: failed step (no number; no line drawn across it)")
    if notes:
        out.append(
            svg.text(PLOT_LEFT - 60, bottom + 64, "; ".join(notes), fill="#666666", font_size="11")
        )
    out.append("</g>")
    return out
