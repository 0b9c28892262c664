"""The capacity search's spec (spec.capacitySearch) and its verdict (status.summary.capacity).

The search itself is domain/stats/capacity.py; how a run goes with it is docs/capacity.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tidb_bench_operator.domain.api.common import MAX_STATUS_INT, SpecModel, StatusModel
from tidb_bench_operator.domain.sysbench import Workload

#: What a finished search says: the SLO point bracketed to the precision; even minThreads
#: misses the SLO; maxThreads still meets it (the capacity is beyond the range).
CapacityVerdict = Literal["Found", "MinThreadsMisses", "MaxThreadsMeets"]


class CapacitySearch(SpecModel):
    """Find, per workload, the most threads whose percentile latency meets spec.slo."""

    min_threads: int = Field(
        default=1,
        ge=1,
        le=4096,
        description="Lowest sysbench --threads per client the search measures (measured first).",
    )
    max_threads: int = Field(
        ge=2,
        le=4096,
        description="Highest sysbench --threads per client the search measures (measured "
        "second); above minThreads.",
    )
    precision: int = Field(
        default=1,
        ge=1,
        le=4096,
        description="The search stops once the highest threads meeting the SLO and the lowest "
        "missing it are at most this many threads apart.",
    )


class CapacityResult(StatusModel):
    """A workload's capacity at the SLO, and the most throughput its search saw."""

    workload: Workload = Field(description="sysbench test the search measured.")
    slo_latency_ms: float = Field(description="The SLO: spec.slo.latencyMs.")
    percentile: int = Field(
        le=100, ge=1, description="Latency percentile compared with the SLO (spec.percentile)."
    )
    verdict: CapacityVerdict = Field(
        description="Found: the SLO point is bracketed to `precision`; MinThreadsMisses: even "
        "minThreads misses the SLO (lower it, or the SLO cannot be met); MaxThreadsMeets: "
        "maxThreads still meets it (the capacity is above the range: raise maxThreads)."
    )
    slo_threads: int | None = Field(
        le=MAX_STATUS_INT,
        default=None,
        description="The SLO point: the most threads measured whose percentile latency is "
        "below the SLO (the bracket's low end); null when none is.",
    )
    miss_threads: int | None = Field(
        le=MAX_STATUS_INT,
        default=None,
        description="The fewest threads measured above sloThreads that miss the SLO (the "
        "bracket's high end); null when none does.",
    )
    best_threads: int | None = Field(
        le=MAX_STATUS_INT,
        default=None,
        description="Threads of the highest-QPS valid step meeting the SLO (the best "
        "throughput under it, as the sweep's recommended step); sloThreads unless QPS fell "
        "with more threads. Null when no step meets the SLO.",
    )
    best_qps: float | None = Field(default=None, description="QPS of that step.")
    best_latency_ms: float | None = Field(
        default=None, description="Percentile latency of that step, in ms."
    )
    max_threads: int | None = Field(
        le=MAX_STATUS_INT,
        default=None,
        description="Threads of the highest-QPS valid step the search measured.",
    )
    max_qps: float | None = Field(
        default=None,
        description="The highest QPS the search measured (the maximum TiDB Cloud's reference "
        "publishes beside the best point under its SLO).",
    )
    steps_measured: int = Field(
        le=MAX_STATUS_INT, ge=0, description="Steps the search measured for this workload."
    )
    precision: int = Field(le=MAX_STATUS_INT, ge=1, description="spec.capacitySearch.precision.")
    headline: str = Field(description="The verdict in one sentence.")
