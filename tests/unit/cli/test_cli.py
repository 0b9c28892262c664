"""`tidb-bench parse` and `tidb-bench pd-check`, run in-process on recorded outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tidb_bench_operator import __version__
from tidb_bench_operator.cli import main

DATA = Path(__file__).resolve().parents[2] / "data"
SYSBENCH = DATA / "sysbench"
POINT_SELECT = SYSBENCH / "sysbench-1.0.20_oltp_point_select_threads4_recorded.txt"
READ_WRITE_P99 = SYSBENCH / "sysbench-1.0.20_oltp_read_write_threads4_p99_recorded.txt"
CONNECT_REFUSED = SYSBENCH / "sysbench-1.0.20_connect-refused_run_recorded.txt"
STORES_V81 = DATA / "pd" / "pd-api-v1-stores_v8.1.0_tidb-operator-testdata.json"
OFFLINE_STORE = (
    DATA
    / "pd"
    / "pd-ctl-store-check-offline_operator-address_v5.1.0-alpha_pd-issue3780_FRAGMENT.txt"
)
STEP_KEYS = [
    "workload", "threads", "clients", "tps", "qps", "readQps", "writeQps", "otherQps",
    "latencyMs", "errorsPerSec", "reconnectsPerSec", "events", "durationSeconds",
    "sysbenchVersion",
]  # fmt: skip
CHECK_KEYS = ["name", "status", "message", "stores"]


# --- parse --------------------------------------------------------------------------------------


def test_parse_prints_a_json_array_of_step_results_with_the_fixed_keys(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["parse", str(POINT_SELECT)]) == 0
    out = capsys.readouterr()
    results = json.loads(out.out)
    assert isinstance(results, list) and len(results) == 1
    step = results[0]
    assert list(step) == STEP_KEYS
    assert list(step["latencyMs"]) == ["min", "avg", "max", "percentile", "value"]
    assert (step["workload"], step["threads"], step["clients"]) == ("oltp_point_select", 4, 1)
    assert step["qps"] == 76955.79
    assert step["latencyMs"] == {
        "min": 0.02,
        "avg": 0.05,
        "max": 25.17,
        "percentile": 95,
        "value": 0.1,
    }
    assert step["events"] == 769714
    assert step["sysbenchVersion"] == "1.0.20"
    assert out.err == ""


def test_parse_takes_several_files_in_order(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parse", str(POINT_SELECT), str(READ_WRITE_P99), "--format", "json"]) == 0
    results = json.loads(capsys.readouterr().out)
    assert [(r["workload"], r["latencyMs"]["percentile"]) for r in results] == [
        ("oltp_point_select", 95),
        ("oltp_read_write", 99),
    ]


def test_parse_of_a_failed_run_exits_1_and_says_why_on_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["parse", str(CONNECT_REFUSED)]) == 1
    out = capsys.readouterr()
    assert json.loads(out.out) == []
    assert out.err == (
        f"tidb-bench parse: {CONNECT_REFUSED}: sysbench 1.0.20 could not connect to MySQL server "
        "on host '127.0.0.1', port 1: error 2002: Can't connect to server on '127.0.0.1' (115); "
        "nothing accepts connections there: check target host/port and that TiDB is up\n"
    )


def test_parse_still_prints_the_good_files_when_one_failed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["parse", str(POINT_SELECT), str(CONNECT_REFUSED)]) == 1
    out = capsys.readouterr()
    assert [r["threads"] for r in json.loads(out.out)] == [4]
    assert out.err.startswith(f"tidb-bench parse: {CONNECT_REFUSED}: ")


def test_parse_as_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parse", str(POINT_SELECT), str(READ_WRITE_P99), "--format", "table"]) == 0
    lines = [line.rstrip() for line in capsys.readouterr().out.splitlines()]
    assert lines == [
        "WORKLOAD           THREADS  CLIENTS  QPS        TPS        LATENCY(ms)  ERR/S",
        "oltp_point_select  4        1        76,955.79  76,955.79  p95 0.10     0.00",
        "oltp_read_write    4        1        28,428.94  1,421.45   p99 7.30     0.00",
    ]


def test_parse_of_a_missing_file_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.txt"
    assert main(["parse", str(missing)]) == 1
    assert capsys.readouterr().err == (
        f"tidb-bench parse: cannot read {missing}: No such file or directory\n"
    )


# --- pd-check -----------------------------------------------------------------------------------


def field_note_stores(path: Path) -> Path:
    """docs/field-story.md's four stores, saved as GET /pd/api/v1/stores (sizes in MiB)."""
    rows = [(1, 130, 771, 86), (2, 121, 779, 141), (3, 110, 795, 122), (4, 41, 769, 689)]
    stores = [
        {
            "store": {
                "id": sid,
                "address": f"basic-tikv-{sid - 1}.basic-tikv-peer.tidb-cluster.svc:20160",
                "state_name": "Up",
            },
            "status": {"region_count": rc, "region_size": rs, "leader_size": ls},
        }
        for sid, rc, rs, ls in rows
    ]
    path.write_text(json.dumps({"count": 4, "stores": stores}, indent=2))
    return path


def test_pd_check_json_has_the_fixed_shape_and_exits_0_when_balanced(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["pd-check", "--stores", str(STORES_V81), "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert list(result) == ["checks"]
    assert [list(c) for c in result["checks"]] == [CHECK_KEYS] * 3
    assert [(c["name"], c["status"]) for c in result["checks"]] == [
        ("store-state", "Pass"),
        ("leader-size-balance", "Pass"),
        ("region-size-balance", "Pass"),
    ]
    assert result["checks"][0]["stores"] == [1, 4, 5], "TiFlash store 20 is not a TiKV store"


def test_pd_check_fails_the_field_note_leader_size_skew_with_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stores = field_note_stores(tmp_path / "stores.json")
    assert main(["pd-check", "--stores", str(stores), "--format", "json"]) == 1
    checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)["checks"]}
    leader = checks["leader-size-balance"]
    assert leader["status"] == "Fail"
    assert leader["stores"][0] == 4
    assert "689" in leader["message"]
    assert checks["region-size-balance"]["status"] == "Pass", "region_size is even"
    assert checks["store-state"]["status"] == "Pass"


def test_pd_check_skew_bounds_come_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stores = field_note_stores(tmp_path / "stores.json")
    args = ["pd-check", "--stores", str(stores), "--format", "json", "--max-leader-size-skew", "10"]
    assert main(args) == 0
    checks = {c["name"]: c["status"] for c in json.loads(capsys.readouterr().out)["checks"]}
    assert checks["leader-size-balance"] == "Pass"


def test_pd_check_adds_pending_operators_when_given_an_operators_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ops = tmp_path / "operators.json"
    ops.write_text("[]")
    assert (
        main(["pd-check", "--stores", str(STORES_V81), "--operators", str(ops), "--format", "json"])
        == 0
    )
    names = [c["name"] for c in json.loads(capsys.readouterr().out)["checks"]]
    assert names[-1] == "pending-operators"


def test_pd_check_table_shows_the_failing_store(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pd-check", "--stores", str(OFFLINE_STORE)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["CHECK", "STATUS", "STORES", "MESSAGE"]
    assert lines[1].split()[:3] == ["store-state", "Fail", "1531026"]
    assert "Offline" in lines[1]


def test_pd_check_on_a_file_that_is_not_store_output_exits_1_with_a_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    junk = tmp_path / "stores.json"
    junk.write_text("Error: [500] no leader\n")
    assert main(["pd-check", "--stores", str(junk)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tidb-bench pd-check: ")
    assert err.count("\n") == 1, "one line, no traceback"


# --- the command itself -------------------------------------------------------------------------


def test_no_verb_prints_the_help_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    err = capsys.readouterr().err
    for verb in ("operator", "runner", "parse", "pd-check", "run"):
        assert verb in err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out == f"tidb-bench {__version__}\n"
