"""The notes a reader of a step needs about sysbench's known quirks (docs/sysbench.md)."""

from __future__ import annotations

from tidb_bench_operator.domain.sysbench.model import RunSummary

#: OPER_LOG_MAX_VALUE: the top of sysbench's latency histogram, in ms.
_HISTOGRAM_MAX_MS = 1e5


def summary_notes(
    summary: RunSummary, histogram: list[tuple[float, int]] | None, fatal: list[str]
) -> list[str]:
    """Notes a reader of the step needs: quirks and forced shutdowns."""
    notes: list[str] = []
    events = summary.total_events or 0
    if summary.percentile == 0:
        notes.append("percentile stats disabled (--percentile=0): no percentile latency")
    elif summary.percentile_printed_ms == 0.0:
        if events == 0:
            notes.append(
                f"p{summary.percentile} printed as 0.00 with zero events: no latency "
                "(sysbench reports its lowest bucket when empty; akopytov/sysbench#242)"
            )
        else:
            notes.append(
                f"p{summary.percentile} printed as 0.00 with {events} events: latency below "
                "the 0.01 ms display resolution, kept as 0.0 (akopytov/sysbench#479)"
            )
    if (summary.percentile_printed_ms or 0.0) >= _HISTOGRAM_MAX_MS:
        # Latencies >= 100 s land in the last histogram bucket (sb_logger.c:52-54, #242).
        notes.append(
            f"p{summary.percentile} is clamped at sysbench's 100 s histogram limit: "
            "the real value is at least that"
        )
    if summary.unfinished_transactions is not None or any("forcing shutdown" in f for f in fatal):
        unfinished = summary.unfinished_transactions or 0
        notes.append(
            "sysbench forced a shutdown (--forced-shutdown) after the time limit; "
            f"{unfinished} transactions were unfinished, so the report includes a stalled tail"
        )
    if histogram is not None and events > 0 and sum(c for _, c in histogram) == 0:
        # The block can come out empty although events completed (macOS build,
        # akopytov/sysbench#479); such a histogram cannot be merged.
        notes.append(
            f"the --histogram block is empty although {events} events completed "
            "(akopytov/sysbench#479); percentile merging falls back to the worst client"
        )
    return notes
