"""The runner → controller result message: versioned, typed, within 4 KiB, read the same way."""

from __future__ import annotations

import json

import pytest

from tidb_bench_operator.domain.api.results import Latency, StepResult
from tidb_bench_operator.domain.api.runner_message import (
    MAX_TERMINATION_MESSAGE,
    RESULT_VERSION,
    SERIES_MARKER,
    ClientCpu,
    DatasetReport,
    RunnerFailure,
    StepReport,
    combine_clients,
    failure,
    read_report,
    read_series,
    series_line,
    termination_text,
)


def result(qps: float, p95: float, events: int = 1000) -> StepResult:
    return StepResult(
        workload="oltp_point_select", threads=8, tps=qps, qps=qps, read_qps=qps, write_qps=0.0,
        other_qps=0.0,
        latency_ms=Latency(min=0.1, avg=p95 / 2, max=p95 * 3, percentile=95, value=p95),
        errors_per_sec=0.0, reconnects_per_sec=0.0, events=events, duration_seconds=10.0,
        sysbench_version="1.0.20",
    )  # fmt: skip


def test_a_step_report_survives_the_termination_message_except_its_series() -> None:
    report = StepReport(
        result=result(9000.0, 2.0),
        started_at="2024-06-01T02:00:08+00:00",
        late_seconds=0.2,
        cpu=ClientCpu(used=0.5, available=2.0, saturated=False),
        notes=["warm-up: discarded"],
        histogram=[(1.5, 10), (2.0, 5)],
        series=[{"t": 10.0, "qps": 9000.0}],
    )
    text = termination_text(report)
    assert json.loads(text)["v"] == RESULT_VERSION
    back = read_report(text, StepReport)
    assert back == report.model_copy(update={"series": []})


def test_a_dataset_report_reads_back_as_written() -> None:
    report = DatasetReport(action="prepared", reason="stale", tables=4, seconds=12.5)
    assert read_report(termination_text(report), DatasetReport) == report


def test_a_message_of_another_version_is_a_failure_naming_both_versions() -> None:
    text = json.dumps({"v": 2, "ok": True, "result": {}})
    got = read_report(text, StepReport)
    assert isinstance(got, RunnerFailure)
    assert got.kind == "version"
    assert "version 2" in got.message and f"version {RESULT_VERSION}" in got.message


def test_a_message_without_a_version_is_a_failure_too() -> None:
    got = read_report(json.dumps({"ok": True, "action": "reused", "tables": 1}), DatasetReport)
    assert isinstance(got, RunnerFailure) and "version None" in got.message


def test_a_failure_message_is_read_as_a_failure_whatever_was_expected() -> None:
    text = termination_text(failure("connect", "cannot connect to basic-tidb:4000"))
    got = read_report(text, StepReport)
    assert got == RunnerFailure(kind="connect", message="cannot connect to basic-tidb:4000")


@pytest.mark.parametrize("text", ["Segmentation fault", "[1, 2]"])
def test_text_that_is_not_a_json_object_is_quoted_with_the_exit_code(text: str) -> None:
    got = read_report(text, StepReport, exit_code=139)
    assert isinstance(got, RunnerFailure)
    assert got.message == f"exit 139: {text}"


def test_a_message_that_does_not_match_its_schema_names_the_field() -> None:
    got = read_report(json.dumps({"v": 1, "ok": True, "tables": 1}), DatasetReport)
    assert isinstance(got, RunnerFailure) and got.kind == "invalid"
    assert "action" in got.message


def test_a_field_from_a_newer_runner_of_the_same_version_is_ignored() -> None:
    text = json.dumps({"v": 1, "ok": True, "action": "reused", "tables": 1, "newThing": 3})
    assert read_report(text, DatasetReport) == DatasetReport(action="reused", tables=1)


def test_the_histogram_goes_first_when_the_message_is_too_long() -> None:
    report = StepReport(result=result(1.0, 1.0), histogram=[(i / 7, i) for i in range(900)])
    text = termination_text(report)
    assert len(text.encode()) <= MAX_TERMINATION_MESSAGE
    back = read_report(text, StepReport)
    assert isinstance(back, StepReport)
    assert back.histogram == [] and back.histogram_dropped is True


def test_the_series_line_round_trips_and_the_last_one_counts() -> None:
    log = "x\n" + series_line([{"t": 1.0}]) + "\n" + series_line([{"t": 2.0}]) + "\n"
    assert log.count(SERIES_MARKER) == 2
    assert read_series(log) == [{"t": 2.0}]
    assert read_series("no series here") is None


def test_clients_are_combined_with_notes_once_and_late_and_saturated_clients_named() -> None:
    a = StepReport(result=result(9000.0, 2.0), notes=["warm-up"], late=True, late_seconds=4.0)
    b = StepReport(
        result=result(8000.0, 3.0),
        notes=["warm-up"],
        cpu=ClientCpu(used=1.9, available=2.0, saturated=True),
    )
    combined = combine_clients([a, b])
    assert combined.result.qps == 17000.0
    assert combined.notes[0] == "warm-up" and combined.notes.count("warm-up") == 1
    assert len(combined.notes) > 1, "how the clients were combined is noted"
    assert combined.late == [a]
    assert combined.saturated is True


def test_one_client_is_not_noted_as_combined() -> None:
    combined = combine_clients([StepReport(result=result(9000.0, 2.0), notes=["n"])])
    assert combined.notes == ["n"] and combined.late == [] and combined.saturated is False
