"""The operations window's numbers from recorded sysbench interval lines."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tidb_bench_operator.domain.api.experiment import WindowEvent
from tidb_bench_operator.domain.experiment.window import analyse, window_points
from unit.domain.experiment.support import LOCK_CLIENTS, coarse, series

#: When the two clients started (the recording's clock); the lock came 10.19 s later.
START = datetime(2026, 12, 3, 9, 12, 51, 710000, tzinfo=UTC)
LOCKED = START + timedelta(seconds=10.19)


def lock_series() -> dict[str, list[dict[str, object]]]:
    return {client: series(name) for client, name in LOCK_CLIENTS.items()}


def at(seconds: float) -> datetime:
    return START + timedelta(seconds=seconds)


def test_two_clients_are_summed_on_one_wall_clock_axis() -> None:
    points = window_points(lock_series(), START)
    assert len(points) == 24
    first = points[0]
    assert (first.start, first.end) == (START, at(1))
    assert first.qps == pytest.approx(6197.65 + 6338.28)
    assert first.latency_ms == 20.74  # the worse client's
    assert points[12].qps == 0.0 and points[12].latency_ms is None  # sysbench printed 0.00


def test_a_write_lock_is_a_full_dip_recovered_when_the_writes_resume() -> None:
    window = analyse(window_points(lock_series(), START), LOCKED, 10.0, [], run="op-run")
    # median of the ten summed lines before the lock: ([ 8s ] 7,736.87 + [ 10s ] 9,255.90) / 2
    assert window.level_qps == pytest.approx(8496.385, abs=0.01)
    assert window.worst_qps == 0.0
    assert window.worst_at == at(12)  # the first line of no QPS at all
    assert window.dip_percent == 100.0
    assert window.recovered_at == at(14)  # the [ 15s ] line's start
    assert window.recovery_seconds == pytest.approx(3.81)
    assert (window.errors, window.reconnects) == (0, 0)
    assert window.run == "op-run"
    assert window.message == (
        "QPS 8,496 before; worst 0 (-100%) 1.81 s after the change; back within 10% "
        "3.81 s after it; 0 errors, 0 reconnects"
    )


def test_no_interval_before_the_change_leaves_no_level() -> None:
    window = analyse(window_points(lock_series(), START), START, 10.0, [])
    assert window.level_qps is None
    assert window.dip_percent is None and window.recovered_at is None
    assert window.worst_qps == 0.0
    assert window.message is not None
    assert window.message.startswith("no measured interval ended before the change")


def test_a_run_that_ends_in_the_dip_has_not_recovered() -> None:
    cut = {c: lines[:13] for c, lines in lock_series().items()}
    window = analyse(window_points(cut, START), LOCKED, 10.0, [])
    assert window.dip_percent == 100.0
    assert window.recovered_at is None and window.recovery_seconds is None
    assert "not back within 10% by the end" in (window.message or "")


def test_a_dip_shorter_than_one_interval_is_seen_diluted_in_it() -> None:
    # As --report-interval=8 would print them: [0-8] before, [8-16] holds the 4 s lock
    eight = {c: coarse(lines, 8) for c, lines in lock_series().items()}
    points = window_points(eight, START)
    assert [(p.start, p.end) for p in points] == [(at(0), at(8)), (at(8), at(16)), (at(16), at(24))]
    window = analyse(points, LOCKED, 10.0, [])
    assert window.level_qps == pytest.approx(points[0].qps, abs=0.01)
    assert window.worst_at == at(16)
    assert 30 < (window.dip_percent or 0) < 70  # four of its eight seconds were lost
    assert window.recovered_at == at(16)


def test_a_two_second_interval_without_a_dip_recovers_at_once() -> None:
    lines = series("sysbench-1.0.20_oltp_read_write_threads4_p99_recorded.txt")
    points = window_points({"0": lines}, START)
    assert [p.seconds for p in points] == [2.0] * 5
    window = analyse(points, at(4), 10.0, [])
    assert window.level_qps == pytest.approx((26565.43 + 29530.05) / 2)
    assert (window.recovered_at, window.recovery_seconds) == (at(4), 0.0)
    assert "never more than 10% below it" in (window.message or "")


def test_errors_are_counted_from_the_change_by_rate_and_interval_length() -> None:
    lines = series("sysbench-1.0.20_oltp_read_write_deadlocks-ignored_recorded.txt")
    window = analyse(window_points({"0": lines}, START), at(2), 10.0, [])
    assert window.errors == round(264.13 + 267.90 + 261.99)


def test_events_are_sorted_and_capped_with_the_first_and_the_last_kept() -> None:
    events = [
        WindowEvent(at=at(i), source="Kubernetes", what="PodRecreated", object=f"pod-{i}")
        for i in reversed(range(70))
    ]
    window = analyse(window_points(lock_series(), START), LOCKED, 10.0, events)
    assert len(window.events) == 64
    assert [e.object for e in window.events[:2]] == ["pod-0", "pod-1"]
    assert window.events[-2].object == "pod-62" and window.events[-1].object == "pod-69"
    assert "6 events not kept" in (window.message or "")
