"""Everything the program reads from its environment, in one place.

`Settings` is the controller's (the Deployment sets the variables); `credentials_from_env`
is the benchmark pod's and `tidb-bench run`'s (the runner Job maps the Secret to them);
`kubeconfig_from_env` is the command line's. No other module reads os.environ.

    KUBECONFIG                            kubeconfig file; unset in a pod: in-cluster config
    TIDB_BENCH_RUNNER_IMAGE               image of the benchmark Jobs
    TIDB_BENCH_METRICS_PORT               Prometheus port (default 9090; empty or 0: off)
    TIDB_BENCH_SCHEDULING_TIMEOUT_SECONDS how long a pod may stay unschedulable (120)
    TIDB_BENCH_CRD_WAIT_SECONDS           how long to wait at start for the CRDs (60)
    TIDB_BENCH_RESULTS_OBJECT_BYTES       results per ConfigMap (1000000; tests shrink it)
    TIDB_BENCH_DEBUG                      non-empty: kopf's verbose logging
    TIDB_BENCH_LIVENESS                   kopf's liveness endpoint (empty: none)
    TIDB_BENCH_ALLOW_CROSS_NAMESPACE      clusters runs may name outside their namespace:
                                          false (default), true (any) or ns1,ns2
    TIDB_BENCH_ALLOW_IMAGE_OVERRIDE       true: spec.image may name another image (false)
    TIDB_BENCH_OPERATOR_TARGETS_ONLY      true: no spec.target.host/pdURL (false)
    TIDB_BENCH_ALLOW_CUSTOM_WORKLOADS     true: spec.customWorkloads may run Lua scripts (false)
    TIDB_BENCH_PROMETHEUS_URL             the platform's Prometheus, read for runs' server
                                          resources when spec.metrics names none (unset)
    TIDB_BENCH_USER, TIDB_BENCH_PASSWORD  the database credentials of the runner
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from tidb_bench_operator.domain.api.common import check_base_url
from tidb_bench_operator.domain.manifests import DEFAULT_IMAGE, PASSWORD_ENV, USER_ENV
from tidb_bench_operator.domain.results_store import CONFIGMAP_LIMIT, DEFAULT_BUDGET
from tidb_bench_operator.domain.trust.reach import (
    ALLOW_CROSS_NAMESPACE,
    ALLOW_CUSTOM_WORKLOADS,
    ALLOW_IMAGE_OVERRIDE,
    OPERATOR_TARGETS_ONLY,
    Reach,
    parse_flag,
    parse_namespaces,
)

DEFAULT_LIVENESS = "http://0.0.0.0:8080/healthz"
PROMETHEUS_URL = "TIDB_BENCH_PROMETHEUS_URL"


def _env(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def kubeconfig_from_env(env: Mapping[str, str] | None = None) -> str | None:
    """KUBECONFIG, or None (in a pod: the in-cluster configuration)."""
    return _env(env).get("KUBECONFIG") or None


@dataclass(frozen=True)
class Settings:
    """What the controller needs to know about where it runs."""

    kubeconfig: str | None
    runner_image: str
    metrics_port: int
    scheduling_timeout_seconds: float
    crd_wait_seconds: float = 60.0
    results_object_bytes: int = DEFAULT_BUDGET
    debug: bool = False
    liveness_endpoint: str | None = DEFAULT_LIVENESS
    #: What runs may ask beyond their namespace and the runner image (docs/trust.md).
    reach: Reach = field(default_factory=Reach)
    #: The platform's Prometheus for runs' server resources (docs/resources.md); None: none.
    prometheus_url: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """From KUBECONFIG and the TIDB_BENCH_* variables (see the module's docstring)."""
        e = _env(env)
        return cls(
            kubeconfig=kubeconfig_from_env(e),
            runner_image=e.get("TIDB_BENCH_RUNNER_IMAGE", DEFAULT_IMAGE),
            # Empty or 0 turns the metrics endpoint off.
            metrics_port=int(e.get("TIDB_BENCH_METRICS_PORT", "9090") or 0),
            scheduling_timeout_seconds=float(e.get("TIDB_BENCH_SCHEDULING_TIMEOUT_SECONDS", "120")),
            # How long to wait at start for API discovery to serve our CRDs before exiting.
            crd_wait_seconds=float(e.get("TIDB_BENCH_CRD_WAIT_SECONDS", "60")),
            results_object_bytes=_results_bytes(e.get("TIDB_BENCH_RESULTS_OBJECT_BYTES")),
            debug=bool(e.get("TIDB_BENCH_DEBUG")),
            liveness_endpoint=e.get("TIDB_BENCH_LIVENESS", DEFAULT_LIVENESS) or None,
            reach=reach_from_env(e),
            prometheus_url=_prometheus_url(e.get(PROMETHEUS_URL)),
        )


def reach_from_env(env: Mapping[str, str]) -> Reach:
    """The four trust settings (docs/trust.md); a value that is not one raises ValueError."""
    any_namespace, namespaces = parse_namespaces(env.get(ALLOW_CROSS_NAMESPACE))
    return Reach(
        any_namespace=any_namespace,
        cluster_namespaces=namespaces,
        image_override=parse_flag(ALLOW_IMAGE_OVERRIDE, env.get(ALLOW_IMAGE_OVERRIDE)),
        operator_targets_only=parse_flag(OPERATOR_TARGETS_ONLY, env.get(OPERATOR_TARGETS_ONLY)),
        custom_workloads=parse_flag(ALLOW_CUSTOM_WORKLOADS, env.get(ALLOW_CUSTOM_WORKLOADS)),
    )


def _prometheus_url(text: str | None) -> str | None:
    """TIDB_BENCH_PROMETHEUS_URL: a base URL as spec.metrics.prometheusURL takes, or unset."""
    if not text:
        return None
    try:
        return check_base_url(text)
    except ValueError as exc:
        raise ValueError(
            f"{PROMETHEUS_URL}={text!r}: {exc} (e.g. http://prometheus.monitoring:9090)"
        ) from exc


def _results_bytes(text: str | None) -> int:
    """TIDB_BENCH_RESULTS_OBJECT_BYTES: 1024 up to what a ConfigMap holds."""
    if not text:
        return DEFAULT_BUDGET
    value = int(text)
    if not 1024 <= value <= DEFAULT_BUDGET:
        raise ValueError(
            f"TIDB_BENCH_RESULTS_OBJECT_BYTES={text}: must be 1024..{DEFAULT_BUDGET} (a "
            f"ConfigMap holds at most {CONFIGMAP_LIMIT} bytes, keys included)"
        )
    return value


@dataclass
class Credentials:
    """Database user and password, from the environment (a Secret in Kubernetes)."""

    user: str
    password: str

    def __repr__(self) -> str:
        return f"Credentials(user={self.user!r}, password=***)"


def credentials_from_env(env: Mapping[str, str] | None = None) -> Credentials:
    """TIDB_BENCH_USER (default root) and TIDB_BENCH_PASSWORD (default empty)."""
    e = _env(env)
    return Credentials(e.get(USER_ENV, "root"), e.get(PASSWORD_ENV, ""))
