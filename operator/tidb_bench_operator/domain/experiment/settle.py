"""Has the cluster settled after a patch? What TiDB Operator (v1, v2) and pods say still moves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tidb_bench_operator.domain.cluster.view import V1_LABELS, ClusterView, ComponentGroup
from tidb_bench_operator.domain.objects import get_path, metadata_labels, metadata_name

# TidbCluster components whose `status.<component>.phase` TiDB Operator v1 keeps.
_V1_COMPONENTS = ("pd", "tikv", "tidb", "tiflash", "ticdc", "pump", "tiproxy")
_NORMAL = "Normal"


def _ready(pod: Mapping[str, Any]) -> bool:
    conditions = get_path(pod, "status", "conditions") or []
    return any(
        isinstance(c, Mapping) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in conditions
    )


def _pods_moving(what: str, replicas: int, pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """Pods that are terminating or not Ready, or a count other than `replicas`."""
    out = []
    live = [p for p in pods if not get_path(p, "metadata", "deletionTimestamp")]
    for pod in pods:
        if get_path(pod, "metadata", "deletionTimestamp"):
            out.append(f"{what}: pod {metadata_name(pod)} is terminating")
        elif not _ready(pod):
            out.append(f"{what}: pod {metadata_name(pod)} is not Ready")
    if len(live) != replicas:
        out.append(f"{what}: {len(live)} pods for {replicas} replicas")
    return out


def moving_v1(tidbcluster: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """What of a TidbCluster is still moving (empty: settled).

    Settled: every component's `status.<component>.phase` is Normal, it has as many live pods
    as `spec.<component>.replicas`, all Ready, none terminating.
    """
    name = metadata_name(tidbcluster)
    spec: Mapping[str, Any] = get_path(tidbcluster, "spec") or {}
    out = []
    for component in _V1_COMPONENTS:
        wanted = spec.get(component)
        if not isinstance(wanted, Mapping):
            continue
        phase = get_path(tidbcluster, "status", component, "phase")
        if phase != _NORMAL:
            out.append(f"{component}: phase {phase or 'not reported'}, not {_NORMAL}")
        replicas = wanted.get("replicas")
        if not isinstance(replicas, int):
            continue
        mine = [
            p
            for p in pods
            if metadata_labels(p).get(V1_LABELS.cluster) == name
            and metadata_labels(p).get(V1_LABELS.component) == component
            and get_path(p, "status", "phase") not in ("Succeeded", "Failed")
        ]
        out += _pods_moving(component, replicas, mine)
    return out


def moving_v2(view: ClusterView, pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """What of a v2 Cluster is still moving (empty: settled).

    The groups' status (replicas, readyReplicas, updatedReplicas, Synced) and the Cluster's
    Ready/Synced where present (ClusterView), then each group's pods as for v1.
    """
    out = view.aggregated_unsettled() + view.unsettled_groups()
    for group in view.groups:
        out += _group_pods(view, group, pods)
    return out


def _group_pods(
    view: ClusterView, group: ComponentGroup, pods: Sequence[Mapping[str, Any]]
) -> list[str]:
    if group.replicas is None:
        return []
    return _pods_moving(f"{group.kind} {group.name}", group.replicas, view.pods_of(group, pods))
