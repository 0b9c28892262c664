"""BenchmarkRun/BenchmarkSchedule models: defaults, wire names, semantic checks, examples."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tidb_bench_operator.domain.api.common import API_VERSION
from tidb_bench_operator.domain.api.resources import (
    BenchmarkRun,
    parse_run_spec,
    parse_schedule_spec,
)
from tidb_bench_operator.domain.api.results import Latency, StepResult
from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec
from tidb_bench_operator.domain.api.run_status import BenchmarkRunStatus, StepStatus
from tidb_bench_operator.errors import SpecError

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"


def minimal_spec(**extra: Any) -> dict[str, Any]:
    """The smallest valid spec, plus `extra` top-level fields."""
    return {"cluster": {"name": "basic"}, "credentials": {"secretRef": {"name": "creds"}}, **extra}


def spec_error(data: dict[str, Any]) -> SpecError:
    """The SpecError that parsing `data` raises."""
    with pytest.raises(SpecError) as caught:
        parse_run_spec(data)
    return caught.value


def example_documents() -> list[tuple[str, dict[str, Any]]]:
    """(file name, document) for every tidbbench.io resource in examples/."""
    documents = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if document and str(document.get("apiVersion", "")).startswith("tidbbench.io/"):
                documents.append((path.name, document))
    return documents


def test_a_minimal_spec_gets_the_documented_defaults() -> None:
    spec = parse_run_spec(minimal_spec())
    assert spec.database == "sbtest"
    assert spec.workloads == ["oltp_point_select"]
    assert spec.threads == [64, 128, 256]
    assert spec.clients == 1
    assert (spec.duration_seconds, spec.warmup_seconds, spec.report_interval_seconds) == (60, 0, 10)
    assert spec.percentile == 95
    assert spec.dataset.tables == 1 and spec.dataset.table_size == 10000
    assert spec.dataset.prepare == "IfMissing" and spec.dataset.auto_inc is True
    assert spec.credentials.user_key == "user" and spec.credentials.password_key == "password"
    assert spec.placement.anti_affinity == "Required" and spec.placement.node_selector == {}
    assert spec.preflight.policy == "Enforce" and spec.preflight.timeout_seconds == 300
    assert spec.preflight.max_leader_size_skew == 0.5 and spec.preflight.pd_transport == "Auto"
    assert spec.resources.requests == {"cpu": "1", "memory": "512Mi"}
    assert spec.resources.limits == {}


def test_a_spec_round_trips_through_its_camel_case_wire_form() -> None:
    data = minimal_spec(
        target={"host": "10.0.0.1", "port": 4001, "pdURL": "http://10.0.0.1:2379"},
        dataset={"tables": 8, "tableSize": 500, "autoInc": False},
        threads=[256, 64],
        slo={"latencyMs": 105},
        extraArgs=["--range-size=10"],
        ttlSecondsAfterFinished=600,
    )
    spec = parse_run_spec(data)
    wire = spec.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert wire["target"] == {"host": "10.0.0.1", "port": 4001, "pdURL": "http://10.0.0.1:2379"}
    assert wire["dataset"]["tableSize"] == 500 and wire["ttlSecondsAfterFinished"] == 600
    assert wire["threads"] == [256, 64], "the sweep runs in the order given"
    assert parse_run_spec(wire) == spec


def test_python_names_are_accepted_as_well_as_camel_case() -> None:
    spec = BenchmarkRunSpec.model_validate(
        minimal_spec(duration_seconds=30, target={"pd_url": "http://pd:2379"})
    )
    assert spec.duration_seconds == 30
    assert spec.target is not None and spec.target.pd_url == "http://pd:2379"


def test_quantities_may_be_written_as_numbers_or_strings() -> None:
    spec = parse_run_spec(minimal_spec(resources={"requests": {"cpu": 2, "memory": "1Gi"}}))
    assert spec.resources.requests == {"cpu": "2", "memory": "1Gi"}


def test_a_malformed_quantity_names_its_key() -> None:
    error = spec_error(minimal_spec(resources={"limits": {"memory": "lots"}}))
    assert error.field == "resources.limits.memory"


def test_an_unknown_field_is_an_error_at_its_path() -> None:
    error = spec_error(minimal_spec(dataset={"tablesize": 10}))
    assert error.field == "dataset.tablesize"
    assert str(error).startswith("spec.dataset.tablesize: ")


def test_an_out_of_range_thread_count_names_its_list_index() -> None:
    error = spec_error(minimal_spec(threads=[64, 0]))
    assert error.field == "threads[1]"


def test_an_unknown_workload_is_rejected() -> None:
    assert spec_error(minimal_spec(workloads=["tpcc"])).field == "workloads[0]"


def test_a_missing_secret_ref_is_reported_at_credentials() -> None:
    error = spec_error({"cluster": {"name": "basic"}, "credentials": {}})
    assert error.field == "credentials.secretRef"


def test_a_spec_needs_a_cluster_or_a_target_host() -> None:
    data = minimal_spec()
    del data["cluster"]
    error = spec_error({**data, "target": {"pdURL": "http://pd:2379"}})
    assert error.field == "cluster"
    assert "target.host" in error.hint


def test_a_target_host_alone_is_enough() -> None:
    data = minimal_spec(target={"host": "127.0.0.1"})
    del data["cluster"]
    spec = parse_run_spec(data)
    assert spec.target is not None and spec.target.port == 4000


def test_a_repeated_thread_count_is_named_by_its_second_position() -> None:
    error = spec_error(minimal_spec(threads=[64, 128, 64]))
    assert error.field == "threads[2]"
    assert "64" in error.problem


def test_a_repeated_workload_is_rejected() -> None:
    error = spec_error(minimal_spec(workloads=["oltp_read_only", "oltp_read_only"]))
    assert error.field == "workloads[1]"


def test_bulk_insert_cannot_share_a_run_with_oltp_tests() -> None:
    error = spec_error(minimal_spec(workloads=["oltp_point_select", "bulk_insert"]))
    assert error.field == "workloads"
    assert "(id, k)" in error.hint


def test_cleanup_of_tables_the_run_did_not_prepare_is_refused() -> None:
    error = spec_error(minimal_spec(dataset={"prepare": "Never", "cleanup": True}))
    assert error.field == "dataset.cleanup"


def test_a_report_interval_longer_than_the_step_is_refused() -> None:
    error = spec_error(minimal_spec(durationSeconds=5, reportIntervalSeconds=10))
    assert error.field == "reportIntervalSeconds"


def test_warmup_may_be_longer_than_the_measured_time() -> None:
    spec = parse_run_spec(minimal_spec(durationSeconds=30, warmupSeconds=60))
    assert spec.warmup_seconds == 60


def test_the_same_secret_key_for_user_and_password_is_refused() -> None:
    error = spec_error(
        minimal_spec(credentials={"secretRef": {"name": "c"}, "userKey": "password"})
    )
    assert error.field == "credentials.passwordKey"


def test_an_extra_arg_the_controller_owns_points_to_the_spec_field() -> None:
    error = spec_error(minimal_spec(extraArgs=["--range-size=10", "--table_size=5"]))
    assert error.field == "extraArgs[1]"
    assert "spec.dataset.tableSize" in error.hint


def test_warmup_time_is_refused_in_favour_of_warmup_seconds() -> None:
    error = spec_error(minimal_spec(extraArgs=["--warmup-time=10"]))
    assert "spec.warmupSeconds" in error.hint


def test_an_extra_arg_outside_the_allow_list_is_refused_with_the_list() -> None:
    error = spec_error(minimal_spec(extraArgs=["--mysql-dry-run"]))
    assert error.field == "extraArgs[0]"
    assert "--range-size" in error.hint


def test_allow_listed_extra_args_accept_dashes_or_underscores() -> None:
    spec = parse_run_spec(minimal_spec(extraArgs=["--point_selects=5", "--skip-trx=on"]))
    assert spec.extra_args == ["--point_selects=5", "--skip-trx=on"]


def test_an_extra_arg_must_be_a_long_option() -> None:
    assert spec_error(minimal_spec(extraArgs=["range-size=10"])).field == "extraArgs[0]"


@pytest.mark.parametrize(
    ("toleration", "field"),
    [
        ({"key": "k", "operator": "Exists", "value": "v"}, "placement.tolerations[0].value"),
        ({"operator": "Equal", "value": "v"}, "placement.tolerations[0].key"),
        (
            {"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5},
            "placement.tolerations[0].tolerationSeconds",
        ),
    ],
)
def test_tolerations_the_api_server_would_reject_are_refused(
    toleration: dict[str, Any], field: str
) -> None:
    error = spec_error(minimal_spec(placement={"tolerations": [toleration]}))
    assert error.field == field


def test_a_schedule_gets_its_defaults_and_keeps_the_template() -> None:
    spec = parse_schedule_spec({"schedule": "0 2 * * *", "template": minimal_spec()})
    assert spec.suspend is False and spec.concurrency_policy == "Forbid"
    assert (spec.successful_runs_history_limit, spec.failed_runs_history_limit) == (3, 1)
    assert spec.regression.baseline_runs == 5 and spec.regression.max_qps_drop_percent == 10
    assert spec.template.threads == [64, 128, 256]


@pytest.mark.parametrize("schedule", ["@daily", "*/15 * * * *", "0 2 * * MON-FRI"])
def test_cron_lines_and_macros_are_accepted(schedule: str) -> None:
    assert parse_schedule_spec({"schedule": schedule, "template": minimal_spec()})


@pytest.mark.parametrize("schedule", ["nightly", "0 2 * *", "0 2 * * * *", "@fortnightly"])
def test_a_malformed_cron_expression_is_refused(schedule: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_schedule_spec({"schedule": schedule, "template": minimal_spec()})
    assert caught.value.field == "schedule"


def test_an_unknown_time_zone_is_refused() -> None:
    with pytest.raises(SpecError) as caught:
        parse_schedule_spec(
            {"schedule": "@daily", "timeZone": "Mars/Olympus", "template": minimal_spec()}
        )
    assert caught.value.field == "timeZone"


def test_a_known_time_zone_is_accepted() -> None:
    spec = parse_schedule_spec(
        {"schedule": "@daily", "timeZone": "Asia/Shanghai", "template": minimal_spec()}
    )
    assert spec.time_zone == "Asia/Shanghai"


def test_template_errors_carry_the_template_prefix() -> None:
    with pytest.raises(SpecError) as caught:
        parse_schedule_spec({"schedule": "@daily", "template": minimal_spec(threads=[8, 8])})
    assert caught.value.field == "template.threads[1]"
    with pytest.raises(SpecError) as caught:
        parse_schedule_spec({"schedule": "@daily", "template": minimal_spec(threads=[0])})
    assert caught.value.field == "template.threads[0]"


def result(threads: int = 64) -> StepResult:
    """A step result as `tidb-bench parse` would produce it."""
    return StepResult(
        workload="oltp_point_select",
        threads=threads,
        tps=50300.94,
        qps=50300.94,
        read_qps=50300.94,
        write_qps=0.0,
        other_qps=0.0,
        latency_ms=Latency(min=0.27, avg=1.27, max=24.1, percentile=95, value=1.96),
        errors_per_sec=0.0,
        reconnects_per_sec=0.0,
        events=3018053,
        duration_seconds=60.0,
        sysbench_version="1.0.20",
    )


def test_a_pending_step_has_no_result_yet() -> None:
    step = StepStatus(index=0, workload="oltp_point_select", threads=64)
    assert step.phase == "Pending"
    assert step.to_result() is None


def test_a_step_carries_a_result_and_gives_it_back_unchanged() -> None:
    step = StepStatus(index=2, workload="oltp_point_select", threads=64, phase="Running")
    done = step.with_result(result())
    assert done.to_result() == result()
    assert (done.index, done.phase) == (2, "Running")
    wire = done.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert {key: wire[key] for key in result().to_json_dict()} == result().to_json_dict()


def test_a_step_without_a_percentile_value_survives_a_dump_without_nulls() -> None:
    step = StepStatus(index=0, workload="oltp_point_select", threads=64)
    no_value = result().latency_ms.model_copy(update={"value": None})
    step = step.with_result(result().model_copy(update={"latency_ms": no_value}))
    wire = step.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert "value" not in wire["latencyMs"]
    assert StepStatus.model_validate(wire) == step


def test_step_status_uses_the_step_result_field_text() -> None:
    for name, field in StepResult.model_fields.items():
        assert StepStatus.model_fields[name].description == field.description, name


def test_status_written_by_other_versions_or_kopf_still_parses() -> None:
    status = BenchmarkRunStatus.model_validate(
        {"phase": "Running", "kopf": {"progress": {}}, "steps": [], "futureField": 1}
    )
    assert status.phase == "Running"


def test_a_whole_resource_parses_ignoring_metadata() -> None:
    run = BenchmarkRun.model_validate(
        {
            "apiVersion": API_VERSION,
            "kind": "BenchmarkRun",
            "metadata": {"name": "x", "namespace": "y"},
            "spec": minimal_spec(),
            "status": {"phase": "Succeeded", "summary": {"peakQps": 1.5, "peakThreads": 64}},
        }
    )
    assert run.status is not None and run.status.summary is not None
    assert run.status.summary.peak_qps == 1.5


def test_there_are_examples_of_each_kind_we_ship() -> None:
    names = {name for name, _ in example_documents()}
    assert {"point-select-sweep.yaml", "read-write-sweep.yaml", "multi-client.yaml"} <= names


@pytest.mark.parametrize(
    ("name", "document"), example_documents(), ids=[name for name, _ in example_documents()]
)
def test_every_example_validates_against_the_models(name: str, document: dict[str, Any]) -> None:
    assert document["apiVersion"] == API_VERSION
    assert document["metadata"]["name"]
    if document["kind"] == "BenchmarkRun":
        parse_run_spec(document["spec"])
    else:
        assert document["kind"] == "BenchmarkSchedule", name
        parse_schedule_spec(document["spec"])


def test_a_rate_sweep_needs_one_thread_count() -> None:
    err = spec_error(minimal_spec(rates=[100, 200], threads=[4, 8]))
    assert err.field == "threads" and "one thread count" in str(err)
    spec = parse_run_spec(minimal_spec(rates=[100, 200], threads=[4]))
    assert spec.rates == [100, 200] and spec.rate_tolerance_percent == 5.0


def test_a_rate_in_extra_args_beside_rates_is_refused_at_its_index() -> None:
    err = spec_error(
        minimal_spec(rates=[100], threads=[4], extraArgs=["--range-size=5", "--rate=9"])
    )
    assert err.field == "extraArgs[1]" and "spec.rates" in str(err)


def test_a_rate_below_one_per_client_and_a_repeated_rate_are_refused() -> None:
    err = spec_error(minimal_spec(rates=[100, 3], threads=[4], clients=4))
    assert err.field == "rates[1]" and "4 clients" in str(err)
    assert spec_error(minimal_spec(rates=[100, 100], threads=[4])).field == "rates[1]"


def test_write_events_pair_with_threads_and_not_with_rates() -> None:
    err = spec_error(minimal_spec(threads=[4, 8], writeEvents=[100]))
    assert err.field == "writeEvents" and "1 value(s) for 2 thread count(s)" in str(err)
    err = spec_error(minimal_spec(threads=[4], rates=[100], writeEvents=[100]))
    assert err.field == "rates" and "cannot be bounded by events" in str(err)


def test_the_pingcap_preset_names_a_thread_count_it_has_no_events_for() -> None:
    err = spec_error(
        minimal_spec(preset="PingCAP", workloads=["oltp_write_only"], threads=[100, 64])
    )
    assert err.field == "threads[1]" and "100, 200 and 400 threads" in str(err)
    # Reads need no events; explicit writeEvents replace the preset's.
    parse_run_spec(minimal_spec(preset="PingCAP", workloads=["oltp_point_select"], threads=[64]))
    parse_run_spec(
        minimal_spec(preset="PingCAP", workloads=["oltp_insert"], threads=[64], writeEvents=[9])
    )


def test_the_pause_defaults_to_none_and_the_preset_to_sixty_seconds() -> None:
    from tidb_bench_operator.domain.api import load_shape

    assert load_shape.pause_seconds(parse_run_spec(minimal_spec())) == 0
    preset = parse_run_spec(minimal_spec(preset="PingCAP", workloads=["oltp_point_select"]))
    assert load_shape.pause_seconds(preset) == 60
    own = parse_run_spec(
        minimal_spec(preset="PingCAP", pauseSeconds=5, workloads=["oltp_read_only"])
    )
    assert load_shape.pause_seconds(own) == 5
