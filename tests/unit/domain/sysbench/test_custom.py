"""Custom workloads (docs/workloads.md): the spec's checks, the argv, the runner's argument and
the failure messages that name the ConfigMap and key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tidb_bench_operator.cli.run import run_local_sweep
from tidb_bench_operator.config import Settings
from tidb_bench_operator.domain.api.resources import parse_run_spec
from tidb_bench_operator.domain.sysbench import (
    build_sysbench_argv,
    parse_sysbench_output,
    to_step_result,
)
from tidb_bench_operator.domain.sysbench.custom import (
    CustomScript,
    custom_failure,
    name_files,
    not_implemented,
    validate_custom_args,
)
from tidb_bench_operator.errors import ParseError, SpecError, SysbenchError

DATA = Path(__file__).resolve().parents[3] / "data" / "sysbench"
TPCC: dict[str, Any] = {
    "name": "tpcc",
    "configMapRef": {"name": "tpcc"},
    "script": "tpcc.lua",
    "options": {"scale": "int", "tables": "int", "use_fk": "int", "trx_level": "word"},
    "args": ["--scale=10", "--tables=2", "--use-fk=0", "--trx_level=RC", "--rand-seed=7"],
}
SCRIPT = CustomScript(
    name="tpcc", path="/var/run/tidb-bench/workloads/tpcc/tpcc.lua", configmap="ns/tpcc",
    key="tpcc.lua", options={"scale": "int"}, args=["--scale=10"],
)  # fmt: skip


def spec(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "target": {"host": "tidb"},
        "credentials": {"secretRef": {"name": "db"}},
        "workloads": ["tpcc"],
        "customWorkloads": [TPCC],
    }
    base.update(changes)
    return base


def error_of(data: dict[str, Any]) -> str:
    with pytest.raises(SpecError) as err:
        parse_run_spec(data)
    return str(err.value)


def test_a_custom_workload_is_named_in_workloads_beside_built_in_tests() -> None:
    parsed = parse_run_spec(spec(workloads=["oltp_point_select", "tpcc"]))
    assert parsed.builtin_workloads() == ["oltp_point_select"]
    entry = parsed.custom_workload("tpcc")
    assert entry is not None and parsed.custom_workload("oltp_point_select") is None
    script = entry.script_for("team-a")
    assert script.path == "/var/run/tidb-bench/workloads/tpcc/tpcc.lua"
    assert script.source == "ConfigMap team-a/tpcc key 'tpcc.lua'"
    assert CustomScript.from_arg(script.to_arg()) == script


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"workloads": ["oltp_pointselect"], "customWorkloads": []},
         "workloads[0]: unknown workload 'oltp_pointselect' (one of sysbench's tests "
         "(oltp_point_select, "),
        ({"workloads": ["tpcc", "tpcc2"]},
         "workloads[1]: unknown workload 'tpcc2'"),
        ({"workloads": ["oltp_point_select"]},
         "customWorkloads[0].name: 'tpcc' is not in spec.workloads (add it to spec.workloads, "
         "or remove the entry)"),
        ({"customWorkloads": [TPCC, TPCC]}, "customWorkloads[1]: 'tpcc' is listed twice"),
        ({"customWorkloads": [{**TPCC, "name": "oltp_point_select"}],
          "workloads": ["oltp_point_select"]},
         "customWorkloads[0].name: String should match pattern"),
        ({"customWorkloads": [{**TPCC, "script": "tpcc.sh"}]},
         "customWorkloads[0].script: String should match pattern"),
        ({"customWorkloads": [{**TPCC, "args": ["--warehouses=3"]}]},
         "customWorkloads[0].args[0]: --warehouses is not in this workload's options"),
        ({"customWorkloads": [{**TPCC, "args": ["--scale=ten"]}]},
         "customWorkloads[0].args[0]: --scale must be a non-negative integer, got 'ten'"),
        ({"customWorkloads": [{**TPCC, "args": ["--scale=1;rm"]}]},
         "customWorkloads[0].args[0]: value '1;rm' contains characters other than"),
        ({"customWorkloads": [{**TPCC, "args": ["--threads=4"]}]},
         "customWorkloads[0].args[0]: --threads is set by the controller"),
        ({"customWorkloads": [{**TPCC, "options": {"time": "int"}}]},
         "customWorkloads[0].options.time: --time is set by the controller (use "
         "spec.durationSeconds instead"),
        ({"customWorkloads": [{**TPCC, "options": {"config_file": "word"}}]},
         "customWorkloads[0].options.config_file: --config-file is an option of sysbench "
         "itself, not of the script"),
        ({"customWorkloads": [{**TPCC, "options": {"rate": "int"}}]},
         "(it may be given in args as it is)"),
        ({"customWorkloads": [{**TPCC, "options": {"scale": "text"}}]},
         "customWorkloads[0].options.scale: Input should be 'int', 'number', 'bool', 'word' or "
         "'size'"),
    ],
    ids=["unknown", "unknown-custom", "unused", "twice", "shadows", "not-lua", "not-declared",
         "wrong-kind", "shell", "owned-arg", "owned-option", "core-option", "core-in-options",
         "kind"],
)  # fmt: skip
def test_a_bad_custom_workload_is_a_spec_error_naming_the_field(
    changes: dict[str, Any], said: str
) -> None:
    assert said in error_of(spec(**changes))


def test_the_argv_runs_the_script_with_the_connection_and_its_own_args_only() -> None:
    argv = build_sysbench_argv(
        workload="tpcc", command="run", host="tidb", port=4000, user="u", threads=4,
        time_seconds=5, report_interval=1, percentile=95, script=SCRIPT.path,
        script_options=SCRIPT.options, extra_args=SCRIPT.args,
    )  # fmt: skip
    assert argv == [
        "sysbench", SCRIPT.path, "--db-driver=mysql", "--mysql-host=tidb", "--mysql-port=4000",
        "--mysql-user=u", "--mysql-db=sbtest", "--threads=4", "--time=5",
        "--report-interval=1", "--percentile=95", "--scale=10", "run",
    ]  # fmt: skip
    with pytest.raises(SpecError, match="--range-size is not in this workload's options"):
        build_sysbench_argv(
            workload="tpcc", command="run", host="tidb", port=4000, user="u",
            script=SCRIPT.path, script_options={}, extra_args=["--range-size=3"],
        )  # fmt: skip
    assert validate_custom_args(["--use_fk=1", "--use-fk=0"], {"use-fk": "int"}) == [
        "--use_fk=1", "--use-fk=0",
    ]  # fmt: skip
    assert SCRIPT.lua_path() == "/var/run/tidb-bench/workloads/tpcc/?.lua;;"


def test_a_runner_argument_that_no_valid_spec_makes_is_refused() -> None:
    for text in ("{", '{"name": "x"}',
                 SCRIPT.to_arg().replace("workloads/tpcc/tpcc.lua", "etc/passwd.lua"),
                 SCRIPT.to_arg().replace("--scale=10", "--mysql-host=evil")):  # fmt: skip
        with pytest.raises(SpecError):
            CustomScript.from_arg(text)


def test_failures_name_the_configmap_the_key_and_a_missing_module() -> None:
    lua = custom_failure(SCRIPT, SysbenchError(
        "fatal", "sysbench 1.0.20 failed: `thread_run' function failed: "
        "/var/run/tidb-bench/workloads/tpcc/tpcc_run.lua:12: attempt to index nil",
    ))  # fmt: skip
    assert lua.kind == "fatal"
    assert str(lua) == (
        "custom workload 'tpcc' (ConfigMap ns/tpcc key 'tpcc.lua'): sysbench 1.0.20 failed: "
        "`thread_run' function failed: key tpcc_run.lua:12: attempt to index nil"
    )
    module = custom_failure(SCRIPT, SysbenchError(
        "fatal", "sysbench 1.0.20 failed: /var/run/tidb-bench/workloads/tpcc/tpcc.lua:1: "
        "module 'tpcc_common' not found:",
    ))  # fmt: skip
    assert str(module).endswith(
        "(add tpcc_common.lua to ConfigMap ns/tpcc: every key of it is on the script's Lua path)"
    )
    silent = custom_failure(SCRIPT, SysbenchError("no-summary", "output ends"), exit_code=0)
    assert silent.kind == "no-report" and "printed no end-of-run report" in str(silent)
    killed = custom_failure(SCRIPT, SysbenchError("no-summary", "output ends"), exit_code=137)
    assert killed.kind == "no-summary", "a killed client is retried as for built-in tests"
    no_sql = custom_failure(SCRIPT, ParseError("no 'SQL statistics:' block"), exit_code=0)
    assert no_sql.kind == "no-report"
    assert name_files("at /etc/x.lua:1", SCRIPT) == "at /etc/x.lua:1"
    assert not_implemented("'tpcc.lua' test does not implement the 'cleanup' command.", "cleanup")


def test_the_setting_is_read_strictly_and_tidb_bench_run_refuses_custom_workloads() -> None:
    assert Settings.from_env({"TIDB_BENCH_ALLOW_CUSTOM_WORKLOADS": "true"}).reach.custom_workloads
    assert not Settings.from_env({}).reach.custom_workloads
    with pytest.raises(ValueError, match="TIDB_BENCH_ALLOW_CUSTOM_WORKLOADS='yes': must be true"):
        Settings.from_env({"TIDB_BENCH_ALLOW_CUSTOM_WORKLOADS": "yes"})
    text = "workloads: [tpcc]\ncustomWorkloads:\n- {name: tpcc, configMapRef: {name: t}, script: tpcc.lua}\n"
    with pytest.raises(SpecError, match="customWorkloads: `tidb-bench run` runs only sysbench's"):
        run_local_sweep(text, host="127.0.0.1", port=1, user="u", password="p", out=None)


def test_sysbench_tpccs_intervals_without_the_colon_after_err_s_are_read() -> None:
    """tpcc.lua's report hook calls sysbench.report_default, which prints `err/s 4.00`."""
    text = (DATA / "sysbench-1.0.20_tpcc-lua_scale1_run_recorded.txt").read_text()
    run = parse_sysbench_output(text, workload="tpcc", threads=2)
    assert len(run.intervals) == 5
    assert [i.errors_per_sec for i in run.intervals] == [0.0, 0.0, 0.0, 4.0, 0.0]
    step = to_step_result(run, "tpcc", 2)
    assert (step.tps, step.qps, step.events) == (100.18, 2902.36, 506)
    assert step.latency_ms.value == 66.84
