"""Hostile and careless input to the parsers and CLI verbs: refused clearly, never judged.

Each test is one class of input from the "Hostile input" table of docs/bad-input.md: it must end in a
precise error naming the field and value (or an explicit Fail), never in a traceback, a hang
or a confident wrong verdict. Cases found by the fuzzers are at the end.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from tidb_bench_operator.cli import main
from tidb_bench_operator.cli.run import run_local_sweep
from tidb_bench_operator.cli.sources import load_report_source
from tidb_bench_operator.domain.pd import parse_operators, parse_stores
from tidb_bench_operator.domain.preflight.pdcheck import run_pd_check
from tidb_bench_operator.domain.sysbench import (
    parse_sysbench_lines,
    parse_sysbench_output,
    to_step_result,
)
from tidb_bench_operator.domain.untrusted import embedded_json_values
from tidb_bench_operator.errors import ParseError, SpecError, SysbenchError, TidbBenchError

DATA = Path(__file__).resolve().parents[1] / "data"
SYSBENCH = DATA / "sysbench"
POINT_SELECT = SYSBENCH / "sysbench-1.0.20_oltp_point_select_threads4_recorded.txt"
V11 = SYSBENCH / "sysbench-1.1.0-df89d34_oltp_update_index_threads64_myrocks.txt"
STORES_V81 = DATA / "pd" / "pd-api-v1-stores_v8.1.0_tidb-operator-testdata.json"


def point_select(old: str = "", new: str = "") -> str:
    text = POINT_SELECT.read_text()
    if old:
        assert old in text, old
        text = text.replace(old, new)
    return text


# --- sysbench output ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        ("min:                                    0.02", "min: N/A", "latency_min_ms 'N/A'"),
        ("(76955.79 per sec.)\n    queries", "(nan per sec.)\n    queries", "tps 'nan'"),
        ("queries:                             769714 (76955.79", "queries: 769714 (-5.00", "qps"),
        ("max:                                   25.17", "max: " + "9" * 400, "latency_max_ms"),
        ("95th percentile", "1000th percentile", "1000th percentile does not exist"),
        ("total number of events:              769714", "total number of events: lots", "lots"),
        # Characters str.isdigit() accepts and int() refuses, and counts no uint64 holds.
        ("total number of events:              769714", "total number of events: 7²", "'7²'"),
        ("total number of events:              769714", "total number of events: ١٢", "'١٢'"),
        (
            "total number of events:              769714",
            "total number of events: " + "9" * 5000,
            "not a count",
        ),
        (
            "total number of events:              769714",
            "total number of events: 9007199254740993",
            "at most 2^53-1",
        ),
        ("queries:                             769714", "queries: " + "9" * 400, "queries"),
        ("max:                                   25.17", "max: 1" + "0" * 30, "latency_max_ms"),
    ],
)
def test_a_report_value_that_is_not_a_finite_non_negative_number_is_refused_by_line_and_field(
    old: str, new: str, words: str
) -> None:
    run = parse_sysbench_output(point_select(old, new))
    with pytest.raises(SysbenchError, match="cannot be read") as info:
        to_step_result(run)
    assert info.value.kind == "unreadable-report"
    assert words in str(info.value)
    assert "line " in str(info.value)


def test_a_thread_count_of_more_digits_than_sysbench_prints_is_not_read() -> None:
    # Found by the property test: 30 digits reached the step's model, past its bound.
    absurd = point_select("Number of threads: 4", "Number of threads: " + "9" * 30)
    assert to_step_result(parse_sysbench_output(absurd)).threads == 4, "the saved --threads=4"
    alone = absurd.replace("--threads=4 ", "")
    with pytest.raises(ParseError, match="the thread count is unknown"):
        to_step_result(parse_sysbench_output(alone))


def test_a_log_cut_inside_its_latency_block_is_not_a_report() -> None:
    text = point_select()
    cut = text[: text.index("max:")] + "max:                                    0.0"
    run = parse_sysbench_output(cut)
    assert run.summary is None or not run.summary.is_complete
    with pytest.raises(SysbenchError) as info:
        to_step_result(run)
    assert info.value.kind == "no-summary"


@pytest.mark.parametrize(
    ("old", "new", "words"),
    [
        ("max:                                   25.17", "max:     0.00", "min <= avg <= max"),
        ("sum:                                39858.71", "sum:     398.71", "sum 398.71 ms is not"),
        ("read:                            769714", "read:                            7", "total"),
    ],
)
def test_a_report_whose_numbers_contradict_each_other_is_refused(
    old: str, new: str, words: str
) -> None:
    with pytest.raises(ParseError, match=words):
        to_step_result(parse_sysbench_output(point_select(old, new)))


def test_a_fatal_after_a_complete_report_fails_the_step() -> None:
    text = point_select() + "FATAL: `thread_done' function failed: oltp_common.lua: error\n"
    with pytest.raises(SysbenchError, match="printed its report and then failed") as info:
        to_step_result(parse_sysbench_output(text))
    assert info.value.kind == "fatal-after-report"


def test_the_forced_shutdown_fatal_before_the_report_still_reads_as_a_report() -> None:
    text = (SYSBENCH / "sysbench-1.0.20_forced-shutdown_recorded.txt").read_text()
    step = to_step_result(parse_sysbench_output(text))
    assert step.events == 75394


def test_sysbench_1_1_threads_come_from_the_echoed_command_line_when_the_header_is_gone() -> None:
    text = V11.read_text()
    summary = text[text.index("SQL statistics:") :]
    capture = "$ sysbench oltp_update_index --threads=64 --time=60 run\n" + summary
    step = to_step_result(parse_sysbench_output(capture))
    assert (step.workload, step.threads) == ("oltp_update_index", 64)


def test_an_endless_line_is_cut_and_an_interval_flood_is_counted_not_kept() -> None:
    line = "[ 1s ] thds: 4 tps: 1.00 qps: 1.00 (r/w/o: 1.00/0.00/0.00) lat (ms,95%): 0.10 "
    line += "err/s: 0.00 reconn/s: 0.00\n"
    lines = ["x" * 1_000_000 + "\n", *([line] * 50_000)]
    run = parse_sysbench_lines(iter(lines), keep_intervals=False)
    assert (run.interval_count, run.intervals, run.last_interval_t) == (50_000, [], 1.0)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-8-sig"])
def test_parse_reads_utf16_and_bom_logs_like_utf8(
    encoding: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "log.txt"
    path.write_bytes(POINT_SELECT.read_text().encode(encoding))
    assert main(["parse", str(path)]) == 0
    (step,) = json.loads(capsys.readouterr().out)
    assert (step["qps"], step["threads"]) == (76955.79, 4)


def test_parse_with_a_misspelt_workload_says_which_exist(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["parse", "--workload", "oltp_pointselect", str(POINT_SELECT)]) == 1
    err = capsys.readouterr().err
    assert "'oltp_pointselect' is not a sysbench workload" in err
    assert "oltp_point_select" in err


def test_parse_never_prints_nan_or_infinity(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "nan.txt"
    path.write_text(point_select("avg:                                    0.05", "avg: nan"))
    assert main(["parse", str(path)]) == 1
    out = capsys.readouterr().out
    assert json.loads(out) == []
    assert "NaN" not in out


# --- PD stores and operators --------------------------------------------------------------


def stores_body(*infos: object) -> str:
    return json.dumps({"count": len(infos), "stores": list(infos)})


def up_store(sid: object, **status: object) -> dict[str, object]:
    return {"store": {"id": sid, "state_name": "Up"}, "status": status}


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ('{"stores": [1]}', "stores[0]: 1 is not a {'store', 'status'} object"),
        (stores_body(up_store(None)), "stores[0].store.id is missing"),
        (stores_body(up_store(1, leader_size="17MiB")), "(store 1).status.leader_size: '17MiB'"),
        (stores_body(up_store(1, region_size=-5)), "region_size: -5 is below 0"),
        (stores_body(up_store(True)), "store.id: True is not an integer"),
        (stores_body(up_store(1.5)), "store.id: 1.5 is not an integer"),
        ('{"stores": {"a": 1}}', ".stores: {'a': 1} is not a list"),
        (
            '{"stores": [{"store": {"id": 1, "state_name": "Up", "labels": "engine=tiflash"}}]}',
            "labels",
        ),
        ('{"stores": [{"store": {"id": 1, "state_name": 7}}]}', "state_name: 7 is not a string"),
        ('{"stores": [], "x": NaN}', "NaN"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        # Magnitudes no PD sends: past Python's own 4,300-digit limit, past a float, past 2^64.
        (stores_body(up_store(1)).replace('"id": 1', '"id": ' + "9" * 5000), "5,000 digits"),
        (stores_body(up_store(1, leader_size=10**400)), "401 digits"),
        (stores_body(up_store(1)).replace('"id": 1', '"id": 1e999'), "1e999"),
        (stores_body(up_store(1)).replace('"id": 1', '"id": 1e300'), "1e300"),
    ],
)
def test_a_store_value_of_the_wrong_type_or_range_is_refused_naming_field_and_value(
    body: str, words: str
) -> None:
    with pytest.raises(ParseError) as info:
        parse_stores(body)
    assert words in str(info.value)


def test_stores_without_sizes_fail_both_balance_checks_naming_stores_and_field() -> None:
    result = run_pd_check(stores_body(up_store(1), up_store(2, leader_size=5, region_size=5)))
    by_name = {c["name"]: c for c in result["checks"]}
    for name, field in (
        ("leader-size-balance", "leader_size"),
        ("region-size-balance", "region_size"),
    ):
        assert by_name[name]["status"] == "Fail"
        assert by_name[name]["stores"] == [1]
        assert f"no status.{field} for Up TiKV store(s) 1" in by_name[name]["message"]


@pytest.mark.parametrize(
    "text",
    [
        "garbage",
        "the queue was [] yesterday",
        '["balance-leader-scheduler", "balance-region-scheduler"]',
        '{"operators": []}',
        '[{"desc": "balance-leader", "status": [1]}]',
        '[{"brief": "no desc"}]',
        "[1, 2, 3]",
    ],
)
def test_operator_input_that_cannot_be_read_is_an_error_never_none_pending(text: str) -> None:
    with pytest.raises(TidbBenchError, match="PD operators"):
        parse_operators(text)


def test_pd_check_with_garbage_operators_exits_1_instead_of_passing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ops = tmp_path / "ops.txt"
    ops.write_text("garbage here\n")
    assert main(["pd-check", "--stores", str(STORES_V81), "--operators", str(ops)]) == 1
    assert "PD operators: no JSON array found" in capsys.readouterr().err


def test_the_embedded_json_search_is_linear_on_megabytes_of_brackets_and_text() -> None:
    # Quadratic before: every bracket restarted a JSON decode. Now one scan; a count limit
    # refuses inputs that are mostly brackets (PD output has about 1 in 100 characters).
    rng = random.Random(7)
    text = "".join(rng.choice('ab {}[]",:1\n') for _ in range(200_000))
    assert len(list(embedded_json_values(text, line_start=False))) >= 0
    with pytest.raises(ParseError, match="brackets"):
        list(embedded_json_values("[" * 2_000_000))
    with pytest.raises(ParseError, match="no store JSON found"):
        parse_stores("{" + "x" * 4_000_000)


# --- report and run files -----------------------------------------------------------------


def test_report_on_a_missing_path_says_so_without_a_cluster_lookup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    missing = tmp_path / "run.yaml"
    assert main(["report", str(missing)]) == 1
    err = capsys.readouterr().err
    assert f"{missing}: no such file" in err
    assert "Traceback" not in err and "kube" not in err.lower()
    assert main(["report", str(tmp_path)]) == 1
    assert "not a regular file" in capsys.readouterr().err


def test_report_on_a_name_without_a_cluster_says_there_is_none(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert main(["report", "nightly-1"]) == 1
    assert "no such file, and no cluster to look up" in capsys.readouterr().err


BILLION_LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("a:\n" + "".join("  " * i + "- \n" for i in range(1, 400)), "nested deeper"),
        ("[" * 100_000, "nested deeper"),
        (BILLION_LAUGHS, "aliases"),
        ("kind: BenchmarkRun\nstatus: {phase: Succeeded, steps: [{qps: .nan}]}\n", "finite"),
        ("kind: BenchmarkRun\nstatus: {phase: Succeeded, steps: [{qps: '-Infinity'}]}\n", "finite"),
        (
            'kind: ConfigMap\nmetadata: {name: r}\ndata: {steps.json: "[{\\"qps\\": NaN}]"}\n',
            "NaN",
        ),
        ("kind: ConfigMap\nmetadata: {name: r}\ndata: {steps.json: '[1, 2]'}\n", "list of step"),
        ("kind: List\nitems: 5\n", "List of malformed"),
        # Found by the fuzzer (make fuzz, target documents): a null owner reference.
        (
            "kind: ConfigMap\nmetadata:\n  name: r\n  ownerReferences:\n  - \n"
            "data: {steps.json: '[{\"qps\": 1.0}]'}\n",
            None,
        ),
        (
            "kind: ConfigMap\nmetadata: {name: r, ownerReferences: 5}\n"
            "data: {steps.json: '[{\"qps\": 1.0}]'}\n",
            None,
        ),
        ("kind: BenchmarkRun\nmetadata: [1]\nstatus: {}\n", "metadata"),
    ],
)
def test_a_saved_run_document_that_is_hostile_is_refused(text: str, words: str | None) -> None:
    if words is None:  # readable after all: the odd part is skipped, not a traceback
        assert load_report_source(text, "run.yaml")[0] == "r"
        return
    with pytest.raises(TidbBenchError, match=words):
        load_report_source(text, "run.yaml")


@pytest.mark.parametrize(
    "text",
    [BILLION_LAUGHS, "[" * 50_000, "spec: {threads: [.inf]}", "workloads: [x]\ntarget: [1, 2]"],
)
def test_a_hostile_run_file_is_a_spec_error(text: str) -> None:
    with pytest.raises(SpecError, match=r"RUN\.yaml|spec\.target"):
        run_local_sweep(text, host="h", port=1, user="u", password="", out=None)


@pytest.mark.parametrize("bound", ["nan", "inf", "-1", "lots"])
def test_pd_check_refuses_a_skew_bound_that_cannot_judge(
    bound: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["pd-check", "--stores", str(STORES_V81), "--max-leader-size-skew", bound])
    assert info.value.code == 2
    assert "--max-leader-size-skew" in capsys.readouterr().err


def test_a_reader_that_leaves_early_gets_no_traceback() -> None:
    # `tidb-bench parse ... | head -1`: the pipe closes while the JSON is being written.
    import subprocess
    import sys

    with subprocess.Popen(
        [sys.executable, "-m", "tidb_bench_operator.cli", "parse", *[str(POINT_SELECT)] * 160],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.read(1)
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 141
    assert "Traceback" not in err
