"""bench-node-isolation, and the scheduling rules it shares with topology-spread (taints).

Pods, nodes and the TidbCluster are plain dicts in Kubernetes' JSON form; the scheduling
rules modelled here are described in docs/preflight.md and docs/tidb-operator.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tidb_bench_operator.domain.cluster.view import DATABASE_COMPONENTS
from tidb_bench_operator.domain.objects import (
    get_path,
    metadata_labels,
    metadata_name,
)
from tidb_bench_operator.domain.preflight.verdict import (
    BENCH_NODE_ISOLATION,
    CheckResult,
)

_INSTANCE_LABEL = "app.kubernetes.io/instance"
COMPONENT_LABEL = "app.kubernetes.io/component"
# TiDB Operator v2 labels its pods pingcap.com/{cluster,component} instead (see
# docs/tidb-operator-v2.md); isolation counts either generation's pods.
_V2_CLUSTER_LABEL = "pingcap.com/cluster"
_V2_COMPONENT_LABEL = "pingcap.com/component"
CONTROL_PLANE_TAINTS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


def toleration_tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """Kubernetes `Toleration.ToleratesTaint`: effect, key, then operator Equal/Exists."""
    # k8s.io/api core/v1 toleration.go: an empty effect matches all effects; an empty key
    # (only valid with Exists) matches all keys; operator "" means Equal.
    effect = toleration.get("effect") or ""
    if effect and effect != taint.get("effect"):
        return False
    key = toleration.get("key") or ""
    if key and key != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def blocking_taints(node: Mapping[str, Any]) -> list[dict[str, Any]]:
    """NoSchedule/NoExecute taints of a node, plus the implicit one of a cordoned node."""
    taints = [
        dict(t)
        for t in (get_path(node, "spec", "taints") or [])
        if isinstance(t, Mapping) and t.get("effect") in _BLOCKING_EFFECTS
    ]
    # A cordoned node (spec.unschedulable) is refused by the scheduler's NodeUnschedulable
    # plugin unless the pod tolerates this taint; the node lifecycle controller that would
    # add it is not always running (docs/preflight.md), so model it from the field.
    if get_path(node, "spec", "unschedulable") and not any(
        t.get("key") == "node.kubernetes.io/unschedulable" for t in taints
    ):
        taints.append({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"})
    return taints


def untolerated_taints(
    node: Mapping[str, Any], tolerations: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The node's blocking taints that none of the tolerations tolerates."""
    return [
        taint
        for taint in blocking_taints(node)
        if not any(toleration_tolerates(t, taint) for t in tolerations)
    ]


def taint_text(taint: Mapping[str, Any]) -> str:
    value = taint.get("value")
    key = f"{taint.get('key', '')}={value}" if value else str(taint.get("key", ""))
    return f"{key}:{taint.get('effect', '')}"


def component_of(labels: Mapping[str, str]) -> str | None:
    return labels.get(COMPONENT_LABEL) or labels.get(_V2_COMPONENT_LABEL)


def _is_database_pod(labels: Mapping[str, str]) -> bool:
    # v1: pd/tikv/tidb only (its selector is fixed, and it labels non-database pods such as
    # `discovery` too); v2: any component TiDB Operator labels, kinds added later included.
    return labels.get(COMPONENT_LABEL) in DATABASE_COMPONENTS or bool(
        labels.get(_V2_COMPONENT_LABEL)
    )


def database_pods(
    pods: Sequence[Mapping[str, Any]], cluster_name: str | None, namespace: str | None = None
) -> list[Mapping[str, Any]]:
    result = []
    for pod in pods:
        labels = metadata_labels(pod)
        if not _is_database_pod(labels):
            continue
        if cluster_name is not None and cluster_name not in (
            labels.get(_INSTANCE_LABEL),
            labels.get(_V2_CLUSTER_LABEL),
        ):
            continue
        pod_ns = get_path(pod, "metadata", "namespace")
        if namespace and pod_ns and pod_ns != namespace:
            continue
        if get_path(pod, "status", "phase") in ("Succeeded", "Failed"):
            continue
        result.append(pod)
    return result


# ---------------------------------------------------------------------------
# bench-node-isolation


def eligible_bench_nodes(
    nodes: Sequence[Mapping[str, Any]],
    node_selector: Mapping[str, str],
    tolerations: Sequence[Mapping[str, Any]],
) -> tuple[list[str], list[str]]:
    """The nodes a benchmark client may land on, by name; and why each other one may not."""
    eligible: list[str] = []
    reasons: list[str] = []
    for node in sorted(nodes, key=metadata_name):
        name = metadata_name(node)
        labels = metadata_labels(node)
        wrong = {k: v for k, v in node_selector.items() if labels.get(k) != v}
        if wrong:
            reasons.append(f"{name}: labels do not match {_selector_text(wrong)}")
            continue
        blocking = untolerated_taints(node, tolerations)
        if blocking:
            reasons.append(f"{name}: untolerated taint {taint_text(blocking[0])}")
            continue
        eligible.append(name)
    return eligible, reasons


def check_bench_node_isolation(
    nodes: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    node_selector: Mapping[str, str],
    tolerations: Sequence[Mapping[str, Any]],
    clients: int,
    *,
    cluster_name: str | None = None,
) -> CheckResult:
    """No pd/tikv/tidb pod on any node a benchmark client may land on, and enough such nodes."""
    eligible, reasons = eligible_bench_nodes(nodes, node_selector, tolerations)
    selector = _selector_text(node_selector) if node_selector else "{} (any node)"
    if not eligible:
        why = "; ".join(reasons[:5]) or "no nodes at all"
        return CheckResult(
            name=BENCH_NODE_ISOLATION,
            status="Fail",
            message=f"placement.nodeSelector {selector} with the given tolerations matches no "
            f"schedulable node ({why}); label a dedicated benchmark node or fix the selector",
        )
    problems: list[str] = []
    eligible_set = set(eligible)
    for pod in database_pods(pods, cluster_name):
        node_name = get_path(pod, "spec", "nodeName")
        if node_name in eligible_set:
            component = component_of(metadata_labels(pod)) or "?"
            problems.append(
                f"pod {metadata_name(pod)} ({component}) runs on bench node {node_name}"
            )
    if problems:
        # A client sharing a node with TiKV/TiDB/PD corrupts the result (docs/field-story.md:
        # adding TiKV-3 onto the benchmark node dropped point-select QPS by a third).
        return CheckResult(
            name=BENCH_NODE_ISOLATION,
            status="Fail",
            message=f"{'; '.join(problems)}: a benchmark client sharing a node with the "
            "database competes with it for CPU and I/O and measures itself; move the "
            "database pod off that node or narrow placement.nodeSelector to a node that "
            "holds no pd/tikv/tidb pod",
        )
    if len(eligible) < clients:
        return CheckResult(
            name=BENCH_NODE_ISOLATION,
            status="Fail",
            message=f"placement.nodeSelector {selector} matches {len(eligible)} node(s) "
            f"({', '.join(eligible)}) but clients={clients} needs one node per client; "
            "label more benchmark nodes or lower clients",
        )
    return CheckResult(
        name=BENCH_NODE_ISOLATION,
        status="Pass",
        message=f"{len(eligible)} eligible benchmark node(s) ({', '.join(eligible)}) for "
        f"{clients} client(s), none running a pd/tikv/tidb pod",
    )


def _selector_text(selector: Mapping[str, str]) -> str:
    return "{" + ", ".join(f"{k}={v}" for k, v in sorted(selector.items())) + "}"
