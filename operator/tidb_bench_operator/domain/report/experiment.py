"""A BenchmarkExperiment's variants side by side: one chart (QPS and latency against threads,
a curve per variant) and the table by threads that docs/field-story.md's author wrote by hand."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tidb_bench_operator.domain.api.experiment import BASELINE, BenchmarkExperimentStatus
from tidb_bench_operator.domain.api.run_status import BenchmarkRunStatus, StepStatus
from tidb_bench_operator.domain.report import svg
from tidb_bench_operator.domain.report.format import cell, delta, ms, rate
from tidb_bench_operator.domain.report.model import by_workload, latency, percentile

#: One colour per variant, the baseline first (grey-blue), then the usual categorical set.
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")
SHAPES = ("circle", "square", "diamond", "triangle")
WIDTH = 760
LEFT, RIGHT = 84, WIDTH - 40
PLOT_HEIGHT = 190


@dataclass
class VariantResult:
    """One variant (or the baseline) with its run's steps."""

    name: str
    phase: str
    run: str | None
    settle_seconds: float | None
    skipped_reason: str | None
    steps: list[StepStatus] = field(default_factory=list)


@dataclass
class ExperimentReport:
    """What the comparison shows: the experiment's identity and each variant's result."""

    name: str
    cluster: str
    phase: str
    message: str | None
    restored: str | None
    variants: list[VariantResult]


def _meta_name(obj: Mapping[str, Any], default: str) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return str(name) if name else default


def experiment_report(
    experiment: Mapping[str, Any], runs: Sequence[Mapping[str, Any]]
) -> ExperimentReport:
    """The comparison of a BenchmarkExperiment (as `kubectl get -o json` gives it) and its
    runs (each named by a status.variants[].run); a variant without its run has no steps."""
    status = BenchmarkExperimentStatus.model_validate(experiment.get("status") or {})
    spec = experiment.get("spec") or {}
    cluster = spec.get("cluster") if isinstance(spec, Mapping) else None
    by_name = {_meta_name(r, ""): r for r in runs}
    variants = []
    for v in status.variants:
        run = by_name.get(v.run or "")
        steps = BenchmarkRunStatus.model_validate(run.get("status") or {}).steps if run else []
        variants.append(
            VariantResult(v.name, str(v.phase), v.run, v.settle_seconds, v.skipped_reason, steps)
        )
    variants.sort(key=lambda v: v.name != BASELINE)  # the baseline first, the rest in order
    restored = None
    if status.restored is not None and status.restored.at is not None:
        settled = "settled" if status.restored.settled else "not seen settled"
        restored = f"restored {status.restored.at:%Y-%m-%d %H:%M:%S}Z, {settled}"
        if status.restored.left_alone:
            others = ", ".join(status.restored.left_alone)
            restored += f"; left alone (changed by someone else): {others}"
    where = (
        f"{cluster.get('kind', 'TidbCluster')} {cluster.get('namespace', '')}/{cluster.get('name')}"
        if isinstance(cluster, Mapping)
        else "—"
    )
    return ExperimentReport(
        name=_meta_name(experiment, "experiment"),
        cluster=where,
        phase=str(status.phase),
        message=status.message,
        restored=restored,
        variants=variants,
    )


def _measured(steps: Sequence[StepStatus]) -> dict[str, dict[int, StepStatus]]:
    """Steps with a QPS by workload and threads."""
    return {
        w: {s.threads: s for s in group if s.qps is not None}
        for w, group in by_workload(steps).items()
    }


def _peak(steps: Sequence[StepStatus]) -> StepStatus | None:
    """The valid step with the highest QPS: where the variant's efficiency is read."""
    valid = [s for s in steps if s.qps is not None and s.valid is not False]
    return max(valid, key=lambda s: s.qps or 0.0, default=None)


def _cpu_ms(value: float | None) -> str:
    """CPU milliseconds per query: 2 decimals, or 3 significant digits below 1 ms (a point
    select costs hundredths of a millisecond)."""
    if value is None:
        return "—"
    return f"{value:,.2f}" if value >= 1 else f"{value:.3g}"


def _settle(seconds: float | None) -> str:
    return "—" if seconds is None else f"{seconds:,.0f} s"


def _settled(seconds: float | None) -> str:
    return "settle time not recorded" if seconds is None else f"settled in {seconds:,.0f} s"


def render_experiment_markdown(report: ExperimentReport) -> str:
    """The variants' status, then per workload the table by threads: each variant's QPS and
    percentile latency, and the change against the baseline (the first variant) in percent."""
    lines = [f"# Experiment {report.name}", ""]
    facts = [f"cluster {report.cluster}", f"phase {report.phase}"]
    if report.restored:
        facts.append(report.restored)
    lines += [" · ".join(facts), ""]
    if report.message:
        lines += [cell(report.message), ""]
    lines += [
        "| variant | status | run | settle time | peak QPS | QPS per core | CPU ms per query "
        "| bottleneck at the peak | not measured because |",
        "|---|---|---|---:|---:|---:|---:|---|---|",
    ]
    base_cpu: float | None = None
    for i, v in enumerate(report.variants):
        peak = _peak(v.steps)
        res = peak.resources if peak is not None else None
        cpu = res.cpu_ms_per_query if res else None
        if i == 0:
            base_cpu = cpu
        cpu_text = (
            _cpu_ms(cpu) if i == 0 or cpu is None else (f"{_cpu_ms(cpu)} ({delta(cpu, base_cpu)})")
        )
        neck = res.bottleneck.message if res and res.bottleneck else ""
        lines.append(
            f"| {cell(v.name)} | {v.phase} | {cell(v.run or '—')} | {_settle(v.settle_seconds)} "
            f"| {rate(peak.qps if peak else None)} | {rate(res.qps_per_core if res else None)} "
            f"| {cpu_text} | {cell(neck)} | {cell(v.skipped_reason or '')} |"
        )
    measured = [(v, _measured(v.steps)) for v in report.variants]
    workloads: list[str] = []
    for _, per in measured:
        workloads += [w for w in per if w not in workloads]
    for workload in workloads:
        runs = [(v, per.get(workload, {})) for v, per in measured if per.get(workload)]
        if not runs:
            continue
        pct = percentile([s for _, steps in runs for s in steps.values()])
        base_name, base = runs[0][0].name, runs[0][1]
        head = ["threads"]
        for i, (v, _) in enumerate(runs):
            head += [f"{v.name} QPS", f"p{pct} ms"]
            if i:
                head += [f"QPS vs {base_name}", f"p{pct} vs {base_name}"]
        lines += ["", f"## {workload}: QPS and p{pct} latency by threads", ""]
        lines += ["| " + " | ".join(cell(h) for h in head) + " |", "|" + "---:|" * len(head)]
        for threads in sorted({t for _, steps in runs for t in steps}):
            row = [str(threads)]
            b = base.get(threads)
            for i, (_, steps) in enumerate(runs):
                s = steps.get(threads)
                row += [rate(s.qps if s else None), ms(latency(s) if s else None)]
                if i:
                    row += [
                        delta(s.qps if s else None, b.qps if b else None),
                        delta(latency(s) if s else None, latency(b) if b else None),
                    ]
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- the chart


def _plot(
    title: str,
    curves: Sequence[tuple[VariantResult, list[tuple[int, float]]]],
    x_at: svg.LogScale,
    top: float,
    unit: str,
) -> list[str]:
    """One plot: a value axis, a curve per variant against threads (log scale); beside each
    later variant's point, its change against the baseline's at the same threads."""
    values = [y for _, pts in curves for _, y in pts]
    ticks = svg.nice_ticks(max(values, default=1.0) * 1.05)
    y_at = svg.LinearScale(tuple(ticks), top + PLOT_HEIGHT, top + 10)
    base = dict(curves[0][1]) if curves else {}
    out = [svg.text(LEFT - 60, top, title, font_weight="bold")]
    out += svg.y_grid(y_at, LEFT, RIGHT, "#333333")
    for i, (variant, pts) in enumerate(curves):
        if not pts:
            continue  # not measured (skipped) or no latency recorded
        colour, shape = COLOURS[i % len(COLOURS)], SHAPES[i % len(SHAPES)]
        xy = [(x_at(t), y_at(y)) for t, y in pts]
        out.append(
            f'<path class="variant" d="{svg.path([xy])}" fill="none" stroke="{colour}" '
            f'stroke-width="2"/>'
        )
        for (t, y), (x, py) in zip(pts, xy, strict=True):
            out.append(svg.marker(x, py, colour, shape, tooltip=f"{variant.name}: {t} threads, "
                                  f"{svg.short_number(y)} {unit}"))  # fmt: skip
            change = delta(y, base.get(t)) if i else "—"
            if change != "—":
                out.append(svg.text(x + 8, py + 14, change, fill=colour, font_size="11"))
    return out


def render_experiment_svg(report: ExperimentReport) -> str:
    """Per workload: QPS against threads, then percentile latency, one curve per variant
    (the baseline first), with a legend naming each variant and its status. Deterministic."""
    title = f"Experiment {report.name}: the variants side by side"
    body = [svg.text(WIDTH / 2, 28, title, text_anchor="middle", font_size="17",
                     font_weight="bold"),
            svg.text(WIDTH / 2, 48, f"cluster {report.cluster} · {report.restored or report.phase}",
                     text_anchor="middle", fill="#333333")]  # fmt: skip
    y = 70.0
    legend_x = LEFT - 60.0
    for i, v in enumerate(report.variants):
        colour = COLOURS[i % len(COLOURS)]
        state = v.phase if v.skipped_reason is None else f"{v.phase}: {v.skipped_reason}"
        label = f"{v.name} ({state}; {_settled(v.settle_seconds)})"
        body.append(svg.marker(legend_x + 6, y - 4, colour, SHAPES[i % len(SHAPES)]))
        body.append(svg.text(legend_x + 16, y, label[:110], fill="#222222"))
        y += 18
    per_variant = [(v, _measured(v.steps)) for v in report.variants]
    workloads: list[str] = []
    for _, per in per_variant:
        workloads += [w for w in per if w not in workloads]
    if not workloads:
        body.append(svg.text(WIDTH / 2, y + 30, "no variant measured yet", text_anchor="middle"))
        y += 60
    for workload in workloads:
        threads = sorted({t for _, per in per_variant for t in per.get(workload, {})})
        x_at = svg.LogScale.over(threads, LEFT, RIGHT)
        qps = [(v, [(t, s.qps or 0.0) for t, s in sorted(per.get(workload, {}).items())])
               for v, per in per_variant]  # fmt: skip
        lat = [(v, [(t, latency(s) or 0.0) for t, s in sorted(per.get(workload, {}).items())
                    if latency(s) is not None]) for v, per in per_variant]  # fmt: skip
        steps = [s for _, per in per_variant for s in per.get(workload, {}).values()]
        y += 16
        body += _plot(f"{workload}: QPS", qps, x_at, y, "QPS")
        y += PLOT_HEIGHT + 34
        body += _plot(f"{workload}: p{percentile(steps)} latency, ms", lat, x_at, y, "ms")
        y += PLOT_HEIGHT + 8
        for t in threads:
            body.append(svg.text(x_at(t), y + 8, str(t), text_anchor="middle"))
        body.append(svg.text((LEFT + RIGHT) / 2, y + 26, "threads (log scale)",
                             text_anchor="middle", fill="#333333"))  # fmt: skip
        y += 40
    return svg.document(title, WIDTH, int(y + 10), body)
