"""`tidb-bench report`: a finished run as Markdown tables and a hand-written SVG chart."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from tidb_bench_operator.domain.analysis import compute_summary
from tidb_bench_operator.domain.models import BenchmarkRunStatus, StepStatus
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


def _verdicts(status: BenchmarkRunStatus) -> dict[str, _Verdict]:
    """Per-workload verdicts: the controller's own summary wins, else analysis on valid steps.

    Why prefer status.summary: only the controller knew spec.slo; without it the report can
    name the peak and the knee but not the best step under the SLO.
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
                saturation_threads=item.saturation_threads,
                slo_known=True,
            )
    results: list[StepResult] = []
    for step in status.steps:
        result = step.to_result()
        if step.workload not in verdicts and result is not None and step.valid is not False:
            results.append(result)
    for computed in compute_summary(results, slo_latency_ms=None).workloads:
        verdicts[computed.workload] = _Verdict(
            peak_qps=computed.peak_qps,
            peak_threads=computed.peak_threads,
            peak_latency_ms=computed.peak_latency_ms,
            recommended_threads=None,
            recommended_qps=None,
            saturation_threads=(
                computed.saturation_threads if computed.saturation_basis == "knee" else None
            ),
            slo_known=False,
        )
    return verdicts


def _summary_lines(verdict: _Verdict | None, label: str, steps: Sequence[StepStatus]) -> list[str]:
    if verdict is None or verdict.peak_qps is None or verdict.peak_threads is None:
        return ["- No valid finished step: no peak, recommendation or saturation point."]
    peak = f"- Peak: {_rate(verdict.peak_qps)} QPS at {verdict.peak_threads} threads"
    if verdict.peak_latency_ms is not None:
        peak += f" ({label} {_ms(verdict.peak_latency_ms)} ms)"
    if not verdict.slo_known:
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


def render_markdown(
    run_name: str,
    status: StatusLike,
    compare: tuple[str, StatusLike] | None = None,
) -> str:
    """The run as Markdown: per workload a step table and summary lines; optionally a
    side-by-side comparison with another run (deltas in % per workload and threads)."""
    run = _as_status(status)
    lines = [f"# BenchmarkRun {_cell(run_name)}", ""]
    facts = [f"phase {run.phase}"]
    if run.environment is not None:
        if run.environment.tidb_version:
            facts.append(f"TiDB {run.environment.tidb_version}")
        if run.environment.sysbench_version:
            facts.append(f"sysbench {run.environment.sysbench_version}")
    if run.started_at is not None:
        facts.append(f"started {run.started_at.isoformat()}")
    if run.finished_at is not None:
        facts.append(f"finished {run.finished_at.isoformat()}")
    lines += [_cell(", ".join(facts)), ""]
    if run.summary is not None and run.summary.headline:
        lines += [_cell(run.summary.headline), ""]
    groups = _by_workload(run.steps)
    if not groups:
        lines += ["No steps recorded.", ""]
    verdicts = _verdicts(run)
    for workload, steps in groups.items():
        label = f"p{_percentile(steps)}"
        verdict = verdicts.get(workload)
        lines += [f"## {workload}", ""]
        lines += _workload_table(steps, verdict, label)
        lines += ["", *_summary_lines(verdict, label, steps), ""]
    if compare is not None:
        other_name, other_status = compare
        lines += _compare_table(run_name, run, other_name, _as_status(other_status))
        lines.append("")
    return "\n".join(lines)


# --------------------------------------------------------------------------- svg

WIDTH = 720
TITLE_HEIGHT = 40
PANEL_HEIGHT = 320
PLOT_LEFT = 80
PLOT_RIGHT = WIDTH - 80
PLOT_TOP = 56  # within a panel: workload name and legend above the plot
PLOT_BOTTOM = PANEL_HEIGHT - 56
QPS_COLOUR = "#1f77b4"
LATENCY_COLOUR = "#d62728"
TICKS = 5


def _nice_ticks(maximum: float, count: int = TICKS) -> list[float]:
    """Round tick values 0, s, 2s, ... covering `maximum`, with s = 1, 2, 2.5 or 5 x 10^k."""
    if not maximum > 0 or not math.isfinite(maximum):
        maximum = 1.0
    raw = maximum / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    top = math.ceil(maximum / step - 1e-9) * step
    return [i * step for i in range(round(top / step) + 1)]


def _tick_label(value: float, step: float) -> str:
    """A tick value with as many decimals as the tick step needs (2.5 -> 1), thousands separated."""
    decimals = 0
    while decimals < 4 and abs(round(step, decimals) - step) > step * 1e-9:
        decimals += 1
    return f"{value:,.{decimals}f}"


def _num(value: float) -> str:
    return f"{value:.1f}"


def _text(x: float, y: float, content: str, **attrs: str) -> str:
    extra = "".join(f" {k.replace('_', '-')}={quoteattr(v)}" for k, v in attrs.items())
    return f'<text x="{_num(x)}" y="{_num(y)}"{extra}>{escape(content)}</text>'


def _panel(workload: str, steps: Sequence[StepStatus], top: float) -> list[str]:
    """One workload's chart: QPS (left axis) and percentile latency (right axis) per threads."""
    label = f"p{_percentile(steps)}"
    latency_title = f"{label} latency (ms)"
    y0, y1 = top + PLOT_TOP, top + PLOT_BOTTOM
    width = PLOT_RIGHT - PLOT_LEFT
    qps_ticks = _nice_ticks(max((s.qps or 0.0) for s in steps) if steps else 0.0)
    lat_ticks = _nice_ticks(max((_latency(s) or 0.0) for s in steps) if steps else 0.0)

    def x_at(i: int) -> float:
        # Categorical x axis: thread counts are usually powers of two, evenly spaced here.
        return PLOT_LEFT + (i + 0.5) * width / len(steps)

    def y_at(value: float, ticks: Sequence[float]) -> float:
        return y1 - value / ticks[-1] * (y1 - y0)

    out = [
        f'<g class="panel" data-workload={quoteattr(workload)}>',
        _text(PLOT_LEFT, top + 22, workload, font_size="14", font_weight="bold"),
    ]
    # Grid and left (QPS) axis.
    for tick in qps_ticks:
        y = y_at(tick, qps_ticks)
        out.append(
            f'<line x1="{PLOT_LEFT}" y1="{_num(y)}" x2="{PLOT_RIGHT}" y2="{_num(y)}" '
            'stroke="#e0e0e0"/>'
        )
        out.append(
            _text(
                PLOT_LEFT - 6,
                y + 4,
                _tick_label(tick, qps_ticks[1]),
                text_anchor="end",
                fill=QPS_COLOUR,
            )
        )
    for tick in lat_ticks:
        y = y_at(tick, lat_ticks)
        out.append(
            f'<line x1="{PLOT_RIGHT}" y1="{_num(y)}" x2="{PLOT_RIGHT + 4}" y2="{_num(y)}" '
            f'stroke="{LATENCY_COLOUR}"/>'
        )
        out.append(
            _text(PLOT_RIGHT + 7, y + 4, _tick_label(tick, lat_ticks[1]), fill=LATENCY_COLOUR)
        )
    out += [
        f'<line x1="{PLOT_LEFT}" y1="{_num(y0)}" x2="{PLOT_LEFT}" y2="{_num(y1)}" '
        f'stroke="{QPS_COLOUR}"/>',
        f'<line x1="{PLOT_RIGHT}" y1="{_num(y0)}" x2="{PLOT_RIGHT}" y2="{_num(y1)}" '
        f'stroke="{LATENCY_COLOUR}"/>',
        f'<line x1="{PLOT_LEFT}" y1="{_num(y1)}" x2="{PLOT_RIGHT}" y2="{_num(y1)}" stroke="#333"/>',
    ]
    for i, step in enumerate(steps):
        x = x_at(i)
        out.append(
            f'<line x1="{_num(x)}" y1="{_num(y1)}" x2="{_num(x)}" y2="{_num(y1 + 4)}" '
            'stroke="#333"/>'
        )
        out.append(_text(x, y1 + 18, str(step.threads), text_anchor="middle"))
    # Axis titles.
    mid = (y0 + y1) / 2
    out += [
        _text((PLOT_LEFT + PLOT_RIGHT) / 2, y1 + 38, "threads", text_anchor="middle"),
        _text(
            22,
            mid,
            "QPS",
            text_anchor="middle",
            fill=QPS_COLOUR,
            transform=f"rotate(-90 22 {_num(mid)})",
        ),
        _text(
            WIDTH - 16,
            mid,
            latency_title,
            text_anchor="middle",
            fill=LATENCY_COLOUR,
            transform=f"rotate(90 {WIDTH - 16} {_num(mid)})",
        ),
    ]
    # Legend, top right above the plot.
    legend_y = top + 22
    for offset, colour, name, marker in (
        (0, QPS_COLOUR, "QPS", "circle"),
        (90, LATENCY_COLOUR, latency_title, "square"),
    ):
        lx = PLOT_RIGHT - 230 + offset
        out.append(
            f'<line x1="{lx}" y1="{_num(legend_y - 4)}" x2="{lx + 24}" y2="{_num(legend_y - 4)}" '
            f'stroke="{colour}" stroke-width="2"/>'
        )
        out.append(_marker(lx + 12, legend_y - 4, colour, marker, hollow=False))
        out.append(_text(lx + 30, legend_y, name))
    if any(step.valid is False for step in steps):
        out.append(_text(PLOT_LEFT, y1 + 38, "hollow marker: invalid step", fill="#666"))
    # The two curves; steps without a number are left out of that curve.
    for cls, colour, marker, ticks, value_of, fmt in (
        ("qps", QPS_COLOUR, "circle", qps_ticks, lambda s: s.qps, _rate),
        ("latency", LATENCY_COLOUR, "square", lat_ticks, _latency, _ms),
    ):
        points = [
            (x_at(i), y_at(v, ticks), s, v)
            for i, s in enumerate(steps)
            if (v := value_of(s)) is not None
        ]
        coords = " ".join(f"{_num(x)},{_num(y)}" for x, y, _, _ in points)
        out.append(
            f'<polyline class="{cls}" points="{coords}" fill="none" stroke="{colour}" '
            'stroke-width="2"/>'
        )
        for x, y, step, value in points:
            tip = f"{step.threads} threads: {fmt(value)}"
            if step.valid is False:
                tip += " (invalid step)"
            out.append(_marker(x, y, colour, marker, hollow=step.valid is False, tooltip=tip))
    out.append("</g>")
    return out


def _marker(
    x: float, y: float, colour: str, shape: str, hollow: bool, tooltip: str | None = None
) -> str:
    """A point marker; hollow marks an invalid step. Circles for QPS, squares for latency."""
    fill = "#ffffff" if hollow else colour
    tip = f"<title>{escape(tooltip)}</title>" if tooltip else ""
    if shape == "circle":
        return (
            f'<circle cx="{_num(x)}" cy="{_num(y)}" r="4" fill="{fill}" stroke="{colour}" '
            f'stroke-width="1.5">{tip}</circle>'
        )
    return (
        f'<rect x="{_num(x - 3.5)}" y="{_num(y - 3.5)}" width="7" height="7" fill="{fill}" '
        f'stroke="{colour}" stroke-width="1.5">{tip}</rect>'
    )


def render_svg(status: StatusLike, title: str) -> str:
    """A self-contained SVG: per workload (stacked vertically) QPS and percentile latency
    against threads, with tick-labelled axes, a legend and `title`. Deterministic output."""
    run = _as_status(status)
    groups = _by_workload([s for s in run.steps if s.qps is not None or _latency(s) is not None])
    height = TITLE_HEIGHT + PANEL_HEIGHT * max(len(groups), 1)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">',
        f"<title>{escape(title)}</title>",
        f'<rect x="0" y="0" width="{WIDTH}" height="{height}" fill="#ffffff"/>',
        _text(WIDTH / 2, 26, title, text_anchor="middle", font_size="16", font_weight="bold"),
    ]
    if not groups:
        out.append(_text(WIDTH / 2, TITLE_HEIGHT + 40, "no finished steps", text_anchor="middle"))
    for index, (workload, steps) in enumerate(groups.items()):
        out += _panel(workload, steps, TITLE_HEIGHT + index * PANEL_HEIGHT)
    out.append("</svg>")
    return "\n".join(out) + "\n"
