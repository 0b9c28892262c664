"""The efficiency verdict: server CPU per query against the baseline runs, a rise regressing."""

from __future__ import annotations

import pytest

from tidb_bench_operator.domain.api.run_status import BenchmarkRunStatus
from tidb_bench_operator.domain.api.schedule import HistoryEntry, HistoryStep
from tidb_bench_operator.domain.schedule import compute_history_steps
from tidb_bench_operator.domain.stats.efficiency import judge_efficiency
from tidb_bench_operator.domain.stats.inference import compare_runs

PS = "oltp_point_select"
#: A quiet night's CPU ms per query, three trials each (49k QPS on 5.6 server cores).
BASE = [[0.112, 0.114, 0.116], [0.115, 0.113, 0.111], [0.117, 0.114, 0.112]]


def _entry(name: str, cpu: list[float], qps: float = 49_000.0, threads: int = 128) -> HistoryEntry:
    steps = [
        HistoryStep(workload=PS, threads=threads, qps=qps, trials=[qps] * 3, cpu_ms_per_query=cpu),
        HistoryStep(workload=PS, threads=256, qps=45_000.0, trials=[45_000.0] * 3),
    ]
    return HistoryEntry(name=name, outcome="Succeeded", steps=steps)


def _baseline() -> list[HistoryEntry]:
    return [_entry(f"night-{i}", cpu) for i, cpu in enumerate(BASE)]


def test_a_planted_forty_percent_rise_at_the_same_qps_is_regressed_with_its_interval() -> None:
    planted = _entry("planted", [v * 1.4 for v in (0.113, 0.114, 0.115)])
    judged = judge_efficiency(planted, _baseline(), 5, 10)
    assert judged.verdict is not None and judged.verdict.verdict == "Regressed"
    (step,) = judged.verdict.steps
    assert step.effect_percent == pytest.approx(40.0, abs=1.5)
    assert step.interval_low_percent is not None and step.interval_high_percent is not None
    assert 10 < step.interval_low_percent <= step.effect_percent <= step.interval_high_percent
    assert step.p_adjusted is not None and step.p_adjusted < 0.05
    assert "+40" in judged.message and "CPU ms/query" in judged.message


def test_noise_in_cpu_per_query_is_no_change() -> None:
    quiet = _entry("quiet", [0.113, 0.116, 0.112])
    judged = judge_efficiency(quiet, _baseline(), 5, 10)
    assert judged.verdict is not None and judged.verdict.verdict == "NoChange"


def test_less_cpu_per_query_is_improved_not_regressed() -> None:
    leaner = _entry("leaner", [0.080, 0.081, 0.079])
    judged = judge_efficiency(leaner, _baseline(), 5, 10)
    assert judged.verdict is not None and judged.verdict.verdict == "Improved"


def test_the_same_drop_in_qps_is_a_regression_and_in_cpu_per_query_an_improvement() -> None:
    base = [{(PS, 4): [100.0, 101.0, 99.0]}, {(PS, 4): [100.5, 99.5, 100.0]}]
    now = {(PS, 4): [70.0, 71.0, 69.0]}
    assert compare_runs(now, base, 10).verdict == "Regressed"
    assert compare_runs(now, base, 10, metric="cpuMsPerQuery").verdict == "Improved"


def test_steps_without_resource_data_get_no_verdict_and_are_named() -> None:
    judged = judge_efficiency(_entry("x", [0.113, 0.114, 0.115]), _baseline(), 5, 10)
    assert judged.verdict is not None
    assert [s.threads for s in judged.verdict.steps] == [128]
    assert "no efficiency verdict for oltp_point_select at 256 threads" in judged.message


def test_a_run_without_any_resource_data_gets_no_verdict() -> None:
    judged = judge_efficiency(_entry("x", []), _baseline(), 5, 10)
    assert judged.verdict is None and "no resource data" in judged.message


def test_baseline_runs_without_resource_data_are_skipped_not_counted() -> None:
    older = [_entry("old", []), *_baseline()]
    judged = judge_efficiency(_entry("x", [0.113, 0.114, 0.115]), older, 5, 10)
    assert judged.verdict is not None and judged.verdict.baseline_runs == 3


def test_history_keeps_each_valid_trials_cpu_or_the_steps_own_for_a_run_measured_once() -> None:
    status = BenchmarkRunStatus.model_validate(
        {
            "phase": "Succeeded",
            "steps": [
                {"index": 0, "workload": PS, "threads": 64, "phase": "Succeeded", "qps": 39600.0,
                 "valid": True, "resources": {"source": "prometheus", "cpuMsPerQuery": 0.12}},
                {"index": 1, "workload": PS, "threads": 128, "phase": "Succeeded", "qps": 49200.0,
                 "valid": True, "trials": [
                     {"round": 0, "qps": 49000.0, "valid": True, "cpuMsPerQuery": 0.113},
                     {"round": 1, "qps": 49300.0, "valid": False, "cpuMsPerQuery": 0.2},
                     {"round": 2, "qps": 49200.0, "valid": True}]},
            ],
        }
    )  # fmt: skip
    steps = compute_history_steps(status)
    assert [s.cpu_ms_per_query for s in steps] == [[0.12], [0.113]]
