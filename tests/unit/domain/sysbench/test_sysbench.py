"""sysbench argv building, output parsing, failure diagnosis and combining, on real outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tidb_bench_operator.domain.api.results import StepResult
from tidb_bench_operator.domain.sysbench import (
    EXTRA_ARG_KINDS,
    LUA_WORKLOADS,
    SysbenchRun,
    build_sysbench_argv,
    combine_step_results,
    diagnose_failure,
    histogram_percentile,
    merge_histograms,
    parse_sysbench_output,
    to_step_result,
    validate_extra_args,
    validate_workload,
)
from tidb_bench_operator.errors import ParseError, SpecError, SysbenchError

DATA = Path(__file__).resolve().parents[3] / "data" / "sysbench"

# What each captured output is: "ok" (a usable step result), "not-db" (a complete report of
# a non-database test) or the SysbenchError kind diagnose_failure must give.
EXPECTED_OUTCOME = {
    "sysbench-1.0.17_worker_threads_init_timeout_issue538.txt": "thread-init-timeout",
    "sysbench-1.0.20_connect-access-denied_run_recorded.txt": "connect",
    "sysbench-1.0.20_connect-refused_prepare_recorded.txt": "connect",
    "sysbench-1.0.20_connect-refused_run_recorded.txt": "connect",
    "sysbench-1.0.20_connect-unknown-db-1049_run_recorded.txt": "connect",
    "sysbench-1.0.20_connect-unknown-db_run_recorded.txt": "connect",
    "sysbench-1.0.20_connect-unknown-host_run_recorded.txt": "connect",
    "sysbench-1.0.20_cpu_histogram_recorded.txt": "not-db",
    "sysbench-1.0.20_cpu_report-interval_recorded.txt": "not-db",
    "sysbench-1.0.20_debian-system-luajit_cpu_run.txt": "not-db",
    "sysbench-1.0.20_forced-shutdown_recorded.txt": "ok",
    "sysbench-1.0.20_histogram_percentile0_fatal_recorded.txt": "invalid-option",
    "sysbench-1.0.20_invalid-option-warmup-time_recorded.txt": "invalid-option",
    "sysbench-1.0.20_macos_p95_zero_histogram_empty_issue479.txt": "not-db",
    "sysbench-1.0.20_oltp_cleanup_tables2_recorded.txt": "no-summary",
    "sysbench-1.0.20_oltp_insert_threads4_recorded.txt": "ok",
    "sysbench-1.0.20_oltp_point_select_histogram_recorded.txt": "ok",
    "sysbench-1.0.20_oltp_point_select_no-tables_run_recorded.txt": "sql-error",
    "sysbench-1.0.20_oltp_point_select_percentile0_recorded.txt": "ok",
    "sysbench-1.0.20_oltp_point_select_percentile100_recorded.txt": "ok",
    "sysbench-1.0.20_oltp_point_select_rate100_percentile0_recorded.txt": "ok",
    "sysbench-1.0.20_oltp_point_select_rate200_reached_histogram_recorded.txt": "ok",
    "sysbench-1.0.20_oltp_point_select_rate40000_short_histogram_recorded.txt": "ok",
    "sysbench-1.0.20_oltp_point_select_rate40000_queue-full_recorded.txt": "rate-queue-full",
    "sysbench-1.0.20_oltp_point_select_rate1000000_queue-full-before-report_recorded.txt": (
        "rate-queue-full"
    ),
    "sysbench-1.0.20_oltp_point_select_threads1_tidb.txt": "ok",
    "sysbench-1.0.20_oltp_point_select_threads4_recorded.txt": "ok",
    "sysbench-1.0.20_oltp_point_select_threads64_tidb.txt": "ok",
    "sysbench-1.0.20_oltp_prepare_table-exists_recorded.txt": "sql-error",
    "sysbench-1.0.20_oltp_prepare_tables2_recorded.txt": "no-summary",
    "sysbench-1.0.20_oltp_read_only_threads2_histogram_report-interval_recorded.txt": "ok",
    "sysbench-1.0.20_oltp_read_write_client-a-of-2_histogram_recorded.txt": "ok",
    "sysbench-1.0.20_oltp_read_write_client-b-of-2_histogram_recorded.txt": "ok",
    "sysbench-1.0.20_oltp_read_write_client-a-of-2_read-lock-4s_recorded.txt": "ok",
    "sysbench-1.0.20_oltp_read_write_client-b-of-2_read-lock-4s_recorded.txt": "ok",
    "sysbench-1.0.20_oltp_read_write_deadlocks-ignored_recorded.txt": "ok",
    "sysbench-1.0.20_oltp_read_write_threads4_p99_recorded.txt": "ok",
    "sysbench-1.0.20_reconnect-segfault-exit139_run_recorded.txt": "no-summary",
    "sysbench-1.0.20_sql-error-killed-connections_run_recorded.txt": "sql-error",
    "sysbench-1.0.20_sql-error-ps-mode-disable_run_recorded.txt": "sql-error",
    "sysbench-1.0.20_thread-init-timeout_silent-server_recorded.txt": "thread-init-timeout",
    "sysbench-1.0.20_tpcc-lua_report_default_errs-no-colon_excerpt.txt": "no-summary",
    "sysbench-1.0.20_tpcc-lua_scale1_run_recorded.txt": "ok",
    "sysbench-1.0.20_tpcc_report-csv_issue531_excerpt.txt": "no-summary",
    "sysbench-1.0.20_version_recorded.txt": "no-summary",
    "sysbench-1.0.6_connect_fatal_unknown_db_percona-qa-issue98.txt": "connect",
    "sysbench-1.0.x_connect_fatal_variants_sysbench-issues.txt": "connect",
    "sysbench-1.1.0-df89d34_oltp_update_index_threads64_myrocks.txt": "ok",
    "sysbench-1.1.0_intermediate_p95_zero_issue242_excerpt.txt": "no-summary",
}


def read(name: str) -> str:
    return (DATA / name).read_text()


def parse(name: str) -> SysbenchRun:
    return parse_sysbench_output(read(name))


def failure(name: str) -> SysbenchError:
    error = diagnose_failure(parse(name))
    assert error is not None
    return error


# ------------------------------------------------------------------------------------------
# Every captured output
# ------------------------------------------------------------------------------------------


def test_every_file_in_the_data_directory_has_an_expected_outcome() -> None:
    assert sorted(p.name for p in DATA.glob("sysbench-*.txt")) == sorted(EXPECTED_OUTCOME)


@pytest.mark.parametrize("name", sorted(EXPECTED_OUTCOME))
def test_every_captured_output_parses_to_its_expected_outcome(name: str) -> None:
    run = parse(name)
    error = diagnose_failure(run)
    expected = EXPECTED_OUTCOME[name]
    if expected == "ok":
        assert error is None
        step = to_step_result(run)
        assert run.summary is not None
        assert step.qps == run.summary.qps
        assert step.events == run.summary.total_events
    elif expected == "not-db":
        assert error is None
        with pytest.raises(ParseError, match="SQL statistics"):
            to_step_result(run, "oltp_point_select", 1)
    else:
        assert error is not None
        assert error.kind == expected
        with pytest.raises(SysbenchError) as raised:
            to_step_result(run, "oltp_point_select", 1)
        assert raised.value.kind == expected


# ------------------------------------------------------------------------------------------
# Successful runs: numbers straight from the files
# ------------------------------------------------------------------------------------------


def test_the_tidb_point_select_run_gives_the_summary_rates_not_interval_averages() -> None:
    run = parse("sysbench-1.0.20_oltp_point_select_threads64_tidb.txt")
    step = to_step_result(run)
    assert step.to_json_dict() == {
        "workload": "oltp_point_select",
        "threads": 64,
        "clients": 1,
        "tps": 51023.92,
        "qps": 51023.92,
        "readQps": 51023.92,
        "writeQps": 0.0,
        "otherQps": 0.0,
        "latencyMs": {"min": 0.39, "avg": 1.25, "max": 71.32, "percentile": 95, "value": 1.89},
        "errorsPerSec": 0.0,
        "reconnectsPerSec": 0.0,
        "events": 5103864,
        "durationSeconds": 100.0271,
        "sysbenchVersion": "1.0.20",
    }


def test_intermediate_reports_are_parsed_including_the_unpadded_100s_timestamp() -> None:
    run = parse("sysbench-1.0.20_oltp_point_select_threads64_tidb.txt")
    assert run.report_interval_seconds == 10
    assert [i.t for i in run.intervals] == [10.0 * n for n in range(1, 11)]
    first, last = run.intervals[0], run.intervals[-1]
    assert (first.threads, first.tps, first.qps, first.latency_ms) == (64, 50300.94, 50300.94, 1.96)
    assert (last.t, last.tps, last.latency_ms, last.errors_per_sec) == (100.0, 51086.20, 1.89, 0.0)
    assert run.luajit == "bundled LuaJIT 2.1.0-beta2"


def test_the_workload_is_taken_from_a_saved_command_line_when_not_given() -> None:
    assert parse("sysbench-1.0.20_oltp_point_select_threads1_tidb.txt").workload == (
        "oltp_point_select"
    )
    assert parse("sysbench-1.1.0-df89d34_oltp_update_index_threads64_myrocks.txt").workload == (
        "oltp_update_index"
    )
    assert parse("sysbench-1.0.20_tpcc-lua_report_default_errs-no-colon_excerpt.txt").workload == (
        "tpcc"
    )
    given = parse_sysbench_output(
        read("sysbench-1.0.20_oltp_point_select_threads1_tidb.txt"), workload="mine"
    )
    assert given.workload == "mine"


def test_read_write_counts_padded_by_percent_6llu_and_the_99th_percentile_are_read() -> None:
    run = parse("sysbench-1.0.20_oltp_read_write_threads4_p99_recorded.txt")
    assert run.summary is not None
    assert (run.summary.transactions, run.summary.tps) == (14222, 1421.45)
    assert (run.summary.reads, run.summary.writes, run.summary.other) == (199108, 56888, 28444)
    step = to_step_result(run)
    assert step.latency_ms.percentile == 99
    assert step.latency_ms.value == 7.30
    assert step.qps == 28428.94
    # The summary prints only the total query rate: the split follows the counts.
    assert step.read_qps == round(28428.94 * 199108 / 284440, 2)
    assert abs(step.read_qps + step.write_qps + step.other_qps - step.qps) < 0.02
    assert run.intervals[0].percentile == 99
    assert run.intervals[0].latency_ms == 7.98


def test_ignored_errors_are_reported_per_second_from_the_summary() -> None:
    step = to_step_result(parse("sysbench-1.0.20_oltp_read_write_deadlocks-ignored_recorded.txt"))
    assert step.errors_per_sec == 285.57
    assert step.tps == 1158.65
    assert step.events == 5802
    run = parse("sysbench-1.0.20_oltp_read_write_deadlocks-ignored_recorded.txt")
    assert run.summary is not None and run.summary.ignored_errors == 1430
    assert run.intervals[0].errors_per_sec == 312.48


def test_the_lua_report_default_err_s_without_colon_is_parsed() -> None:
    run = parse("sysbench-1.0.20_tpcc-lua_report_default_errs-no-colon_excerpt.txt")
    assert [i.errors_per_sec for i in run.intervals] == [43.59, 49.90, 48.20, 54.60, 50.30]
    assert run.intervals[0].qps == 8879.12
    assert run.intervals[0].write_qps == 4174.05
    assert run.warnings == []


def test_the_1_1_throughput_block_gives_time_elapsed_and_events_per_second() -> None:
    run = parse("sysbench-1.1.0-df89d34_oltp_update_index_threads64_myrocks.txt")
    assert run.version == "1.1.0-df89d34"
    assert run.summary is not None
    assert run.summary.total_time_seconds == 60.0093
    assert run.summary.events_per_sec == 13782.3199
    step = to_step_result(run)
    assert (step.tps, step.qps, step.errors_per_sec) == (13782.32, 82694.12, 0.08)
    assert step.events == 827068
    assert step.read_qps == 0.0
    assert step.sysbench_version == "1.1.0-df89d34"
    assert len(run.intervals) == 12
    assert run.intervals[2].errors_per_sec == 0.20


def test_percentile_zero_gives_no_percentile_value_and_a_note() -> None:
    run = parse("sysbench-1.0.20_oltp_point_select_percentile0_recorded.txt")
    step = to_step_result(run)
    assert step.latency_ms.percentile == 0
    assert step.latency_ms.value is None
    assert step.latency_ms.max == 10.62
    assert any("disabled" in note for note in run.notes)


def test_intervals_with_percentile_zero_have_no_latency_and_rate_queue_lines_are_skipped() -> None:
    run = parse("sysbench-1.0.20_oltp_point_select_rate100_percentile0_recorded.txt")
    assert [i.tps for i in run.intervals] == [104.88, 114.04, 94.00]
    assert all(i.latency_ms is None and i.percentile == 0 for i in run.intervals)
    assert run.warnings == []
    assert to_step_result(run).qps == 104.09


def test_the_100th_percentile_is_read_from_its_three_digit_label() -> None:
    step = to_step_result(parse("sysbench-1.0.20_oltp_point_select_percentile100_recorded.txt"))
    assert step.latency_ms.percentile == 100
    assert step.latency_ms.value == 12.08


def test_a_forced_shutdown_report_is_used_and_says_what_happened() -> None:
    run = parse("sysbench-1.0.20_forced-shutdown_recorded.txt")
    assert any("forcing shutdown" in line for line in run.fatal)
    assert run.forced_shutdown_seconds == 5
    assert run.summary is not None
    assert run.summary.unfinished_transactions == 2
    assert any("2 transactions were unfinished" in note for note in run.notes)
    step = to_step_result(run)
    assert (step.tps, step.events, step.duration_seconds) == (15076.30, 75394, 5.0001)


def test_an_interval_with_no_events_has_no_latency_instead_of_0_00() -> None:
    # The cluster stalled (tables locked): sysbench prints "lat (ms,95%): 0.00".
    run = parse("sysbench-1.0.20_forced-shutdown_recorded.txt")
    assert [(i.tps, i.latency_ms) for i in run.intervals] == [
        (39698.87, 0.07),
        (35660.61, 0.06),
        (0.0, None),
        (0.0, None),
    ]


def test_an_interval_with_queries_but_no_finished_transaction_has_no_latency() -> None:
    run = parse("sysbench-1.1.0_intermediate_p95_zero_issue242_excerpt.txt")
    first, second = run.intervals
    assert (first.threads, first.tps, first.qps, first.latency_ms) == (4000, 0.0, 7843.18, None)
    assert second.latency_ms == 9799.46


def test_a_summary_percentile_of_0_00_with_events_is_sub_resolution_not_missing() -> None:
    run = parse("sysbench-1.0.20_macos_p95_zero_histogram_empty_issue479.txt")
    assert run.summary is not None
    assert run.summary.total_events == 133738547
    assert run.summary.percentile_printed_ms == 0.0
    assert any("below the 0.01 ms display resolution" in note for note in run.notes)
    assert run.histogram == []
    assert run.warnings == [
        "the --test option is deprecated. You can pass a script name or path on the "
        "command line without any options."
    ]


def test_a_summary_percentile_of_0_00_with_zero_events_becomes_none() -> None:
    # A real report whose numbers are rewritten to "nothing completed": the stalled-cluster
    # case (docs/sysbench.md, "The 0.00 percentile") for which no capture exists.
    text = read("sysbench-1.0.20_oltp_point_select_threads1_tidb.txt")
    start = text.index("SQL statistics:")
    report = text[start:]
    for old, new in (
        ("128210 (1282.05 per sec.)", "0      (0.00 per sec.)"),
        ("total number of events:              128210", "total number of events:              0"),
        (
            "95th percentile:                        0.94",
            "95th percentile:                        0.00",
        ),
        ("read:                            128210", "read:                            0"),
        ("total:                           128210", "total:                           0"),
        (
            "min:                                    0.52",
            "min:                                    0.00",
        ),
        (
            "avg:                                    0.78",
            "avg:                                    0.00",
        ),
        (
            "max:                                   26.34",
            "max:                                    0.00",
        ),
        (
            "sum:                                99836.53",
            "sum:                                    0.00",
        ),
    ):
        assert old in report
        report = report.replace(old, new)
    run = parse_sysbench_output(text[:start] + report)
    step = to_step_result(run)
    assert step.events == 0
    assert step.latency_ms.value is None
    assert any("zero events" in note for note in run.notes)


def test_a_percentile_at_the_100_second_histogram_limit_is_flagged_as_clamped() -> None:
    text = read("sysbench-1.0.20_oltp_point_select_threads1_tidb.txt")
    old = "95th percentile:                        0.94"
    assert old in text
    run = parse_sysbench_output(text.replace(old, "95th percentile:                   100000.00"))
    assert to_step_result(run).latency_ms.value == 100000.0
    assert any("clamped at sysbench's 100 s histogram limit" in note for note in run.notes)


def test_cpu_test_reports_are_parsed_but_are_not_step_results() -> None:
    run = parse("sysbench-1.0.20_debian-system-luajit_cpu_run.txt")
    assert run.version == "1.0.20"
    assert run.luajit == "system LuaJIT 2.1.0-beta3"
    assert run.threads == 8
    assert run.summary is not None
    assert run.summary.events_per_sec == 27736.51
    assert run.summary.total_time_seconds == 60.0003
    assert run.summary.fairness_events_avg == 208026.75
    assert not run.summary.has_sql_statistics


def test_eps_intervals_of_non_database_tests_are_parsed() -> None:
    run = parse("sysbench-1.0.20_cpu_report-interval_recorded.txt")
    assert [(i.tps, i.latency_ms, i.qps) for i in run.intervals] == [
        (5744.58, 0.38, None),
        (5219.86, 0.21, None),
        (5571.69, 0.24, None),
    ]


def test_a_thread_count_that_contradicts_the_output_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="Number of threads: 64"):
        parse_sysbench_output(
            read("sysbench-1.0.20_oltp_point_select_threads64_tidb.txt"), threads=8
        )


# ------------------------------------------------------------------------------------------
# Histograms
# ------------------------------------------------------------------------------------------

HISTOGRAM_FILES = [
    "sysbench-1.0.20_cpu_histogram_recorded.txt",
    "sysbench-1.0.20_oltp_point_select_histogram_recorded.txt",
    "sysbench-1.0.20_oltp_read_only_threads2_histogram_report-interval_recorded.txt",
    "sysbench-1.0.20_oltp_read_write_client-a-of-2_histogram_recorded.txt",
    "sysbench-1.0.20_oltp_read_write_client-b-of-2_histogram_recorded.txt",
]


@pytest.mark.parametrize("name", HISTOGRAM_FILES)
def test_the_histogram_holds_every_event_of_the_run(name: str) -> None:
    run = parse(name)
    assert run.summary is not None and run.histogram is not None
    assert sum(count for _, count in run.histogram) == run.summary.total_events


@pytest.mark.parametrize("name", HISTOGRAM_FILES)
def test_the_percentile_computed_from_a_histogram_matches_the_one_sysbench_printed(
    name: str,
) -> None:
    run = parse(name)
    assert run.summary is not None and run.histogram is not None
    assert run.summary.percentile is not None
    value = histogram_percentile(run.histogram, run.summary.percentile)
    assert value is not None
    # Bucket bounds are printed with 3 decimals and the summary with 2.
    assert abs(value - (run.summary.percentile_printed_ms or 0.0)) <= 0.0051


def test_histogram_rows_are_read_with_their_values_and_counts() -> None:
    run = parse("sysbench-1.0.20_cpu_histogram_recorded.txt")
    assert run.histogram is not None
    assert run.histogram[:3] == [(0.185, 961), (0.189, 7976), (0.192, 4414)]
    assert run.histogram[-1] == (5.373, 1)


def test_an_empty_histogram_has_no_percentile() -> None:
    assert histogram_percentile([], 95) is None
    assert histogram_percentile([(0.5, 0)], 95) is None


# ------------------------------------------------------------------------------------------
# Failures
# ------------------------------------------------------------------------------------------


def test_a_refused_connection_is_a_connect_error_with_errno_and_where() -> None:
    error = failure("sysbench-1.0.20_connect-refused_run_recorded.txt")
    assert error.kind == "connect"
    message = str(error)
    assert "host '127.0.0.1', port 1" in message
    assert "error 2002: Can't connect to server on '127.0.0.1' (115)" in message
    assert "check target host/port" in message


def test_a_refused_connection_during_prepare_is_a_connect_error() -> None:
    error = failure("sysbench-1.0.20_connect-refused_prepare_recorded.txt")
    assert (error.kind, "2002" in str(error)) == ("connect", True)


@pytest.mark.parametrize(
    ("name", "expected", "hint"),
    [
        ("sysbench-1.0.20_connect-access-denied_run_recorded.txt", "error 1045", "password"),
        ("sysbench-1.0.20_connect-unknown-db-1049_run_recorded.txt", "error 1049", "database"),
        ("sysbench-1.0.20_connect-unknown-db_run_recorded.txt", "error 1044", "GRANT"),
        ("sysbench-1.0.20_connect-unknown-host_run_recorded.txt", "error 2005", "resolve"),
        ("sysbench-1.0.6_connect_fatal_unknown_db_percona-qa-issue98.txt", "error 1049", "socket"),
        ("sysbench-1.0.x_connect_fatal_variants_sysbench-issues.txt", "error 2005", "resolve"),
    ],
)
def test_connect_errors_name_the_mysql_error_and_what_to_check(
    name: str, expected: str, hint: str
) -> None:
    error = failure(name)
    assert error.kind == "connect"
    assert expected in str(error)
    assert hint in str(error)


@pytest.mark.parametrize(
    "name",
    [
        "sysbench-1.0.17_worker_threads_init_timeout_issue538.txt",
        "sysbench-1.0.20_thread-init-timeout_silent-server_recorded.txt",
    ],
)
def test_worker_threads_that_never_initialise_are_a_thread_init_timeout(name: str) -> None:
    error = failure(name)
    assert error.kind == "thread-init-timeout"
    assert "30 seconds" in str(error)


def test_a_lost_connection_mid_run_is_a_sql_error_naming_errno_and_query() -> None:
    error = failure("sysbench-1.0.20_sql-error-killed-connections_run_recorded.txt")
    assert error.kind == "sql-error"
    assert "mysql_stmt_execute() returned error 2013" in str(error)
    assert "for query 'COMMIT'" in str(error)
    assert "ignoreErrors" in str(error)


def test_a_sql_error_without_prepared_statements_names_the_full_query() -> None:
    error = failure("sysbench-1.0.20_sql-error-ps-mode-disable_run_recorded.txt")
    assert "mysql_drv_query() returned error 2013" in str(error)
    assert "'SELECT c FROM sbtest2 WHERE id=5001'" in str(error)


def test_missing_tables_say_to_prepare() -> None:
    error = failure("sysbench-1.0.20_oltp_point_select_no-tables_run_recorded.txt")
    assert error.kind == "sql-error"
    assert "1146" in str(error)
    assert "dataset.prepare" in str(error)


def test_a_multi_line_query_is_cut_at_its_first_line() -> None:
    error = failure("sysbench-1.0.20_oltp_prepare_table-exists_recorded.txt")
    assert "error 1050 (Table 'sbtest1' already exists)" in str(error)
    assert "'CREATE TABLE sbtest1( ...'" in str(error)


def test_warmup_time_on_1_0_20_is_an_invalid_option_that_explains_itself() -> None:
    error = failure("sysbench-1.0.20_invalid-option-warmup-time_recorded.txt")
    assert error.kind == "invalid-option"
    assert "--warmup-time=10" in str(error)
    assert "1.0.20" in str(error)


def test_histogram_with_percentile_zero_is_an_invalid_option() -> None:
    error = failure("sysbench-1.0.20_histogram_percentile0_fatal_recorded.txt")
    assert error.kind == "invalid-option"
    assert "--histogram cannot be used with --percentile=0" in str(error)


def test_a_run_without_summary_after_a_crash_is_a_precise_no_summary_error() -> None:
    # Debian's 1.0.20 segfaulted (exit 139) while reconnecting; stdout just stops.
    error = failure("sysbench-1.0.20_reconnect-segfault-exit139_run_recorded.txt")
    assert error.kind == "no-summary"
    assert "after the [ 3s ] report" in str(error)
    assert "killed, crashed or output truncated" in str(error)


def test_a_real_report_cut_before_its_end_is_a_no_summary_error() -> None:
    text = read("sysbench-1.0.20_oltp_point_select_threads64_tidb.txt")
    run = parse_sysbench_output(text[: text.index("General statistics:")])
    assert run.summary is None
    error = diagnose_failure(run)
    assert error is not None and error.kind == "no-summary"


def test_empty_output_is_a_no_summary_error() -> None:
    error = diagnose_failure(parse_sysbench_output(""))
    assert error is not None and error.kind == "no-summary"


def test_fatal_lines_are_kept_in_order() -> None:
    run = parse("sysbench-1.0.20_connect-refused_run_recorded.txt")
    assert (
        run.fatal[0] == "unable to connect to MySQL server on host '127.0.0.1', port 1, aborting..."
    )
    assert run.fatal[-1] == "Thread initialization failed!"
    assert len(run.fatal) == 7


# ------------------------------------------------------------------------------------------
# argv builder
# ------------------------------------------------------------------------------------------


def test_the_run_argv_has_every_option_and_ends_with_the_command() -> None:
    argv = build_sysbench_argv(
        workload="oltp_point_select",
        command="run",
        host="basic-tidb.tidb.svc",
        port=4000,
        user="root",
        db="sbtest",
        threads=64,
        time_seconds=300,
        report_interval=10,
        percentile=95,
        rand_type="uniform",
        tables=32,
        table_size=10000,
        ignore_errors=[1062, 2013, 8028, 9007],
        auto_inc=False,
        histogram=True,
        extra_args=["--db-ps-mode=auto"],
    )
    assert argv == [
        "sysbench",
        "oltp_point_select",
        "--db-driver=mysql",
        "--mysql-host=basic-tidb.tidb.svc",
        "--mysql-port=4000",
        "--mysql-user=root",
        "--mysql-db=sbtest",
        "--tables=32",
        "--table-size=10000",
        "--auto-inc=off",
        "--threads=64",
        "--time=300",
        "--report-interval=10",
        "--percentile=95",
        "--rand-type=uniform",
        "--histogram=on",
        "--mysql-ignore-errors=1062,2013,8028,9007",
        "--db-ps-mode=auto",
        "run",
    ]
    assert not any("password" in arg for arg in argv)


def test_prepare_and_cleanup_leave_out_run_only_options() -> None:
    common = {
        "workload": "oltp_read_write",
        "host": "127.0.0.1",
        "port": 4000,
        "user": "root",
        "threads": 8,
        "time_seconds": 60,
        "report_interval": 10,
        "percentile": 95,
        "histogram": True,
        "tables": 4,
        "table_size": 1000,
    }
    prepare = build_sysbench_argv(command="prepare", **common)  # type: ignore[arg-type]
    assert prepare[-1] == "prepare"
    assert "--threads=8" in prepare and "--table-size=1000" in prepare
    assert not any(a.startswith(("--time", "--report", "--percentile", "--hist")) for a in prepare)
    cleanup = build_sysbench_argv(command="cleanup", **common)  # type: ignore[arg-type]
    assert cleanup == [
        "sysbench",
        "oltp_read_write",
        "--db-driver=mysql",
        "--mysql-host=127.0.0.1",
        "--mysql-port=4000",
        "--mysql-user=root",
        "--mysql-db=sbtest",
        "--tables=4",
        "cleanup",
    ]


def test_every_shipped_workload_is_valid_and_others_are_a_spec_error() -> None:
    assert len(LUA_WORKLOADS) == 11
    for name in LUA_WORKLOADS:
        assert validate_workload(name) == name
    with pytest.raises(SpecError) as raised:
        validate_workload("oltp_point_selct")
    assert raised.value.field == "workloads"
    assert "oltp_point_select" in str(raised.value)


def test_allowed_extra_args_pass_with_dashes_or_underscores_and_bare_booleans() -> None:
    args = ["--range-size=50", "--range_selects=off", "--skip-trx", "--rand-spec-res=1.5"]
    assert validate_extra_args(args) == args


@pytest.mark.parametrize(
    ("args", "field", "problem"),
    [
        (["--range-size=5", "--mysql-password=x"], "extraArgs[1]", "set by the controller"),
        (["--mysql-host=evil"], "extraArgs[0]", "set by the controller"),
        (["--warmup-time=10"], "extraArgs[0]", "1.0.20 has no --warmup-time"),
        (["--config-file=/etc/passwd"], "extraArgs[0]", "is not allowed"),
        (["--luajit-cmd=off"], "extraArgs[0]", "is not allowed"),
        (["--range-size=5 --mysql-host=x"], "extraArgs[0]", "characters other than"),
        (["--range-size=5\n"], "extraArgs[0]", "characters other than"),
        (["--skip-trx\n"], "extraArgs[0]", "not of the form"),
        (["range-size=5"], "extraArgs[0]", "not of the form"),
        (["--range-size="], "extraArgs[0]", "not of the form"),
        (["--range-size=abc"], "extraArgs[0]", "non-negative integer"),
        (["--range-size"], "extraArgs[0]", "needs a value"),
        (["--db-ps-mode=always"], "extraArgs[0]", "auto or disable"),
    ],
)
def test_other_extra_args_are_a_spec_error_naming_the_item(
    args: list[str], field: str, problem: str
) -> None:
    with pytest.raises(SpecError) as raised:
        validate_extra_args(args)
    assert raised.value.field == field
    assert problem in str(raised.value)


def test_an_unknown_extra_arg_error_lists_the_allowed_options() -> None:
    with pytest.raises(SpecError) as raised:
        validate_extra_args(["--debug"])
    for name in EXTRA_ARG_KINDS:
        assert f"--{name}" in str(raised.value)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"threads": 0}, "threads"),
        ({"time_seconds": 0}, "durationSeconds"),
        ({"percentile": 101}, "percentile"),
        ({"percentile": 0, "histogram": True}, "percentile"),
        ({"rand_type": "zipfian"}, "randType"),
        ({"ignore_errors": ["1062", "x"]}, "ignoreErrors"),
        ({"port": 0}, "target.port"),
        ({"host": "a b"}, "target.host"),
        ({"db": "sb;test"}, "database"),
        ({"tables": 0}, "dataset.tables"),
    ],
)
def test_invalid_builder_inputs_name_the_spec_field(changes: dict[str, object], field: str) -> None:
    kwargs: dict[str, object] = {
        "workload": "oltp_point_select",
        "command": "run",
        "host": "127.0.0.1",
        "port": 4000,
        "user": "root",
    }
    kwargs.update(changes)
    with pytest.raises(SpecError) as raised:
        build_sysbench_argv(**kwargs)  # type: ignore[arg-type]
    assert raised.value.field == field


def test_ignore_errors_accepts_all() -> None:
    argv = build_sysbench_argv(
        workload="oltp_insert", command="run", host="h", port=1, user="u", ignore_errors="all"
    )
    assert "--mysql-ignore-errors=all" in argv


# ------------------------------------------------------------------------------------------
# Combining clients
# ------------------------------------------------------------------------------------------

CLIENT_A = "sysbench-1.0.20_oltp_read_write_client-a-of-2_histogram_recorded.txt"
CLIENT_B = "sysbench-1.0.20_oltp_read_write_client-b-of-2_histogram_recorded.txt"


def two_clients() -> tuple[list[StepResult], list[list[tuple[float, int]]]]:
    runs = [parse(CLIENT_A), parse(CLIENT_B)]
    steps = [to_step_result(run) for run in runs]
    histograms = [run.histogram or [] for run in runs]
    return steps, histograms


def test_two_real_clients_combine_by_sums_extremes_and_event_weighted_average() -> None:
    (a, b), histograms = two_clients()
    combined, notes = combine_step_results([a, b], histograms)
    assert combined.clients == 2
    assert combined.tps == round(a.tps + b.tps, 2) == 1247.80
    assert combined.qps == round(a.qps + b.qps, 2) == 24956.01
    assert combined.events == a.events + b.events == 6247
    assert combined.duration_seconds == max(a.duration_seconds, b.duration_seconds) == 5.0067
    assert combined.latency_ms.min == min(a.latency_ms.min, b.latency_ms.min)
    assert combined.latency_ms.max == max(a.latency_ms.max, b.latency_ms.max)
    expected_avg = (a.latency_ms.avg * a.events + b.latency_ms.avg * b.events) / combined.events
    assert combined.latency_ms.avg == round(expected_avg, 2)
    assert any("merged from 2 clients' latency histograms" in note for note in notes)


def test_the_merged_percentile_lies_between_the_clients_and_follows_sysbench_rule() -> None:
    (a, b), histograms = two_clients()
    combined, _ = combine_step_results([a, b], histograms)
    value = combined.latency_ms.value
    assert value is not None
    assert a.latency_ms.value is not None and b.latency_ms.value is not None
    assert min(a.latency_ms.value, b.latency_ms.value) <= value
    assert value <= max(a.latency_ms.value, b.latency_ms.value)
    expected = histogram_percentile(histograms[0] + histograms[1], 95)
    assert expected is not None and value == round(expected, 2)


def test_without_every_histogram_the_percentile_is_the_worst_client_and_says_so() -> None:
    (a, b), histograms = two_clients()
    worst = max(v for v in (a.latency_ms.value, b.latency_ms.value) if v is not None)
    combined, notes = combine_step_results([a, b], None)
    assert combined.latency_ms.value == worst == 5.18
    assert any("worst client's value (no histograms were collected" in n for n in notes)
    combined, notes = combine_step_results([a, b], [histograms[0], None])
    assert combined.latency_ms.value == worst
    assert any("1 of 2 clients had no usable histogram" in n for n in notes)


def test_merging_histograms_sums_counts_of_equal_bucket_values() -> None:
    assert merge_histograms([[(0.5, 2), (1.0, 1)], [(1.0, 3), (0.25, 1)]]) == [
        (0.25, 1),
        (0.5, 2),
        (1.0, 4),
    ]


def test_clients_of_different_steps_cannot_be_combined() -> None:
    a = to_step_result(parse(CLIENT_A))
    other = to_step_result(parse("sysbench-1.0.20_oltp_read_write_threads4_p99_recorded.txt"))
    with pytest.raises(ValueError, match="clients of one step only"):
        combine_step_results([a, other])
    with pytest.raises(ValueError, match="at least one"):
        combine_step_results([])


def test_a_single_client_is_returned_unchanged() -> None:
    a = to_step_result(parse(CLIENT_A))
    combined, notes = combine_step_results([a])
    assert combined == a
    assert notes == []


def test_ignore_errors_given_as_the_specs_comma_separated_string_becomes_one_option() -> None:
    from tidb_bench_operator.domain.sysbench import build_sysbench_argv

    argv = build_sysbench_argv(
        workload="oltp_read_write",
        command="run",
        host="127.0.0.1",
        port=4000,
        user="root",
        ignore_errors="1062,2013,8028,9007",
    )
    assert "--mysql-ignore-errors=1062,2013,8028,9007" in argv
