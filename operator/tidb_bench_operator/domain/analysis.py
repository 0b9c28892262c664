"""Sweep analysis: peak, knee (saturation), best step under a latency SLO, and regression."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import Field

from tidb_bench_operator.domain import models
from tidb_bench_operator.domain.base import CamelModel
from tidb_bench_operator.domain.results import StepResult

#: A step stops "rising meaningfully" when the next step adds less than this QPS fraction.
KNEE_MIN_QPS_GAIN = 0.05
#: ... while the next step's percentile latency is at least this many times higher.
KNEE_MIN_LATENCY_GROWTH = 1.5


class WorkloadVerdict(models.WorkloadSummary):
    """A workload's verdict as computed, with what status does not keep."""

    percentile: int = Field(description="Which latency percentile the steps report (e.g. 95).")
    saturation_basis: Literal["knee", "peak"] = Field(
        description="`knee` when the rule found one, `peak` when it fell back to the peak."
    )


class Summary(models.Verdict):
    """The verdict over all workloads: overall fields from the peak workload, and each one's."""

    peak_workload: str | None = Field(default=None, description="Workload of the peak step.")
    workloads: list[WorkloadVerdict] = Field(
        default_factory=list, description="Per-workload verdicts, in first-seen order."
    )


def _latency_label(percentile: int) -> str:
    return f"p{percentile}"


def _ms(value: float) -> str:
    """Milliseconds as sysbench prints them (2 decimals), without trailing zeros."""
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def _find_knee(steps: Sequence[StepResult]) -> StepResult | None:
    """The first step after which QPS gains < 5% while percentile latency grows >= 1.5x.

    Why both conditions: QPS flattening alone also happens on a noisy plateau that is still
    cheap in latency, and latency growth alone is normal while QPS still scales; the knee
    people look for (docs/field-story.md: 128 -> 256 threads, QPS -9%, p95 x2.5) has both.
    Steps without a percentile value cannot show the latency half and are skipped.
    """
    for current, following in itertools.pairwise(steps):
        if current.qps <= 0:
            continue
        gain = (following.qps - current.qps) / current.qps
        now, then = current.latency_ms.value, following.latency_ms.value
        if now is None or then is None or now <= 0:
            continue
        if gain < KNEE_MIN_QPS_GAIN and then / now >= KNEE_MIN_LATENCY_GROWTH:
            return current
    return None


def _summarise_workload(
    workload: str, steps: Sequence[StepResult], slo_latency_ms: float | None
) -> WorkloadVerdict:
    ordered = sorted(steps, key=lambda s: s.threads)
    # Ties go to fewer threads: the same QPS for less concurrency is the better point.
    peak = max(ordered, key=lambda s: (s.qps, -s.threads))
    percentile = peak.latency_ms.percentile
    label = _latency_label(percentile)

    recommended: StepResult | None = None
    if slo_latency_ms is not None:
        meeting = [
            s
            for s in ordered
            if s.latency_ms.value is not None and s.latency_ms.value < slo_latency_ms
        ]
        if meeting:
            recommended = max(meeting, key=lambda s: (s.qps, -s.threads))

    knee = _find_knee(ordered)
    saturation = knee if knee is not None else peak

    parts = [f"{workload}: peak {peak.qps:,.0f} QPS at {peak.threads} threads"]
    if peak.latency_ms.value is not None:
        parts[0] += f" ({label} {_ms(peak.latency_ms.value)} ms)"
    if knee is not None:
        parts.append(f"saturates at {knee.threads}")
    else:
        parts.append(f"no knee up to {ordered[-1].threads} threads")
    if slo_latency_ms is None:
        parts.append("no SLO set")
    elif recommended is None:
        parts.append(f"no step meets {label} < {_ms(slo_latency_ms)} ms")
    else:
        parts.append(f"recommended {recommended.threads} under {label} < {_ms(slo_latency_ms)} ms")

    return WorkloadVerdict(
        workload=workload,
        percentile=percentile,
        peak_qps=peak.qps,
        peak_threads=peak.threads,
        peak_latency_ms=peak.latency_ms.value,
        recommended_threads=recommended.threads if recommended else None,
        recommended_qps=recommended.qps if recommended else None,
        saturation_threads=saturation.threads,
        saturation_basis="knee" if knee is not None else "peak",
        headline="; ".join(parts),
    )


def compute_summary(steps: Sequence[StepResult], slo_latency_ms: float | None) -> Summary:
    """Summarise finished steps: per workload, plus overall fields from the peak workload.

    recommended = highest QPS whose percentile latency is strictly below the SLO;
    saturation = the knee (see _find_knee: < 5% QPS gain with >= 1.5x latency), else the peak.
    """
    by_workload: dict[str, list[StepResult]] = {}
    for step in steps:
        by_workload.setdefault(step.workload, []).append(step)
    if not by_workload:
        return Summary(headline="no finished steps")
    summaries = [
        _summarise_workload(name, group, slo_latency_ms) for name, group in by_workload.items()
    ]
    top = max(summaries, key=lambda w: w.peak_qps or 0.0)
    return Summary(
        **top.model_dump(include=set(models.Verdict.model_fields) - {"headline"}),
        peak_workload=top.workload,
        headline=" | ".join(w.headline or "" for w in summaries),
        workloads=summaries,
    )


# --------------------------------------------------------------------------------------
# Regression against earlier runs (BenchmarkSchedule.regression)
# --------------------------------------------------------------------------------------

StepKey = tuple[str, int]


class StepComparison(CamelModel):
    """One (workload, threads) step compared with the baseline runs."""

    workload: str = Field(description="sysbench test name.")
    threads: int = Field(description="Threads per client.")
    baseline_runs: int = Field(description="How many baseline runs had this step.")
    baseline_median_qps: float | None = Field(description="Median QPS of the baseline runs.")
    baseline_spread_percent: float | None = Field(
        description="(max - min) / median of the baseline QPS, in percent: its own noise."
    )
    current_qps: float | None = Field(description="This run's QPS; null if the step is missing.")
    delta_percent: float | None = Field(
        description="(current - median) / median, in percent; negative is a drop."
    )
    status: Literal["ok", "regressed", "no-baseline", "missing"] = Field(
        description="`regressed` when the drop exceeds both maxQpsDropPercent and the spread."
    )


class RegressionVerdict(CamelModel):
    """Whether a run is slower than its baseline runs, step by step."""

    regressed: bool = Field(description="True when at least one step regressed.")
    insufficient_baseline: bool = Field(
        description="True when there was no baseline run to compare with."
    )
    baseline_runs: int = Field(description="Number of baseline runs given.")
    max_drop_percent: float = Field(description="The allowed QPS drop, in percent.")
    steps: list[StepComparison] = Field(default_factory=list, description="Per-step numbers.")
    message: str = Field(description="One line saying what was found.")


def detect_regression(
    current: Mapping[StepKey, float],
    baseline_runs: Sequence[Mapping[StepKey, float]],
    max_drop_percent: float,
) -> RegressionVerdict:
    """Compare a run's per-step QPS with the median of earlier runs.

    A step regresses only when its drop is larger than `max_drop_percent` AND larger than
    the baseline's own spread ((max - min) / median): nightly runs are noisy, and a drop
    that the baseline itself showed between good runs is not evidence of a regression.
    """
    if not baseline_runs:
        return RegressionVerdict(
            regressed=False,
            insufficient_baseline=True,
            baseline_runs=0,
            max_drop_percent=max_drop_percent,
            message="insufficient baseline: no earlier successful run to compare with",
        )
    keys = list(current)
    for run in baseline_runs:
        keys.extend(k for k in run if k not in keys)
    comparisons = [_compare_step(key, current, baseline_runs, max_drop_percent) for key in keys]
    regressed = [c for c in comparisons if c.status == "regressed"]
    if regressed:
        worst = min(regressed, key=lambda c: c.delta_percent or 0.0)
        message = (
            f"{len(regressed)} step(s) regressed; worst {worst.workload}@{worst.threads}: "
            f"{worst.current_qps:,.0f} QPS vs median {worst.baseline_median_qps:,.0f} "
            f"({worst.delta_percent:+.1f}%, allowed -{max_drop_percent:g}%, "
            f"baseline spread {worst.baseline_spread_percent:.1f}%)"
        )
    else:
        message = (
            f"no regression against {len(baseline_runs)} baseline run(s) "
            f"(allowed drop {max_drop_percent:g}%)"
        )
    return RegressionVerdict(
        regressed=bool(regressed),
        insufficient_baseline=False,
        baseline_runs=len(baseline_runs),
        max_drop_percent=max_drop_percent,
        steps=comparisons,
        message=message,
    )


def _compare_step(
    key: StepKey,
    current: Mapping[StepKey, float],
    baseline_runs: Sequence[Mapping[StepKey, float]],
    max_drop_percent: float,
) -> StepComparison:
    workload, threads = key
    values = [run[key] for run in baseline_runs if key in run]
    now = current.get(key)
    if not values or statistics.median(values) <= 0:
        return StepComparison(
            workload=workload,
            threads=threads,
            baseline_runs=len(values),
            baseline_median_qps=None,
            baseline_spread_percent=None,
            current_qps=now,
            delta_percent=None,
            status="no-baseline",
        )
    median = statistics.median(values)
    spread = (max(values) - min(values)) / median * 100
    if now is None:
        return StepComparison(
            workload=workload,
            threads=threads,
            baseline_runs=len(values),
            baseline_median_qps=round(median, 2),
            baseline_spread_percent=round(spread, 2),
            current_qps=None,
            delta_percent=None,
            status="missing",
        )
    delta = (now - median) / median * 100
    drop = -delta
    status: Literal["ok", "regressed"] = (
        "regressed" if drop > max_drop_percent and drop > spread else "ok"
    )
    return StepComparison(
        workload=workload,
        threads=threads,
        baseline_runs=len(values),
        baseline_median_qps=round(median, 2),
        baseline_spread_percent=round(spread, 2),
        current_qps=now,
        delta_percent=round(delta, 2),
        status=status,
    )


def compute_status_summary(
    results: Sequence[StepResult], workloads: Sequence[str], slo_latency_ms: float | None
) -> models.Summary | None:
    """status.summary: the verdict per workload; top-level numbers for the first workload.

    The top level follows spec.workloads[0] because that is what the Workload printer column
    shows, so a `kubectl get` row never mixes one workload's name with another's numbers.
    """
    if not results:
        return None
    verdict = compute_summary(list(results), slo_latency_ms)
    # Status keeps the verdict fields only (not the percentile or the saturation basis).
    per = [
        models.WorkloadSummary.model_validate(
            w.model_dump(include=set(models.WorkloadSummary.model_fields))
        )
        for w in verdict.workloads
    ]
    first = next((p for p in per if workloads and p.workload == workloads[0]), per[0])
    return models.Summary(
        **first.model_dump(exclude={"headline"}),
        headline=verdict.headline,
        per_workload=per,
    )
