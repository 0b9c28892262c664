"""The spec and status fields for repeated trials, dataset practice, verdicts and fingerprints."""

from __future__ import annotations

import pytest

from tidb_bench_operator.domain.api.resources import parse_run_spec, parse_schedule_spec
from tidb_bench_operator.domain.api.run_status import BenchmarkRunStatus
from tidb_bench_operator.domain.api.schedule import BenchmarkScheduleStatus
from tidb_bench_operator.domain.fingerprint import Fingerprint
from tidb_bench_operator.domain.stats.inference import compare_runs, summarize_trials
from tidb_bench_operator.domain.stats.trend import history_change_points
from tidb_bench_operator.errors import SpecError

RESULT = {
    "workload": "oltp_point_select",
    "threads": 1,
    "clients": 1,
    "tps": 70.0,
    "qps": 70.0,
    "readQps": 70.0,
    "writeQps": 0.0,
    "otherQps": 0.0,
    "latencyMs": {"min": 0.1, "avg": 0.2, "max": 3.0, "percentile": 95, "value": 0.3},
    "errorsPerSec": 0.0,
    "reconnectsPerSec": 0.0,
    "events": 700,
    "durationSeconds": 10.0,
    "sysbenchVersion": "1.0.20",
}
SPEC = {"target": {"host": "db"}, "credentials": {"secretRef": {"name": "db"}}}


def test_one_trial_analyze_and_warm_up_are_the_defaults() -> None:
    spec = parse_run_spec(SPEC)
    assert (spec.repeats, spec.noisy_cv_percent) == (1, 10.0)
    assert (spec.dataset.analyze, spec.dataset.warm_up) == (True, True)


def test_repeats_and_the_dataset_switches_are_read_from_camel_case() -> None:
    spec = parse_run_spec(
        {**SPEC, "repeats": 3, "noisyCvPercent": 5, "dataset": {"analyze": False, "warmUp": False}}
    )
    assert (spec.repeats, spec.noisy_cv_percent) == (3, 5)
    assert (spec.dataset.analyze, spec.dataset.warm_up) == (False, False)


@pytest.mark.parametrize("repeats", [0, 21])
def test_repeats_out_of_range_are_refused(repeats: int) -> None:
    with pytest.raises(SpecError, match=r"spec\.repeats"):
        parse_run_spec({**SPEC, "repeats": repeats})


def test_a_schedule_keeps_thirty_runs_of_trend_by_default() -> None:
    spec = parse_schedule_spec({"schedule": "0 2 * * *", "template": SPEC})
    assert spec.regression.trend_runs == 30


def test_a_run_status_carries_trials_verdict_and_fingerprint_through_the_wire() -> None:
    verdict = compare_runs(
        {("oltp_point_select", 1): [70.0, 71.0, 72.0]},
        [{("oltp_point_select", 1): [100.0, 101.0, 99.0]}] * 3,
        10,
    )
    status = BenchmarkRunStatus.model_validate(
        {
            "steps": [
                {
                    "index": 0,
                    "workload": "oltp_point_select",
                    "threads": 1,
                    "qps": 71.0,
                    "trials": [{"round": 0, "result": RESULT}, {"round": 1, "result": RESULT}],
                    "qpsTrials": summarize_trials([70.0, 71.0]).model_dump(by_alias=True),
                }
            ],
            "regression": verdict.model_dump(by_alias=True, mode="json"),
            "fingerprint": Fingerprint(images={"tidb": "pingcap/tidb:v8.1.0"}).model_dump(
                by_alias=True
            ),
            "fingerprintDiff": ["tidb image pingcap/tidb:v8.1.0 → pingcap/tidb:v8.1.1"],
            "fieldOfANewerVersion": 1,
        }
    )
    assert status.steps[0].trials[1].result.qps == 70.0 and status.steps[
        0
    ].qps_trials == summarize_trials([70.0, 71.0])
    assert status.regression is not None and status.regression.verdict == "Regressed"
    assert status.regression.steps[0].p_value == verdict.steps[0].p_value
    assert status.fingerprint is not None and status.fingerprint.images["tidb"].endswith("v8.1.0")
    again = BenchmarkRunStatus.model_validate(status.model_dump(by_alias=True, mode="json"))
    assert again == status


def test_a_schedule_status_carries_change_points() -> None:
    runs = [(f"n{i}", {("oltp_point_select", 1): 100.0 if i < 8 else 80.0}) for i in range(16)]
    points = history_change_points(runs)
    status = BenchmarkScheduleStatus.model_validate(
        {"changePoints": [p.model_dump(by_alias=True) for p in points], "verdict": "NoChange"}
    )
    assert [p.run for p in status.change_points] == ["n8"]
