"""Load shapes of a run beyond the thread sweep: rate steps (spec.rates), steps bounded by
events (spec.writeEvents) and the pause between them, the PingCAP preset that fills them
(domain/sysbench/preset.py), and the capacity search (spec.capacitySearch): the cross-field
checks and the settings in effect."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tidb_bench_operator.domain.sysbench.preset import (
    PINGCAP,
    PINGCAP_PAUSE_SECONDS,
    PINGCAP_RAND_TYPE,
    PINGCAP_WRITE_EVENTS,
    WRITE_WORKLOADS,
)
from tidb_bench_operator.errors import SpecError

if TYPE_CHECKING:
    from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec


#: spec.threads when the author leaves it out (the CRD's default, which the API server fills
#: in: a run cannot tell it from the same list written out).
DEFAULT_THREADS = (64, 128, 256)


def check_load_shape(spec: BenchmarkRunSpec, prefix: str = "") -> None:
    """Raise SpecError for a rate, events or capacity-search setting that cannot run."""
    _check_rates(spec, prefix)
    _check_events(spec, prefix)
    _check_capacity_search(spec, prefix)


def pause_seconds(spec: BenchmarkRunSpec) -> int:
    """spec.pauseSeconds, else the preset's, else 0."""
    if spec.pause_seconds is not None:
        return spec.pause_seconds
    return PINGCAP_PAUSE_SECONDS if spec.preset == PINGCAP else 0


def rand_type(spec: BenchmarkRunSpec) -> str | None:
    """spec.randType, else the preset's, else sysbench's own default (None)."""
    if spec.rand_type is None and spec.preset == PINGCAP:
        return PINGCAP_RAND_TYPE
    return spec.rand_type


def events_for(spec: BenchmarkRunSpec, workload: str, threads: int) -> int | None:
    """How many events bound a step of `workload` at `threads`; None: durationSeconds."""
    if workload not in WRITE_WORKLOADS or spec.rates:
        return None
    if spec.write_events is not None:
        return spec.write_events[spec.threads.index(threads)]
    if spec.preset == PINGCAP:
        return PINGCAP_WRITE_EVENTS.get(threads)
    return None


def runner_args(spec: BenchmarkRunSpec, workload: str, threads: int, rate: int | None) -> list[str]:
    """The step runner's --rate (this client's share), --events and --rand-type, when set."""
    args = [f"--rate={rate}"] if rate is not None else []
    events = events_for(spec, workload, threads)
    if events is not None:
        args.append(f"--events={events}")
    if rand_type(spec):
        args.append(f"--rand-type={rand_type(spec)}")
    return args


def _check_events(spec: BenchmarkRunSpec, prefix: str) -> None:
    """writeEvents pairs with threads; the preset knows three thread counts."""
    if spec.write_events is not None and len(spec.write_events) != len(spec.threads):
        raise SpecError(
            f"{prefix}writeEvents",
            f"{len(spec.write_events)} value(s) for {len(spec.threads)} thread count(s)",
            "give one event count per entry of threads, in the same order",
        )
    if (spec.write_events is not None or spec.preset == PINGCAP) and spec.rates:
        raise SpecError(
            f"{prefix}rates",
            "a rate sweep runs each step for durationSeconds; it cannot be bounded by events",
            "remove writeEvents (and preset), or rates",
        )
    writes = [w for w in spec.workloads if w in WRITE_WORKLOADS]
    if spec.preset == PINGCAP and spec.write_events is None and writes:
        for i, threads in enumerate(spec.threads):
            if threads not in PINGCAP_WRITE_EVENTS:
                raise SpecError(
                    f"{prefix}threads[{i}]",
                    f"PingCAP's procedure gives --events for {writes[0]} at 100, 200 and "
                    f"400 threads only, not {threads}",
                    "use threads [100, 200, 400], or set writeEvents for these threads",
                )


def _check_rates(spec: BenchmarkRunSpec, prefix: str) -> None:
    """A rate sweep holds the concurrency fixed and owns --rate."""
    if not spec.rates:
        return
    no_duplicates(f"{prefix}rates", spec.rates)
    if len(spec.threads) != 1:
        raise SpecError(
            f"{prefix}threads",
            f"a rate sweep runs at one thread count, but threads lists {len(spec.threads)}",
            "list one value (enough threads to serve the highest rate), or run one "
            "BenchmarkRun per thread count",
        )
    for i, arg in enumerate(spec.extra_args):
        if arg.split("=", 1)[0] in ("--rate", "--tx-rate"):
            raise SpecError(
                f"{prefix}extraArgs[{i}]",
                "--rate is set per step from spec.rates",
                "remove it from extraArgs",
            )
    for i, rate in enumerate(spec.rates):
        if rate < spec.clients:
            raise SpecError(
                f"{prefix}rates[{i}]",
                f"{rate}/s cannot be split over {spec.clients} clients (each needs >= 1/s)",
                "raise the rate or lower clients",
            )


def no_duplicates(field: str, values: list[Any]) -> None:
    """Raise SpecError naming the first repeated item of a list."""
    seen: set[Any] = set()
    for i, value in enumerate(values):
        if value in seen:
            raise SpecError(
                f"{field}[{i}]", f"{value!r} is listed twice", "each value runs once; remove it"
            )
        seen.add(value)


def _check_capacity_search(spec: BenchmarkRunSpec, prefix: str) -> None:
    """Raise SpecError for a capacity search without an SLO, beside a sweep, or upside down."""
    search = spec.capacity_search
    if search is None:
        return
    if spec.rates:
        raise SpecError(
            f"{prefix}rates",
            "capacitySearch searches over threads; a rate sweep holds them fixed",
            "remove rates to search, or capacitySearch to run the rate sweep",
        )
    if spec.slo is None:
        raise SpecError(
            f"{prefix}slo",
            "capacitySearch needs an SLO to search for, and slo is not set",
            "set slo.latencyMs (e.g. 105 for TiDB Cloud's p95 < 105 ms), or remove "
            "capacitySearch to run the threads sweep",
        )
    if tuple(spec.threads) != DEFAULT_THREADS:
        raise SpecError(
            f"{prefix}threads",
            f"a threads sweep {list(spec.threads)} and capacitySearch are both set; the search "
            "chooses its own threads between minThreads and maxThreads",
            "remove threads to search, or remove capacitySearch to run the sweep",
        )
    if search.max_threads <= search.min_threads:
        raise SpecError(
            f"{prefix}capacitySearch.maxThreads",
            f"{search.max_threads} is not above minThreads ({search.min_threads}), so there "
            "is nothing to search",
            "raise maxThreads above minThreads, or lower minThreads",
        )
    if search.precision >= search.max_threads - search.min_threads:
        raise SpecError(
            f"{prefix}capacitySearch.precision",
            f"{search.precision} threads is not below maxThreads - minThreads "
            f"({search.max_threads - search.min_threads}), so the search would stop at its ends",
            "lower precision, or widen minThreads..maxThreads",
        )
