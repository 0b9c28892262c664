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

from tidb_bench_operator.domain.api.results import RateOutcome


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
