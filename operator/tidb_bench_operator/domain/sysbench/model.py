"""What parsing one sysbench invocation's output yields (docs/sysbench.md "Output")."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    """Base: immutable parsed values."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class Interval(_Frozen):
    """One intermediate report line (`[ 10s ] thds: ...`, --report-interval)."""

    t: float = Field(description="Seconds since the start of the run.")
    threads: int = Field(description="Running threads (`thds:`).")
    tps: float = Field(description="Events per second (`tps:`, or `eps:` for non-DB tests).")
    qps: float | None = Field(description="Queries per second; None for non-DB tests.")
    read_qps: float | None = Field(description="Read queries per second.")
    write_qps: float | None = Field(description="Write queries per second.")
    other_qps: float | None = Field(description="Other queries (BEGIN/COMMIT) per second.")
    percentile: int = Field(description="Which latency percentile (`lat (ms,95%)`).")
    latency_ms: float | None = Field(
        description="Percentile latency; None when no event completed in the interval "
        "(sysbench prints 0.00 then) or when the percentile is disabled (0%)."
    )
    errors_per_sec: float | None = Field(description="Ignored errors per second (`err/s`).")
    reconnects_per_sec: float | None = Field(description="Reconnects per second.")


class RunSummary(_Frozen):
    """The end-of-run (cumulative) report."""

    reads: int | None = Field(default=None, description="`queries performed: read`.")
    writes: int | None = Field(default=None, description="`queries performed: write`.")
    other: int | None = Field(default=None, description="`queries performed: other`.")
    total_queries: int | None = Field(default=None, description="`queries performed: total`.")
    transactions: int | None = Field(default=None, description="`transactions` count.")
    tps: float | None = Field(default=None, description="`transactions` per second.")
    queries: int | None = Field(default=None, description="`queries` count.")
    qps: float | None = Field(default=None, description="`queries` per second.")
    ignored_errors: int | None = Field(default=None, description="`ignored errors` count.")
    errors_per_sec: float | None = Field(default=None, description="Ignored errors per second.")
    reconnects: int | None = Field(default=None, description="`reconnects` count.")
    reconnects_per_sec: float | None = Field(default=None, description="Reconnects per second.")
    unfinished_transactions: int | None = Field(
        default=None, description="`Number of unfinished transactions on forced shutdown`."
    )
    total_time_seconds: float | None = Field(
        default=None,
        description="1.0.20 `General statistics: total time`, 1.1 `Throughput: time elapsed`.",
    )
    total_events: int | None = Field(default=None, description="`total number of events`.")
    events_per_sec: float | None = Field(
        default=None, description="1.1 `events/s (eps)` or the cpu test's `events per second`."
    )
    latency_min_ms: float | None = Field(default=None, description="Latency `min`.")
    latency_avg_ms: float | None = Field(default=None, description="Latency `avg`.")
    latency_max_ms: float | None = Field(default=None, description="Latency `max`.")
    latency_sum_ms: float | None = Field(default=None, description="Latency `sum`.")
    percentile: int | None = Field(
        default=None, description="N of `Nth percentile`; 0 when `percentile stats: disabled`."
    )
    percentile_printed_ms: float | None = Field(
        default=None, description="The percentile value exactly as printed (0.00 included)."
    )
    fairness_events_avg: float | None = Field(default=None, description="Events per thread, avg.")
    fairness_events_stddev: float | None = Field(default=None, description="... stddev.")
    fairness_time_avg: float | None = Field(default=None, description="Busy time per thread, avg.")
    fairness_time_stddev: float | None = Field(default=None, description="... stddev.")

    @property
    def has_sql_statistics(self) -> bool:
        """True when the `SQL statistics:` block (database tests) was present."""
        return self.qps is not None and self.tps is not None

    @property
    def is_complete(self) -> bool:
        """True when the general/throughput block and the whole latency block were read.

        The latency block is min, avg, max, the percentile (or `percentile stats: disabled`)
        and sum: a log cut inside it is not a report.
        """
        return (
            self.total_time_seconds is not None
            and self.total_events is not None
            and self.latency_min_ms is not None
            and self.latency_avg_ms is not None
            and self.latency_max_ms is not None
            and self.percentile is not None
            and self.latency_sum_ms is not None
        )


class SysbenchRun(_Frozen):
    """Everything parse_sysbench_output understood about one sysbench invocation."""

    version: str | None = Field(description="e.g. 1.0.20 or 1.1.0-df89d34; None if absent.")
    luajit: str | None = Field(default=None, description="e.g. `system LuaJIT 2.1.0-beta3`.")
    workload: str | None = Field(default=None, description="Given by the caller or detected.")
    threads: int | None = Field(description="`Number of threads:` (or the caller's value).")
    report_interval_seconds: int | None = Field(default=None, description="--report-interval.")
    forced_shutdown_seconds: int | None = Field(default=None, description="--forced-shutdown.")
    target_rate: int | None = Field(
        default=None, description="`Target transaction rate: N/sec` (--rate): an open-loop run."
    )
    queue_max: int | None = Field(
        default=None,
        description="(--rate) the longest `queue length:` reported: events due, not yet started.",
    )
    queue_last: int | None = Field(
        default=None, description="(--rate) the last `queue length:` reported."
    )
    intervals: list[Interval] = Field(default_factory=list, description="Intermediate reports.")
    histogram: list[tuple[float, int]] | None = Field(
        default=None,
        description="--histogram rows (bucket lower bound in ms as printed, count); None "
        "when no histogram block was printed. Printed values have 3 decimals, so adjacent "
        "sub-0.06 ms buckets can share a value: rows are kept as printed.",
    )
    summary: RunSummary | None = Field(default=None, description="End-of-run report.")
    fatal: list[str] = Field(default_factory=list, description="`FATAL:` messages, in order.")
    warnings: list[str] = Field(default_factory=list, description="`WARNING:` messages.")
    notes: list[str] = Field(
        default_factory=list, description="What the parser inferred (quirks, forced shutdown)."
    )
    invalid_option: str | None = Field(default=None, description="From `invalid option: ...`.")
    fatal_after_report: list[str] = Field(
        default_factory=list,
        description="`FATAL:` messages printed after the end-of-run report had begun.",
    )
    problems: list[str] = Field(
        default_factory=list,
        description="Values in the report that could not be read (line number, field, text): "
        "a report with problems is refused, never half-used.",
    )
    interval_count: int = Field(
        default=0, description="Intermediate report lines seen (kept or not)."
    )
    last_interval_t: float | None = Field(
        default=None, description="Time of the last intermediate report line, seconds."
    )
