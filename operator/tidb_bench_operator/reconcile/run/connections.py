"""The run's real dependencies: its database connection and PD client from its Secrets, and
the preflight gate, the guard's PD poll, the server's fingerprint built on them, and where
the steps' server resources are read.

The controller's wiring composes these with one Kubernetes client; the reconciler sees only
the functions (reconcile/run/context.py's PreflightFn, PdLookFn, ServerFactsFn).
"""

from __future__ import annotations

import ssl
from typing import Any

from tidb_bench_operator.adapters import mysql
from tidb_bench_operator.adapters.k8s import Kube
from tidb_bench_operator.adapters.pd import (
    HTTPPDClient,
    PDClient,
    UnavailablePDClient,
    make_pd_client,
)
from tidb_bench_operator.adapters.tls import context_from_secret
from tidb_bench_operator.adapters.usage import MetricsServerSource, PrometheusUsageSource
from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec
from tidb_bench_operator.domain.fingerprint import (
    PERFORMANCE_VARIABLES,
    Fingerprint,
    server_fingerprint,
)
from tidb_bench_operator.domain.guard import PdLook
from tidb_bench_operator.domain.manifests import Endpoint
from tidb_bench_operator.domain.resources.usage import UsageSource
from tidb_bench_operator.errors import TidbBenchError, TLSConfigError
from tidb_bench_operator.reconcile.run import gate
from tidb_bench_operator.reconcile.run.context import (
    PdLookFn,
    PreflightFn,
    ServerFactsFn,
    UsageFn,
)
from tidb_bench_operator.reconcile.run.gate import PreflightOutcome


def run_dsn(kube: Kube, spec: BenchmarkRunSpec, namespace: str, endpoint: Endpoint) -> mysql.DSN:
    """The run's database connection: its credentials and, with MySQL TLS, its certificate.

    Read at use, never stored: the password and the key live only in this call's memory.
    """
    ref = spec.credentials
    user = kube.secret_value(namespace, ref.secret_ref.name, ref.user_key)
    password = kube.secret_value(namespace, ref.secret_ref.name, ref.password_key)
    secret = endpoint.mysql_tls_secret
    tls = None if secret is None else context_from_secret(kube.secret_value, namespace, secret)
    return mysql.DSN(
        endpoint.host,
        endpoint.port,
        user or "",
        password or "",
        tls=tls,
        tls_source=f"Secret {namespace}/{secret}" if secret else None,
        # A user read from a Secret is secret: messages name its Secret key, not its value.
        user_source=f"Secret {namespace}/{ref.secret_ref.name} key {ref.user_key!r}",
    )


def pd_client(
    kube: Kube,
    api: Any,
    spec: BenchmarkRunSpec,
    namespace: str,
    endpoint: Endpoint,
    timeout: float = 5.0,
) -> PDClient | None:
    """The PD client, with PD's client certificate when the run uses TLS to PD."""
    tls = None
    if endpoint.pd_tls_secret is not None and endpoint.pd_url is not None:
        try:
            tls = context_from_secret(
                kube.secret_value, namespace, endpoint.pd_tls_secret, endpoint.pd_tls_ca_secret
            )
        except TLSConfigError as exc:
            return UnavailablePDClient(str(exc), f"PD HTTP {endpoint.pd_url}")
    return make_pd_client(
        spec.preflight.pd_transport, endpoint, kube, api, tls=tls, timeout=timeout
    )


def build_preflight(kube: Kube, api: Any) -> PreflightFn:
    """The preflight gate with real PD, Kubernetes and MySQL adapters."""

    def preflight(spec: BenchmarkRunSpec, namespace: str, endpoint: Endpoint) -> PreflightOutcome:
        pd = pd_client(kube, api, spec, namespace, endpoint)

        def dsn() -> mysql.DSN:
            return run_dsn(kube, spec, namespace, endpoint)

        out = gate.run_preflight(
            spec, namespace, kube=kube, pd=pd, db=mysql.connector(dsn), endpoint=endpoint
        )
        return gate.with_skipped(out, spec)

    return preflight


def build_pd_look(kube: Kube, api: Any) -> PdLookFn:
    """PD as the guard polls it: stores, pending operators, the leader (HTTP only)."""

    def pd_look(spec: BenchmarkRunSpec, namespace: str, endpoint: Endpoint) -> PdLook:
        pd = pd_client(kube, api, spec, namespace, endpoint, timeout=3.0)
        if pd is None:
            return PdLook(stores=[], pending_operators=0, errors=["no PD address"])
        try:
            stores = pd.stores()
            pending = [op for op in pd.operators() if op.pending]
            leader = pd.leader() if isinstance(pd, HTTPPDClient) else None
        except TidbBenchError as exc:
            return PdLook(stores=[], pending_operators=0, errors=[str(exc)])
        first = f"{pending[0].desc} {{{pending[0].brief}}}" if pending else ""
        return PdLook(
            stores=stores, pending_operators=len(pending), first_operator=first, leader=leader
        )

    return pd_look


def build_server_facts(kube: Kube) -> ServerFactsFn:
    """The server's part of a run's fingerprint, read over SQL with the run's credentials.

    A fingerprint never fails a run: when the server cannot be read, the fingerprint says
    nothing about it (its other parts still come from Kubernetes).
    """

    def server_facts(spec: BenchmarkRunSpec, namespace: str, endpoint: Endpoint) -> Fingerprint:
        try:
            dsn = run_dsn(kube, spec, namespace, endpoint)
            with mysql.connect(dsn, timeout=5.0) as conn:
                return server_fingerprint(
                    mysql.global_variables(conn, PERFORMANCE_VARIABLES),
                    mysql.show_config(conn),
                    mysql.server_version(conn),
                )
        except TidbBenchError:
            return Fingerprint()

    return server_facts


def build_usage(kube: Kube, api: Any, platform_prometheus: str | None) -> UsageFn:
    """Where each run reads its steps' server resources (docs/resources.md).

    spec.metrics.source `auto`: the run's Prometheus, else the platform's
    (TIDB_BENCH_PROMETHEUS_URL), else the resource metrics API; `prometheus` needs one of
    the two URLs; `metrics-server` only the API; `none` nothing. One metrics-server source
    is shared by every run: it keeps the samples it took during the steps in memory.
    """
    metrics_api = MetricsServerSource(kube)

    def usage(spec: BenchmarkRunSpec, namespace: str) -> UsageSource | str | None:
        m = spec.metrics
        if m.source == "none":
            return None
        url = m.prometheus_url or platform_prometheus
        if m.source == "metrics-server" or (m.source == "auto" and url is None):
            return metrics_api
        if url is None:
            return (
                "spec.metrics.source is prometheus but no Prometheus is named: set "
                "spec.metrics.prometheusURL, or ask the platform team for TIDB_BENCH_PROMETHEUS_URL"
            )
        token = ca = None
        if m.prometheus_url is not None:  # the run's Secrets go to the run's Prometheus only
            if m.bearer_token is not None:
                token = kube.secret_value(namespace, m.bearer_token.name, m.bearer_token.key)
                if not token:
                    return (
                        f"Secret {namespace}/{m.bearer_token.name} has no key "
                        f"{m.bearer_token.key!r} (spec.metrics.bearerToken)"
                    )
            if m.ca is not None:
                pem = kube.secret_value(namespace, m.ca.name, m.ca.key)
                if not pem:
                    return (
                        f"Secret {namespace}/{m.ca.name} has no key {m.ca.key!r} (spec.metrics.ca)"
                    )
                try:
                    ca = ssl.create_default_context(cadata=pem)
                except (ssl.SSLError, ValueError):
                    return f"Secret {namespace}/{m.ca.name} key {m.ca.key!r} is not a PEM CA bundle"
        return PrometheusUsageSource(
            url,
            token=token,
            ssl_context=ca,
            timeout=m.timeout_seconds,
            queries=m.queries,
            cpu_source=m.cpu_source,
        )

    return usage
