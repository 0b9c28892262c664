"""The report chart as one SVG: a header with the run's context, a panel per workload
(panel.py), QPS over time per step from the interval series, and the sources
of the published numbers drawn."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from xml.sax.saxutils import quoteattr

from tidb_bench_operator.domain.api.run_status import StepStatus
from tidb_bench_operator.domain.report import svg
from tidb_bench_operator.domain.report.format import rate
from tidb_bench_operator.domain.report.model import (
    Context,
    RunReport,
    by_workload,
    is_failed,
    is_rate_sweep,
    latency,
    on_rate_axis,
)
from tidb_bench_operator.domain.report.panel import (
    FAILED_COLOUR,
    HEADER_HEIGHT,
    PLOT_LEFT,
    QPS_COLOUR,
    WIDTH,
    PanelInput,
    draw_panel,
    panel_height,
)
from tidb_bench_operator.domain.report.reference import Reference
from tidb_bench_operator.domain.report.references import REF_COLOUR
from tidb_bench_operator.domain.report.resources import resource_panels

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

        state = " — failed" if is_failed(step) else " — invalid" if step.valid is False else ""
        out.append(
            svg.text(
                cx + 34,
                cy + 12,
                f"{step.threads} threads: {rate(step.qps)} QPS{state}",
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


def render_svg(report: RunReport) -> str:
    """A self-contained SVG: a header with the run's context; per workload (stacked) QPS
    (and TPS), latency with the SLO, and the points against threads; the compared run and
    published numbers overlaid; a resource panel per step with resource data; QPS over time
    per step when the report has the interval series (the results ConfigMap's series.json).
    Deterministic output."""
    run, title = report.status, report.title
    other = report.compare.status if report.compare is not None else None
    drawn = [s for s in run.steps if s.qps is not None or latency(s) is not None or is_failed(s)]
    groups = by_workload(drawn)
    if other is not None:
        for workload in by_workload([s for s in other.steps if s.qps is not None]):
            groups.setdefault(workload, [])
    body: list[str] = [
        svg.text(WIDTH / 2, 28, title, text_anchor="middle", font_size="17", font_weight="bold"),
    ]
    y = 50.0
    for line in _header_lines(report.context):
        body.append(svg.text(WIDTH / 2, y, line, text_anchor="middle", fill="#333333"))
        y += 18
    y += HEADER_HEIGHT - 86
    if not groups:
        body.append(svg.text(WIDTH / 2, y + 40, "no finished steps", text_anchor="middle"))
        y += 80
    for workload, steps in groups.items():
        placed, points = on_rate_axis(steps, report.points.get(workload))
        data = PanelInput(
            workload=workload,
            steps=placed,
            points=points,
            slo=report.slo,
            other_name=report.compare.name if report.compare is not None else None,
            other=[s for s in other.steps if s.workload == workload] if other is not None else [],
            refs=[r for r in report.ref_rows if r.row.workload == workload],
        )
        if is_rate_sweep(steps):
            data.x_label = "target rate, events/s (sysbench --rate; log scale)"
        body += draw_panel(data, y)
        y += panel_height(data)
        panels, height = resource_panels(workload, steps, y)
        body += panels
        y += height
    if report.series:
        for workload, steps in groups.items():
            cells, height = _multiples(workload, steps, report.series, y)
            body += cells
            y += height
    labels = {r.label for r in report.ref_rows if r.row.workload in groups}
    notes, height = _footnotes(report.references, labels, y)
    body += notes
    y += height
    total = int(y + 10)
    return svg.document(title, WIDTH, total, body)
