"""The Prometheus adapter: series follow run and schedule status; the dashboard asks for real ones."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tidb_bench_operator.adapters.metrics import Metrics

ROOT = Path(__file__).resolve().parents[3]
DASHBOARD = ROOT / "deploy" / "grafana" / "tidb-bench-dashboard.json"
NS = "bench"

#: Every metric the controller exports (name as exposed, kind): what dashboards may use.
METRICS: dict[str, str] = {
    "tidb_bench_step_qps": "gauge",
    "tidb_bench_step_qps_interval": "gauge",
    "tidb_bench_step_tps": "gauge",
    "tidb_bench_step_latency_seconds": "gauge",
    "tidb_bench_step_errors_per_second": "gauge",
    "tidb_bench_step_valid": "gauge",
    "tidb_bench_step_disturbances": "gauge",
    "tidb_bench_step_qps_per_core": "gauge",
    "tidb_bench_step_cpu_seconds_per_query": "gauge",
    "tidb_bench_run_peak_qps": "gauge",
    "tidb_bench_run_regressed": "gauge",
    "tidb_bench_runs_finished_total": "counter",
    "tidb_bench_preflight_failures_total": "counter",
    "tidb_bench_schedule_last_success_timestamp_seconds": "gauge",
    "tidb_bench_schedule_last_peak_qps": "gauge",
    "tidb_bench_schedule_regressed": "gauge",
    "tidb_bench_schedule_efficiency_regressed": "gauge",
    "tidb_bench_schedule_period_seconds": "gauge",
}


def samples(metrics: Metrics) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    text = generate_latest(metrics.registry).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(metrics: Metrics, name: str, **labels: str) -> float | None:
    found = [
        v for (n, ls), v in samples(metrics).items() if n == name and set(labels.items()) <= ls
    ]
    assert len(found) <= 1, found
    return found[0] if found else None


def run_body(name: str = "r1", phase: str = "Running", **status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": NS,
            "uid": f"uid-{name}",
            "labels": {"tidbbench.io/schedule": "nightly"},
        },
        "spec": {"cluster": {"name": "basic"}, "threads": [64, 128]},
        "status": {"phase": phase, **status},
    }


STEPS = [
    {
        "index": 0,
        "workload": "oltp_point_select",
        "threads": 64,
        "phase": "Succeeded",
        "qps": 50300.94,
        "tps": 50300.94,
        "errorsPerSec": 0.0,
        "valid": True,
        "latencyMs": {"min": 0.27, "avg": 1.27, "max": 24.1, "percentile": 95, "value": 1.96},
        "qpsTrials": {
            "n": 3,
            "median": 50300.94,
            "mean": 50100.0,
            "ciLow": 48000.5,
            "ciHigh": 52199.5,
            "cvPercent": 1.7,
            "noisy": False,
        },
        "resources": {"source": "prometheus", "qpsPerCore": 9000.0, "cpuMsPerQuery": 0.11},
    },
    {"index": 1, "workload": "oltp_point_select", "threads": 128, "phase": "Running"},
]
FINISHED = "2099-01-01T00:00:00Z"  # after any process start: the run finished while watched


def test_a_steps_numbers_become_gauges_labelled_by_run_schedule_cluster_workload_threads() -> None:
    metrics = Metrics()
    metrics.observe_run(run_body(steps=STEPS))
    labels = {
        "namespace": NS,
        "run": "r1",
        "schedule": "nightly",
        "cluster": "basic",
        "workload": "oltp_point_select",
        "threads": "64",
    }
    assert value(metrics, "tidb_bench_step_qps", **labels) == 50300.94
    assert value(metrics, "tidb_bench_step_tps", **labels) == 50300.94
    assert value(metrics, "tidb_bench_step_latency_seconds", percentile="95", **labels) == (
        pytest.approx(0.00196)
    )
    assert value(metrics, "tidb_bench_step_qps", threads="128") is None  # not measured yet


def test_the_schedule_label_of_a_metric_is_the_owning_schedules_full_name() -> None:
    # Label values stop at 63 characters, so a long schedule name is shortened in the
    # run's label; the owner reference keeps it whole.
    schedule = "nightly-" + "y" * 70
    body = run_body(steps=STEPS)
    body["metadata"]["labels"] = {"tidbbench.io/schedule": schedule[:54] + "-0f0f0f0f"}
    body["metadata"]["ownerReferences"] = [{"kind": "BenchmarkSchedule", "name": schedule}]
    metrics = Metrics()
    metrics.observe_run(body)
    assert value(metrics, "tidb_bench_step_qps", schedule=schedule, threads="64") == 50300.94


def test_a_status_patch_is_applied_before_the_numbers_are_read() -> None:
    metrics = Metrics()
    metrics.observe_run(run_body(), {"steps": STEPS, "phase": "Running"})
    assert value(metrics, "tidb_bench_step_qps", threads="64") == 50300.94


def test_a_target_without_a_cluster_is_labelled_by_host_and_port() -> None:
    metrics = Metrics()
    body = run_body(steps=STEPS)
    body["spec"] = {"target": {"host": "10.0.0.5", "port": 4000}}
    metrics.observe_run(body)
    assert value(metrics, "tidb_bench_step_qps", cluster="10.0.0.5:4000") == 50300.94


def test_a_run_seen_finishing_is_counted_once_by_outcome() -> None:
    metrics = Metrics()
    metrics.observe_run(run_body(steps=STEPS))
    done = run_body(phase="Succeeded", steps=STEPS, finishedAt=FINISHED)
    metrics.observe_run(done)
    metrics.observe_run(done)  # e.g. the Regressed condition patched later
    assert value(metrics, "tidb_bench_runs_finished_total", outcome="Succeeded") == 1.0


def test_a_run_that_finished_before_the_process_started_is_not_counted_again() -> None:
    metrics = Metrics()
    metrics.observe_run(run_body(phase="Failed", finishedAt="2020-01-01T00:00:00Z"))
    assert value(metrics, "tidb_bench_runs_finished_total", outcome="Failed") is None


def test_a_failing_preflight_check_is_counted_once_per_run() -> None:
    metrics = Metrics()
    checks = {"checks": [{"name": "leader-size-balance", "status": "Fail", "message": "skew"}]}
    body = run_body(phase="Preflight", preflight=checks)
    metrics.observe_run(body)
    metrics.observe_run(body)
    metrics.observe_run(run_body("r2", phase="Preflight", preflight=checks))
    assert value(metrics, "tidb_bench_preflight_failures_total", check="leader-size-balance") == 2


def test_the_peak_and_the_regressed_condition_of_a_finished_run_are_exported() -> None:
    metrics = Metrics()
    metrics.observe_run(
        run_body(
            phase="Succeeded",
            steps=STEPS,
            summary={"perWorkload": [{"workload": "oltp_point_select", "peakQps": 50300.94}]},
            conditions=[{"type": "Regressed", "status": "True", "reason": "QpsDrop"}],
        )
    )
    assert value(metrics, "tidb_bench_run_peak_qps", run="r1") == 50300.94
    assert value(metrics, "tidb_bench_run_regressed", run="r1") == 1.0


def test_a_deleted_run_leaves_no_series_behind() -> None:
    metrics = Metrics()
    body = run_body(steps=STEPS)
    metrics.observe_run(body)
    metrics.forget_run(body)
    assert value(metrics, "tidb_bench_step_qps", run="r1") is None
    assert value(metrics, "tidb_bench_step_latency_seconds", run="r1") is None


def test_a_schedule_exports_its_last_success_peak_and_regression_flag() -> None:
    metrics = Metrics()
    body = {
        "metadata": {"name": "nightly", "namespace": NS},
        "status": {
            "lastPeakQps": 41000.0,
            "regressed": True,
            "history": [
                {"name": "a", "outcome": "Succeeded", "finishedAt": "2026-03-01T02:05:00Z"},
                {"name": "b", "outcome": "Failed", "finishedAt": "2026-03-02T02:05:00Z"},
            ],
        },
    }
    metrics.observe_schedule(body)
    assert value(metrics, "tidb_bench_schedule_last_peak_qps", schedule="nightly") == 41000.0
    assert value(metrics, "tidb_bench_schedule_regressed", schedule="nightly") == 1.0
    assert value(metrics, "tidb_bench_schedule_last_success_timestamp_seconds") == 1772330700.0
    assert value(metrics, "tidb_bench_schedule_efficiency_regressed", schedule="nightly") is None
    metrics.forget_schedule(body)
    assert value(metrics, "tidb_bench_schedule_regressed", schedule="nightly") is None


def test_a_schedule_exports_its_efficiency_flag_while_its_latest_run_has_resource_data() -> None:
    metrics = Metrics()
    body: dict[str, Any] = {
        "metadata": {"name": "nightly", "namespace": NS},
        "status": {"regressed": False, "efficiency": "Regressed"},
    }
    metrics.observe_schedule(body)
    assert value(metrics, "tidb_bench_schedule_efficiency_regressed", schedule="nightly") == 1.0
    metrics.observe_schedule(body, {"efficiency": "NoChange"})
    assert value(metrics, "tidb_bench_schedule_efficiency_regressed", schedule="nightly") == 0.0
    metrics.observe_schedule(body, {"efficiency": None})
    assert value(metrics, "tidb_bench_schedule_efficiency_regressed", schedule="nightly") is None


SCHEDULE_SPEC = {
    "schedule": "0 2 * * *",
    "timeZone": "Asia/Tokyo",
    "template": {"target": {"host": "tidb"}, "credentials": {"secretRef": {"name": "db"}}},
}


def test_a_schedule_exports_its_period_until_it_is_suspended() -> None:
    metrics = Metrics()
    body: dict[str, Any] = {"metadata": {"name": "nightly", "namespace": NS}, "spec": SCHEDULE_SPEC}
    metrics.observe_schedule(body)
    assert value(metrics, "tidb_bench_schedule_period_seconds", schedule="nightly") == 86400.0
    hourly = {**body, "spec": {**SCHEDULE_SPEC, "schedule": "@hourly"}}
    metrics.observe_schedule(hourly)
    assert value(metrics, "tidb_bench_schedule_period_seconds", schedule="nightly") == 3600.0
    metrics.observe_schedule({**body, "spec": {**SCHEDULE_SPEC, "suspend": True}})
    assert value(metrics, "tidb_bench_schedule_period_seconds", schedule="nightly") is None
    metrics.observe_schedule({**body, "spec": {**SCHEDULE_SPEC, "schedule": "not cron"}})
    assert value(metrics, "tidb_bench_schedule_period_seconds", schedule="nightly") is None


def test_every_declared_metric_is_what_the_registry_exposes() -> None:
    metrics = Metrics()
    metrics.observe_run(
        run_body(
            phase="Succeeded",
            steps=STEPS,
            finishedAt=FINISHED,
            summary={"perWorkload": [{"workload": "oltp_point_select", "peakQps": 1.0}]},
            conditions=[{"type": "Regressed", "status": "False"}],
            preflight={"checks": [{"name": "store-state", "status": "Fail"}]},
        )
    )
    metrics.observe_schedule(
        {
            "metadata": {"name": "s", "namespace": NS},
            "spec": SCHEDULE_SPEC,
            "status": {
                "lastPeakQps": 1.0,
                "efficiency": "NoChange",
                "history": [{"outcome": "Succeeded", "finishedAt": FINISHED}],
            },
        }
    )
    exposed = {name for name, _ in samples(metrics)} - {
        n for n in {name for name, _ in samples(metrics)} if n.endswith("_created")
    }
    assert exposed == set(METRICS)


def test_the_endpoint_serves_the_registry_over_http() -> None:
    metrics = Metrics()
    metrics.observe_run(run_body(steps=STEPS))
    server = metrics.serve(0, addr="127.0.0.1")
    try:
        port = server.server_address[1]
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
    finally:
        server.shutdown()
        server.server_close()
    assert b"tidb_bench_step_qps{" in body
    assert b"python_gc" not in body  # our registry, not the process-wide default one


# ---------------------------------------------------------------------- the Grafana dashboard
PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
    "unless", "offset", "sum", "max", "min", "avg", "count", "increase", "rate", "time",
    "label_values", "histogram_quantile", "topk", "bottomk",
}  # fmt: skip


def expressions(dashboard: dict[str, Any]) -> list[str]:
    """Every PromQL text in the dashboard: panel targets (rows included) and variable queries."""
    found: list[str] = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for panel in panels:
            found.extend(t["expr"] for t in panel.get("targets") or [] if t.get("expr"))
            walk(panel.get("panels") or [])

    walk(dashboard["panels"])
    for var in dashboard["templating"]["list"]:
        query = var.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if var.get("type") == "query" and query:
            found.append(str(query))
    return found


def metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression: identifiers that are not functions, keywords,
    label names (inside {} or by/without/on lists), strings, or Grafana $variables."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", r"\1", text)
    text = re.sub(r"\$\w+", "", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        word = match.group(0)
        following = text[match.end() :].lstrip()
        if word in PROMQL_WORDS or following.startswith("("):
            continue
        names.add(word)
    # label_values(metric, label): the second argument is a label.
    for call in re.finditer(r"label_values\(\s*([A-Za-z_:][\w:]*)[^,]*,\s*(\w+)\s*\)", expr):
        names.discard(call.group(2))
        names.add(call.group(1))
    return names


def test_the_metric_name_finder_skips_functions_labels_and_variables() -> None:
    expr = 'sum by (check) (increase(tidb_bench_x_total{namespace=~"$namespace"}[$__range]))'
    assert metric_names(expr) == {"tidb_bench_x_total"}
    assert metric_names('time() - tidb_bench_y{a="b"}') == {"tidb_bench_y"}
    assert metric_names('label_values(tidb_bench_z{namespace=~"$n"}, schedule)') == {"tidb_bench_z"}


def test_the_dashboard_asks_only_for_metrics_the_controller_exports() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = expressions(dashboard)
    assert len(exprs) >= 8
    used = set().union(*(metric_names(e) for e in exprs))
    assert used, "no metric names found in the dashboard"
    assert used <= set(METRICS), f"not exported by adapters/metrics.py: {used - set(METRICS)}"
    # The panels the issue asks for: QPS and p95 vs threads, nightly trend, preflight failures.
    titles = " | ".join(p["title"] for p in dashboard["panels"])
    for words in ("QPS vs threads", "p95 latency vs threads", "Nightly", "Preflight failures"):
        assert words in titles


def test_a_steps_qps_interval_is_two_gauges_labelled_by_bound() -> None:
    metrics = Metrics()
    metrics.observe_run(run_body(steps=STEPS))
    labels = {
        "namespace": NS, "run": "r1", "schedule": "nightly", "cluster": "basic",
        "workload": "oltp_point_select", "threads": "64",
    }  # fmt: skip
    assert value(metrics, "tidb_bench_step_qps_interval", **labels, bound="low") == 48000.5
    assert value(metrics, "tidb_bench_step_qps_interval", **labels, bound="high") == 52199.5


def test_an_invalid_step_is_marked_by_its_valid_and_disturbances_series() -> None:
    metrics = Metrics()
    disturbance = {"at": "2026-01-01T00:00:00Z", "source": "Kubernetes", "what": "PodOnBenchNode",
                   "object": "basic-tikv-3", "message": "on node1"}  # fmt: skip
    body = {
        "metadata": {"namespace": NS, "name": "guarded", "uid": "u-guarded"},
        "spec": {"cluster": {"name": "basic"}},
        "status": {"phase": "Succeeded", "steps": [
            {"workload": "oltp_point_select", "threads": 1, "qps": 100.0, "valid": True},
            {"workload": "oltp_point_select", "threads": 2, "qps": 50.0, "valid": False,
             "disturbances": [disturbance]},
            {"workload": "oltp_point_select", "threads": 4, "qps": 300.0, "valid": True,
             "trials": [{"round": 0, "valid": False, "disturbances": [disturbance, disturbance]}]},
        ]},
    }  # fmt: skip
    metrics.observe_run(body)
    got = samples(metrics)

    def value(name: str, threads: str) -> float:
        return next(v for (n, labels), v in got.items()
                    if n == name and ("threads", threads) in labels)  # fmt: skip

    assert [value("tidb_bench_step_valid", t) for t in ("1", "2", "4")] == [1.0, 0.0, 1.0]
    assert [value("tidb_bench_step_disturbances", t) for t in ("1", "2", "4")] == [0.0, 1.0, 2.0]


def test_a_steps_efficiency_becomes_qps_per_core_and_cpu_seconds_per_query_per_component() -> None:
    resources = {
        "source": "prometheus http://prom:9090",
        "qpsPerCore": 38300.0,
        "cpuMsPerQuery": 0.026,
        "components": [
            {"component": "tidb", "pods": 1, "cores": 0.68, "cpuMsPerQuery": 0.0165},
            {"component": "tikv", "pods": 3, "cores": 0.3, "cpuMsPerQuery": None},
        ],
    }
    metrics = Metrics()
    metrics.observe_run(run_body(steps=[{**STEPS[0], "resources": resources}, STEPS[1]]))
    assert value(metrics, "tidb_bench_step_qps_per_core", threads="64") == 38300.0
    per_query = "tidb_bench_step_cpu_seconds_per_query"
    assert value(metrics, per_query, component="all") == pytest.approx(0.000026)
    assert value(metrics, per_query, component="tidb") == pytest.approx(0.0000165)
    assert value(metrics, per_query, component="tikv") is None  # no number, no series
    unavailable = {"source": "none", "unavailable": "Prometheus http://prom:9090 timed out"}
    metrics.observe_run(run_body(steps=[{**STEPS[0], "resources": unavailable}]))
    assert value(metrics, "tidb_bench_step_qps_per_core", threads="64") is None
