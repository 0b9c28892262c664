"""Where a run reads its steps' server resources (connections.build_usage)."""

from __future__ import annotations

from typing import Any

from tidb_bench_operator.adapters.usage import MetricsServerSource, PrometheusUsageSource
from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec
from tidb_bench_operator.reconcile.run.connections import build_usage

TOKEN = "s3cr3t-token-value"


class FakeKube:
    """A Secret `prom` (key token) and a resource metrics API that is not served."""

    def __init__(self) -> None:
        self.secrets = {("ns", "prom", "token"): TOKEN}
        self.read: list[tuple[str, str, str]] = []

    def secret_value(self, namespace: str, name: str, key: str) -> str | None:
        self.read.append((namespace, name, key))
        return self.secrets.get((namespace, name, key))

    def metrics_api(self, path: str) -> Any:
        return None


def spec(**metrics: Any) -> BenchmarkRunSpec:
    return BenchmarkRunSpec.model_validate(
        {"target": {"host": "db"}, "credentials": {"secretRef": {"name": "db"}},
         "metrics": metrics}
    )  # fmt: skip


def test_auto_takes_the_runs_prometheus_then_the_platforms_then_the_metrics_api() -> None:
    kube = FakeKube()
    none = build_usage(kube, None, None)  # type: ignore[arg-type]
    platform = build_usage(kube, None, "http://prom.monitoring:9090")  # type: ignore[arg-type]
    first = none(spec(), "ns")
    assert isinstance(first, MetricsServerSource)
    assert none(spec(), "other") is first, "one source keeps every run's samples"
    assert isinstance(platform(spec(), "ns"), PrometheusUsageSource)
    assert isinstance(none(spec(prometheusURL="http://mine:9090"), "ns"), PrometheusUsageSource)
    assert isinstance(platform(spec(source="metrics-server"), "ns"), MetricsServerSource)
    assert platform(spec(source="none"), "ns") is None


def test_prometheus_without_a_url_says_which_field_or_setting_names_one() -> None:
    why = build_usage(FakeKube(), None, None)(spec(source="prometheus"), "ns")  # type: ignore[arg-type]
    assert isinstance(why, str)
    assert "spec.metrics.prometheusURL" in why and "TIDB_BENCH_PROMETHEUS_URL" in why


def test_a_missing_token_key_is_named_and_no_secret_value_is_in_the_reason() -> None:
    kube = FakeKube()
    usage = build_usage(kube, None, None)  # type: ignore[arg-type]
    why = usage(
        spec(prometheusURL="http://mine:9090", bearerToken={"name": "prom", "key": "nope"}), "ns"
    )
    assert why == "Secret ns/prom has no key 'nope' (spec.metrics.bearerToken)"
    ok = usage(
        spec(prometheusURL="http://mine:9090", bearerToken={"name": "prom", "key": "token"}), "ns"
    )
    assert isinstance(ok, PrometheusUsageSource)
    assert TOKEN not in repr(vars(ok).get("base_url", "")) and TOKEN not in str(why)


def test_the_runs_secrets_are_never_read_for_the_platforms_prometheus() -> None:
    kube = FakeKube()
    usage = build_usage(kube, None, "http://prom.monitoring:9090")  # type: ignore[arg-type]
    got = usage(spec(bearerToken={"name": "prom", "key": "token"}), "ns")
    assert isinstance(got, PrometheusUsageSource)
    assert kube.read == [], "a run's token goes only to the Prometheus the run names"
