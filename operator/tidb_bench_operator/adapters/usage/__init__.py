"""Where a step's server usage is read: a Prometheus (prometheus.py) or the Kubernetes
resource metrics API (metrics_server.py), each a domain.resources.usage.UsageSource."""

from tidb_bench_operator.adapters.usage.metrics_server import MetricsAPI, MetricsServerSource
from tidb_bench_operator.adapters.usage.prometheus import PrometheusUsageSource

__all__ = ["MetricsAPI", "MetricsServerSource", "PrometheusUsageSource"]
