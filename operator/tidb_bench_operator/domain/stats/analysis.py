"""Sweep analysis: peak, knee (saturation), best step under a latency SLO.

Regression against earlier runs is judged from trials, in domain/stats.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from tidb_bench_operator.domain.api.results import RateOutcome, StepResult
from tidb_bench_operator.domain.api.run_status import SweepNumbers, SweepSummary, WorkloadSummary

#: A step stops "rising meaningfully" when the next step adds less than this QPS fraction.
KNEE_MIN_QPS_GAIN = 0.05
#: ... while the next step's percentile latency is at least this many times higher.
KNEE_MIN_LATENCY_GROWTH = 1.5


class WorkloadAnalysis(WorkloadSummary):
    """A workload's verdict as computed, with what status does not keep."""

    percentile: int = Field(description="Which latency percentile the steps report (e.g. 95).")
    saturation_basis: Literal["knee", "peak"] = Field(
        description="`knee` when the rule found one, `peak` when it fell back to the peak."
    )


class SweepAnalysis(SweepNumbers):
    """The verdict over all workloads: overall fields from the peak workload, and each one's."""

    peak_workload: str | None = Field(default=None, description="Workload of the peak step.")
    workloads: list[WorkloadAnalysis] = Field(
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
    workload: str,
    measured: Sequence[tuple[StepResult, RateOutcome | None]],
    slo_latency_ms: float | None,
) -> WorkloadAnalysis:
    rate_of = {id(s): r for s, r in measured}
    # A rate sweep's steps share one thread count: they are ordered by target rate.
    ordered = sorted(
        (s for s, _ in measured), key=lambda s: (s.threads, _target(rate_of.get(id(s))))
    )
    # Ties go to fewer threads: the same QPS for less concurrency is the better point.
    peak = max(ordered, key=lambda s: (s.qps, -s.threads))
    percentile = peak.latency_ms.percentile
    label = _latency_label(percentile)

    recommended: StepResult | None = None
    if slo_latency_ms is not None:
        # A rate step short of its target measured latency at a lower rate than asked: it
        # never counts as meeting the SLO.
        meeting = [
            s
            for s in ordered
            if s.latency_ms.value is not None
            and s.latency_ms.value < slo_latency_ms
            and _reached(rate_of.get(id(s)))
        ]
        if meeting:
            recommended = max(meeting, key=lambda s: (s.qps, -s.threads))

    knee = _find_knee(ordered)
    saturation = knee if knee is not None else peak

    peak_rate = rate_of.get(id(peak))
    where = f"a {peak_rate.target:,}/s target" if peak_rate else f"{peak.threads} threads"
    parts = [f"{workload}: peak {peak.qps:,.0f} QPS at {where}"]
    if peak.latency_ms.value is not None:
        parts[0] += f" ({label} {_ms(peak.latency_ms.value)} ms)"
    if peak_rate is not None:
        pass  # one thread count: a knee over threads says nothing; the rates below do
    elif knee is not None:
        parts.append(f"saturates at {knee.threads}")
    else:
        parts.append(f"no knee up to {ordered[-1].threads} threads")
    rates = [r for r in (rate_of.get(id(s)) for s in ordered) if r is not None]
    reached = [r.target for r in rates if r.reached]
    recommended_rate = _target(rate_of.get(id(recommended))) if recommended else None
    if rates:
        short = [r for r in rates if not r.reached]
        parts.append(
            (f"reached up to {max(reached):,}/s" if reached else "no target rate reached")
            + (f", {short[0].target:,}/s not ({short[0].achieved:,.0f}/s)" if short else "")
        )
    if slo_latency_ms is None:
        parts.append("no SLO set")
    elif recommended is None:
        parts.append(f"no step meets {label} < {_ms(slo_latency_ms)} ms")
    elif recommended_rate:
        parts.append(f"recommended {recommended_rate:,}/s under {label} < {_ms(slo_latency_ms)} ms")
    else:
        parts.append(f"recommended {recommended.threads} under {label} < {_ms(slo_latency_ms)} ms")

    return WorkloadAnalysis(
        recommended_rate=recommended_rate or None,
        highest_reached_rate=max(reached) if reached else None,
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


def _target(rate: RateOutcome | None) -> int:
    return rate.target if rate is not None else 0


def _reached(rate: RateOutcome | None) -> bool:
    return rate is None or rate.reached


def compute_summary(
    steps: Sequence[StepResult],
    slo_latency_ms: float | None,
    rates: Sequence[RateOutcome | None] = (),
) -> SweepAnalysis:
    """Summarise finished steps: per workload, plus overall fields from the peak workload.

    recommended = highest QPS whose percentile latency is strictly below the SLO (a rate step
    short of its target never is); saturation = the knee (see _find_knee: < 5% QPS gain with
    >= 1.5x latency), else the peak. `rates` are a rate sweep's outcomes, one per step.
    """
    by_workload: dict[str, list[tuple[StepResult, RateOutcome | None]]] = {}
    for i, step in enumerate(steps):
        by_workload.setdefault(step.workload, []).append((step, rates[i] if rates else None))
    if not by_workload:
        return SweepAnalysis(headline="no finished steps")
    summaries = [
        _summarise_workload(name, group, slo_latency_ms) for name, group in by_workload.items()
    ]
    top = max(summaries, key=lambda w: w.peak_qps or 0.0)
    return SweepAnalysis(
        **top.model_dump(include=set(SweepNumbers.model_fields) - {"headline"}),
        peak_workload=top.workload,
        headline=" | ".join(w.headline or "" for w in summaries),
        workloads=summaries,
    )


def compute_status_summary(
    results: Sequence[StepResult],
    workloads: Sequence[str],
    slo_latency_ms: float | None,
    rates: Sequence[RateOutcome | None] = (),
) -> SweepSummary | None:
    """status.summary: the verdict per workload; top-level numbers for the first workload.

    The top level follows spec.workloads[0] because that is what the Workload printer column
    shows, so a `kubectl get` row never mixes one workload's name with another's numbers.
    """
    if not results:
        return None
    verdict = compute_summary(list(results), slo_latency_ms, rates)
    # Status keeps the verdict fields only (not the percentile or the saturation basis).
    per = [
        WorkloadSummary.model_validate(w.model_dump(include=set(WorkloadSummary.model_fields)))
        for w in verdict.workloads
    ]
    first = next((p for p in per if workloads and p.workload == workloads[0]), per[0])
    return SweepSummary(
        **first.model_dump(exclude={"headline"}),
        headline=verdict.headline,
        per_workload=per,
    )
