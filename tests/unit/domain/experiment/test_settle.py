"""Whether a cluster has settled after a patch: TidbCluster phases and pods, v2 groups."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from tidb_bench_operator.domain.cluster.readers import read_v2_cluster
from tidb_bench_operator.domain.experiment.settle import moving_v1, moving_v2

DATA = Path(__file__).resolve().parents[3] / "data"
TC: dict[str, Any] = yaml.safe_load((DATA / "experiment" / "tidbcluster-basic.yaml").read_text())
PODS: list[dict[str, Any]] = yaml.safe_load((DATA / "experiment" / "pods-basic.yaml").read_text())
V2 = DATA / "vendor" / "tidb-operator-v2.1.0-beta.6" / "examples" / "basic"


def test_a_tidbcluster_with_normal_phases_and_all_pods_ready_has_settled() -> None:
    assert moving_v1(TC, PODS) == []


def test_a_scale_out_in_progress_names_the_phase_and_the_missing_pod() -> None:
    tc = copy.deepcopy(TC)
    tc["spec"]["tikv"]["replicas"] = 4
    tc["status"]["tikv"]["phase"] = "Scale"
    new = copy.deepcopy(PODS[1])
    new["metadata"]["name"] = "basic-tikv-3"
    new["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}
    assert moving_v1(tc, [*PODS, new]) == [
        "tikv: phase Scale, not Normal",
        "tikv: pod basic-tikv-3 is not Ready",
    ]


def test_a_terminating_pod_is_still_moving_and_does_not_count_as_a_replica() -> None:
    pods = copy.deepcopy(PODS)
    gone = next(p for p in pods if p["metadata"]["name"] == "basic-tidb-1")
    gone["metadata"]["deletionTimestamp"] = "2026-12-01T10:00:00Z"
    assert moving_v1(TC, pods) == [
        "tidb: pod basic-tidb-1 is terminating",
        "tidb: 1 pods for 2 replicas",
    ]


def _v2() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    docs = [yaml.safe_load(p.read_text()) for p in sorted(V2.glob("*.yaml"))]
    for d in docs:
        d["metadata"]["namespace"] = "tidb-cluster"
    return docs[0], docs[1:]


def _v2_pods(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for g in groups:
        labels = g["metadata"]["labels"]
        for i in range(g["spec"]["replicas"]):
            out.append({
                "metadata": {"name": f"{g['metadata']['name']}-{i}", "namespace": "tidb-cluster",
                             "labels": {**labels, "pingcap.com/instance": f"x{i}"}},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
            })  # fmt: skip
    return out


def test_v2_groups_whose_status_caught_up_have_settled() -> None:
    cluster, groups = _v2()
    for g in groups:
        n = g["spec"]["replicas"]
        g["status"] = {"replicas": n, "readyReplicas": n, "updatedReplicas": n,
                       "conditions": [{"type": "Synced", "status": "True", "reason": "Synced"}]}  # fmt: skip
    assert moving_v2(read_v2_cluster(cluster, groups), _v2_pods(groups)) == []


def test_a_v2_group_scaling_out_is_moving_by_its_status_and_its_pods() -> None:
    cluster, groups = _v2()
    for g in groups:
        n = g["spec"]["replicas"]
        g["status"] = {"replicas": n, "readyReplicas": n, "updatedReplicas": n}
    pods = _v2_pods(groups)
    tikv = next(g for g in groups if g["kind"] == "TiKVGroup")
    tikv["spec"]["replicas"] = 4
    moving = moving_v2(read_v2_cluster(cluster, groups), pods)
    assert moving == [
        "TiKVGroup tikv: 3/4 updated, 3/4 ready",
        "TiKVGroup tikv: 3 pods for 4 replicas",
    ]
