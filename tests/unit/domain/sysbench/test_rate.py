"""Rate steps: the split over clients, the outcome, the layout, and sysbench's --rate output."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidb_bench_operator.domain.sysbench import parse_sysbench_output, to_step_result
from tidb_bench_operator.domain.sysbench.rate import (
    client_rates,
    describe,
    rate_outcome,
    sweep_layout,
)

DATA = Path(__file__).resolve().parents[3] / "data" / "sysbench"


@pytest.mark.parametrize(
    ("total", "clients", "parts"),
    [(10, 3, [4, 3, 3]), (1000, 1, [1000]), (7, 7, [1] * 7), (1001, 2, [501, 500])],
)
def test_a_target_is_split_so_the_clients_add_up_to_it_exactly(
    total: int, clients: int, parts: list[int]
) -> None:
    assert client_rates(total, clients) == parts
    assert sum(parts) == total


def test_no_clients_is_an_error() -> None:
    with pytest.raises(ValueError, match="clients"):
        client_rates(10, 0)


def test_a_rate_within_the_tolerance_is_reached_and_an_overshoot_is_no_shortfall() -> None:
    within = rate_outcome(1000, 961.0, 5.0)
    assert within.reached and within.shortfall_percent == 3.9
    over = rate_outcome(1000, 1040.0, 5.0)
    assert over.reached and over.shortfall_percent == 0.0
    assert "short" not in describe(within)


def test_a_rate_short_by_more_than_the_tolerance_is_marked_with_its_queue() -> None:
    short = rate_outcome(40000, 13379.5, 5.0, [79967, 70000], [79967, 100])
    assert not short.reached
    assert short.shortfall_percent == 66.55
    assert short.queue_max == 79967 and short.queue_at_end == 80067
    text = describe(short)
    assert "short by 66.55% (tolerance 5%)" in text and "never meets the SLO" in text
    assert "queue reached 79,967 events and held 80,067 at the end" in text


def test_clients_that_printed_no_queue_line_leave_the_queue_unknown() -> None:
    outcome = rate_outcome(100, 100.0, 5.0, [None], [None])
    assert outcome.queue_max is None and outcome.queue_at_end is None


def test_a_rate_sweep_holds_threads_and_walks_the_rates_per_workload() -> None:
    assert sweep_layout(["a", "b"], [4], [10, 20]) == [
        ("a", 4, 10), ("a", 4, 20), ("b", 4, 10), ("b", 4, 20)
    ]  # fmt: skip
    assert sweep_layout(["a"], [1, 2], []) == [("a", 1, None), ("a", 2, None)]


def test_a_recorded_unreachable_rate_gives_its_target_queue_and_numbers() -> None:
    text = DATA / "sysbench-1.0.20_oltp_point_select_rate40000_short_histogram_recorded.txt"
    run = parse_sysbench_output(text.read_text())
    assert run.target_rate == 40000
    assert run.queue_max == 79967 and run.queue_last == 79967
    assert run.warnings == []
    step = to_step_result(run)
    assert step.tps == 13379.5
    # Queueing is in the latency: seconds, where the same threads closed-loop take < 1 ms.
    assert step.latency_ms.value == 1938.16


def test_a_recorded_reached_rate_has_an_empty_queue() -> None:
    text = DATA / "sysbench-1.0.20_oltp_point_select_rate200_reached_histogram_recorded.txt"
    run = parse_sysbench_output(text.read_text())
    assert run.target_rate == 200 and run.queue_max == 0 and run.queue_last == 0
    assert rate_outcome(200, to_step_result(run).tps, 5.0).reached


def test_a_closed_loop_run_has_no_target_or_queue() -> None:
    text = DATA / "sysbench-1.0.20_oltp_point_select_threads4_recorded.txt"
    run = parse_sysbench_output(text.read_text())
    assert run.target_rate is None and run.queue_max is None


def test_a_queue_full_stop_is_diagnosed_and_its_reports_give_the_rate_reached() -> None:
    from tidb_bench_operator.domain.sysbench import diagnose_failure
    from tidb_bench_operator.domain.sysbench.rate import result_before_queue_full

    text = (
        DATA / "sysbench-1.0.20_oltp_point_select_rate40000_queue-full_recorded.txt"
    ).read_text()
    run = parse_sysbench_output(text)
    failure = diagnose_failure(run)
    assert failure is not None and failure.kind == "rate-queue-full"
    assert "after the [ 8s ] report" in str(failure) and "--rate 40000/s" in str(failure)
    step = result_before_queue_full(run, "oltp_point_select", 2)
    assert step is not None
    tps = [i.tps for i in run.intervals]
    assert len(tps) == 8 and step.duration_seconds == 8.0
    assert step.tps == round(sum(tps) / 8, 2) and step.qps == step.tps
    assert step.events == round(sum(tps))
    worst = max(i.latency_ms or 0.0 for i in run.intervals)
    assert step.latency_ms.value == worst == step.latency_ms.max
    assert not rate_outcome(40000, step.tps, 5.0, [run.queue_max], [run.queue_last]).reached


def test_a_queue_full_before_the_first_report_leaves_nothing_to_use() -> None:
    from tidb_bench_operator.domain.sysbench import diagnose_failure
    from tidb_bench_operator.domain.sysbench.rate import result_before_queue_full

    name = "sysbench-1.0.20_oltp_point_select_rate1000000_queue-full-before-report_recorded.txt"
    run = parse_sysbench_output((DATA / name).read_text())
    failure = diagnose_failure(run)
    assert failure is not None and failure.kind == "rate-queue-full"
    assert "before any report" in str(failure) and "lower the rate" in str(failure)
    assert result_before_queue_full(run, "oltp_point_select", 2) is None
