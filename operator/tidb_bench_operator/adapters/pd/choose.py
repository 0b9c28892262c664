"""Choosing the PD client for a run: HTTP, pd-ctl in a ready PD pod, or one that says why not."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any, Protocol

from tidb_bench_operator.adapters.pd.client import (
    HEALTH_PATH,
    PD_CONTAINER,
    ExecFn,
    PDClient,
    Transport,
    TransportMode,
)
from tidb_bench_operator.adapters.pd.ctl import ExecPDClient, UnavailablePDClient
from tidb_bench_operator.adapters.pd.http import HTTPPDClient
from tidb_bench_operator.domain.cluster.tls import pd_tls_dir
from tidb_bench_operator.domain.cluster.view import V1_KIND, database_pod_selector
from tidb_bench_operator.domain.manifests import Endpoint
from tidb_bench_operator.errors import (
    PDError,
    PDUnreachableError,
)

# ---------------------------------------------------------------------------
# Choosing a client


class PodLister(Protocol):
    """The part of adapters.k8s.Kube that finding a PD pod needs."""

    def pods(self, namespace: str | None, selector: str) -> list[dict[str, Any]]:
        """Pods matching a label selector, as plain Kubernetes JSON dicts."""
        ...


def _pod_ready(pod: Mapping[str, Any]) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return bool(condition.get("status") == "True")
    return False


def choose_pd_pod(
    kube: PodLister, cluster_namespace: str, cluster_name: str, kind: str = V1_KIND
) -> dict[str, Any] | None:
    """A Running, not-terminating PD pod of the cluster (Ready ones first), as the API has it."""
    # TiDB Operator v1 labels PD pods app.kubernetes.io/instance=<tc>, component=pd; v2
    # pingcap.com/cluster=<cluster>, pingcap.com/component=pd (docs/tidb-operator-v2.md).
    selector = database_pod_selector(kind, cluster_name, "pd")
    candidates = []
    for pod in kube.pods(cluster_namespace, selector):
        meta = pod.get("metadata") or {}
        if (pod.get("status") or {}).get("phase") != "Running" or meta.get("deletionTimestamp"):
            continue
        candidates.append((not _pod_ready(pod), str(meta.get("name", "")), pod))
    if not candidates:
        return None
    return min(candidates, key=lambda c: (c[0], c[1]))[2]


def _http_failure(client: HTTPPDClient, timeout: float) -> str | None:
    """None if PD's URL gives any HTTP answer within `timeout`, else why not."""
    try:
        client.get(HEALTH_PATH, timeout=timeout)
    except PDUnreachableError as exc:
        return str(exc)
    except PDError:
        return None  # an HTTP error is still an answer: HTTP reaches PD
    return None


def make_pd_client(
    transport_mode: TransportMode,
    endpoint: Endpoint,
    kube: PodLister,
    api_client: Any,
    *,
    timeout: float = 5.0,
    probe_timeout: float = 2.0,
    http_transport: Transport | None = None,
    exec_fn: ExecFn | None = None,
    tls: ssl.SSLContext | None = None,
) -> PDClient | None:
    """The PD client spec.preflight.pdTransport asks for; None when there is no PD address.

    Auto: HTTP if the URL answers within `probe_timeout`, else pd-ctl in a PD pod if one
    runs. When the chosen way is impossible, an UnavailablePDClient carries the reason, so
    the PD checks fail with it instead of the controller raising. With `endpoint.pd_tls_secret`
    set, HTTP uses `tls` (the context of that Secret) and pd-ctl the PD pod's own mounted TLS
    Secret.
    """
    tls_secret = endpoint.pd_tls_secret
    cluster = endpoint.cluster_name
    ns = endpoint.cluster_namespace
    kind = endpoint.cluster_kind or V1_KIND

    def http() -> HTTPPDClient | None:
        if endpoint.pd_url is None:
            return None
        return HTTPPDClient(
            endpoint.pd_url,
            timeout=timeout,
            transport=http_transport,
            tls=tls,
            tls_secret=tls_secret,
        )

    def exec_client(why_not_http: str = "") -> PDClient:
        prefix = f"{why_not_http}; and " if why_not_http else ""
        if cluster is None:
            return UnavailablePDClient(
                f"{prefix}pdTransport Exec needs spec.cluster to find a PD pod "
                "(spec.target alone names no pods)"
            )
        try:
            pod = choose_pd_pod(kube, ns, cluster, kind)
        except Exception as exc:  # any API failure: report it rather than crash the gate
            return UnavailablePDClient(f"{prefix}listing PD pods in {ns} failed: {exc}")
        if pod is None:
            return UnavailablePDClient(
                f"{prefix}no Running PD pod of {kind} {ns}/{cluster} to exec pd-ctl in "
                f"(selector {database_pod_selector(kind, cluster, 'pd')})"
                "; is the cluster up and spec.cluster right?"
            )
        name = str(pod["metadata"]["name"])
        tls_dir = None
        if tls_secret is not None:
            tls_dir = pd_tls_dir(pod, tls_secret, PD_CONTAINER)
            if tls_dir is None:
                return UnavailablePDClient(
                    f"{prefix}PD pod {ns}/{name} mounts no TLS Secret in its {PD_CONTAINER!r} "
                    "container for pd-ctl (TiDB Operator mounts the PD server Secret at "
                    "/var/lib/pd-tls when spec.tlsCluster is on); use pdTransport: HTTP"
                )
        return ExecPDClient(
            api_client, ns, name, exec_fn=exec_fn, timeout=max(timeout, 10.0), tls_dir=tls_dir
        )

    if transport_mode == "HTTP":
        return http()
    if transport_mode == "Exec":
        return exec_client()
    client = http()
    if client is None:
        return exec_client() if cluster is not None else None
    failure = _http_failure(client, probe_timeout)
    if failure is None or cluster is None:
        return client  # without a cluster there is no pod to exec in: keep HTTP's own errors
    return exec_client(failure)
