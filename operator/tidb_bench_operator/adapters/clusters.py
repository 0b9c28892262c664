"""Read the TiDB cluster `spec.cluster` names, v1 or v2, into one domain ClusterView."""

from __future__ import annotations

from typing import Protocol

from tidb_bench_operator.domain.api.run_spec import ClusterRef
from tidb_bench_operator.domain.cluster.readers import read_tidb_cluster, read_v2_cluster
from tidb_bench_operator.domain.cluster.view import (
    V1_KIND,
    V2_KIND,
    ClusterView,
    choose_kind,
)
from tidb_bench_operator.domain.objects import JSON
from tidb_bench_operator.errors import KubeForbidden, SpecError


class ClusterObjects(Protocol):
    """The reads of adapters.k8s.Kube that resolving a cluster needs."""

    def tidb_cluster(self, namespace: str, name: str) -> JSON | None:
        """The v1 TidbCluster, or None."""
        ...

    def v2_cluster(self, namespace: str, name: str) -> JSON | None:
        """The v2 Cluster, or None."""
        ...

    def v2_groups(self, namespace: str) -> list[JSON]:
        """The v2 PD/TiKV/TiDB groups of the namespace."""
        ...


def read_cluster(kube: ClusterObjects, ref: ClusterRef, run_namespace: str) -> ClusterView:
    """The cluster `ref` names, as a view; SpecError when it names none, or both kinds.

    With `ref.kind` unset, both kinds are looked up: whichever exists is used. API failures
    (403 included) propagate as the adapter's errors.
    """
    ns = ref.namespace or run_namespace
    tc = kube.tidb_cluster(ns, ref.name) if ref.kind in (None, V1_KIND) else None
    cluster: JSON | None = None
    if ref.kind in (None, V2_KIND):
        try:
            cluster = kube.v2_cluster(ns, ref.name)
        except KubeForbidden:
            # A controller upgraded without deploy/'s new rule for v2 Clusters still
            # benchmarks the TidbCluster it has always benchmarked.
            if ref.kind is not None or tc is None:
                raise
    # The requested kind is missing: look at the other one too, so the error can name it.
    if ref.kind == V1_KIND and tc is None:
        cluster = kube.v2_cluster(ns, ref.name)
    if ref.kind == V2_KIND and cluster is None:
        tc = kube.tidb_cluster(ns, ref.name)
    kind = choose_kind(
        ref.kind,
        namespace=ns,
        name=ref.name,
        tidbcluster_exists=tc is not None,
        cluster_exists=cluster is not None,
    )
    if kind == V1_KIND:
        assert tc is not None
        if ref.tidb_group:
            raise SpecError(
                "cluster.tidbGroup",
                f"{ns}/{ref.name} is a TidbCluster, which has no TiDB groups",
                "remove tidbGroup",
            )
        return read_tidb_cluster(tc, namespace=ns)
    assert cluster is not None
    return read_v2_cluster(cluster, kube.v2_groups(ns), tidb_group=ref.tidb_group)
