"""The fixed step result schema: CR status steps, `tidb-bench parse`, the results ConfigMap."""

from __future__ import annotations

from pydantic import Field

from tidb_bench_operator.domain.api.base import CamelModel
from tidb_bench_operator.domain.api.common import MAX_STATUS_INT


class Latency(CamelModel):
    """End-of-run latency summary in milliseconds."""

    min: float = Field(description="Minimum latency of one event, in milliseconds.")
    avg: float = Field(description="Average latency of one event, in milliseconds.")
    max: float = Field(description="Maximum latency of one event, in milliseconds.")
    percentile: int = Field(
        le=MAX_STATUS_INT, description="Which percentile `value` is (sysbench --percentile)."
    )
    value: float | None = Field(
        description="Latency at `percentile`, in milliseconds; null when sysbench printed none "
        "(percentile disabled) or when 0.00 means 'no events' rather than a real latency."
    )


class StepResult(CamelModel):
    """One step's end-of-run numbers: a (workload, threads) point of the sweep."""

    workload: str = Field(description="sysbench test name, e.g. oltp_point_select.")
    threads: int = Field(
        le=MAX_STATUS_INT, description="sysbench --threads per client for this step."
    )
    clients: int = Field(
        le=MAX_STATUS_INT, default=1, description="How many client pods were combined."
    )
    tps: float = Field(description="Transactions (events) per second, summed over clients.")
    qps: float = Field(description="Queries per second, summed over clients.")
    read_qps: float = Field(description="Read queries per second.")
    write_qps: float = Field(description="Write queries per second.")
    other_qps: float = Field(description="Other queries (BEGIN/COMMIT) per second.")
    latency_ms: Latency = Field(description="Latency summary in milliseconds.")
    errors_per_sec: float = Field(description="Ignored errors per second.")
    reconnects_per_sec: float = Field(description="Reconnects per second.")
    events: int = Field(le=MAX_STATUS_INT, description="Total number of events (transactions).")
    duration_seconds: float = Field(description="sysbench's measured total time, in seconds.")
    sysbench_version: str = Field(description="sysbench version from the output header.")

    def to_json_dict(self) -> dict[str, object]:
        """The wire form: camelCase keys, as in status.steps[] (docs/design.md)."""
        return self.model_dump(by_alias=True, mode="json")


#: A step's identity within a run: (workload, threads).
StepKey = tuple[str, int]


class RateOutcome(CamelModel):
    """A rate step (spec.rates): the rate asked for, the rate reached, and sysbench's queue."""

    target: int = Field(
        ge=1, le=MAX_STATUS_INT, description="Target events (transactions) per second, all clients."
    )
    achieved: float = Field(description="Events per second reached (the step's tps).")
    shortfall_percent: float = Field(
        description="How far below the target the achieved rate was, percent (0 when reached)."
    )
    tolerance_percent: float = Field(description="spec.rateTolerancePercent when measured.")
    reached: bool = Field(
        description="False when the shortfall exceeds the tolerance: the step is marked and "
        "never counted as meeting the SLO."
    )
    queue_max: int | None = Field(
        default=None,
        le=MAX_STATUS_INT,
        description="Longest sysbench event queue a client reported (events due, not started).",
    )
    queue_at_end: int | None = Field(
        default=None,
        le=MAX_STATUS_INT,
        description="Events still queued at the last report, summed over clients: a backlog "
        "that was still growing.",
    )
