"""BenchmarkRuns against TiDB Operator v2 clusters on the test bed.

The v2 CRDs are installed next to v1's (transformed for 1.20, see testbed.v2cluster); a
stand-in is a Cluster with its PD/TiKV/TiDB groups, instances and pods carrying v2's
`pingcap.com/*` labels on chosen nodes. As in the v1 tests, MariaDB answers the SQL
(spec.target.host) and a FakePD the PD API (spec.target.pdURL); the cluster named in
spec.cluster decides placement, the topology check and the provenance.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from kubernetes import client

from testbed.cluster import Testbed
from testbed.deploy import kubectl
from testbed.fake_pd import FakePD
from testbed.kube import pd_ctl_exec, wait_for
from testbed.runs import (
    BENCH_PLACEMENT,
    EXAMPLES,
    RunBed,
    assert_blocked_only_by,
    assert_quiet,
    checks_of,
    database_of,
)
from testbed.v2cluster import (
    ZONE_KEY,
    StandinGroup,
    create_v2_standin_cluster,
    unzone_nodes,
    zone_nodes,
)

pytestmark = pytest.mark.e2e

RUN_TIMEOUT = 240


@pytest.fixture
def zones(core: client.CoreV1Api) -> Iterator[dict[str, str]]:
    """Three zones over the bed's three nodes: node2=a, node3=b, node1 (the bench node)=c."""
    placed = {"node2": "a", "node3": "b", "node1": "c"}
    zone_nodes(core, placed)
    yield placed
    unzone_nodes(core, list(placed))


def v2_example_run(mariadb: dict[str, Any], pd_url: str, **spec: Any) -> dict[str, Any]:
    """examples/v2-cluster-sweep.yaml, shortened, its SQL and PD answered by the stand-ins."""
    doc = yaml.safe_load((EXAMPLES / "v2-cluster-sweep.yaml").read_text())
    s = doc["spec"]
    s["cluster"].pop("namespace", None)
    s["target"] = {"host": str(mariadb["host"]), "port": int(mariadb["port"]), "pdURL": pd_url}
    s["credentials"] = {"secretRef": {"name": "db"}}
    s["placement"] = dict(BENCH_PLACEMENT)
    s.update(database_of(mariadb))
    s.update(threads=[2], durationSeconds=2, reportIntervalSeconds=1,
             dataset={"tables": 1, "tableSize": 1000}, slo={"latencyMs": 105})  # fmt: skip
    s.update(spec)
    doc["metadata"] = {"name": doc["metadata"]["name"]}
    return dict(doc)


def basic(tikv: list[str], **tikv_kw: Any) -> dict[str, StandinGroup]:
    """TiDB Operator v2's basic example as a stand-in: groups pd, tikv, tidb."""
    return {
        "pd": StandinGroup("pd", ["node2"]),
        "tikv": StandinGroup("tikv", tikv, **tikv_kw),
        "tidb": StandinGroup("tidb", ["node3"]),
    }


def test_the_v2_example_run_succeeds_and_describe_shows_the_v2_provenance(
    bed: RunBed, testbed: Testbed, controller: Any, fake_pd: FakePD
) -> None:
    # PD checks go through pd-ctl in the v2 PD pod, found by its pingcap.com labels.
    groups = basic(["node2", "node3", "node3"])
    groups["pd"].exec_commands = pd_ctl_exec(fake_pd.url)
    create_v2_standin_cluster(bed.api, bed.namespace, "basic", groups)
    body = v2_example_run(bed.mariadb, fake_pd.url, preflight={"policy": "Enforce", "timeoutSeconds": 20,
                                                            "pdTransport": "Exec"})  # fmt: skip
    bed.create(body)
    run = bed.wait("v2-cluster-sweep", timeout=RUN_TIMEOUT)
    st = run["status"]
    assert st["phase"] == "Succeeded", st
    assert_quiet(run)  # the guard read the v2 Cluster and its groups on every look
    # The groups have no schedule policies: a Warn naming each group with the patch.
    spread = checks_of(run)["topology-spread"]
    assert spread["status"] == "Warn", spread
    assert (
        "TiKV node3:2 node2:1 (TiKVGroup tikv): no EvenlySpread schedulePolicies"
        in spread["message"]
    )
    assert (
        f"kubectl -n {bed.namespace} patch tikvgroup tikv --type=merge -p "
        '\'{"spec":{"schedulePolicies":[{"type":"EvenlySpread","evenlySpread":{"topologies":'
        '[{"topology":{"kubernetes.io/hostname":"node2"}},{"topology":{"kubernetes.io/hostname":"node3"}}]}}]}}\''
    ) in spread["message"]
    assert checks_of(run)["bench-node-isolation"]["status"] == "Pass"
    assert checks_of(run)["store-state"]["status"] == "Pass", "pd-ctl ran in the v2 PD pod"
    assert st["endpoint"]["clusterKind"] == "Cluster"
    assert st["endpoint"]["pdURL"] == fake_pd.url
    env = st["environment"]
    assert env["images"] == {"pd": "pingcap/pd:v8.5.2", "tikv": "pingcap/tikv:v8.5.2",
                             "tidb": "pingcap/tidb:v8.5.2"}  # fmt: skip
    assert env["replicas"] == {"pd": 1, "tikv": 3, "tidb": 1}
    assert env["versions"] == {"pd": "v8.5.2", "tikv": "v8.5.2", "tidb": "v8.5.2"}
    described = kubectl(
        testbed, "-n", bed.namespace, "describe", "benchmarkrun", "v2-cluster-sweep"
    ).stdout
    # kubectl aligns values with spaces, so match key and value apart.
    for pattern in (r"Cluster Kind:\s+Cluster", r"Versions:", r"Tikv:\s+v8\.5\.2",
                    r"Tikv:\s+pingcap/tikv:v8\.5\.2", r"Tikv:\s+3"):  # fmt: skip
        assert re.search(pattern, described), (pattern, described)
    assert "Target" in described and f"Cluster {bed.namespace}/basic: TiDB at" in described


def test_a_v2_tikv_pod_on_the_bench_node_keeps_the_job_off_it_and_fails_bench_node_isolation(
    bed: RunBed, controller: Any, fake_pd: FakePD
) -> None:
    create_v2_standin_cluster(bed.api, bed.namespace, "basic", basic(["node1", "node2", "node3"]))
    tikv_on_bench = "tikv-tikv-000x"
    # Preflight Off: the Job is created, and the real scheduler keeps its pod off node1.
    placed = v2_example_run(bed.mariadb, fake_pd.url, preflight={"policy": "Off"})
    placed["metadata"]["name"] = "crowded"
    bed.create(placed)

    def live_reason() -> str:
        for c in (bed.get("crowded").get("status") or {}).get("conditions", []):
            if c["type"] == "Progressing" and c["reason"] == "Unschedulable":
                return str(c["message"])
        return ""

    message = wait_for(live_reason, 60, "the scheduler's reason in status")
    assert "didn't match pod anti-affinity rules" in message, message
    run = bed.wait("crowded", timeout=90)
    assert run["status"]["phase"] == "Failed"
    assert "didn't match pod anti-affinity rules" in run["status"]["message"]
    wait_for(lambda: not bed.jobs("crowded"), 30, "the run's Jobs to be removed")

    # Preflight Enforce: bench-node-isolation names the v2 pod; no Job is created.
    checked = v2_example_run(
        bed.mariadb, fake_pd.url, preflight={"policy": "Enforce", "timeoutSeconds": 6}
    )
    checked["metadata"]["name"] = "isolated"
    bed.create(checked)
    run = bed.wait("isolated", timeout=RUN_TIMEOUT)
    time.sleep(2)
    assert run["status"]["phase"] == "Failed", run["status"]
    isolation = checks_of(run)["bench-node-isolation"]
    assert isolation["status"] == "Fail"
    assert f"pod {tikv_on_bench} (tikv) runs on bench node node1" in isolation["message"]
    assert not bed.jobs("isolated")


def test_tikv_two_one_zero_over_three_zones_with_weights_one_fails_topology_spread_naming_them(
    bed: RunBed, controller: Any, fake_pd: FakePD, zones: dict[str, str]
) -> None:
    policy = [({ZONE_KEY: z}, 1) for z in ("a", "b", "c")]
    groups = basic(["node2", "node2", "node3"], topologies=policy)
    groups["pd"].topologies = policy
    groups["tidb"].topologies = policy
    create_v2_standin_cluster(bed.api, bed.namespace, "basic", groups)
    body = v2_example_run(
        bed.mariadb, fake_pd.url, preflight={"policy": "Enforce", "timeoutSeconds": 6}
    )
    bed.create(body)
    run = bed.wait("v2-cluster-sweep", timeout=RUN_TIMEOUT)
    assert run["status"]["phase"] == "Failed", run["status"]
    spread = checks_of(run)["topology-spread"]
    assert spread["status"] == "Fail"
    z = f"{ZONE_KEY}="
    assert f"TiKV {z}a:2 {z}b:1 {z}c:0 — weights 1:1:1 (TiKVGroup tikv)" in spread["message"]
    assert (
        f"{z}a holds 2 where the weights give 1; {z}c holds 0 where the weights give 1"
        in spread["message"]
    )
    # One PD and one TiDB over three zones: 0 or 1 each is what the weights give.
    assert (
        f"PD {z}a:1 {z}b:0 {z}c:0 — weights 1:1:1 (PDGroup pd): spread as the weights say."
        in spread["message"]
    )
    assert_blocked_only_by(run, "topology-spread")


def failure_of_run_on(bed: RunBed, fake_pd: FakePD, name: str, cluster: str) -> dict[str, Any]:
    """The Failed condition of the v2 example run `name` pointed at `cluster`, once it ended."""
    body = v2_example_run(bed.mariadb, fake_pd.url)
    body["metadata"]["name"] = name
    body["spec"]["cluster"] = {"name": cluster}
    bed.create(body)
    run = bed.wait(name, timeout=RUN_TIMEOUT)
    return next(c for c in run["status"]["conditions"] if c["type"] == "Failed")


def test_naming_no_cluster_or_a_name_both_kinds_carry_fails_at_pending_saying_what_to_set(
    bed: RunBed, controller: Any, fake_pd: FakePD
) -> None:
    failed = failure_of_run_on(bed, fake_pd, "nowhere", "nothing")
    assert failed["reason"] == "ClusterNotFound"
    assert failed["message"] == (
        f"spec.cluster.name: neither a TidbCluster nor a Cluster named {bed.namespace}/nothing exists "
        f"(check cluster.name and cluster.namespace (kubectl -n {bed.namespace} get "
        "tidbclusters.pingcap.com,clusters.core.pingcap.com))"
    )
    bed.cluster("basic", {"pd": ["node2"]})
    create_v2_standin_cluster(
        bed.api, bed.namespace, "basic", {"pd": StandinGroup("pd", ["node3"])}
    )
    failed = failure_of_run_on(bed, fake_pd, "which", "basic")
    assert (failed["reason"], failed["message"]) == (
        "InvalidSpec",
        f"spec.cluster.kind: both a TidbCluster and a Cluster named {bed.namespace}/basic exist (set "
        "cluster.kind to TidbCluster (TiDB Operator v1) or Cluster (v2) to say which)",
    )
    assert not bed.jobs("nowhere") and not bed.jobs("which")
