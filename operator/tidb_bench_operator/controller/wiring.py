"""Build the reconcilers from settings: real adapters in, nothing else (one place to see it)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Protocol

from tidb_bench_operator.adapters import mysql
from tidb_bench_operator.adapters.k8s import Kube, load_api_client
from tidb_bench_operator.adapters.pd import (
    HTTPPDClient,
    PDClient,
    UnavailablePDClient,
    make_pd_client,
)
from tidb_bench_operator.adapters.tls import context_from_secret
from tidb_bench_operator.config import Settings
from tidb_bench_operator.domain.api.models import GROUP, VERSION, BenchmarkRunSpec
from tidb_bench_operator.domain.fingerprint import (
    PERFORMANCE_VARIABLES,
    Fingerprint,
    server_fingerprint,
)
from tidb_bench_operator.domain.guard import PdLook
from tidb_bench_operator.domain.manifests import Endpoint
from tidb_bench_operator.errors import CrdsNotServed, KubeError, TidbBenchError, TLSConfigError
from tidb_bench_operator.reconcile.run import PreflightFn, PreflightOutcome, RunReconciler, gate
from tidb_bench_operator.reconcile.run.context import PdLookFn, ServerFactsFn
from tidb_bench_operator.reconcile.schedule.reconciler import ScheduleReconciler


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
    )


def _pd_client(
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
        pd = _pd_client(kube, api, spec, namespace, endpoint)

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
        pd = _pd_client(kube, api, spec, namespace, endpoint, timeout=3.0)
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


def build_run_reconciler(cfg: Settings) -> RunReconciler:
    """A RunReconciler talking to the cluster in `cfg`."""
    api = load_api_client(cfg.kubeconfig)
    kube = Kube(api)
    return RunReconciler(
        kube,
        preflight=build_preflight(kube, api),
        image=cfg.runner_image,
        scheduling_timeout=timedelta(seconds=cfg.scheduling_timeout_seconds),
        server_facts=build_server_facts(kube),
        results_budget=cfg.results_object_bytes,
        pd_look=build_pd_look(kube, api),
    )


def build_kube(cfg: Settings) -> Kube:
    """The Kubernetes adapter for the cluster in `cfg` (the driver patches status with it)."""
    return Kube(load_api_client(cfg.kubeconfig))


def build_schedule_reconciler(cfg: Settings) -> ScheduleReconciler:
    """A ScheduleReconciler talking to the cluster in `cfg`."""
    return ScheduleReconciler(Kube(load_api_client(cfg.kubeconfig)))


#: What API discovery must list before kopf scans it (kopf only looks again on a CRD event).
SERVED_RESOURCES = ("benchmarkruns", "benchmarkschedules")


class Discovery(Protocol):
    """API discovery, as wait_until_served reads it (adapters.k8s.Kube has it)."""

    def served_resources(self, group: str, version: str) -> set[str]:
        """The resources discovery lists for group/version (KubeError when it cannot say)."""
        ...


def wait_until_served(
    kube: Discovery,
    *,
    timeout: float,
    log: Callable[[str], None],
    poll: float = 0.5,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Return once discovery lists every resource in SERVED_RESOURCES; else CrdsNotServed.

    kopf scans API discovery once at start and again only when a CRD changes. A controller
    that starts while its CRDs are being created (`kubectl apply -k deploy/` creates both
    together) can scan between `Established` and discovery listing the resource, and would
    then never serve BenchmarkRuns. Waiting here, before kopf's scan, closes that gap.
    """
    deadline = clock() + timeout
    next_note = clock()
    while True:
        problem = ""
        try:
            served = kube.served_resources(GROUP, VERSION)
        except KubeError as exc:
            served, problem = set(), f" ({exc})"
        missing = [f"{r}.{GROUP}/{VERSION}" for r in SERVED_RESOURCES if r not in served]
        if not missing:
            return
        now = clock()
        if now >= deadline:
            raise CrdsNotServed(
                f"API discovery does not list {', '.join(missing)} after {timeout:.0f} s"
                f"{problem}; install the CRDs first (kubectl apply -k crds/, or kubectl apply "
                "-k deploy/ which includes them), or raise TIDB_BENCH_CRD_WAIT_SECONDS"
            )
        if now >= next_note:
            log(f"waiting for API discovery to list {', '.join(missing)}{problem}")
            next_note = now + 10
        sleep(poll)


def wait_for_crds(cfg: Settings, log: Callable[[str], None]) -> None:
    """wait_until_served against the cluster in `cfg`."""
    wait_until_served(Kube(load_api_client(cfg.kubeconfig)), timeout=cfg.crd_wait_seconds, log=log)
