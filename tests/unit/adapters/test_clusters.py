"""Resolving spec.cluster to a TidbCluster or a Cluster through the Kube reads (FakeKube)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.fake_kube import FakeKube
from tidb_bench_operator.adapters.clusters import read_cluster
from tidb_bench_operator.domain.api.run_spec import ClusterRef
from tidb_bench_operator.errors import KubeForbidden, SpecError

V2 = Path(__file__).resolve().parents[2] / "data" / "vendor" / "tidb-operator-v2.0.1"
NS = "tidb-cluster"
TC = {"kind": "TidbCluster", "metadata": {"name": "basic", "namespace": NS},
      "spec": {"version": "v8.1.0", "tikv": {"replicas": 3}}}  # fmt: skip


def v2_basic() -> list[dict[str, Any]]:
    docs = [
        yaml.safe_load(p.read_text()) for p in sorted((V2 / "examples" / "basic").glob("*.yaml"))
    ]
    for d in docs:
        d["metadata"]["namespace"] = NS
    return docs


def ref(**kw: Any) -> ClusterRef:
    return ClusterRef.model_validate({"name": "basic", **kw})


def test_a_tidbcluster_alone_is_read_as_v1_and_a_cluster_alone_as_v2_with_its_groups() -> None:
    v1 = FakeKube()
    v1.add_tidb_cluster(TC)
    assert read_cluster(v1, ref(), NS).kind == "TidbCluster"
    assert read_cluster(v1, ref(namespace=NS), "runs").replicas() == {"tikv": 3}
    v2 = FakeKube()
    v2.add_v2(*v2_basic())
    view = read_cluster(v2, ref(), NS)
    assert view.kind == "Cluster"
    assert view.replicas() == {"pd": 1, "tikv": 3, "tidb": 2}
    assert view.tidb is not None and view.tidb.host == f"tidb-tidb.{NS}"


def test_both_kinds_under_one_name_need_kind_and_kind_picks_one() -> None:
    kube = FakeKube()
    kube.add_tidb_cluster(TC)
    kube.add_v2(*v2_basic())
    with pytest.raises(
        SpecError, match="both a TidbCluster and a Cluster named tidb-cluster/basic"
    ):
        read_cluster(kube, ref(), NS)
    assert read_cluster(kube, ref(kind="Cluster"), NS).kind == "Cluster"
    assert read_cluster(kube, ref(kind="TidbCluster"), NS).kind == "TidbCluster"


def test_a_missing_requested_kind_names_the_other_kind_when_that_exists() -> None:
    kube = FakeKube()
    kube.add_v2(*v2_basic())
    with pytest.raises(SpecError) as err:
        read_cluster(kube, ref(kind="TidbCluster"), NS)
    assert str(err.value) == (
        "spec.cluster.name: TidbCluster tidb-cluster/basic not found (a Cluster of that name "
        "exists: set cluster.kind to Cluster or remove it)"
    )
    with pytest.raises(
        SpecError, match="neither a TidbCluster nor a Cluster named tidb-cluster/basic"
    ):
        read_cluster(FakeKube(), ref(), NS)


def test_a_tidb_group_on_what_turns_out_a_tidbcluster_is_refused() -> None:
    kube = FakeKube()
    kube.add_tidb_cluster(TC)
    with pytest.raises(
        SpecError, match=r"^spec.cluster.tidbGroup: tidb-cluster/basic is a TidbCluster"
    ):
        read_cluster(kube, ref(tidbGroup="tidb"), NS)


class NoV2Rights(FakeKube):
    def v2_cluster(self, namespace: str, name: str) -> dict[str, Any] | None:
        raise KubeForbidden(f"reading Cluster {namespace}/{name}: 403 Forbidden")


def test_without_rbac_for_v2_a_tidbcluster_is_still_benchmarked_but_kind_cluster_says_403() -> None:
    kube = NoV2Rights()
    kube.add_tidb_cluster(TC)
    assert read_cluster(kube, ref(), NS).kind == "TidbCluster"
    with pytest.raises(KubeForbidden):
        read_cluster(kube, ref(kind="Cluster"), NS)
    with pytest.raises(KubeForbidden):
        read_cluster(NoV2Rights(), ref(), NS)


def test_groups_of_other_clusters_in_the_namespace_are_not_this_clusters() -> None:
    kube = FakeKube()
    docs = v2_basic()
    other = copy.deepcopy(docs[2])
    other["metadata"]["name"] = "tikv-other"
    other["spec"]["cluster"]["name"] = "other"
    kube.add_v2(*docs, other)
    assert [g.name for g in read_cluster(kube, ref(), NS).groups] == ["pd", "tikv", "tidb"]
