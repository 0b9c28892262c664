"""spec.metrics: where a run reads the server's CPU and memory per step, and the bottleneck's
thresholds (docs/resources.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tidb_bench_operator.domain.api.common import PdUrl, SpecModel

#: Where server resources come from: `auto` takes the run's Prometheus, else the controller's
#: (TIDB_BENCH_PROMETHEUS_URL), else the resource metrics API; `none` records nothing.
MetricsSourceKind = Literal["auto", "prometheus", "metrics-server", "none"]


class MetricsSecretKey(SpecModel):
    """One key of a Secret in the run's namespace (read by the controller, never shown)."""

    name: str = Field(min_length=1, max_length=253, description="Secret name.")
    key: str = Field(min_length=1, max_length=253, description="Key in the Secret.")


class PrometheusQueries(SpecModel):
    """PromQL overriding the defaults; `$namespace`, `$pods` (a regex of pod names) and
    `$window` (e.g. `30s`) are filled in by the controller."""

    pod_cpu: str | None = Field(
        default=None,
        max_length=2048,
        description="Cores per pod over the window, one series per (namespace, pod). Default: "
        "cAdvisor's container_cpu_usage_seconds_total, as kubelet exposes it.",
    )
    pod_memory: str | None = Field(
        default=None,
        max_length=2048,
        description="Working-set bytes per pod. Default: container_memory_working_set_bytes.",
    )


class MetricsSpec(SpecModel):
    """How a run measures server resources per step: evidence, never a gate."""

    source: MetricsSourceKind = Field(
        default="auto",
        description="auto, prometheus, metrics-server or none (docs/resources.md).",
    )
    prometheus_url: PdUrl | None = Field(
        default=None,
        alias="prometheusURL",
        description="Prometheus base URL, e.g. `http://prometheus.monitoring:9090`: scheme, host, "
        "optional port and path prefix, as pdURL. Unset: the controller's own, if any.",
    )
    bearer_token: MetricsSecretKey | None = Field(
        default=None, description="Secret key holding a bearer token for Prometheus."
    )
    ca: MetricsSecretKey | None = Field(
        default=None, description="Secret key holding a PEM CA bundle for an https Prometheus."
    )
    timeout_seconds: float = Field(
        default=5.0, gt=0, le=60, description="Timeout of one Prometheus or metrics API call."
    )
    cpu_source: Literal["cadvisor", "process"] = Field(
        default="cadvisor",
        description="cadvisor: container_cpu_usage_seconds_total per pod; process: the TiDB "
        "components' own process_cpu_seconds_total.",
    )
    queries: PrometheusQueries = Field(
        default_factory=PrometheusQueries, description="Overrides of the default queries."
    )
    saturated_percent: float = Field(
        default=85.0,
        gt=0,
        le=100,
        description="A pod (or the clients) using this share of its CPU limit, or of its "
        "node's allocatable cores when unlimited, is named the bottleneck.",
    )
    hot_store_ratio: float = Field(
        default=1.5,
        gt=1,
        le=100,
        description="A TiKV using this many times the median TiKV's cores is a hot store.",
    )
