"""Sweep summary (peak, knee, SLO), on docs/field-story.md's numbers."""

from __future__ import annotations

from tidb_bench_operator.domain.api.results import Latency, StepResult
from tidb_bench_operator.domain.stats.analysis import compute_summary


def step(
    workload: str, threads: int, qps: float, p95: float | None, tps: float = 0.0
) -> StepResult:
    return StepResult(
        workload=workload,
        threads=threads,
        tps=tps or qps,
        qps=qps,
        read_qps=qps,
        write_qps=0.0,
        other_qps=0.0,
        latency_ms=Latency(min=0.1, avg=1.0, max=100.0, percentile=95, value=p95),
        errors_per_sec=0.0,
        reconnects_per_sec=0.0,
        events=int(qps * 15),
        duration_seconds=15.0,
        sysbench_version="1.0.20",
    )


# docs/field-story.md: point-select sweep (TiKV=3, bench node alone) and the read-write sweep.
POINT_SELECT = [
    step("oltp_point_select", 64, 39562, 3.89),
    step("oltp_point_select", 128, 49193, 4.33),
    step("oltp_point_select", 256, 44952, 10.65),
]
READ_WRITE = [
    step("oltp_read_write", 32, 13020, 64, tps=651),
    step("oltp_read_write", 64, 17286, 94, tps=864),
    step("oltp_read_write", 128, 20203, 167, tps=1010),
    step("oltp_read_write", 256, 22801, 314, tps=1140),
]


def test_the_point_select_sweep_peaks_and_saturates_at_128_threads() -> None:
    summary = compute_summary(POINT_SELECT, slo_latency_ms=105)
    assert (summary.peak_qps, summary.peak_threads) == (49193, 128)
    assert summary.saturation_threads == 128
    assert summary.recommended_threads == 128
    assert summary.headline == (
        "oltp_point_select: peak 49,193 QPS at 128 threads (p95 4.33 ms); saturates at 128; "
        "recommended 128 under p95 < 105 ms"
    )
    assert summary.workloads[0].saturation_basis == "knee"


def test_the_read_write_sweep_recommends_64_threads_under_the_105_ms_slo() -> None:
    summary = compute_summary(READ_WRITE, slo_latency_ms=105)
    assert summary.recommended_threads == 64
    assert summary.workloads[0].recommended_qps == 17286
    assert (summary.peak_qps, summary.peak_threads) == (22801, 256)


def test_a_sweep_still_gaining_qps_has_no_knee_and_falls_back_to_the_peak() -> None:
    # 128 -> 256 still adds 12.9% QPS, so the latency growth alone is no knee.
    workload = compute_summary(READ_WRITE, slo_latency_ms=105).workloads[0]
    assert workload.saturation_threads == 256
    assert workload.saturation_basis == "peak"
    assert "no knee up to 256 threads" in workload.headline


def test_tidb_cloud_point_select_numbers_scale_without_a_knee() -> None:
    # TiDB Cloud's v8.1 sysbench report: point select 50/100/200 threads, p95 1.96/2.03/2.48 ms
    # (https://docs.pingcap.com/tidbcloud/v8.1-performance-benchmarking-with-sysbench).
    steps = [
        step("oltp_point_select", 50, 32741, 1.96),
        step("oltp_point_select", 100, 62545, 2.03),
        step("oltp_point_select", 200, 111470, 2.48),
    ]
    summary = compute_summary(steps, slo_latency_ms=105)
    assert (summary.peak_threads, summary.saturation_threads, summary.recommended_threads) == (
        200,
        200,
        200,
    )


def test_without_an_slo_nothing_is_recommended_and_the_headline_says_so() -> None:
    summary = compute_summary(POINT_SELECT, slo_latency_ms=None)
    assert summary.recommended_threads is None
    assert summary.headline.endswith("; no SLO set")


def test_an_slo_no_step_meets_recommends_nothing_and_says_so() -> None:
    summary = compute_summary(READ_WRITE, slo_latency_ms=50)
    assert summary.recommended_threads is None
    assert summary.headline.endswith("; no step meets p95 < 50 ms")


def test_a_step_without_a_percentile_value_is_never_recommended() -> None:
    steps = [
        step("oltp_point_select", 64, 39562, 3.89),
        step("oltp_point_select", 128, 49193, None),
    ]
    assert compute_summary(steps, slo_latency_ms=105).recommended_threads == 64


def test_several_workloads_get_a_summary_each_and_the_overall_peak_across_all() -> None:
    summary = compute_summary(READ_WRITE + POINT_SELECT, slo_latency_ms=105)
    assert [w.workload for w in summary.workloads] == ["oltp_read_write", "oltp_point_select"]
    assert (summary.peak_qps, summary.peak_threads) == (49193, 128)
    assert summary.peak_workload == "oltp_point_select"
    assert summary.recommended_threads == 128
    assert summary.headline.count(" | ") == 1


def test_no_steps_give_an_empty_summary() -> None:
    summary = compute_summary([], slo_latency_ms=105)
    assert summary.peak_qps is None
    assert summary.headline == "no finished steps"


def test_the_summary_is_camel_case_on_the_wire() -> None:
    wire = compute_summary(POINT_SELECT, slo_latency_ms=105).model_dump(by_alias=True)
    for key in ("peakQps", "peakThreads", "recommendedThreads", "saturationThreads", "headline"):
        assert key in wire
    assert wire["workloads"][0]["saturationBasis"] == "knee"


def test_a_rate_step_short_of_its_target_never_meets_the_slo_even_when_fast() -> None:
    from tidb_bench_operator.domain.sysbench.rate import rate_outcome

    steps = [step("oltp_point_select", 4, q, p) for q, p in [(1000, 1.0), (2000, 1.5), (3100, 4.0)]]
    rates = [rate_outcome(1000, 1000, 5), rate_outcome(2000, 1990, 5), rate_outcome(8000, 3100, 5)]
    verdict = compute_summary(steps, 50.0, rates)
    w = verdict.workloads[0]
    # The short step is the fastest and under the SLO, yet 2,000/s is the recommended rate.
    assert w.peak_qps == 3100
    assert w.recommended_rate == 2000 and w.recommended_qps == 2000
    assert w.highest_reached_rate == 2000
    assert "reached up to 2,000/s, 8,000/s not (3,100/s)" in (w.headline or "")
    assert "recommended 2,000/s under p95 < 50 ms" in (w.headline or "")


def test_a_thread_sweep_has_no_rate_fields() -> None:
    steps = [step("oltp_point_select", t, q, p) for t, q, p in [(1, 100, 1.0), (2, 190, 1.1)]]
    w = compute_summary(steps, 5.0).workloads[0]
    assert w.recommended_rate is None and w.highest_reached_rate is None
    assert w.recommended_threads == 2
