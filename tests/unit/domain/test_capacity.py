"""The capacity search (domain/stats/capacity.py): brackets, edges, noise, and the spec's checks."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from tidb_bench_operator.domain.api.capacity import CapacitySearch
from tidb_bench_operator.domain.api.resources import parse_run_spec
from tidb_bench_operator.domain.stats.capacity import (
    Point,
    bracket,
    max_steps,
    next_threads,
    result,
)
from tidb_bench_operator.errors import SpecError

SEARCH = CapacitySearch(min_threads=1, max_threads=64, precision=4)
SLO = 20.0


def search(latency: Callable[[int], float], s: CapacitySearch = SEARCH) -> list[Point]:
    """Run the search against a latency curve; the points it measured, in order."""
    points: list[Point] = []
    while (threads := next_threads(s, SLO, points)) is not None:
        assert threads not in {p.threads for p in points}, "no point is measured twice"
        points.append(Point(threads, qps=1000.0 * min(threads, 16), latency_ms=latency(threads)))
        assert len(points) <= max_steps(s)
    return points


def linear(threshold: float) -> Callable[[int], float]:
    """p95 crossing the SLO at `threshold` threads."""
    return lambda t: SLO * t / threshold


def test_the_ends_come_first_then_midpoints_of_the_bracket() -> None:
    points = search(linear(30.5))
    assert [p.threads for p in points] == [1, 64, 32, 16, 24, 28]
    b = bracket(SEARCH, SLO, points)
    assert (b.lo and b.lo.threads, b.hi and b.hi.threads, b.verdict) == (28, 32, "Found")


@pytest.mark.parametrize("threshold", [1.5, 2.0, 7.3, 17.0, 33.3, 50.0, 63.9])
def test_the_answer_is_within_the_precision_of_the_true_threshold(threshold: float) -> None:
    points = search(linear(threshold))
    found = result(SEARCH, SLO, 95, "oltp_read_write", points)
    assert found is not None and found.verdict == "Found"
    assert found.slo_threads is not None and found.miss_threads is not None
    assert found.slo_threads < threshold <= found.miss_threads
    assert found.miss_threads - found.slo_threads <= SEARCH.precision
    # QPS rises to 16 threads and stays: the best under the SLO is the first step of the
    # highest QPS that meets it (fewer threads on a tie), never above the SLO point.
    assert found.best_threads is not None and found.best_threads <= found.slo_threads
    # The equivalent sweep (every 4 threads from 1 to 64: 17 steps) takes at least twice as many.
    assert len(points) <= max_steps(SEARCH) == 6 <= math.ceil(17 / 2)


def test_even_min_threads_missing_the_slo_ends_the_search_after_both_ends() -> None:
    points = search(lambda t: 50.0 + t)
    assert [p.threads for p in points] == [1, 64]
    found = result(SEARCH, SLO, 95, "oltp_read_write", points)
    assert found is not None and found.verdict == "MinThreadsMisses"
    assert found.slo_threads is None and found.best_threads is None and found.miss_threads == 1
    assert (found.max_threads, found.max_qps) == (64, 16_000.0), "the maximum is still reported"
    assert "even 1 threads miss it" in found.headline


def test_max_threads_meeting_the_slo_says_the_capacity_is_beyond_the_range() -> None:
    points = search(lambda t: 1.0 + t / 100)
    assert [p.threads for p in points] == [1, 64]
    found = result(SEARCH, SLO, 95, "oltp_read_write", points)
    assert found is not None and found.verdict == "MaxThreadsMeets"
    assert (found.slo_threads, found.miss_threads, found.best_threads) == (64, None, 64)
    assert "beyond maxThreads" in found.headline


def test_a_range_within_the_precision_is_done_after_its_ends() -> None:
    s = CapacitySearch(min_threads=8, max_threads=10, precision=2)
    points = search(linear(9), s)
    assert [p.threads for p in points] == [8, 10]
    assert bracket(s, SLO, points).verdict == "Found"


def test_noise_cannot_contradict_the_bracket_each_point_moves_one_end_in_measured_order() -> None:
    # A noisy curve: rising, but 40 threads reads lower than 32 did. 32 missed, so the bracket
    # is below 32 from then on and 40 is never measured; later points only narrow it.
    noisy = {1: 2.0, 64: 90.0, 32: 25.0, 16: 12.0, 24: 21.0, 20: 19.0, 40: 15.0}
    points = search(lambda t: noisy[t])
    assert [p.threads for p in points] == [1, 64, 32, 16, 24, 20]
    b = bracket(SEARCH, SLO, points)
    assert (b.lo and b.lo.threads, b.hi and b.hi.threads) == (20, 24)
    # A non-monotone answer within the bracket still moves the end it lands on: 24 met after
    # 32 missed, so the bracket is [24, 32] even if 16 had read higher than the SLO earlier.
    odd = [Point(1, 1.0, 2.0), Point(64, 1.0, 90.0), Point(32, 1.0, 25.0), Point(16, 1.0, 21.0)]
    assert next_threads(SEARCH, SLO, odd) == 8
    odd.append(Point(8, 1.0, 19.0))
    assert next_threads(SEARCH, SLO, odd) == 12


def test_an_invalid_step_or_one_without_a_percentile_never_meets_the_slo() -> None:
    points = [Point(1, 1.0, 2.0), Point(64, 1.0, 90.0), Point(32, 9.0, 3.0, valid=False)]
    assert next_threads(SEARCH, SLO, points) == 16, "the invalid 32 counted as a miss"
    assert not Point(4, 1.0, None).meets(SLO)
    narrow = CapacitySearch(min_threads=1, max_threads=3, precision=2)
    found = result(
        narrow, SLO, 95, "oltp_read_write", [Point(1, 5.0, 2.0), Point(3, 9.0, 90.0, valid=False)]
    )
    assert found is not None and found.max_threads == 1, "an invalid step is never the maximum"


def test_the_slo_is_strict_as_for_the_sweeps_recommended_step() -> None:
    assert not Point(4, 1.0, SLO).meets(SLO)
    assert Point(4, 1.0, SLO - 0.01).meets(SLO)


def test_an_unfinished_search_has_no_result() -> None:
    assert result(SEARCH, SLO, 95, "oltp_read_write", [Point(1, 1.0, 2.0)]) is None
    assert (
        result(SEARCH, SLO, 95, "oltp_read_write", [Point(1, 1.0, 2.0), Point(64, 1.0, 90.0)])
        is None
    )


def test_the_best_under_the_slo_is_its_highest_qps_where_qps_falls_with_threads() -> None:
    # A server whose QPS falls as threads contend (row locks): the SLO point is 28 threads,
    # but the most throughput under the SLO was measured at 1.
    points = [Point(t, qps=10_000.0 / t, latency_ms=linear(30.5)(t)) for t in (1, 64, 32, 16)]
    points += [Point(t, qps=10_000.0 / t, latency_ms=linear(30.5)(t)) for t in (24, 28)]
    found = result(SEARCH, SLO, 95, "oltp_read_write", points)
    assert found is not None
    assert (found.slo_threads, found.best_threads, found.best_qps) == (28, 1, 10_000.0)
    assert (found.max_threads, found.max_qps) == (1, 10_000.0)


def test_the_headline_says_the_slo_point_the_bracket_the_best_and_the_maximum() -> None:
    points = search(linear(30.5))
    found = result(SEARCH, SLO, 95, "oltp_read_write", points)
    assert found is not None
    assert found.headline == (
        "oltp_read_write: capacity under p95 < 20 ms: 28 threads (32 miss it; to 4 threads in "
        "6 steps); best 16,000 QPS at 16 threads (p95 10.49 ms); max 16,000 QPS at 16 threads"
    )


# --------------------------------------------------------------------------- spec


def spec(**extra: Any) -> dict[str, Any]:
    return {
        "cluster": {"name": "basic"},
        "credentials": {"secretRef": {"name": "creds"}},
        "slo": {"latencyMs": 105},
        "capacitySearch": {"minThreads": 1, "maxThreads": 64, "precision": 4},
        **extra,
    }


def spec_error(data: dict[str, Any]) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parse_run_spec(data)
    return caught.value


def test_a_search_spec_is_accepted_with_its_defaults() -> None:
    parsed = parse_run_spec(spec(capacitySearch={"maxThreads": 32}))
    assert parsed.capacity_search == CapacitySearch(min_threads=1, max_threads=32, precision=1)


def test_a_search_without_an_slo_is_refused_at_slo() -> None:
    data = spec()
    del data["slo"]
    error = spec_error(data)
    assert error.field == "slo" and "slo.latencyMs" in error.hint


def test_a_search_beside_a_threads_sweep_is_refused_at_threads() -> None:
    error = spec_error(spec(threads=[8, 16, 32]))
    assert error.field == "threads"
    assert "[8, 16, 32]" in error.problem and "remove threads" in error.hint


def test_the_default_threads_the_api_server_fills_in_are_taken_as_unset() -> None:
    assert parse_run_spec(spec(threads=[64, 128, 256])).capacity_search is not None


@pytest.mark.parametrize(
    ("search", "field"),
    [
        ({"minThreads": 64, "maxThreads": 64}, "capacitySearch.maxThreads"),
        ({"minThreads": 65, "maxThreads": 64}, "capacitySearch.maxThreads"),
        ({"minThreads": 1, "maxThreads": 9, "precision": 8}, "capacitySearch.precision"),
        ({"minThreads": 0, "maxThreads": 9}, "capacitySearch.minThreads"),
        ({"minThreads": 1}, "capacitySearch.maxThreads"),
    ],
)
def test_a_search_that_cannot_run_names_its_field(search: dict[str, Any], field: str) -> None:
    assert spec_error(spec(capacitySearch=search)).field == field


def test_a_schedule_template_is_checked_the_same_way() -> None:
    from tidb_bench_operator.domain.api.resources import parse_schedule_spec

    template = spec()
    del template["slo"]
    with pytest.raises(SpecError) as caught:
        parse_schedule_spec({"schedule": "0 2 * * *", "template": template})
    assert caught.value.field == "template.slo"
