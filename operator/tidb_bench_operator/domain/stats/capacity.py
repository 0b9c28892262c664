"""The capacity search: which threads to measure next, and what the search found.

Over threads (sysbench --threads per client), per workload, in spec.workloads order:

1. measure minThreads, then maxThreads (both ends always: maxThreads gives the maximum
   throughput TiDB Cloud's reference reports beside the best one under its SLO);
2. minThreads misses the SLO → done, verdict MinThreadsMisses; maxThreads meets it → done,
   verdict MaxThreadsMeets;
3. otherwise the bracket is [lo, hi]: lo the most threads known to meet the SLO, hi the
   fewest known to miss it; measure (lo + hi) // 2 and move lo or hi to it, until
   hi - lo <= precision (verdict Found).

A step meets the SLO when it is valid and its percentile latency is strictly below
spec.slo.latencyMs (as the sweep's recommended step, domain/stats/analysis.py). An invalid
step (disturbed, late clients) or one without a percentile never meets it: it counts as a
miss, so noise from a disturbance can only make the answer lower, never higher.

Latency is noisy. The bracket is built from the steps in the order they were measured, each
one moving one end; as every midpoint lies inside the bracket of its time, the measured
points never contradict each other (everything below lo met, everything above hi missed).
A measurement that would have contradicted an earlier one is never taken: no point is
measured twice. The search takes 2 + ceil(log2((max - min) / precision)) steps at most.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from tidb_bench_operator.domain.api.capacity import CapacityResult, CapacitySearch, CapacityVerdict
from tidb_bench_operator.domain.api.common import StepPhase
from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec
from tidb_bench_operator.domain.api.run_status import StepStatus, SweepSummary
from tidb_bench_operator.domain.sysbench.rate import sweep_layout


@dataclass(frozen=True)
class Point:
    """A measured search step: its threads, QPS, percentile latency and validity."""

    threads: int
    qps: float | None
    latency_ms: float | None
    valid: bool = True

    def meets(self, slo_ms: float) -> bool:
        """Valid, with a percentile below the SLO."""
        return self.valid and self.latency_ms is not None and self.latency_ms < slo_ms


@dataclass(frozen=True)
class Bracket:
    """Where the search stands: its ends (None while unknown) and whether it is done."""

    lo: Point | None
    hi: Point | None
    verdict: CapacityVerdict | None  # None: not done


def max_steps(search: CapacitySearch) -> int:
    """The most steps one workload's search can take."""
    width = search.max_threads - search.min_threads
    if width <= search.precision:
        return 2
    return 2 + math.ceil(math.log2(width / search.precision))


def layout(spec: BenchmarkRunSpec) -> list[tuple[str, int, int | None]]:
    """The (workload, threads, target rate) steps a run lays out when it starts measuring: the
    whole sweep (of threads or of rates), or a search's first step (the search appends the
    others as it learns)."""
    if spec.capacity_search is None:
        return sweep_layout(spec.workloads, spec.threads, spec.rates)
    return [(spec.workloads[0], spec.capacity_search.min_threads, None)]


def planned_steps(spec: BenchmarkRunSpec) -> int:
    """The most steps the run can have: the sweep's, or every workload's longest search."""
    if spec.capacity_search is None:
        return len(sweep_layout(spec.workloads, spec.threads, spec.rates))
    return len(spec.workloads) * max_steps(spec.capacity_search)


def following(spec: BenchmarkRunSpec, steps: Sequence[StepStatus]) -> tuple[str, int] | None:
    """The search's next (workload, threads) after `steps`; None once every search is done
    (and for a sweep, whose steps are all laid out at the start)."""
    if spec.capacity_search is None or spec.slo is None:
        return None
    return next_step(spec.capacity_search, spec.slo.latency_ms, spec.workloads, steps)


def summary_of(spec: BenchmarkRunSpec, steps: Sequence[StepStatus]) -> list[CapacityResult]:
    """status.summary.capacity: every workload's finished search (empty for a sweep)."""
    if spec.capacity_search is None or spec.slo is None:
        return []
    return results(
        spec.capacity_search, spec.slo.latency_ms, spec.percentile, spec.workloads, steps
    )


def with_capacity(
    summary: SweepSummary | None, spec: BenchmarkRunSpec, steps: Sequence[StepStatus]
) -> SweepSummary | None:
    """The run's summary with its searches' capacity, whose lines lead its headline."""
    found = summary_of(spec, steps)
    if not found or summary is None:
        return summary
    lines = " | ".join(c.headline for c in found)
    return summary.model_copy(
        update={"capacity": found, "headline": f"{lines}. {summary.headline}"}
    )


def bracket(search: CapacitySearch, slo_ms: float, points: Sequence[Point]) -> Bracket:
    """The bracket after `points` (in measured order), and the verdict once it is done."""
    lo_end = next((p for p in points if p.threads == search.min_threads), None)
    hi_end = next((p for p in points if p.threads == search.max_threads), None)
    if lo_end is None or hi_end is None:
        return Bracket(lo_end if lo_end and lo_end.meets(slo_ms) else None, None, None)
    if not lo_end.meets(slo_ms):
        return Bracket(None, lo_end, "MinThreadsMisses")
    if hi_end.meets(slo_ms):
        return Bracket(hi_end, None, "MaxThreadsMeets")
    lo, hi = lo_end, hi_end
    for p in points:
        if lo.threads < p.threads < hi.threads:
            if p.meets(slo_ms):
                lo = p
            else:
                hi = p
    return Bracket(lo, hi, "Found" if hi.threads - lo.threads <= search.precision else None)


def next_threads(search: CapacitySearch, slo_ms: float, points: Sequence[Point]) -> int | None:
    """Threads of the next step to measure, or None once the search is done."""
    measured = {p.threads for p in points}
    if search.min_threads not in measured:
        return search.min_threads
    if search.max_threads not in measured:
        return search.max_threads
    b = bracket(search, slo_ms, points)
    if b.verdict is not None or b.lo is None or b.hi is None:
        return None
    return (b.lo.threads + b.hi.threads) // 2


def points_of(steps: Sequence[StepStatus], workload: str) -> list[Point]:
    """A workload's finished steps as search points, in measured (status) order."""
    return [
        Point(
            threads=s.threads,
            qps=s.qps,
            latency_ms=s.latency_ms.value if s.latency_ms is not None else None,
            valid=s.valid is True,
        )
        for s in steps
        if s.workload == workload and s.phase == StepPhase.SUCCEEDED
    ]


def next_step(
    search: CapacitySearch, slo_ms: float, workloads: Sequence[str], steps: Sequence[StepStatus]
) -> tuple[str, int] | None:
    """(workload, threads) of the next step, searching workload after workload; None: done."""
    for workload in workloads:
        threads = next_threads(search, slo_ms, points_of(steps, workload))
        if threads is not None:
            return workload, threads
    return None


def result(
    search: CapacitySearch, slo_ms: float, percentile: int, workload: str, points: Sequence[Point]
) -> CapacityResult | None:
    """What a finished search found for `workload`; None when it is not finished."""
    b = bracket(search, slo_ms, points)
    if b.verdict is None:
        return None
    valid = [p for p in points if p.valid and p.qps is not None]
    meeting = [p for p in valid if p.meets(slo_ms)]
    # Ties go to fewer threads, as for the sweep's peak and recommended step.
    best = max(meeting, key=lambda p: (p.qps or 0.0, -p.threads)) if meeting else None
    top = max(valid, key=lambda p: (p.qps or 0.0, -p.threads)) if valid else None
    found = CapacityResult(
        workload=workload,
        slo_latency_ms=slo_ms,
        percentile=percentile,
        verdict=b.verdict,
        slo_threads=b.lo.threads if b.lo else None,
        miss_threads=b.hi.threads if b.hi else None,
        best_threads=best.threads if best else None,
        best_qps=best.qps if best else None,
        best_latency_ms=best.latency_ms if best else None,
        max_threads=top.threads if top else None,
        max_qps=top.qps if top else None,
        steps_measured=len(points),
        precision=search.precision,
        headline="",
    )
    return found.model_copy(update={"headline": headline(found, search)})


def _number(value: float | None, unit: str = "") -> str:
    return "?" if value is None else f"{value:,.0f}{unit}"


def _ms(value: float | None) -> str:
    return "?" if value is None else f"{value:,.2f}".rstrip("0").rstrip(".")


def headline(found: CapacityResult, search: CapacitySearch) -> str:
    """`oltp_read_write: capacity under p95 < 105 ms: 64 threads (96 miss it; to 32 threads
    in 5 steps); best 17,286 QPS at 64 threads (p95 94 ms); max 22,801 QPS at 256 threads`."""
    label = f"p{found.percentile}"
    slo = f"{label} < {_ms(found.slo_latency_ms)} ms"
    steps = f"{found.steps_measured} steps"
    best = (
        f"best {_number(found.best_qps)} QPS at {found.best_threads} threads ({label} "
        f"{_ms(found.best_latency_ms)} ms)"
    )
    top = f"max {_number(found.max_qps)} QPS at {found.max_threads} threads"
    if found.verdict == "MinThreadsMisses":
        return (
            f"{found.workload}: no capacity under {slo}: even {search.min_threads} threads "
            f"miss it ({steps}); {top}"
        )
    if found.verdict == "MaxThreadsMeets":
        return (
            f"{found.workload}: capacity under {slo} is beyond maxThreads: "
            f"{found.slo_threads} threads still meet it ({steps}); {best}; {top}"
        )
    return (
        f"{found.workload}: capacity under {slo}: {found.slo_threads} threads "
        f"({found.miss_threads} miss it; to {found.precision} threads in {steps}); {best}; {top}"
    )


def results(
    search: CapacitySearch,
    slo_ms: float,
    percentile: int,
    workloads: Sequence[str],
    steps: Sequence[StepStatus],
) -> list[CapacityResult]:
    """Every workload's finished search, in spec.workloads order."""
    found = (result(search, slo_ms, percentile, w, points_of(steps, w)) for w in workloads)
    return [r for r in found if r is not None]
