"""A run against a TiDB Operator v2 Cluster, through the reconciler, the gate and the builders.

The v2 objects are TiDB Operator's own `basic` and `schedule-policy` examples (vendored),
kept in FakeKube / the gate's in-memory reader; pods carry v2's pingcap.com labels.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from testbed.fake_kube import FakeClock, FakeKube
from tidb_bench_operator.adapters.pd import choose_pd_pod, make_pd_client
from tidb_bench_operator.domain.api.resources import parse_run_spec
from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec
from tidb_bench_operator.domain.manifests import Endpoint, RunRef, build_affinity, compute_endpoint
from tidb_bench_operator.domain.preflight import evaluate
from tidb_bench_operator.domain.queue import queue_key
from tidb_bench_operator.domain.trust.reach import Reach
from tidb_bench_operator.reconcile.run import PreflightOutcome, RunReconciler
from tidb_bench_operator.reconcile.run.gate import run_preflight

V2 = Path(__file__).resolve().parents[3] / "data" / "vendor" / "tidb-operator-v2.0.1"
NS = "bench"
CLUSTER_NS = "tidb-cluster"
JSON = dict[str, Any]


def example(name: str, cluster: str | None = None) -> list[JSON]:
    docs = [yaml.safe_load(p.read_text()) for p in sorted((V2 / "examples" / name).glob("*.yaml"))]
    for d in docs:
        d["metadata"]["namespace"] = CLUSTER_NS
    docs[0]["status"] = {
        "pd": f"http://pd-pd.{CLUSTER_NS}:2379",
        "conditions": [{"type": "Progressing", "status": "True", "reason": "ClusterCreation"}],
    }
    return docs


def v2_pod(name: str, component: str, group: str, node: str, cluster: str = "basic") -> JSON:
    return {
        "metadata": {
            "name": name,
            "namespace": CLUSTER_NS,
            "labels": {
                "pingcap.com/cluster": cluster,
                "pingcap.com/component": component,
                "pingcap.com/group": group,
                "pingcap.com/instance": name,
            },
        },
        "spec": {"nodeName": node},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }


def spec(**cluster: Any) -> JSON:
    return {
        "cluster": {"name": "basic", "namespace": CLUSTER_NS, **cluster},
        "credentials": {"secretRef": {"name": "db"}},
        "threads": [4],
        "durationSeconds": 5,
        "reportIntervalSeconds": 1,
        "placement": {"nodeSelector": {"bench": "true"}},
        "preflight": {"policy": "Enforce", "timeoutSeconds": 60},
    }


class Passing:
    """The preflight gate as a function that passes, remembering the endpoints it saw."""

    def __init__(self) -> None:
        self.endpoints: list[Endpoint] = []

    def __call__(self, s: BenchmarkRunSpec, namespace: str, endpoint: Endpoint) -> PreflightOutcome:
        self.endpoints.append(endpoint)
        return PreflightOutcome(checks=[], verdict=evaluate([], s.preflight.policy))


def reconcile(kube: FakeKube, body: JSON, preflight: Passing) -> JSON:
    """Reconcile until nothing happens at once; the run's status as stored."""
    rec = RunReconciler(
        kube, preflight=preflight, clock=FakeClock(), image="tidb-bench:test",
        reach=Reach(cluster_namespaces=frozenset({CLUSTER_NS})),  # the runs are in another one
    )  # fmt: skip
    for _ in range(3):
        out = rec.reconcile(copy.deepcopy(body))
        body["status"] = {**(body.get("status") or {}), **out.status}
    return dict(body["status"])


def world(*objects: JSON) -> FakeKube:
    kube = FakeKube()
    kube.add_secret(NS, "db", {"user": "u", "password": "p"})
    kube.add_node("bench-1", {"bench": "true"})
    kube.add_v2(*objects)
    return kube


def body(run_spec: JSON) -> JSON:
    return {
        "apiVersion": "tidbbench.io/v1alpha1",
        "kind": "BenchmarkRun",
        "metadata": {
            "name": "v2",
            "namespace": NS,
            "uid": "u-1",
            "generation": 1,
            "creationTimestamp": "2024-06-01T01:00:00Z",
        },
        "spec": run_spec,
    }


def test_a_v2_run_resolves_tidb_group_and_pd_into_status_and_its_jobs_avoid_v2_pods() -> None:
    kube, preflight = world(*example("basic")), Passing()
    status = reconcile(kube, body(spec()), preflight)
    assert status["phase"] == "Preparing", status
    assert status["endpoint"] == {
        "clusterKind": "Cluster",
        "host": f"tidb-tidb.{CLUSTER_NS}",
        "port": 4000,
        "pdURL": f"http://pd-pd.{CLUSTER_NS}:2379",
        "tidbGroup": "tidb",
    }
    env = status["environment"]
    assert env["images"] == {"pd": "pingcap/pd:v8.5.2", "tikv": "pingcap/tikv:v8.5.2",
                             "tidb": "pingcap/tidb:v8.5.2"}  # fmt: skip
    assert env["replicas"] == {"pd": 1, "tikv": 3, "tidb": 2}
    assert env["versions"] == {"pd": "v8.5.2", "tikv": "v8.5.2", "tidb": "v8.5.2"}
    assert preflight.endpoints[0].cluster_kind == "Cluster"
    assert preflight.endpoints[0].host == f"tidb-tidb.{CLUSTER_NS}"
    target = [e for e in kube.events if e["reason"] == "Target"]
    assert [e["message"] for e in target] == [
        f"Cluster {CLUSTER_NS}/basic: TiDB at tidb-tidb.{CLUSTER_NS}:4000 (TiDBGroup tidb), "
        f"PD at http://pd-pd.{CLUSTER_NS}:2379"
    ]
    job = kube.job("bench", "v2-prepare")
    term = job["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ][0]
    assert term["labelSelector"]["matchLabels"] == {"pingcap.com/cluster": "basic"}
    assert term["labelSelector"]["matchExpressions"][0]["key"] == "pingcap.com/component"
    assert term["namespaces"] == [CLUSTER_NS]
    assert f"--host=tidb-tidb.{CLUSTER_NS}" in " ".join(
        job["spec"]["template"]["spec"]["containers"][0]["args"]
    )


def test_two_tidb_groups_use_the_named_one_and_the_event_says_which() -> None:
    docs = example("basic")
    olap = copy.deepcopy(docs[3])
    olap["metadata"]["name"] = "analytics"
    olap["spec"]["template"]["spec"]["server"] = {"ports": {"client": {"port": 4001}}}
    kube = world(*docs, olap)
    first = reconcile(kube, body(spec()), Passing())
    assert first["endpoint"]["tidbGroup"] == "analytics"
    assert first["endpoint"]["port"] == 4001
    assert "the first by name of 2 (not tidb); set spec.cluster.tidbGroup to choose" in next(
        e["message"] for e in kube.events if e["reason"] == "Target"
    )
    named = reconcile(world(*docs, olap), body(spec(tidbGroup="tidb")), Passing())
    assert (named["endpoint"]["host"], named["endpoint"]["port"]) == (
        f"tidb-tidb.{CLUSTER_NS}",
        4000,
    )


def test_a_missing_cluster_or_both_kinds_fail_the_run_at_pending_creating_nothing() -> None:
    kube = world()
    status = reconcile(kube, body(spec()), Passing())
    assert status["phase"] == "Failed"
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "ClusterNotFound"
    assert failed["message"].startswith(
        f"spec.cluster.name: neither a TidbCluster nor a Cluster named {CLUSTER_NS}/basic exists"
    )
    assert kube.job_names() == [] and kube.service_accounts == {}

    both = world(*example("basic"))
    both.add_tidb_cluster(
        {"kind": "TidbCluster", "metadata": {"name": "basic", "namespace": CLUSTER_NS}, "spec": {}}
    )
    status = reconcile(both, body(spec()), Passing())
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert (failed["reason"], failed["message"].split(" (")[0]) == (
        "InvalidSpec",
        f"spec.cluster.kind: both a TidbCluster and a Cluster named {CLUSTER_NS}/basic exist",
    )


def test_a_v2_cluster_without_tidb_group_fails_unless_target_host_is_given() -> None:
    docs = example("basic")[:3]
    status = reconcile(world(*docs), body(spec()), Passing())
    assert status["phase"] == "Failed"
    assert "has no TiDBGroup, so there is no TiDB to connect to" in status["message"]
    with_host = spec()
    with_host["target"] = {"host": "mysql.example", "port": 3306}
    status = reconcile(world(*docs), body(with_host), Passing())
    assert status["endpoint"] == {"clusterKind": "Cluster", "host": "mysql.example", "port": 3306,
                                  "pdURL": f"http://pd-pd.{CLUSTER_NS}:2379"}  # fmt: skip


def test_runs_on_the_same_cluster_share_one_queue_whatever_kind_they_name() -> None:
    by_kind = BenchmarkRunSpec.model_validate(spec(kind="Cluster"))
    unnamed = BenchmarkRunSpec.model_validate(spec())
    other = BenchmarkRunSpec.model_validate(spec(name="other"))
    assert queue_key(by_kind, NS) == queue_key(unnamed, NS)
    assert queue_key(other, NS) != queue_key(unnamed, NS)


# ---------------------------------------------------------------------- builders, PD pod


def test_anti_affinity_for_a_v1_cluster_is_unchanged() -> None:
    s = parse_run_spec(spec())
    ep = compute_endpoint(s, NS)
    assert ep.cluster_kind is None
    term = build_affinity(s, ep, RunRef("r", NS, "u"), "0")["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ][0]
    assert term["labelSelector"] == {
        "matchLabels": {"app.kubernetes.io/instance": "basic"},
        "matchExpressions": [
            {
                "key": "app.kubernetes.io/component",
                "operator": "In",
                "values": ["pd", "tikv", "tidb"],
            }
        ],
    }


class Pods:
    def __init__(self, pods: list[JSON]) -> None:
        self._pods = pods
        self.selectors: list[str] = []

    def pods(self, namespace: str | None, selector: str) -> list[JSON]:
        self.selectors.append(selector)
        wanted = dict(t.split("=", 1) for t in selector.split(","))
        return [
            p
            for p in self._pods
            if all(p["metadata"]["labels"].get(k) == v for k, v in wanted.items())
        ]


def test_pd_ctl_runs_in_a_pd_pod_found_by_v2_labels() -> None:
    kube = Pods(
        [v2_pod("pd-pd-abc", "pd", "pd", "node2"), v2_pod("tikv-tikv-x", "tikv", "tikv", "node2")]
    )
    assert (choose_pd_pod(kube, CLUSTER_NS, "basic", "Cluster") or {}).get("metadata", {}).get(
        "name"
    ) == "pd-pd-abc"
    assert kube.selectors == ["pingcap.com/cluster=basic,pingcap.com/component=pd"]
    ep = Endpoint("tidb-tidb.x", 4000, None, "basic", CLUSTER_NS, "Cluster", "tidb")
    client = make_pd_client("Exec", ep, Pods([]), api_client=None)
    assert client is not None
    with pytest.raises(
        Exception,
        match=r"no Running PD pod of Cluster tidb-cluster/basic .*selector pingcap.com/cluster=basic,pingcap.com/component=pd",
    ):
        client.stores()


# ---------------------------------------------------------------------- the gate


class Reader:
    """The gate's Kubernetes reads over plain dicts (nodes, pods, v2 objects)."""

    def __init__(self, nodes: list[JSON], pods: list[JSON], objects: list[JSON]) -> None:
        self.kube = FakeKube()
        self.kube.add_v2(*objects)
        self._nodes, self._pods = nodes, pods

    def nodes(self) -> list[JSON]:
        return self._nodes

    def pods(self, namespace: str | None, selector: str) -> list[JSON]:
        key, value = selector.split("=", 1)
        return [p for p in self._pods if p["metadata"]["labels"].get(key) == value]

    def tidb_cluster(self, namespace: str, name: str) -> JSON | None:
        return None

    def v2_cluster(self, namespace: str, name: str) -> JSON | None:
        return self.kube.v2_cluster(namespace, name)

    def v2_groups(self, namespace: str) -> list[JSON]:
        return self.kube.v2_groups(namespace)


def node(name: str, **labels: str) -> JSON:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "spec": {},
    }


ZONE = "topology.kubernetes.io/zone"


def gate_spec() -> BenchmarkRunSpec:
    s = spec(kind="Cluster")
    s["cluster"]["name"] = "schedule"
    s["preflight"]["skip"] = ["store-state", "leader-size-balance", "region-size-balance",
                              "pending-operators", "table-leader-distribution"]  # fmt: skip
    return parse_run_spec(s)


def test_the_gate_judges_a_v2_cluster_by_its_schedule_policies_and_v2_pods_on_the_bench_node() -> (
    None
):
    nodes = [node("bench-1", bench="true"), node("n-a", **{ZONE: "us-west-2a"}),
             node("n-b", **{ZONE: "us-west-2b"}), node("n-c", **{ZONE: "us-west-2c"})]  # fmt: skip
    pods = [v2_pod(f"pd-{z}", "pd", "pd", f"n-{z}", "schedule") for z in "abc"]
    pods += [v2_pod(f"tidb-{z}", "tidb", "tidb", f"n-{z}", "schedule") for z in "ab"]
    pods += [
        v2_pod(f"tikv-{i}", "tikv", "tikv", n, "schedule")
        for i, n in enumerate(["n-a", "n-a", "n-b"])
    ]
    pods.append(v2_pod("tikv-3", "tikv", "tikv", "bench-1", "schedule"))
    reader = Reader(nodes, pods, example("schedule-policy"))
    s = gate_spec()
    out = run_preflight(s, NS, kube=reader, pd=None, db=None, endpoint=compute_endpoint(s, NS))
    checks = {c.name: c for c in out.checks}
    isolation = checks["bench-node-isolation"]
    assert isolation.status == "Fail"
    assert isolation.message.startswith("pod tikv-3 (tikv) runs on bench node bench-1")
    spread = checks["topology-spread"]
    assert spread.status == "Fail"
    z = f"{ZONE}=us-west-2"
    assert f"TiKV {z}a:2 {z}b:1 {z}c:0 — weights 1:1:1 (TiKVGroup tikv)" in spread.message
    assert "outside every listed topology: tikv-3 on bench-1" in spread.message
    assert out.verdict.proceed is False


# ---------------------------------------------------------------------- TLS (docs/tls.md)

TLS_KEYS = {"ca.crt": "CA", "tls.crt": "CERT", "tls.key": "KEY"}


def tls_example() -> list[JSON]:
    docs = example("basic")
    docs[0]["spec"]["tlsCluster"] = {"enabled": True}
    docs[0]["status"]["pd"] = f"https://pd-pd.{CLUSTER_NS}:2379"
    docs[3]["spec"]["template"]["spec"]["security"] = {"tls": {"mysql": {"enabled": True}}}
    return docs


def test_a_v2_tls_cluster_uses_the_operators_secrets_and_its_jobs_mount_the_mysql_one() -> None:
    kube, preflight = world(*tls_example()), Passing()
    kube.add_secret(NS, "basic-cluster-client-secret", TLS_KEYS)
    kube.add_secret(NS, "tidb-tidb-client-secret", TLS_KEYS)
    status = reconcile(kube, body(spec()), preflight)
    assert status["phase"] == "Preparing", status
    assert status["endpoint"]["pdURL"] == f"https://pd-pd.{CLUSTER_NS}:2379"
    assert status["endpoint"]["pdTLSSecret"] == "basic-cluster-client-secret"
    assert status["endpoint"]["mysqlTLSSecret"] == "tidb-tidb-client-secret"
    assert preflight.endpoints[0].pd_tls_secret == "basic-cluster-client-secret"
    assert [e["message"] for e in kube.events if e["reason"] == "TLS"] == [
        "PD over HTTPS with the client certificate of Secret basic-cluster-client-secret; MySQL "
        "over TLS with the client certificate of Secret tidb-tidb-client-secret"
    ]
    pod = kube.job("bench", "v2-prepare")["spec"]["template"]["spec"]
    assert pod["volumes"][-1] == {
        "name": "mysql-tls",
        "secret": {"secretName": "tidb-tidb-client-secret", "defaultMode": 0o440},
    }
    assert "--tls-dir=/var/run/secrets/tidb-bench/mysql-tls" in pod["containers"][0]["args"]


def test_a_missing_tls_secret_or_key_fails_at_pending_creating_nothing() -> None:
    kube = world(*tls_example())
    kube.add_secret(NS, "basic-cluster-client-secret", TLS_KEYS)
    status = reconcile(kube, body(spec()), Passing())
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "SecretNotFound"
    assert "Secret 'tidb-tidb-client-secret' with the MySQL client certificate" in failed["message"]
    # The cluster is in another namespace: the pods can mount only the run's Secrets.
    assert f"the cluster is in namespace '{CLUSTER_NS}'" in failed["message"]
    assert kube.job_names() == [] and kube.service_accounts == {}

    kube = world(*tls_example())
    kube.add_secret(NS, "basic-cluster-client-secret", {"ca.crt": "CA", "tls.crt": "CERT"})
    kube.add_secret(NS, "tidb-tidb-client-secret", TLS_KEYS)
    status = reconcile(kube, body(spec()), Passing())
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "SecretKeyMissing"
    assert f"Secret {NS}/basic-cluster-client-secret has no key 'tls.key'" in failed["message"]
    assert kube.job_names() == []
