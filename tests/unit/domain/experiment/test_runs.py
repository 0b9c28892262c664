"""What an experiment keeps of a variant's run: the peak and the peak step's efficiency."""

from __future__ import annotations

import copy
from typing import Any

from tidb_bench_operator.domain.experiment.runs import variant_summary


def step(threads: int, qps: float, cpu_ms: float | None, **extra: Any) -> dict[str, Any]:
    resources = None if cpu_ms is None else {
        "source": "cAdvisor", "qpsPerCore": round(1000 / cpu_ms, 1), "cpuMsPerQuery": cpu_ms,
        "bottleneck": {"kind": "none", "message": f"none at {threads} threads"},
    }  # fmt: skip
    return {"index": threads, "workload": "oltp_point_select", "threads": threads,
            "phase": "Succeeded", "qps": qps, "valid": True, "resources": resources,
            **extra}  # fmt: skip


RUN: dict[str, Any] = {
    "phase": "Succeeded",
    "summary": {"workload": "oltp_point_select", "peakQps": 900.0, "peakThreads": 4,
                "peakLatencyMs": 7.1},
    "steps": [step(1, 300.0, 1.5), step(4, 900.0, 1.25), step(8, 880.0, 1.4)],
}  # fmt: skip


def test_the_efficiency_is_the_peak_steps() -> None:
    got = variant_summary(RUN)
    assert (got.peak_qps, got.peak_threads, got.peak_latency_ms) == (900.0, 4, 7.1)
    assert (got.qps_per_core, got.cpu_ms_per_query) == (800.0, 1.25)
    assert got.bottleneck == "none at 4 threads"


def test_an_invalid_step_with_the_peaks_numbers_is_not_taken_for_it() -> None:
    run = copy.deepcopy(RUN)
    run["steps"].insert(0, step(4, 900.0, 9.0, valid=False, index=0))
    assert variant_summary(run).cpu_ms_per_query == 1.25


def test_a_peak_step_without_server_metrics_keeps_the_peak_only() -> None:
    run = copy.deepcopy(RUN)
    run["steps"][1]["resources"] = None
    got = variant_summary(run)
    assert (got.peak_qps, got.qps_per_core, got.cpu_ms_per_query, got.bottleneck) == (
        900.0, None, None, None,
    )  # fmt: skip


def test_a_run_without_a_summary_has_nothing() -> None:
    assert variant_summary({"phase": "Failed"}).model_dump(exclude_none=True) == {}


def test_a_status_not_as_the_controller_writes_it_keeps_the_readable_peak() -> None:
    run = {"summary": {"peakQps": 12.5, "peakThreads": "four"}, "steps": "nope"}
    got = variant_summary(run)
    assert (got.peak_qps, got.peak_threads, got.qps_per_core) == (12.5, None, None)
    assert variant_summary({"summary": "x", "steps": 3}).model_dump(exclude_none=True) == {}
