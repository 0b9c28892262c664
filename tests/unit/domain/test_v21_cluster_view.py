"""TiDB Operator v2.1.0-beta.6's own examples and shapes through the cluster readers.

The examples are the vendored ones (tests/data/vendor/tidb-operator-v2.1.0-beta.6/examples/),
read as `kubectl -n` would create them; what v2.1 adds to a shape (feature gates, TLSSecret
references, StandBy TiDB, maxSurge) is set on copies of them.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from testbed.v2cluster import v2_example_objects
from tidb_bench_operator.domain.api.guard import GuardLook
from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec
from tidb_bench_operator.domain.cluster.readers import read_tidb_cluster, read_v2_cluster
from tidb_bench_operator.domain.cluster.tls import resolve_tls
from tidb_bench_operator.domain.cluster.view import anti_affinity_selector
from tidb_bench_operator.domain.fingerprint import image_digests
from tidb_bench_operator.domain.guard import (
    kube_disturbances,
    pod_entries,
    rollout_baseline,
    rollout_signals,
)
from tidb_bench_operator.domain.preflight.placement import check_bench_node_isolation
from tidb_bench_operator.errors import SpecError

NS = "tidb-cluster"
NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
CREDS = {"credentials": {"secretRef": {"name": "db"}}}


def example(name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The v2.1 example's Cluster and groups (cert-manager objects left out), in NS."""
    docs = [d for d in v2_example_objects(name, "v2.1") if d["apiVersion"].startswith("core.")]
    for d in docs:
        d["metadata"]["namespace"] = NS
    return docs[0], docs[1:]


def pod(name: str, component: str, group: str, node: str, cluster: str = "basic") -> dict:
    return {
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}",
                     "labels": {"pingcap.com/cluster": cluster, "pingcap.com/component": component,
                                "pingcap.com/group": group, "pingcap.com/instance": name}},
        "spec": {"nodeName": node},
        "status": {"phase": "Running"},
    }  # fmt: skip


# ---------------------------------------------------------------------- the three examples


def test_basic_reads_every_group_kind_and_finds_pd_and_tidb_by_their_services() -> None:
    cluster, groups = example("basic")
    view = read_v2_cluster(cluster, groups)
    assert [(g.component, g.kind, g.name) for g in view.groups] == [
        ("pd", "PDGroup", "pd"),
        ("tikv", "TiKVGroup", "tikv"),
        ("tiflash", "TiFlashGroup", "tiflash"),
        ("tidb", "TiDBGroup", "tidb"),
        ("tiproxy", "TiProxyGroup", "tiproxy"),
        ("ticdc", "TiCDCGroup", "ticdc"),
    ]
    assert view.images() == {
        "pd": "pingcap/pd:v8.5.2", "tikv": "pingcap/tikv:v8.5.2",
        "tiflash": "pingcap/tiflash:v8.5.2", "tidb": "pingcap/tidb:v8.5.2",
        "tiproxy": "pingcap/tiproxy:v1.3.1", "ticdc": "pingcap/ticdc:v8.5.2",
    }  # fmt: skip
    assert view.replicas() == {"pd": 1, "tikv": 3, "tiflash": 1, "tidb": 2, "tiproxy": 3,
                               "ticdc": 2}  # fmt: skip
    assert view.tidb is not None and (view.tidb.host, view.tidb.port) == (f"tidb-tidb.{NS}", 4000)
    # No status yet, no MultiPDGroup gate: the one PD group's Service, as the operator makes.
    assert view.pd_url == f"http://pd-pd.{NS}:2379"
    assert view.pd_note == "PD through PDGroup pd's Service pd-pd"


def test_with_multi_pd_group_pd_is_the_clusters_service_never_a_groups() -> None:
    cluster, groups = example("basic")
    cluster["spec"]["featureGates"] = [{"name": "MultiPDGroup"}]
    second = copy.deepcopy(groups[0])
    second["metadata"]["name"] = "pd-b"
    view = read_v2_cluster(cluster, [*groups, second])
    assert view.pd_url == f"http://basic-pd.{NS}:2379"
    assert view.pd_note == (
        "PD through the cluster's Service basic-pd (MultiPDGroup) (2 PDGroups: pd, pd-b)"
    )
    assert view.replicas()["pd/pd-b"] == 1
    cluster["spec"]["customizedPDServiceName"] = "legacy-pd"
    cluster["spec"]["dns"] = {"mode": "FQDN", "clusterDomain": "example.org"}
    view = read_v2_cluster(cluster, [*groups, second])
    assert view.pd_url == f"http://legacy-pd.{NS}.svc.example.org:2379"
    assert "Service legacy-pd (spec.customizedPDServiceName)" in view.pd_note
    # What the operator wrote to the status wins; the note still says there are two.
    cluster["status"] = {"pd": f"http://basic-pd.{NS}:2379"}
    view = read_v2_cluster(cluster, [*groups, second])
    assert view.pd_url == f"http://basic-pd.{NS}:2379"
    assert view.pd_note == "PD from Cluster.status.pd (2 PDGroups: pd, pd-b)"


def test_tls_reads_tls_on_and_the_secret_names_the_example_certificates_write() -> None:
    cluster, groups = example("tls")
    view = read_v2_cluster(cluster, groups)
    assert view.pd_url == f"https://pd-pd.{NS}:2379"
    assert (view.tls.cluster, view.tls.mysql) == (True, True)
    certificates = {
        d["spec"]["secretName"]
        for d in v2_example_objects("tls", "v2.1")
        if d["kind"] == "Certificate"
    }
    # PD's client certificate: the example issues exactly the name TiDB Operator defaults to.
    assert view.tls.cluster_client_secret == "tls-cluster-client-secret" in certificates
    assert view.tls.cluster_ca_secret == ""
    # The MySQL client certificate: TiDB Operator's docs name it <tidbgroup>-tidb-client-secret
    # (api/core/v1alpha1/tidb_types.go); the example issues <cluster>-tidb-client-secret.
    assert view.tls.mysql_client_secret == "tidb-tidb-client-secret"
    assert "tls-tidb-client-secret" in certificates
    # The example sets `version` beside `template`: not a field of v2.1's CRD.
    assert [g.version for g in view.groups] == [None, None, None, None]
    assert [g.component for g in view.groups] == ["pd", "tikv", "tiflash", "tidb"]


def test_tls_secrets_named_by_the_cluster_win_and_a_separate_ca_goes_with_them() -> None:
    cluster, groups = example("tls")
    cluster["spec"]["security"] = {
        "tls": {"client": {"ca": {"name": "trust-bundle"}, "certKeyPair": {"name": "op-client"}}}
    }
    mysql = groups[2]["spec"]["template"]["spec"]["security"]["tls"]["mysql"]
    mysql["clientAuth"] = "NoClientCert"
    view = read_v2_cluster(cluster, groups)
    assert view.tls.cluster_client_secret == "op-client"
    assert view.tls.cluster_ca_secret == "trust-bundle"
    assert view.tls.notes == (
        "PD client certificate from Secret op-client (Cluster spec.security.tls.client)",
        "PD's CA from Secret trust-bundle (Cluster spec.security.tls.client.ca)",
        "TiDBGroup tidb asks MySQL clients for no certificate (clientAuth: NoClientCert)",
    )
    spec = BenchmarkRunSpec.model_validate({"cluster": {"name": "tls"}, **CREDS})
    secrets = resolve_tls(spec, view)
    assert (secrets.pd, secrets.pd_ca) == ("op-client", "trust-bundle")
    # A Secret the spec names is a whole client Secret: no CA from elsewhere.
    spec = BenchmarkRunSpec.model_validate(
        {"cluster": {"name": "tls"}, "tls": {"cluster": {"secretRef": {"name": "mine"}}}, **CREDS}
    )
    assert (resolve_tls(spec, view).pd, resolve_tls(spec, view).pd_ca) == ("mine", None)


def test_pdms_reads_pd_in_ms_mode_with_tso_and_scheduling_and_has_no_tidb() -> None:
    cluster, groups = example("pdms")
    view = read_v2_cluster(cluster, groups)
    assert [(g.component, g.kind) for g in view.groups] == [
        ("pd", "PDGroup"),
        ("tso", "TSOGroup"),
        ("scheduling", "SchedulingGroup"),
        ("tikv", "TiKVGroup"),
    ]
    assert view.pd_url == f"http://pd-pd.{NS}:2379"
    assert view.tidb is None
    assert view.images()["tso"] == "pingcap/pd:v8.5.2"  # TSO ships in PD's image


def test_a_group_kind_no_version_knows_is_read_by_its_label() -> None:
    cluster, groups = example("basic")
    future = copy.deepcopy(groups[0])
    future["kind"] = "ColumnarGroup"
    future["metadata"] = {"name": "col", "namespace": NS,
                          "labels": {"pingcap.com/component": "columnar"}}  # fmt: skip
    view = read_v2_cluster(cluster, [*groups, future])
    assert ("columnar", "ColumnarGroup") in [(g.component, g.kind) for g in view.groups]
    assert view.groups[-1].component == "columnar"  # unknown kinds after the known ones


# ---------------------------------------------------------------------- StandBy TiDB


def test_standby_tidb_groups_are_neither_targets_nor_serving_replicas() -> None:
    cluster, groups = example("basic")
    standby = copy.deepcopy(groups[2])
    standby["metadata"]["name"] = "aaa-standby"  # first by name: still not chosen
    standby["spec"]["replicas"] = 2
    standby["spec"]["template"]["spec"]["mode"] = "StandBy"
    view = read_v2_cluster(cluster, [*groups, standby])
    assert view.tidb is not None and view.tidb.group == "tidb"
    assert view.tidb.note == "TiDBGroup tidb; StandBy, not counted: aaa-standby"
    assert "tidb/aaa-standby" not in view.replicas()
    with pytest.raises(SpecError) as err:
        read_v2_cluster(cluster, [*groups, standby], tidb_group="aaa-standby")
    assert "aaa-standby is StandBy and serves no clients" in str(err.value)


# ---------------------------------------------------------------------- every component


def test_isolation_anti_affinity_and_fingerprint_include_every_v2_component_by_label() -> None:
    worker = pod("tikv-worker-abc", "tikv-worker", "tikvworker", "bench")
    result = check_bench_node_isolation(
        [{"metadata": {"name": "bench", "labels": {"bench": "true"}}, "spec": {}}],
        [worker, pod("router-abc", "router", "router", "db1")],
        {"bench": "true"},
        [],
        1,
        cluster_name="basic",
    )
    assert result.status == "Fail"
    assert "pod tikv-worker-abc (tikv-worker) runs on bench node bench" in result.message
    assert anti_affinity_selector("Cluster", "basic")["matchExpressions"] == [
        {"key": "pingcap.com/component", "operator": "Exists"}
    ]
    worker["status"]["containerStatuses"] = [
        {"name": "tikv-worker", "imageID": "docker-pullable://pingcap/tikv@sha256:w"}
    ]
    assert image_digests([worker], "pingcap.com/component", any_component=True) == {
        "tikv-worker": "sha256:w"
    }


def test_v1_keeps_pd_tikv_tidb_only() -> None:
    discovery = {
        "metadata": {"name": "basic-discovery-0", "namespace": NS,
                     "labels": {"app.kubernetes.io/instance": "basic",
                                "app.kubernetes.io/component": "discovery"}},
        "spec": {"nodeName": "bench"}, "status": {"phase": "Running"},
    }  # fmt: skip
    result = check_bench_node_isolation(
        [{"metadata": {"name": "bench"}, "spec": {}}], [discovery], {}, [], 1, cluster_name="basic"
    )
    assert result.status == "Pass"
    assert anti_affinity_selector("TidbCluster", "basic")["matchExpressions"][0]["values"] == [
        "pd", "tikv", "tidb"
    ]  # fmt: skip
    view = read_tidb_cluster({"metadata": {"name": "basic", "namespace": NS}, "spec": {}})
    assert view.database_pods([discovery]) == []


# ---------------------------------------------------------------------- the guard


def rolling(
    status: dict[str, Any], spec: dict[str, Any] | None = None
) -> tuple[Any, list[dict[str, Any]]]:
    cluster, groups = example("basic")
    tidb = groups[2]
    tidb["spec"]["replicas"] = 2
    tidb["spec"].update(spec or {})
    tidb["status"] = status
    return read_v2_cluster(cluster, groups), groups


SETTLED = {"replicas": 2, "readyReplicas": 2, "updatedReplicas": 2}


def test_a_tidb_rolling_restart_with_a_surge_pod_is_one_disturbance_per_step() -> None:
    view, _ = rolling(SETTLED)
    old = [
        pod("tidb-tidb-000x", "tidb", "tidb", "db1"),
        pod("tidb-tidb-001x", "tidb", "tidb", "db2"),
    ]
    start = GuardLook(step="s0r0a0", at=NOW, pods=pod_entries(view, old))
    assert start.pods["tidb-tidb-000x"] == "uid-tidb-tidb-000x db1 0 tidb TiDBGroup/tidb"
    start.unsettled = rollout_signals(view)[2]
    # The surge instance first (3 instances for 2 replicas), then an old one goes.
    surge = pod("tidb-tidb-002x", "tidb", "tidb", "db3")
    looks = [
        ({"replicas": 3, "readyReplicas": 2, "updatedReplicas": 0}, [*old, surge]),
        ({"replicas": 2, "readyReplicas": 2, "updatedReplicas": 1}, [old[1], surge]),
        (SETTLED, [old[1], surge]),  # settled: its pods are not flagged one by one afterwards
    ]
    found = []
    for status, pods in looks:
        view, _ = rolling(status, {"maxSurge": 1})
        _, _, unsettled = rollout_signals(view, pods, NOW)
        entries = pod_entries(view, pods)
        found += kube_disturbances(start, entries, {}, None, unsettled, cluster="basic", at=NOW)
        start.pods = rollout_baseline(start.pods, entries, unsettled)
    assert {d.what for d in found} == {"ClusterProgressing"}
    assert {d.key() for d in found} == {("Kubernetes", "ClusterProgressing", "basic")}
    assert found[0].message == (
        "TiDBGroup tidb: 0/2 updated, 3 instances for 2 replicas (maxSurge 1) (rollout pods: "
        "tidb-tidb-002x created)"
    )
    assert found[1].message.endswith("(rollout pods: tidb-tidb-000x deleted)")
    assert len(found) == 2  # and both are one disturbance: the same key


def test_a_pod_not_yet_min_ready_seconds_ready_keeps_the_rollout_going() -> None:
    view, _ = rolling(SETTLED, {"minReadySeconds": 30})
    fresh = pod("tidb-tidb-002x", "tidb", "tidb", "db3")
    fresh["status"]["conditions"] = [
        {"type": "Ready", "status": "True",
         "lastTransitionTime": (NOW - timedelta(seconds=10)).isoformat()}
    ]  # fmt: skip
    _, _, unsettled = rollout_signals(view, [fresh], NOW)
    assert unsettled[0] == "TiDBGroup tidb: pod tidb-tidb-002x Ready for 10s of minReadySeconds 30"
    assert rollout_signals(view, [fresh], NOW + timedelta(seconds=25))[2][:1] != unsettled[:1]


def test_the_clusters_aggregated_ready_and_synced_conditions_are_used_where_present() -> None:
    cluster, groups = example("basic")
    cluster["status"] = {"conditions": [
        {"type": "Ready", "status": "True", "reason": "Ready"},
        {"type": "Synced", "status": "False", "reason": "Unsynced",
         "message": "TiDBGroup/tidb"},
    ]}  # fmt: skip
    view = read_v2_cluster(cluster, groups)
    assert rollout_signals(view)[2] == ["Cluster Synced: Synced=False (Unsynced): TiDBGroup/tidb"]
