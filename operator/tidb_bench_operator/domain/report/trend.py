"""`tidb-bench report` for a BenchmarkSchedule: its QPS and efficiency verdicts, its history
as a table, and per step a trend
chart of QPS night by night (each valid trial a dot, the step's median a line) with the
change points found over the history (domain/stats/trend.py) marked where the level moved."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from xml.sax.saxutils import quoteattr

from tidb_bench_operator.domain.api.results import StepKey
from tidb_bench_operator.domain.api.schedule import HistoryEntry, HistoryStep
from tidb_bench_operator.domain.api.verdicts import StepChangePoint
from tidb_bench_operator.domain.report import svg
from tidb_bench_operator.domain.report.format import cell, rate
from tidb_bench_operator.domain.report.model import ScheduleReport
from tidb_bench_operator.domain.report.stats import TRIAL_COLOUR
from tidb_bench_operator.domain.stats.trend import describe_change_point

WIDTH = 760
LEFT, RIGHT = 84, WIDTH - 40
PANEL_HEIGHT = 200
PLOT_TOP, PLOT_HEIGHT = 46, 110
LINE_COLOUR = "#1f77b4"
CPU_COLOUR = "#9467bd"
CHANGE_COLOUR = "#d62728"


def _series(history: Sequence[HistoryEntry]) -> dict[StepKey, list[tuple[int, HistoryEntry]]]:
    """Per (workload, threads): the runs (index in the history, entry) that measured it."""
    found: dict[StepKey, list[tuple[int, HistoryEntry]]] = {}
    for i, entry in enumerate(history):
        for step in entry.steps:
            found.setdefault((step.workload, step.threads), []).append((i, entry))
    return found


def render_schedule_markdown(report: ScheduleReport) -> str:
    """The schedule's latest verdict, its change points and its history, oldest first."""
    status = report.status
    lines = [f"# BenchmarkSchedule {cell(report.name)}", ""]
    latest = status.last_successful_run or "the latest successful run"
    if status.verdict:
        lines += [f"Latest verdict: **{cell(status.verdict)}** ({cell(latest)}).", ""]
    if status.efficiency:
        lines += [
            f"Latest efficiency verdict (server CPU per query): **{cell(status.efficiency)}** "
            f"({cell(latest)}).",
            "",
        ]
    elif status.verdict:
        lines += ["No efficiency verdict: the latest run's steps have no resource data.", ""]
    lines += ["## Change points", ""]
    if status.change_points:
        lines += [f"- {cell(describe_change_point(p))}" for p in status.change_points]
    else:
        lines.append("None found over the history kept (spec.regression.trendRuns).")
    lines += [
        "",
        "## History",
        "",
        "| # | run | finished | outcome | verdict | efficiency | peak QPS | "
        "steps: threads QPS (trials), CPU ms/query |",
        "| ---: | :--- | :--- | :--- | :--- | :--- | ---: | :--- |",
    ]
    for number, entry in enumerate(status.history, start=1):
        finished = entry.finished_at.strftime("%Y-%m-%d %H:%M") if entry.finished_at else "—"
        steps = ", ".join(
            f"{s.threads} thr {rate(s.qps)}"
            + (f" ({len(s.trials)})" if s.trials else "")
            + (f" {statistics.median(s.cpu_ms_per_query):.3g} ms" if s.cpu_ms_per_query else "")
            for s in entry.steps
        )
        lines.append(
            f"| {number} | {cell(entry.name)} | {finished} | {entry.outcome} | "
            f"{entry.verdict or '—'} | {entry.efficiency or '—'} | {rate(entry.peak_qps)} | "
            f"{cell(steps) or '—'} |"
        )
    if not status.history:
        lines.append("| | — | | | | | | no finished runs yet |")
    return "\n".join(lines) + "\n"


def _qps(step: HistoryStep) -> tuple[float, list[float]] | None:
    return step.qps, list(step.trials)


def _cpu(step: HistoryStep) -> tuple[float, list[float]] | None:
    """A night's server CPU ms per query: the median of its trials, and the trials."""
    if not step.cpu_ms_per_query:
        return None
    return statistics.median(step.cpu_ms_per_query), list(step.cpu_ms_per_query)


@dataclass(frozen=True)
class _Measure:
    """What a trend panel plots per run: QPS, or the server's CPU ms per query."""

    title: str
    kind: str  # the class of its line
    colour: str
    value_of: Callable[[HistoryStep], tuple[float, list[float]] | None]
    fmt: Callable[[float], str]


_QPS = _Measure("QPS per run", "trend-qps", LINE_COLOUR, _qps, lambda v: f"{rate(v)} QPS")
_CPU = _Measure(
    "server CPU ms per query per run (a rise is an efficiency regression)",
    "trend-cpu",
    CPU_COLOUR,
    _cpu,
    lambda v: f"{v:.3g} CPU ms/query",
)


def _values(
    key: StepKey, points: Sequence[tuple[int, HistoryEntry]], measure: _Measure
) -> list[tuple[int, float, list[float]]]:
    """(index in the history, the run's value, its trials) of the runs that have the value."""
    values = []
    for i, entry in points:
        step = next(s for s in entry.steps if (s.workload, s.threads) == key)
        found = measure.value_of(step)
        if found is not None:
            values.append((i, found[0], found[1]))
    return values


def _panel(
    key: StepKey,
    points: Sequence[tuple[int, HistoryEntry]],
    runs: int,
    changes: Sequence[StepChangePoint],
    top: float,
    measure: _Measure = _QPS,
) -> list[str]:
    workload, threads = key
    values = _values(key, points, measure)
    y_top = max(max([q, *trials]) for _, q, trials in values)
    y_at = svg.LinearScale(
        tuple(svg.nice_ticks(y_top * 1.08)), top + PLOT_TOP + PLOT_HEIGHT, top + PLOT_TOP
    )

    def x_at(i: float) -> float:
        return LEFT + 20 + (i / max(runs - 1, 1)) * (RIGHT - LEFT - 40)

    out = [
        f'<g class="trend" data-workload={quoteattr(workload)} data-threads="{threads}">',
        svg.text(
            LEFT - 60,
            top + 20,
            f"{workload}, {threads} threads: {measure.title}",
            font_size="13",
            font_weight="bold",
        ),
    ]
    out += svg.y_grid(y_at, LEFT, RIGHT, measure.colour)
    out.append(svg.line(LEFT, y_at.bottom, RIGHT, y_at.bottom, "#333"))
    names = {i: entry.name for i, entry in points}
    for change in changes:
        at = next((i for i, name in names.items() if name == change.run), None)
        if at is None:
            continue
        x = (x_at(at) + x_at(at - 1)) / 2 if at > 0 else x_at(at)
        out.append(
            f'<g class="change-point" data-run={quoteattr(change.run)}>'
            + svg.line(
                x,
                y_at.top - 6,
                x,
                y_at.bottom,
                CHANGE_COLOUR,
                stroke_width="1.5",
                stroke_dasharray="6 3",
            )
            + svg.text(
                x + 4,
                y_at.top - 8,
                f"change {change.change_percent:+.1f}% (p {change.p_value:.2g})",
                fill=CHANGE_COLOUR,
                font_weight="bold",
            )
            + "</g>"
        )
    line = [(x_at(i), y_at(q)) for i, q, _ in values]
    out.append(
        f'<path class="{measure.kind}" d="{svg.path([line])}" fill="none" '
        f'stroke="{measure.colour}" stroke-width="2"/>'
    )
    for i, q, trials in values:
        x = x_at(i)
        for t in trials:
            out.append(
                f'<circle class="trial" cx="{svg.num(x)}" cy="{svg.num(y_at(t))}" '
                f'r="2.5" fill="{TRIAL_COLOUR}"/>'
            )
        tip = f"{names[i]}: {measure.fmt(q)}"
        out.append(svg.marker(x, y_at(q), measure.colour, "circle", tooltip=tip))
    every = max(1, (runs + 9) // 10)
    for i in range(0, runs, every):
        out.append(
            svg.text(x_at(i), y_at.bottom + 15, str(i + 1), text_anchor="middle", font_size="10")
        )
    out.append("</g>")
    return out


def render_schedule_svg(report: ScheduleReport) -> str:
    """A self-contained SVG: per step a trend panel (runs oldest first, numbered as in the
    history table), trials as dots, the median as the line, change points as red lines;
    under it the step's server CPU ms per query per run when runs have resource data."""
    status = report.status
    series = _series(status.history)
    runs = len(status.history)
    has_cpu = any(_values(key, points, _CPU) for key, points in series.items())
    title = f"{report.title}: QPS{' and CPU per query' if has_cpu else ''} per run"
    body = [
        svg.text(WIDTH / 2, 28, title, text_anchor="middle", font_size="17", font_weight="bold")
    ]
    y = 44.0
    if not series:
        body.append(
            svg.text(WIDTH / 2, y + 30, "no successful runs with steps yet", text_anchor="middle")
        )
        y += 60
    notes = [
        "x: the runs of the history, oldest first, numbered as in the report's table",
        "line: the step's QPS (median of its trials); dots: its trials; red: a change point",
    ]
    for key, points in series.items():
        changes = [c for c in status.change_points if (c.workload, c.threads) == key]
        body += _panel(key, points, runs, changes, y)
        y += PANEL_HEIGHT
        if _values(key, points, _CPU):  # the efficiency verdict's numbers, night by night
            body += _panel(key, points, runs, [], y, _CPU)
            y += PANEL_HEIGHT
    if has_cpu:
        notes.append("purple: the step's server CPU ms per query (median of its trials)")
    for k, note in enumerate(notes):
        body.append(svg.text(LEFT - 60, y + 4 + 15 * k, note, font_size="11", fill="#666666"))
    total = int(y + 4 + 15 * len(notes))
    return svg.document(title, WIDTH, total, body)
