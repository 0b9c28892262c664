"""The cluster view on TiDB Operator's own v1 and v2 objects: readers, selectors, topology."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tidb_bench_operator.domain.cluster.readers import read_tidb_cluster, read_v2_cluster
from tidb_bench_operator.domain.cluster.view import (
    ClusterView,
    anti_affinity_selector,
    choose_kind,
    database_pod_selector,
)
from tidb_bench_operator.domain.preflight.topology import check_schedule_policies
from tidb_bench_operator.errors import SpecError

V2 = Path(__file__).resolve().parents[3] / "data" / "vendor" / "tidb-operator-v2.0.1"
NS = "tidb-cluster"


def example(name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The vendored example's Cluster and groups, placed in namespace NS as `kubectl -n` would."""
    docs = [yaml.safe_load(p.read_text()) for p in sorted((V2 / "examples" / name).glob("*.yaml"))]
    for d in docs:
        d["metadata"]["namespace"] = NS
    return docs[0], docs[1:]


def node(name: str, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}}}


def v2_pod(
    name: str, cluster: str, component: str, group: str, node_name: str | None
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {
                "pingcap.com/managed-by": "tidb-operator",
                "pingcap.com/cluster": cluster,
                "pingcap.com/component": component,
                "pingcap.com/group": group,
                "pingcap.com/instance": name,
            },
        },
        "spec": {"nodeName": node_name} if node_name else {},
        "status": {"phase": "Running" if node_name else "Pending"},
    }


ZONES = [node("n-a", **{"topology.kubernetes.io/zone": "us-west-2a"}),
         node("n-b", **{"topology.kubernetes.io/zone": "us-west-2b"}),
         node("n-c", **{"topology.kubernetes.io/zone": "us-west-2c"})]  # fmt: skip


# ---------------------------------------------------------------------- v2 reader


def test_the_basic_example_reads_as_a_cluster_with_pd_tikv_tidb_groups_versions_and_images() -> (
    None
):
    cluster, groups = example("basic")
    view = read_v2_cluster(cluster, groups)
    assert view.kind == "Cluster" and view.name == "basic" and view.namespace == NS
    assert [(g.kind, g.name, g.replicas) for g in view.groups] == [
        ("PDGroup", "pd", 1), ("TiKVGroup", "tikv", 3), ("TiDBGroup", "tidb", 2)
    ]  # fmt: skip
    assert view.versions() == {"pd": "v8.5.2", "tikv": "v8.5.2", "tidb": "v8.5.2"}
    assert view.images() == {
        "pd": "pingcap/pd:v8.5.2", "tikv": "pingcap/tikv:v8.5.2", "tidb": "pingcap/tidb:v8.5.2"
    }  # fmt: skip
    assert view.replicas() == {"pd": 1, "tikv": 3, "tidb": 2}
    # Services `<group>-tidb` and `<group>-pd` (no status.pd yet: derived from the PDGroup).
    assert view.tidb is not None
    assert (view.tidb.host, view.tidb.port, view.tidb.group) == (f"tidb-tidb.{NS}", 4000, "tidb")
    assert view.pd_url == f"http://pd-pd.{NS}:2379"
    # No group of the basic example has schedule policies.
    assert all(g.topologies is None for g in view.groups)


def test_pd_comes_from_cluster_status_pd_when_the_operator_has_written_it() -> None:
    cluster, groups = example("basic")
    cluster["status"] = {"pd": f"https://pd-pd.{NS}:2379"}
    assert read_v2_cluster(cluster, groups).pd_url == f"https://pd-pd.{NS}:2379"


def test_a_tls_cluster_without_status_gets_an_https_pd_url_and_custom_ports_are_used() -> None:
    cluster, groups = example("basic")
    cluster["spec"] = {"tlsCluster": {"enabled": True}}
    groups[0]["spec"]["template"]["spec"]["server"] = {"ports": {"client": {"port": 12379}}}
    groups[2]["spec"]["template"]["spec"]["server"] = {"ports": {"client": {"port": 14000}}}
    view = read_v2_cluster(cluster, groups)
    assert view.pd_url == f"https://pd-pd.{NS}:12379"
    assert view.tidb is not None and view.tidb.port == 14000


def test_the_schedule_policy_example_lists_three_zones_weight_one_for_every_group() -> None:
    cluster, groups = example("schedule-policy")
    view = read_v2_cluster(cluster, groups)
    for g in view.groups:
        assert g.topologies is not None
        assert [t.text() for t in g.topologies] == [
            f"topology.kubernetes.io/zone=us-west-2{z}" for z in "abc"
        ]
        assert [t.weight for t in g.topologies] == [1, 1, 1]
    # The example puts `version` at spec.version, which the CRD does not have (the API
    # server prunes it): no version, and the image stays untagged.
    assert view.versions() == {}
    assert view.images()["tikv"] == "pingcap/tikv"


def test_groups_of_another_cluster_or_kind_are_ignored_and_an_explicit_image_keeps_its_tag() -> (
    None
):
    cluster, groups = example("basic")
    stranger = copy.deepcopy(groups[1])
    stranger["metadata"]["name"] = "other-tikv"
    stranger["spec"]["cluster"]["name"] = "other"
    groups[2]["spec"]["template"]["spec"]["image"] = "registry.local/tidb:v8.5.2-hotfix"
    groups[1]["spec"]["template"]["spec"]["image"] = "registry.local/tikv"
    unknown = {
        "kind": "Backup",  # not a group: TiFlashGroups are read (test_v21_cluster_view.py)
        "metadata": {"name": "tf"},
        "spec": {"cluster": {"name": "basic"}},
    }
    view = read_v2_cluster(cluster, [*groups, stranger, unknown])
    assert [g.name for g in view.groups] == ["pd", "tikv", "tidb"]
    assert view.images()["tidb"] == "registry.local/tidb:v8.5.2-hotfix"
    assert view.images()["tikv"] == "registry.local/tikv:v8.5.2"


def two_tidb_groups() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    cluster, groups = example("basic")
    olap = copy.deepcopy(groups[2])
    olap["metadata"]["name"] = "analytics"
    olap["spec"]["replicas"] = 1
    return cluster, [*groups, olap]


def test_with_two_tidb_groups_the_first_by_name_is_used_and_the_note_says_how_to_choose() -> None:
    cluster, groups = two_tidb_groups()
    view = read_v2_cluster(cluster, groups)
    assert view.tidb is not None
    assert view.tidb.host == f"analytics-tidb.{NS}"
    assert "first by name of 2 (not tidb)" in view.tidb.note
    assert "spec.cluster.tidbGroup" in view.tidb.note
    # Provenance keys each TiDB group apart.
    assert view.replicas() == {"pd": 1, "tikv": 3, "tidb/analytics": 1, "tidb/tidb": 2}


def test_tidb_group_picks_a_group_and_a_wrong_name_lists_the_ones_there_are() -> None:
    cluster, groups = two_tidb_groups()
    view = read_v2_cluster(cluster, groups, tidb_group="tidb")
    assert view.tidb is not None and view.tidb.host == f"tidb-tidb.{NS}"
    with pytest.raises(SpecError) as err:
        read_v2_cluster(cluster, groups, tidb_group="oltp")
    assert str(err.value) == (
        f"spec.cluster.tidbGroup: Cluster {NS}/basic has no TiDBGroup 'oltp' (its TiDBGroups: "
        "analytics, tidb) (name one of them, or leave tidbGroup unset when there is one)"
    )


def test_a_cluster_without_tidb_group_has_no_tidb_endpoint() -> None:
    cluster, groups = example("basic")
    assert read_v2_cluster(cluster, groups[:2]).tidb is None


def test_progressing_and_unsettled_groups_are_exposed_for_the_guard() -> None:
    cluster, groups = example("basic")
    cluster["status"] = {
        "conditions": [
            {"type": "Progressing", "status": "True", "reason": "ClusterCreation", "message": "m"},
            {"type": "Available", "status": "True", "reason": "Available", "message": ""},
        ]
    }
    groups[1]["status"] = {
        "replicas": 3, "readyReplicas": 3, "updatedReplicas": 1, "version": "v8.5.1",
        "conditions": [{"type": "Synced", "status": "False", "reason": "NotAllInstancesUpToDate"}],
    }  # fmt: skip
    groups[2]["status"] = {"replicas": 2, "readyReplicas": 2, "updatedReplicas": 2}
    view = read_v2_cluster(cluster, groups)
    assert view.progressing is not None and view.progressing.reason == "ClusterCreation"
    assert view.unsettled_groups() == [
        "TiKVGroup tikv: Synced=False (NotAllInstancesUpToDate), at v8.5.1, upgrading to "
        "v8.5.2, 1/3 updated"
    ]


# ---------------------------------------------------------------------- v1 reader


def test_a_tidbcluster_reads_with_v1_services_images_and_replicas() -> None:
    tc = {
        "kind": "TidbCluster",
        "metadata": {"name": "basic", "namespace": NS},
        "spec": {
            "version": "v8.1.0",
            "pd": {"baseImage": "pingcap/pd", "replicas": 3},
            "tikv": {"baseImage": "pingcap/tikv", "replicas": 3, "version": "v8.1.1"},
            "tidb": {"baseImage": "registry.local/tidb", "replicas": 2},
        },
    }
    view = read_tidb_cluster(tc)
    assert view.kind == "TidbCluster"
    assert view.images() == {
        "pd": "pingcap/pd:v8.1.0", "tikv": "pingcap/tikv:v8.1.1", "tidb": "registry.local/tidb:v8.1.0"
    }  # fmt: skip
    assert view.replicas() == {"pd": 3, "tikv": 3, "tidb": 2}
    assert view.tidb is not None and (view.tidb.host, view.tidb.port) == (f"basic-tidb.{NS}", 4000)
    assert view.pd_url == f"http://basic-pd.{NS}:2379"
    assert view.progressing is None and view.unsettled_groups() == []


# ---------------------------------------------------------------------- selectors


def test_selectors_and_anti_affinity_use_each_generations_labels() -> None:
    assert database_pod_selector("Cluster", "basic", "pd") == (
        "pingcap.com/cluster=basic,pingcap.com/component=pd"
    )
    # v2: every component the operator labels (issue 29); v1 keeps pd/tikv/tidb.
    assert database_pod_selector("Cluster", None) == "pingcap.com/component"
    assert anti_affinity_selector("Cluster", "basic") == {
        "matchLabels": {"pingcap.com/cluster": "basic"},
        "matchExpressions": [{"key": "pingcap.com/component", "operator": "Exists"}],
    }
    assert anti_affinity_selector("TidbCluster", "basic")["matchLabels"] == {
        "app.kubernetes.io/instance": "basic"
    }


def test_database_pods_are_the_clusters_live_component_pods_only() -> None:
    cluster, groups = example("basic")
    view = read_v2_cluster(cluster, groups)
    done = v2_pod("old", "basic", "tikv", "tikv", "n-a")
    done["status"]["phase"] = "Succeeded"
    pods = [
        v2_pod("tikv-1", "basic", "tikv", "tikv", "n-a"),
        v2_pod("other-tikv-1", "other", "tikv", "tikv", "n-a"),
        v2_pod("ticdc-1", "basic", "ticdc", "ticdc", "n-a"),
        done,
    ]
    assert [p["metadata"]["name"] for p in view.database_pods(pods)] == ["tikv-1", "ticdc-1"]


# ---------------------------------------------------------------------- choose_kind


def test_the_kind_defaults_to_the_one_that_exists_and_both_or_neither_is_a_precise_error() -> None:
    def pick(requested: str | None, tc: bool, c: bool) -> str:
        return choose_kind(
            requested, namespace=NS, name="basic", tidbcluster_exists=tc, cluster_exists=c
        )

    assert pick(None, True, False) == "TidbCluster"
    assert pick(None, False, True) == "Cluster"
    assert pick("Cluster", True, True) == "Cluster"
    with pytest.raises(
        SpecError,
        match=r"^spec.cluster.kind: both a TidbCluster and a Cluster named tidb-cluster/basic exist \(set cluster.kind",
    ):
        pick(None, True, True)
    with pytest.raises(
        SpecError,
        match=r"^spec.cluster.name: neither a TidbCluster nor a Cluster named tidb-cluster/basic exists \(check cluster.name and cluster.namespace \(kubectl -n tidb-cluster get tidbclusters.pingcap.com,clusters.core.pingcap.com\)\)",
    ):
        pick(None, False, False)
    with pytest.raises(
        SpecError,
        match=r"^spec.cluster.name: Cluster tidb-cluster/basic not found \(a TidbCluster of that name exists: set cluster.kind to TidbCluster or remove it\)",
    ):
        pick("Cluster", True, False)


# ---------------------------------------------------------------------- topology-spread (v2)


def schedule_view(weights: tuple[int, int, int] = (1, 1, 1)) -> ClusterView:
    cluster, groups = example("schedule-policy")
    for g in groups:
        for t, w in zip(
            g["spec"]["schedulePolicies"][0]["evenlySpread"]["topologies"], weights, strict=True
        ):
            t["weight"] = w
    return read_v2_cluster(cluster, groups)


def spread_pods(tikv_nodes: list[str | None]) -> list[dict[str, Any]]:
    pods = [v2_pod(f"pd-{z}", "schedule", "pd", "pd", f"n-{z}") for z in "abc"]
    pods += [v2_pod(f"tidb-{z}", "schedule", "tidb", "tidb", f"n-{z}") for z in "ab"]
    pods += [v2_pod(f"tikv-{i}", "schedule", "tikv", "tikv", n) for i, n in enumerate(tikv_nodes)]
    return pods


def test_tikv_two_one_zero_over_three_zones_with_weights_one_fails_naming_the_zones() -> None:
    result = check_schedule_policies(schedule_view(), spread_pods(["n-a", "n-a", "n-b"]), ZONES)
    assert result.status == "Fail"
    z = "topology.kubernetes.io/zone=us-west-2"
    assert f"TiKV {z}a:2 {z}b:1 {z}c:0 — weights 1:1:1 (TiKVGroup tikv): " in result.message
    assert (
        f"{z}a holds 2 where the weights give 1; {z}c holds 0 where the weights give 1."
        in result.message
    )
    # PD 1-1-1 and TiDB 1-1-0 (2 over 3 zones: 0 or 1 each) are fair.
    assert (
        f"PD {z}a:1 {z}b:1 {z}c:1 — weights 1:1:1 (PDGroup pd): spread as the weights say."
        in result.message
    )
    assert (
        f"TiDB {z}a:1 {z}b:1 {z}c:0 — weights 1:1:1 (TiDBGroup tidb): spread as the weights say."
        in result.message
    )


def test_an_even_spread_passes_and_weights_two_one_one_expect_two_one_one() -> None:
    assert (
        check_schedule_policies(schedule_view(), spread_pods(["n-a", "n-b", "n-c"]), ZONES).status
        == "Pass"
    )
    pods = spread_pods(["n-a", "n-a", "n-b", "n-c"])
    assert check_schedule_policies(schedule_view((2, 1, 1)), pods, ZONES).status == "Pass"
    uneven = check_schedule_policies(
        schedule_view((2, 1, 1)), spread_pods(["n-a", "n-b", "n-b", "n-c"]), ZONES
    )
    assert uneven.status == "Fail"
    assert "weights 2:1:1" in uneven.message
    assert "us-west-2a holds 1 where the weights give 2" in uneven.message


def test_a_pod_outside_every_listed_topology_fails_and_an_unscheduled_one_warns() -> None:
    nodes = [*ZONES, node("n-x", **{"topology.kubernetes.io/zone": "eu-1a"})]
    outside = check_schedule_policies(schedule_view(), spread_pods(["n-a", "n-b", "n-x"]), nodes)
    assert outside.status == "Fail"
    assert "outside every listed topology: tikv-2 on n-x" in outside.message
    pending = check_schedule_policies(schedule_view(), spread_pods(["n-a", "n-b", None]), ZONES)
    assert pending.status == "Warn"
    assert "TiKV pods of TiKVGroup tikv not scheduled yet: tikv-2." in pending.message


def test_a_group_without_schedule_policies_warns_naming_it_with_the_patch_that_adds_one() -> None:
    cluster, groups = example("schedule-policy")
    del groups[1]["spec"]["schedulePolicies"]
    view = read_v2_cluster(cluster, groups)
    result = check_schedule_policies(view, spread_pods(["n-a", "n-a", "n-b"]), ZONES)
    assert result.status == "Warn"
    assert (
        "TiKV n-a:2 n-b:1 (TiKVGroup tikv): no EvenlySpread schedulePolicies, so nothing spreads "
        "its instances; add one with: kubectl -n tidb-cluster patch tikvgroup tikv --type=merge -p "
        '\'{"spec":{"schedulePolicies":[{"type":"EvenlySpread","evenlySpread":{"topologies":'
        '[{"topology":{"topology.kubernetes.io/zone":"us-west-2a"}},'
        '{"topology":{"topology.kubernetes.io/zone":"us-west-2b"}},'
        '{"topology":{"topology.kubernetes.io/zone":"us-west-2c"}}]}}]}}\''
    ) in result.message


def test_without_zone_labels_the_suggested_policy_spreads_over_the_clusters_hosts() -> None:
    cluster, groups = example("basic")
    view = read_v2_cluster(cluster, groups)
    nodes = [node("node1"), node("node2"), node("node3")]
    pods = [
        v2_pod("pd-0", "basic", "pd", "pd", "node2"),
        v2_pod("tikv-0", "basic", "tikv", "tikv", "node3"),
    ]
    result = check_schedule_policies(view, pods, nodes)
    assert result.status == "Warn"
    assert (
        '{"topology":{"kubernetes.io/hostname":"node2"}},{"topology":{"kubernetes.io/hostname":"node3"}}'
        in result.message
    )
    assert "kubectl -n tidb-cluster patch pdgroup pd" in result.message
    assert "kubectl -n tidb-cluster patch tidbgroup tidb" in result.message


def test_no_groups_at_all_is_a_warn_naming_the_cluster() -> None:
    cluster, _ = example("basic")
    result = check_schedule_policies(read_v2_cluster(cluster, []), [], ZONES)
    assert result.status == "Warn"
    assert (
        result.message
        == "no PDGroup/TiKVGroup/TiDBGroup with pods found for Cluster tidb-cluster/basic"
    )
