"""The benchmark pod's runner: the termination message, credentials, the sysbench exec, args.

sysbench itself is replaced by a stub script (a fake of an external binary) that reports
how it was called; real sysbench against a real database is tests/e2e's business.
"""

from __future__ import annotations

import base64
import io
import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tidb_bench_operator.cli import build_parser
from tidb_bench_operator.config import Credentials, credentials_from_env
from tidb_bench_operator.domain.api.resources import parse_run_spec
from tidb_bench_operator.domain.api.runner_message import (
    MAX_TERMINATION_MESSAGE,
    RunnerFailure,
    StepReport,
    termination_text,
)
from tidb_bench_operator.domain.manifests import (
    build_dataset_runner_args,
    build_step_runner_args,
    compute_endpoint,
)
from tidb_bench_operator.domain.sysbench.rate import client_rates
from tidb_bench_operator.errors import DatabaseError, SysbenchError, TidbBenchError
from tidb_bench_operator.runner import (
    SYSBENCH_STOP_SECONDS,
    StepPlan,
    exec_sysbench,
    failure_report,
    shown_argv,
    wait_for_start,
)
from tidb_bench_operator.runner_entry import plan_from_args


def termination_message(doc: dict[str, Any] | RunnerFailure) -> str:
    """The termination message of a step report given as its document (or of a failure)."""
    return termination_text(
        doc if isinstance(doc, RunnerFailure) else StepReport.model_validate(doc)
    )


def failure_document(exc: Exception) -> dict[str, Any]:
    """The runner's failure report for `exc`, as the document the controller reads."""
    return failure_report(exc).model_dump(by_alias=True, mode="json")


PASSWORD = "s3cr3t-pa55-w0rd"


def step_document(histogram_rows: int = 0, notes: int = 1, note_length: int = 40) -> dict[str, Any]:
    """run_step's result document, with a histogram and notes of chosen sizes."""
    return {
        "v": 1,
        "ok": True,
        "result": {
            "workload": "oltp_point_select", "threads": 64, "clients": 1,
            "tps": 50300.94, "qps": 50300.94, "readQps": 50300.94, "writeQps": 0.0,
            "otherQps": 0.0,
            "latencyMs": {"min": 0.27, "avg": 1.27, "max": 24.1, "percentile": 95, "value": 1.96},
            "errorsPerSec": 0.0, "reconnectsPerSec": 0.0, "events": 3018053,
            "durationSeconds": 60.0, "sysbenchVersion": "1.0.20",
        },
        "startedAt": "2024-06-01T02:00:08+00:00",
        "lateSeconds": 0.012,
        "late": False,
        "cpu": {"used": 1.2, "available": 4.0, "saturated": False},
        "notes": [f"note {i}: " + "n" * note_length for i in range(notes)],
        "histogram": [[round(0.1 + i * 0.013, 3), 1000 + i] for i in range(histogram_rows)],
        "series": [{"t": 10.0 * i, "qps": 50000.0} for i in range(1, 400)],
    }  # fmt: skip


# --- termination message ----------------------------------------------------------------------


def test_a_small_document_keeps_everything_but_the_series() -> None:
    doc = step_document(histogram_rows=20)
    text = termination_message(doc)
    back = json.loads(text)
    assert back == {k: v for k, v in doc.items() if k != "series"}


def test_a_large_histogram_is_dropped_first_and_flagged_for_the_controller() -> None:
    doc = step_document(histogram_rows=800, notes=2)
    text = termination_message(doc)
    assert len(text.encode()) <= MAX_TERMINATION_MESSAGE
    back = json.loads(text)
    assert "histogram" not in back
    assert back["histogramDropped"] is True
    assert back["notes"] == doc["notes"], "a user-facing note is the controller's to add"
    assert back["result"] == doc["result"]


def test_notes_are_dropped_last_when_the_histogram_alone_is_not_enough() -> None:
    doc = step_document(histogram_rows=800, notes=60, note_length=200)
    text = termination_message(doc)
    assert len(text.encode()) <= MAX_TERMINATION_MESSAGE
    back = json.loads(text)
    assert "histogram" not in back
    assert 0 < len(back["notes"]) < 60
    assert back["notes"] == doc["notes"][: len(back["notes"])], "the first notes are kept"
    assert back["result"] == doc["result"]


def test_making_the_message_leaves_the_document_unchanged() -> None:
    doc = step_document(histogram_rows=800, notes=60, note_length=200)
    before = json.loads(json.dumps(doc))
    first = termination_message(doc)
    assert doc == before
    assert termination_message(doc) == first, "the file and the log line say the same"


def test_a_failure_with_a_long_non_ascii_message_still_fits_in_4_kib() -> None:
    text = termination_message(failure_report(TidbBenchError("表 sbtest1 不存在\n" * 400)))
    assert len(text.encode()) <= MAX_TERMINATION_MESSAGE
    back = json.loads(text)
    assert back["ok"] is False
    assert back["message"].startswith("表 sbtest1 不存在")


# --- failure documents ------------------------------------------------------------------------


def test_a_sysbench_failure_document_names_its_kind() -> None:
    exc = SysbenchError("connect", "could not connect to MySQL server on host 'basic-tidb'")
    assert failure_document(exc) == {
        "v": 1,
        "ok": False,
        "kind": "connect",
        "message": "could not connect to MySQL server on host 'basic-tidb'",
    }


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (
            TidbBenchError("dataset.prepare is Never but sbtest has sbtest1: missing"),
            "TidbBenchError",
        ),
        (DatabaseError(1045, "Access denied for user 'bench'"), "DatabaseError"),
    ],
)
def test_other_failures_are_named_by_their_exception_type(exc: Exception, kind: str) -> None:
    doc = failure_document(exc)
    assert (doc["ok"], doc["kind"], doc["message"]) == (False, kind, str(exc))


def test_a_failure_message_is_capped_at_3000_characters() -> None:
    assert len(failure_document(TidbBenchError("x" * 10_000))["message"]) == 3000


# --- credentials ------------------------------------------------------------------------------


def test_the_credentials_repr_hides_the_password() -> None:
    creds = Credentials("bench", PASSWORD)
    for shown in (repr(creds), str(creds), f"{creds}", f"{creds!r}"):
        assert PASSWORD not in shown
        assert "bench" in shown


def test_credentials_come_from_the_environment_with_defaults() -> None:
    env = {"TIDB_BENCH_USER": "bench", "TIDB_BENCH_PASSWORD": PASSWORD}
    assert credentials_from_env(env) == Credentials("bench", PASSWORD)
    assert credentials_from_env({}) == Credentials("root", "")


# --- exec_sysbench with a stub sysbench -------------------------------------------------------

STUB = """#!{python}
import base64, json, os, stat, sys
cfg = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--config-file="))
print("ARGV " + json.dumps(sys.argv))
print("MODE " + oct(stat.S_IMODE(os.stat(cfg).st_mode)))
print("CONFIG " + base64.b64encode(open(cfg, "rb").read()).decode())
print("CONFIG-PATH " + cfg)
with open("/proc/self/cmdline", "rb") as f:
    print("CMDLINE " + json.dumps(f.read().decode()))
sys.exit({exit_code})
"""


def stub_sysbench(tmp_path: Path, exit_code: int = 0) -> str:
    path = tmp_path / "sysbench"
    path.write_text(STUB.format(python=sys.executable, exit_code=exit_code))
    path.chmod(0o755)
    return str(path)


def lines_of(output: str) -> dict[str, str]:
    return {line.split(" ", 1)[0]: line.split(" ", 1)[1] for line in output.splitlines()}


def test_sysbench_gets_the_password_in_a_0600_config_file_and_never_in_its_argv(
    tmp_path: Path,
) -> None:
    argv = [stub_sysbench(tmp_path), "oltp_point_select", "--mysql-user=bench", "run"]
    ex = exec_sysbench(argv, Credentials("bench", PASSWORD), out=None)
    seen = lines_of(ex.output)
    called = json.loads(seen["ARGV"])
    assert called[0] == argv[0]
    assert called[1].startswith("--config-file="), "before the test name, so driver options apply"
    assert called[2:] == argv[1:]
    assert PASSWORD not in seen["ARGV"] and PASSWORD not in seen["CMDLINE"]
    assert seen["MODE"] == "0o600"
    # Quoted: sysbench cuts a bare value at whitespace (domain/sysbench/config_file.py).
    assert base64.b64decode(seen["CONFIG"]).decode() == f'mysql-password="{PASSWORD}"\n'
    assert not Path(seen["CONFIG-PATH"]).exists(), "the config file is gone once sysbench exits"
    assert ex.exit_code == 0
    assert ex.wall_seconds > 0


def test_sysbench_output_is_streamed_with_a_prefix_and_its_exit_code_kept(tmp_path: Path) -> None:
    out = io.StringIO()
    ex = exec_sysbench(
        [stub_sysbench(tmp_path, exit_code=3), "run"],
        Credentials("u", "p"),
        out,
        prefix="[warm-up] ",
    )
    assert ex.exit_code == 3
    streamed = out.getvalue().splitlines()
    assert streamed and all(line.startswith("[warm-up] ") for line in streamed)
    assert "".join(line.removeprefix("[warm-up] ") + "\n" for line in streamed) == ex.output


ACCOUNT_STUB = """#!{python}
print("FATAL: error 1045: Access denied for user 'tok-3f9a'@'10.0.0.5' (using password: YES)")
print("Dropping table 'sbtest1'...")
"""


def test_sysbench_output_hides_the_secret_user_and_password_from_log_and_report(
    tmp_path: Path,
) -> None:
    path = tmp_path / "sysbench"
    path.write_text(ACCOUNT_STUB.format(python=sys.executable))
    path.chmod(0o755)
    out = io.StringIO()
    ex = exec_sysbench([str(path), "run"], Credentials("tok-3f9a", "pw 1"), out)
    assert "tok-3f9a" not in ex.output and "tok-3f9a" not in out.getvalue()
    assert "user '<user>'@'10.0.0.5'" in ex.output
    assert "'sbtest1'" in ex.output, "only the quoted account is hidden, not every word"


@pytest.mark.parametrize(
    "password",
    [" lead and trail ", 'with "double"', "with 'single'", "back\\slash#=;", "pässwörd", "x" * 238],
)
def test_the_config_file_quotes_any_password_sysbench_can_carry(
    tmp_path: Path, password: str
) -> None:
    ex = exec_sysbench([stub_sysbench(tmp_path), "run"], Credentials("u", password), out=None)
    line = base64.b64decode(lines_of(ex.output)["CONFIG"]).decode()
    quote = "'" if '"' in password else '"'
    assert line == f"mysql-password={quote}{password}{quote}\n"


@pytest.mark.parametrize(
    ("password", "kind"),
    [("a\nb", "a newline"), ("a\"b'c", "both a double quote"), ("x" * 239, "239 bytes")],
)
def test_a_password_sysbench_cannot_carry_fails_by_its_kind_never_its_value(
    tmp_path: Path, password: str, kind: str
) -> None:
    with pytest.raises(SysbenchError) as info:
        exec_sysbench([stub_sysbench(tmp_path), "run"], Credentials("u", password), out=None)
    assert info.value.kind == "password"
    assert kind in str(info.value) and password not in str(info.value)


def test_printed_command_lines_mask_the_user_and_any_password() -> None:
    text = shown_argv(["sysbench", "--mysql-user=tok-3f9a", "--mysql-password=pw", "run"])
    assert text == "sysbench --mysql-user=<user> --mysql-password=<password> run"


def test_the_runner_connection_names_where_the_user_came_from_not_the_user() -> None:
    plan = StepPlan(workload="oltp_point_select", threads=1, duration=1, host="db", port=4000)
    dsn = plan.dsn(Credentials("tok-3f9a", "pw"))
    assert "tok-3f9a" not in dsn.where() and "tok-3f9a" not in repr(dsn)
    assert dsn.where() == "db:4000 as the user in TIDB_BENCH_USER (the run's credentials Secret)"


def test_a_missing_sysbench_says_how_to_install_it(tmp_path: Path) -> None:
    with pytest.raises(SysbenchError) as info:
        exec_sysbench([str(tmp_path / "no-sysbench-here"), "run"], Credentials("u", "p"), None)
    assert info.value.kind == "not-installed"
    assert "apt-get install sysbench" in str(info.value)


# --- waiting for the common start -------------------------------------------------------------


def test_no_start_time_means_start_now_and_not_late() -> None:
    assert wait_for_start(None, lambda: datetime.now(UTC)) == 0.0


def test_a_start_time_in_the_past_returns_how_late_we_are() -> None:
    now = datetime(2024, 6, 1, 2, 0, 10, 500000, tzinfo=UTC)
    start = datetime(2024, 6, 1, 2, 0, 8, tzinfo=UTC)
    assert wait_for_start(start, lambda: now) == pytest.approx(2.5)


def test_a_start_time_ahead_is_waited_for_and_then_not_late() -> None:
    start = datetime.now(UTC) + timedelta(seconds=0.2)
    began = time.monotonic()
    assert wait_for_start(start, lambda: datetime.now(UTC)) == 0.0
    assert time.monotonic() - began >= 0.15


# --- Job args -> plan -------------------------------------------------------------------------


def test_a_step_jobs_args_parse_back_into_the_same_plan() -> None:
    spec = parse_run_spec(
        {
            "cluster": {"name": "basic", "namespace": "tidb-cluster"},
            "credentials": {"secretRef": {"name": "creds"}},
            "dataset": {"tables": 8, "tableSize": 250000, "autoInc": False},
            "durationSeconds": 120,
            "warmupSeconds": 15,
            "reportIntervalSeconds": 5,
            "percentile": 99,
            "randType": "uniform",
            "ignoreErrors": "1062,2013,8028",
            "extraArgs": ["--range-size=5", "--db-ps-mode=disable"],
            "database": "bench_db",
        }
    )
    endpoint = compute_endpoint(spec, "bench")
    start = datetime(2024, 6, 1, 2, 0, 8, tzinfo=UTC)
    args = build_step_runner_args(
        spec, endpoint, workload="oltp_read_only", threads=128, start_at=start
    )
    parsed = build_parser().parse_args(["runner", *args])
    assert (parsed.verb, parsed.action) == ("runner", "step")
    assert plan_from_args(parsed) == StepPlan(
        workload="oltp_read_only",
        threads=128,
        duration=120,
        host="basic-tidb.tidb-cluster",
        port=4000,
        db="bench_db",
        tables=8,
        table_size=250000,
        warmup=15,
        report_interval=5,
        percentile=99,
        rand_type="uniform",
        ignore_errors="1062,2013,8028",
        auto_inc=False,
        extra_args=["--range-size=5", "--db-ps-mode=disable"],
        start_at=start,
        max_start_skew=3.0,
    )
    assert parsed.termination_log == "/dev/termination-log"


def test_a_prepare_jobs_args_parse_back_with_the_policy() -> None:
    spec = parse_run_spec(
        {
            "target": {"host": "10.0.0.7", "port": 4001},
            "credentials": {"secretRef": {"name": "creds"}},
            "dataset": {"tables": 2, "tableSize": 1000, "prepare": "Always"},
        }
    )
    args = build_dataset_runner_args(
        spec, compute_endpoint(spec, "bench"), action="prepare", workload="oltp_point_select"
    )
    parsed = build_parser().parse_args(["runner", *args])
    assert parsed.policy == "Always"
    assert (parsed.analyze, parsed.warm_up) == ("on", "on")
    plan = plan_from_args(parsed)
    assert (plan.host, plan.port, plan.tables, plan.table_size, plan.auto_inc) == (
        "10.0.0.7", 4001, 2, 1000, True,
    )  # fmt: skip
    assert plan.start_at is None


def test_switched_off_analyze_and_warm_up_reach_the_prepare_job_as_off() -> None:
    spec = parse_run_spec(
        {
            "target": {"host": "10.0.0.7"},
            "credentials": {"secretRef": {"name": "creds"}},
            "dataset": {"analyze": False, "warmUp": False},
        }
    )
    args = build_dataset_runner_args(
        spec, compute_endpoint(spec, "bench"), action="prepare", workload="oltp_point_select"
    )
    parsed = build_parser().parse_args(["runner", *args])
    assert (parsed.analyze, parsed.warm_up) == ("off", "off")


# --- SIGTERM: the runner is PID 1 of its pod and must stop sysbench itself ---------------------

STUBBORN = """#!{python}
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
open({pids!r}, "w").write(f"{{os.getpid()}} {{child.pid}}")
print("SQL statistics:", flush=True)
time.sleep(60)
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def catches_sigterm(pid: int) -> bool:
    """Whether process `pid` has a handler for SIGTERM (SigCgt in /proc/<pid>/status)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    caught = next(
        (line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), "0"
    )
    return bool(int(caught, 16) & (1 << (signal.SIGTERM - 1)))


@pytest.mark.parametrize("when", ["measuring", "waiting for the start"])
def test_sigterm_stops_sysbench_and_its_children_within_seconds_and_reports_cancelled(
    tmp_path: Path, when: str
) -> None:
    pids = tmp_path / "pids"
    stub = tmp_path / "sysbench"
    stub.write_text(STUBBORN.format(python=sys.executable, pids=str(pids)))
    stub.chmod(0o755)
    term = tmp_path / "termination-log"
    start_at = datetime.now(UTC) + timedelta(seconds=60 if when != "measuring" else 0)
    args = [
        sys.executable, "-m", "tidb_bench_operator.cli", "runner", "step",
        "--workload=oltp_point_select", "--threads=1", "--duration=60", "--host=127.0.0.1",
        "--port=1", f"--termination-log={term}", f"--start-at={start_at.isoformat()}",
    ]  # fmt: skip
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    errors = tmp_path / "stderr"
    with errors.open("wb") as err:
        runner = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.monotonic() + 20
    if when == "measuring":
        while not (pids.exists() and pids.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        sysbench, child = (int(p) for p in pids.read_text().split())
    else:
        # Until the runner has its SIGTERM handler (importing the package takes ~1 s, more on
        # a busy machine): before that a SIGTERM is the default one and proves nothing.
        while not catches_sigterm(runner.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
    sent = time.monotonic()
    runner.send_signal(signal.SIGTERM)
    code = runner.wait(timeout=10)
    took = time.monotonic() - sent
    assert code == 143, errors.read_text()
    assert took < SYSBENCH_STOP_SECONDS + 2, took
    if when == "measuring":
        assert not alive(sysbench) and not alive(child), "sysbench's whole group is gone"
    doc = json.loads(term.read_text())
    assert (doc["ok"], doc["kind"]) == (False, "cancelled")


def test_a_rate_steps_share_reaches_the_runner_and_sysbench_as_rate() -> None:
    spec = parse_run_spec(
        {
            "target": {"host": "10.0.0.7"},
            "credentials": {"secretRef": {"name": "creds"}},
            "threads": [8],
            "rates": [1001],
            "clients": 2,
        }
    )
    endpoint = compute_endpoint(spec, "bench")
    shares = client_rates(spec.rates[0], spec.clients)
    plans = []
    for share in shares:
        args = build_step_runner_args(
            spec, endpoint, workload="oltp_point_select", threads=8, start_at=None, rate=share
        )
        plans.append(plan_from_args(build_parser().parse_args(["runner", *args])))
    assert [p.rate for p in plans] == [501, 500]
    closed = build_step_runner_args(
        spec, endpoint, workload="oltp_point_select", threads=8, start_at=None
    )
    assert not any(a.startswith("--rate") for a in closed)
    assert plan_from_args(build_parser().parse_args(["runner", *closed])).rate is None


def _step_args(raw: dict[str, object], workload: str, threads: int) -> list[str]:
    spec = parse_run_spec(
        {"target": {"host": "10.0.0.7"}, "credentials": {"secretRef": {"name": "c"}}, **raw}
    )
    return build_step_runner_args(
        spec, compute_endpoint(spec, "bench"), workload=workload, threads=threads, start_at=None
    )


def test_write_steps_end_after_their_events_and_read_steps_after_their_time() -> None:
    raw: dict[str, object] = {"threads": [4, 8], "writeEvents": [1000, 3000]}
    write = _step_args(raw, "oltp_write_only", 8)
    assert "--events=3000" in write
    plan = plan_from_args(build_parser().parse_args(["runner", *write]))
    assert plan.events == 3000 and plan.duration == 60  # the time cap stays
    assert not any(a.startswith("--events") for a in _step_args(raw, "oltp_read_only", 8))


def test_the_pingcap_preset_fills_events_pause_and_rand_type_the_run_left_unset() -> None:
    raw: dict[str, object] = {"threads": [100, 200, 400], "preset": "PingCAP"}
    assert {"--events=8000000", "--rand-type=uniform"} <= set(
        _step_args(raw, "oltp_read_write", 200)
    )
    read = _step_args(raw, "oltp_point_select", 400)
    assert "--rand-type=uniform" in read and not any(a.startswith("--events") for a in read)
    # What the run sets wins over the preset.
    own = _step_args({**raw, "randType": "pareto", "writeEvents": [1, 2, 3]}, "oltp_insert", 400)
    assert {"--events=3", "--rand-type=pareto"} <= set(own)


CUSTOM_STUB = """#!{python}
import json, os, sys
script, command = sys.argv[2], sys.argv[-1]
name = os.path.basename(script)
if "nocleanup" in name and command == "cleanup":
    print(f"'{{name}}' test does not implement the 'cleanup' command.")
    sys.exit(1)
if "broken" in name:
    print(f"FATAL: {{script}}:3: attempt to call a nil value")
    sys.exit(1)
print("RAN " + json.dumps([command, os.environ.get("LUA_PATH"), sys.argv[3:-1]]))
"""


def test_custom_prepare_and_cleanup_run_the_scripts_own_commands_with_their_lua_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tidb_bench_operator.domain.sysbench import Command
    from tidb_bench_operator.domain.sysbench.custom import CustomScript, script_path
    from tidb_bench_operator.runner_entry import custom_dataset

    stub = tmp_path / "sysbench"
    stub.write_text(CUSTOM_STUB.format(python=sys.executable))
    stub.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")

    def script(name: str, key: str) -> CustomScript:
        return CustomScript(name=name, path=script_path(name, key), configmap=f"ns/{name}",
                            key=key, options={"scale": "int"}, args=["--scale=2"])  # fmt: skip

    plan = StepPlan(workload="oltp_point_select", threads=1, duration=1, host="db", port=4000)
    creds = Credentials("u", "p")
    orders, lean = script("orders", "orders.lua"), script("lean", "nocleanup.lua")

    def ran(policy: str, command: Command) -> tuple[list[str], list[list[Any]]]:
        out = io.StringIO()
        done = custom_dataset(plan, creds, [orders, lean], command, policy, out)
        calls = [
            json.loads(line[4:]) for line in out.getvalue().splitlines() if line.startswith("RAN ")
        ]
        return done, calls

    # Always: each script's cleanup, then its prepare, with its own args and its Lua path.
    done, calls = ran("Always", "prepare")
    assert done == ["orders", "lean"]
    lua = "/var/run/tidb-bench/workloads/orders/?.lua;;"
    assert calls[0][:2] == ["cleanup", lua] and calls[1][:2] == ["prepare", lua]
    assert "--scale=2" in calls[1][2] and "--threads=8" in calls[1][2]
    assert [c[0] for c in calls[2:]] == ["prepare"], "lean defines no cleanup: passed over"
    assert [c[0] for c in ran("IfMissing", "prepare")[1]] == ["prepare", "prepare"]
    assert ran("Never", "prepare") == ([], [])
    done, calls = ran("IfMissing", "cleanup")
    assert done == ["orders"] and [c[0] for c in calls] == ["cleanup"]
    # A failing script: its ConfigMap and key, the mounted path shown as the key.
    with pytest.raises(SysbenchError) as err:
        custom_dataset(plan, creds, [script("bad", "broken.lua")], "prepare", "IfMissing", None)
    assert str(err.value) == (
        "custom workload 'bad' (ConfigMap ns/bad key 'broken.lua'): sysbench failed: "
        "key broken.lua:3: attempt to call a nil value; see the full output"
    )
