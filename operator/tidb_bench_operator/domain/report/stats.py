"""The statistics in a report: a step's trials (median, 95% interval, CV, noisy) in the
table and on the chart, and the schedule's verdict on the run with what differs from the
baseline's fingerprints (docs/statistics.md)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tidb_bench_operator.domain.api.run_status import BenchmarkRunStatus, StepStatus
from tidb_bench_operator.domain.api.verdicts import Metric, RunComparison, StepVerdict
from tidb_bench_operator.domain.report import svg
from tidb_bench_operator.domain.report.format import rate

#: Colour of the trial dots and interval bars (the QPS colour, lighter).
TRIAL_COLOUR = "#6f9fd8"


def has_trials(steps: Sequence[StepStatus]) -> bool:
    """True when any step was measured more than once (spec.repeats > 1)."""
    return any(s.qps_trials is not None and s.qps_trials.n >= 2 for s in steps)


def trial_cells(step: StepStatus) -> tuple[str, str]:
    """(the 95% interval of the mean QPS, the CV) of a step's valid trials, for the table."""
    summary = step.qps_trials
    if summary is None or summary.ci_low is None or summary.ci_high is None:
        return "—", "—"
    cv = "—" if summary.cv_percent is None else f"{summary.cv_percent:.1f}%"
    if summary.noisy:
        cv += " noisy"
    return f"{rate(summary.ci_low)}–{rate(summary.ci_high)} (n={summary.n})", cv


def interval_marks(
    step: StepStatus, x: float, y_at: Callable[[float], float], colour: str = TRIAL_COLOUR
) -> list[str]:
    """A step's trials on the QPS plot: each valid trial a small dot, the 95% interval of
    the mean a capped vertical bar (nothing with fewer than two trials)."""
    summary = step.qps_trials
    if summary is None or summary.n < 2 or summary.ci_low is None or summary.ci_high is None:
        return []
    low, high = y_at(summary.ci_low), y_at(summary.ci_high)
    tip = (
        f"{step.threads} threads: {summary.n} trials, median {rate(summary.median)}, "
        f"95% interval {rate(summary.ci_low)}–{rate(summary.ci_high)}"
    )
    out = [
        f'<g class="qps-interval" data-threads="{step.threads}"><title>{tip}</title>'
        + svg.line(x, low, x, high, colour, stroke_width="1.5")
        + svg.line(x - 5, low, x + 5, low, colour, stroke_width="1.5")
        + svg.line(x - 5, high, x + 5, high, colour, stroke_width="1.5")
        + "</g>"
    ]
    for trial in step.trials:
        if trial.valid is False:
            continue
        y = y_at(trial.qps)
        out.append(
            f'<circle class="trial" cx="{svg.num(x - 9)}" cy="{svg.num(y)}" r="2" fill="{colour}"/>'
        )
    return out


def qps_top(steps: Sequence[StepStatus]) -> float:
    """The highest QPS a step's trials or interval reach (the QPS axis must hold them)."""
    top = 0.0
    for step in steps:
        summary = step.qps_trials
        if summary is not None and summary.ci_high is not None:
            top = max(top, summary.ci_high)
        top = max([top, *(t.qps for t in step.trials if t.valid is not False)])
    return top


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:+.1f}%"


def _p(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.2g}" if value >= 0.001 else "< 0.001"


def _median(value: float | None, metric: Metric) -> str:
    if metric == "cpuMsPerQuery":
        return "—" if value is None else f"{value:.3g}"
    return rate(value)


def _verdict_row(step: StepVerdict, metric: Metric = "qps") -> str:
    interval = (
        "—"
        if step.interval_low_percent is None or step.interval_high_percent is None
        else f"{step.interval_low_percent:+.1f}% … {step.interval_high_percent:+.1f}%"
    )
    return (
        f"| {step.workload} | {step.threads} | **{step.verdict}** | "
        f"{_percent(step.effect_percent)} | {interval} | {_p(step.p_value)} | "
        f"{_p(step.p_adjusted)} | {step.trials} vs {step.baseline_trials} "
        f"({step.baseline_runs} runs) | {_median(step.median_qps, metric)} vs "
        f"{_median(step.baseline_median_qps, metric)} |"
    )


def _efficiency_lines(verdict: RunComparison | None) -> list[str]:
    """The efficiency verdict: server CPU per query per step against the baseline (a rise
    regresses), or that the run has none (no resource data)."""
    if verdict is None:
        return ["No efficiency verdict (server CPU per query): no resource data.", ""]
    return [
        f"Efficiency (server CPU ms per query; a rise regresses): **{verdict.verdict}**: "
        f"{verdict.message}",
        "",
        "| workload | threads | verdict | effect | 95% interval | p | p (adjusted) | "
        "trials | median CPU ms/query |",
        "| :--- | ---: | :--- | ---: | :---: | ---: | ---: | ---: | ---: |",
        *(_verdict_row(step, verdict.metric) for step in verdict.steps),
        "",
    ]


def regression_lines(run: BenchmarkRunStatus) -> list[str]:
    """The schedule's verdict on the run: per step the effect, its 95% interval and the
    p-values; then what differs from the baseline runs' fingerprints."""
    verdict = run.regression
    if verdict is None:
        return []
    lines = [
        "## Against the schedule's baseline",
        "",
        f"**{verdict.verdict}**: {verdict.message}",
        "",
        f"Minimum effect {verdict.min_effect_percent:g}%, significance {verdict.alpha:g} after "
        f"the Benjamini–Hochberg correction, {verdict.baseline_runs} baseline runs; "
        f"{verdict.excluded_invalid} invalid trials left out.",
        "",
    ]
    if verdict.steps:
        lines += [
            "| workload | threads | verdict | effect | 95% interval | p | p (adjusted) | "
            "trials | median QPS |",
            "| :--- | ---: | :--- | ---: | :---: | ---: | ---: | ---: | ---: |",
            *(_verdict_row(step) for step in verdict.steps),
            "",
        ]
    lines += _efficiency_lines(run.efficiency)
    if run.fingerprint_diff is not None:
        if run.fingerprint_diff:
            lines += [
                "What differs from the baseline runs' fingerprints:",
                "",
                *(f"- {item}" for item in run.fingerprint_diff),
                "",
            ]
        else:
            lines += ["Nothing recorded differs from the baseline runs' fingerprints.", ""]
    return lines
