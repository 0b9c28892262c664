"""Step results from a parsed run, and one step's clients combined into one result."""

from __future__ import annotations

import math
from collections.abc import Sequence

from tidb_bench_operator.domain.api.results import Latency, StepResult
from tidb_bench_operator.domain.sysbench.diagnose import diagnose_failure
from tidb_bench_operator.domain.sysbench.model import RunSummary, SysbenchRun
from tidb_bench_operator.errors import ParseError

#: Half a unit of the last printed digit of a latency (`%.2f` ms).
_PRINT_HALF_UNIT = 0.005


def check_report_consistency(summary: RunSummary) -> None:
    """Refuse a report whose numbers cannot all be true together (cut or edited output).

    sysbench computes avg = sum / events, prints min <= avg <= max and total = read +
    write + other; each printed latency is rounded to 0.01 ms, which the tolerances allow
    for.
    """
    lo, avg, hi = summary.latency_min_ms, summary.latency_avg_ms, summary.latency_max_ms
    slack = 2 * _PRINT_HALF_UNIT
    if (
        lo is not None
        and avg is not None
        and hi is not None
        and not lo - slack <= avg <= hi + slack
    ):
        raise ParseError(
            f"the latency block is impossible: min {lo}, avg {avg}, max {hi} (min <= avg <= "
            "max must hold); the output was cut or edited: re-capture it"
        )
    events = summary.total_events
    total = summary.latency_sum_ms
    if events is not None and avg is not None and total is not None:
        allowed = _PRINT_HALF_UNIT * (events + 2) + 1e-9 * total
        if abs(total - avg * events) > allowed:
            raise ParseError(
                f"the latency block is impossible: sum {total} ms is not avg {avg} ms x "
                f"{events} events; the output was cut or edited: re-capture it"
            )
    parts = (summary.reads, summary.writes, summary.other)
    known = summary.total_queries is not None and all(p is not None for p in parts)
    if known and sum(p or 0 for p in parts) != summary.total_queries:
        raise ParseError(
            f"queries performed: read {summary.reads} + write {summary.writes} + other "
            f"{summary.other} is not total {summary.total_queries}; the output was cut "
            "or edited: re-capture it"
        )


def _percentile_value(summary: RunSummary) -> float | None:
    """The summary percentile, with the 0.00 quirk resolved (docs/sysbench.md)."""
    if not summary.percentile or summary.percentile_printed_ms is None:
        return None
    if summary.percentile_printed_ms == 0.0 and not summary.total_events:
        return None
    return summary.percentile_printed_ms


def to_step_result(
    run: SysbenchRun,
    workload: str | None = None,
    threads: int | None = None,
    clients: int = 1,
) -> StepResult:
    """Turn a parsed run into the fixed StepResult, from the end-of-run summary's rates.

    Raises SysbenchError (see diagnose_failure) when the run has no report or a report
    with unreadable values, and ParseError when the report is not a database test's (no
    `SQL statistics:`), its numbers contradict each other, or the workload or thread count
    is unknown.
    """
    failure = diagnose_failure(run)
    if failure is not None:
        raise failure
    summary = run.summary
    assert summary is not None  # diagnose_failure returned None, so the report is complete
    if not summary.has_sql_statistics:
        raise ParseError(
            "sysbench output has no 'SQL statistics:' block: not a database workload "
            "(e.g. the cpu test); tidb-bench parses OLTP runs"
        )
    check_report_consistency(summary)
    name = workload or run.workload
    if name is None:
        raise ParseError("the workload is unknown: pass it (the output does not name it)")
    step_threads = threads if threads is not None else run.threads
    if step_threads is None:
        raise ParseError(
            "the thread count is unknown: no 'Number of threads:' line and no --threads= "
            "on a saved command line"
        )
    if step_threads < 1:
        raise ParseError(f"the thread count {step_threads} is impossible (sysbench needs >= 1)")
    qps = summary.qps or 0.0
    total_queries = summary.total_queries or 0

    def share(count: int | None) -> float:
        # The summary prints per-second rates only for transactions and queries; split the
        # query rate by the read/write/other counts so the three always add up to qps.
        if not total_queries or count is None:
            return 0.0
        return round(qps * count / total_queries, 2)

    return StepResult(
        workload=name,
        threads=step_threads,
        clients=clients,
        tps=summary.tps or 0.0,
        qps=qps,
        read_qps=share(summary.reads),
        write_qps=share(summary.writes),
        other_qps=share(summary.other),
        latency_ms=Latency(
            min=summary.latency_min_ms or 0.0,
            avg=summary.latency_avg_ms or 0.0,
            max=summary.latency_max_ms or 0.0,
            percentile=summary.percentile if summary.percentile is not None else 0,
            value=_percentile_value(summary),
        ),
        errors_per_sec=summary.errors_per_sec or 0.0,
        reconnects_per_sec=summary.reconnects_per_sec or 0.0,
        events=summary.total_events or 0,
        duration_seconds=summary.total_time_seconds or 0.0,
        sysbench_version=run.version or "unknown",
    )


def histogram_percentile(histogram: Sequence[tuple[float, int]], percentile: float) -> float | None:
    """The percentile of a (value_ms, count) histogram, computed the way sysbench does.

    sysbench (get_pct_cumulative in src/sb_histogram.c) returns the lower bound of the bucket where
    the cumulative count first reaches floor(n * pct / 100 + 0.5). None when empty.
    """
    rows = sorted((value, count) for value, count in histogram if count > 0)
    total = sum(count for _, count in rows)
    if total == 0:
        return None
    target = math.floor(total * percentile / 100 + 0.5)
    cumulative = 0
    for value, count in rows:
        cumulative += count
        if cumulative >= target:
            return value
    return rows[-1][0]


def merge_histograms(histograms: Sequence[Sequence[tuple[float, int]]]) -> list[tuple[float, int]]:
    """Sum counts per printed bucket value across clients; sorted by value."""
    merged: dict[float, int] = {}
    for histogram in histograms:
        for value, count in histogram:
            merged[value] = merged.get(value, 0) + count
    return sorted(merged.items())


def combine_step_results(
    results: Sequence[StepResult],
    histograms: Sequence[Sequence[tuple[float, int]] | None] | None = None,
) -> tuple[StepResult, list[str]]:
    """Combine the clients of one step: rates summed, min/max, event-weighted avg.

    The percentile comes from the merged histograms when every client provided a non-empty
    one (`histograms[i]` belongs to `results[i]`); otherwise it is the worst (highest)
    client's value. The returned notes say which method was used.
    """
    if not results:
        raise ValueError("combine_step_results needs at least one result")
    first = results[0]
    for other in results[1:]:
        if (other.workload, other.threads) != (first.workload, first.threads):
            raise ValueError(
                f"cannot combine {other.workload}@{other.threads} with "
                f"{first.workload}@{first.threads}: clients of one step only"
            )
        if other.latency_ms.percentile != first.latency_ms.percentile:
            raise ValueError("clients ran with different --percentile values")
    if histograms is not None and len(histograms) != len(results):
        raise ValueError("histograms must have one entry (or None) per result")

    notes: list[str] = []
    events = sum(r.events for r in results)
    if events > 0:
        avg = sum(r.latency_ms.avg * r.events for r in results) / events
    else:
        avg = sum(r.latency_ms.avg for r in results) / len(results)
    pct = first.latency_ms.percentile
    value, note = _combined_percentile(results, histograms, pct)
    if note:
        notes.append(note)
    versions = sorted({r.sysbench_version for r in results})
    if len(versions) > 1:
        notes.append("clients ran different sysbench versions: " + ", ".join(versions))

    combined = StepResult(
        workload=first.workload,
        threads=first.threads,
        clients=sum(r.clients for r in results),
        tps=round(sum(r.tps for r in results), 2),
        qps=round(sum(r.qps for r in results), 2),
        read_qps=round(sum(r.read_qps for r in results), 2),
        write_qps=round(sum(r.write_qps for r in results), 2),
        other_qps=round(sum(r.other_qps for r in results), 2),
        latency_ms=Latency(
            min=min(r.latency_ms.min for r in results),
            avg=round(avg, 2),
            max=max(r.latency_ms.max for r in results),
            percentile=pct,
            value=value,
        ),
        errors_per_sec=round(sum(r.errors_per_sec for r in results), 2),
        reconnects_per_sec=round(sum(r.reconnects_per_sec for r in results), 2),
        events=events,
        duration_seconds=max(r.duration_seconds for r in results),
        sysbench_version=",".join(versions),
    )
    return combined, notes


def _combined_percentile(
    results: Sequence[StepResult],
    histograms: Sequence[Sequence[tuple[float, int]] | None] | None,
    pct: int,
) -> tuple[float | None, str]:
    """The combined percentile value and the note saying how it was obtained."""
    label = f"p{pct}"
    if pct == 0:
        return None, "percentile disabled (--percentile=0) on every client"
    if len(results) == 1 and not histograms:
        return results[0].latency_ms.value, ""
    usable = histograms is not None and all(
        h is not None and sum(c for _, c in h) > 0 for h in histograms
    )
    if usable:
        assert histograms is not None
        merged = merge_histograms([h for h in histograms if h is not None])
        value = histogram_percentile(merged, pct)
        if value is not None:
            return round(value, 2), (
                f"{label} merged from {len(results)} clients' latency histograms "
                "(sysbench's method: lower bound of the bucket holding the percentile)"
            )
    values = [r.latency_ms.value for r in results if r.latency_ms.value is not None]
    worst = max(values) if values else None
    missing = (
        "no histograms were collected"
        if histograms is None
        else f"{sum(1 for h in histograms if not h)} of {len(results)} clients "
        "had no usable histogram"
    )
    return worst, f"{label} is the worst client's value ({missing}; an upper bound)"
