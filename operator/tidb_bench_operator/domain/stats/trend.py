"""A schedule's trend: each step's nightly numbers, where their level moved, the verdict's words.

The statistics are in domain/stats.py; this module feeds them a schedule's history (run by
run, step by step) and turns their answers into what a condition, an Event and the
schedule's status say.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from tidb_bench_operator.domain.api.results import StepKey
from tidb_bench_operator.domain.api.verdicts import RunComparison, StepChangePoint
from tidb_bench_operator.domain.stats.inference import MIN_SEGMENT, find_change_points

#: Fewest runs of a step before change points are looked for (a segment on each side).
MIN_TREND_RUNS = 2 * MIN_SEGMENT


def history_change_points(
    runs: Sequence[tuple[str, Mapping[StepKey, float]]],
) -> list[StepChangePoint]:
    """Change points of every step over `runs` (oldest first: run name, step → QPS).

    A run missing a step leaves that step's series without it; a step with fewer than
    MIN_TREND_RUNS values is not searched.
    """
    keys: list[StepKey] = []
    for _, steps in runs:
        keys.extend(k for k in steps if k not in keys)
    found: list[StepChangePoint] = []
    for key in keys:
        names = [name for name, steps in runs if key in steps]
        values = [steps[key] for _, steps in runs if key in steps]
        if len(values) < MIN_TREND_RUNS:
            continue
        for point in find_change_points(values):
            found.append(
                StepChangePoint(
                    workload=key[0],
                    threads=key[1],
                    run=names[point.index],
                    previous_run=names[point.index - 1],
                    p_value=point.p_value,
                    before_median_qps=point.before_median,
                    after_median_qps=point.after_median,
                    change_percent=point.change_percent,
                )
            )
    return found


def describe_change_point(point: StepChangePoint) -> str:
    """`oltp_point_select at 2 threads moved -10.3% (41,200 → 36,950 QPS) at run X, p 0.005`."""
    return (
        f"{point.workload} at {point.threads} threads moved {point.change_percent:+.1f}% "
        f"({point.before_median_qps:,.0f} → {point.after_median_qps:,.0f} QPS) at run "
        f"{point.run}, p {point.p_value:.3g}"
    )


ConditionStatus = Literal["True", "False", "Unknown"]
#: (condition status, reason, Event type, Event reason) per verdict; "NoBaseline" is an
#: Inconclusive verdict with no baseline run at all.
_Said = dict[str, tuple[ConditionStatus, str, str, str]]
_REGRESSION: _Said = {
    "Regressed": ("True", "QpsDrop", "Warning", "Regressed"),
    "Improved": ("False", "Improved", "Normal", "Improved"),
    "NoChange": ("False", "NoChange", "Normal", "NoRegression"),
    "NoBaseline": ("Unknown", "InsufficientBaseline", "Normal", "NoBaseline"),
    "Inconclusive": ("Unknown", "Inconclusive", "Normal", "Inconclusive"),
}
_EFFICIENCY: _Said = {
    "Regressed": ("True", "CpuPerQueryUp", "Warning", "EfficiencyRegressed"),
    "Improved": ("False", "CpuPerQueryDown", "Normal", "EfficiencyImproved"),
    "NoChange": ("False", "NoChange", "Normal", "NoEfficiencyRegression"),
    "NoBaseline": ("Unknown", "InsufficientBaseline", "Normal", "NoEfficiencyBaseline"),
    "Inconclusive": ("Unknown", "Inconclusive", "Normal", "EfficiencyInconclusive"),
}


def _said(verdict: RunComparison, table: _Said) -> tuple[ConditionStatus, str, str, str]:
    if verdict.verdict == "Inconclusive" and verdict.baseline_runs == 0:
        return table["NoBaseline"]
    return table[verdict.verdict]


def regression_condition(verdict: RunComparison) -> tuple[ConditionStatus, str, str, str]:
    """(condition status, reason, Event type, Event reason) of the `Regressed` condition."""
    return _said(verdict, _REGRESSION)


def efficiency_condition(verdict: RunComparison) -> tuple[ConditionStatus, str, str, str]:
    """(condition status, reason, Event type, Event reason) of the `EfficiencyRegressed`
    condition: server CPU per query against the baseline, a rise being the regression."""
    return _said(verdict, _EFFICIENCY)
