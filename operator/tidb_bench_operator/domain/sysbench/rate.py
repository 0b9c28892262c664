"""Rate steps: a step's target rate split across its clients, and whether it was reached.

A rate step runs sysbench with `--rate` (open loop): events arrive on a schedule whatever
the database does, wait in sysbench's queue when every thread is busy, and their latency
counts from the scheduled arrival, queueing included (measured on the bed: at a rate twice
what two threads can serve, p95 was 2,449 ms against 0.44 ms closed-loop). A step whose
achieved rate falls short of its target by more than the spec's tolerance did not measure
latency *at* that rate, so it is marked and never counted as meeting the SLO.
"""

from __future__ import annotations

from collections.abc import Sequence

from tidb_bench_operator.domain.api.results import Latency, RateOutcome, StepResult
from tidb_bench_operator.domain.sysbench.model import SysbenchRun


def client_rates(total: int, clients: int) -> list[int]:
    """`total` events per second split over `clients` so the parts add up exactly.

    sysbench's --rate is an integer per process: 10/s over 3 clients is 4, 3 and 3.
    """
    if clients < 1:
        raise ValueError(f"clients must be >= 1, got {clients}")
    base, extra = divmod(total, clients)
    return [base + (1 if i < extra else 0) for i in range(clients)]


def rate_outcome(
    target: int,
    achieved: float,
    tolerance_percent: float,
    queue_max: Sequence[int | None] = (),
    queue_last: Sequence[int | None] = (),
) -> RateOutcome:
    """Whether a step reached its target rate (events/s over all clients), and its queue.

    `queue_max`/`queue_last` are per client (None where a client printed no queue line);
    the step's are the largest and the sum of the last (the backlog left at the end).
    """
    shortfall = max(0.0, (target - achieved) / target * 100.0) if target > 0 else 0.0
    maxes = [q for q in queue_max if q is not None]
    lasts = [q for q in queue_last if q is not None]
    return RateOutcome(
        target=target,
        achieved=round(achieved, 2),
        shortfall_percent=round(shortfall, 2),
        tolerance_percent=tolerance_percent,
        reached=shortfall <= tolerance_percent,
        queue_max=max(maxes) if maxes else None,
        queue_at_end=sum(lasts) if lasts else None,
    )


def describe(outcome: RateOutcome) -> str:
    """One line for notes and Events: what was asked, what came, and the backlog."""
    text = f"target {outcome.target:,}/s, achieved {outcome.achieved:,.2f}/s"
    if not outcome.reached:
        text += (
            f": short by {outcome.shortfall_percent:g}% (tolerance {outcome.tolerance_percent:g}%)"
            ", so its latency is not latency at that rate and it never meets the SLO"
        )
    if outcome.queue_max:
        text += f"; sysbench's queue reached {outcome.queue_max:,} events"
        if outcome.queue_at_end:
            text += f" and held {outcome.queue_at_end:,} at the end"
    return text


def sweep_layout(
    workloads: Sequence[str], threads: Sequence[int], rates: Sequence[int]
) -> list[tuple[str, int, int | None]]:
    """The steps of a run in order: (workload, threads, target rate or None).

    A thread sweep is every workload at every thread count; a rate sweep (`rates` given, one
    thread count) every workload at every rate.
    """
    if rates:
        return [(w, threads[0], r) for w in workloads for r in rates]
    return [(w, t, None) for w in workloads for t in threads]


#: A note on a step taken from result_before_queue_full (its seconds to fill in).
QUEUE_FULL_NOTE = (
    "the numbers are its interval reports' over {:g}s: rates time-weighted, latency min/avg/max "
    "those of the reports' percentiles, the percentile the worst report's"
)


def result_before_queue_full(run: SysbenchRun, workload: str, threads: int) -> StepResult | None:
    """A rate step's numbers from the interval reports sysbench printed before its event
    queue filled and it stopped without a summary; None when it printed none.

    Rates are time-weighted means over the reports. Without the summary there is no
    latency histogram for the step: min, avg and max are those of the reports' percentile
    latencies and the percentile is the worst report's (the step's notes say so).
    """
    kept = [i for i in run.intervals if i.qps is not None]
    if not kept:
        return None
    spans = [i.t - prev for prev, i in zip([0.0, *(i.t for i in kept)], kept, strict=False)]
    seconds = sum(spans)
    if seconds <= 0:
        return None

    def mean(values: Sequence[float | None]) -> float:
        return round(sum((v or 0.0) * s for v, s in zip(values, spans, strict=True)) / seconds, 2)

    lat = [i.latency_ms for i in kept if i.latency_ms is not None]
    return StepResult(
        workload=workload,
        threads=threads,
        tps=mean([i.tps for i in kept]),
        qps=mean([i.qps for i in kept]),
        read_qps=mean([i.read_qps for i in kept]),
        write_qps=mean([i.write_qps for i in kept]),
        other_qps=mean([i.other_qps for i in kept]),
        latency_ms=Latency(
            min=min(lat, default=0.0),
            avg=round(sum(lat) / len(lat), 2) if lat else 0.0,
            max=max(lat, default=0.0),
            percentile=kept[0].percentile,
            value=max(lat) if lat else None,
        ),
        errors_per_sec=mean([i.errors_per_sec for i in kept]),
        reconnects_per_sec=mean([i.reconnects_per_sec for i in kept]),
        events=round(sum(i.tps * s for i, s in zip(kept, spans, strict=True))),
        duration_seconds=round(seconds, 2),
        sysbench_version=run.version or "unknown",
    )
