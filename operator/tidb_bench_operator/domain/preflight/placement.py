"""The Kubernetes placement checks: topology-spread and bench-node-isolation.

Pods, nodes and the TidbCluster are plain dicts in Kubernetes' JSON form; the scheduling
rules modelled here are described in docs/preflight.md and docs/tidb-operator.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tidb_bench_operator.domain.objects import get_path, object_labels, object_name
from tidb_bench_operator.domain.preflight.verdict import (
    BENCH_NODE_ISOLATION,
    TOPOLOGY_SPREAD,
    CheckResult,
    CheckStatus,
    worst_status,
)

DATABASE_COMPONENTS = ("pd", "tikv", "tidb")
_DISPLAY = {"pd": "PD", "tikv": "TiKV", "tidb": "TiDB"}
HOSTNAME_KEY = "kubernetes.io/hostname"
_INSTANCE_LABEL = "app.kubernetes.io/instance"
_COMPONENT_LABEL = "app.kubernetes.io/component"
# TiDB Operator v2 labels its pods pingcap.com/{cluster,component} instead (see
# docs/tidb-operator-v2.md); isolation counts either generation's pods.
_V2_CLUSTER_LABEL = "pingcap.com/cluster"
_V2_COMPONENT_LABEL = "pingcap.com/component"
_CONTROL_PLANE_TAINTS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
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


def _taint_text(taint: Mapping[str, Any]) -> str:
    value = taint.get("value")
    key = f"{taint.get('key', '')}={value}" if value else str(taint.get("key", ""))
    return f"{key}:{taint.get('effect', '')}"


def _component(labels: Mapping[str, str]) -> str | None:
    return labels.get(_COMPONENT_LABEL) or labels.get(_V2_COMPONENT_LABEL)


def _is_database_pod(labels: Mapping[str, str]) -> bool:
    # v1: pd/tikv/tidb only (its selector is fixed, and it labels non-database pods such as
    # `discovery` too); v2: any component TiDB Operator labels, kinds added later included.
    return labels.get(_COMPONENT_LABEL) in DATABASE_COMPONENTS or bool(
        labels.get(_V2_COMPONENT_LABEL)
    )


def _database_pods(
    pods: Sequence[Mapping[str, Any]], cluster_name: str | None, namespace: str | None = None
) -> list[Mapping[str, Any]]:
    result = []
    for pod in pods:
        labels = object_labels(pod)
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
# topology-spread


def _component_constraints(
    spec: Mapping[str, Any], component: str
) -> tuple[list[Mapping[str, Any]], str]:
    """The component's topologySpreadConstraints and where they came from."""
    # Component-level wins over cluster-level (docs/tidb-operator.md).
    own = get_path(spec, component, "topologySpreadConstraints")
    if own:
        return [c for c in own if isinstance(c, Mapping)], f"spec.{component}"
    shared = spec.get("topologySpreadConstraints")
    if shared:
        return [c for c in shared if isinstance(c, Mapping)], "spec"
    return [], ""


def _component_node_selector(spec: Mapping[str, Any], component: str) -> dict[str, str]:
    # TiDB Operator's ComponentAccessor merges cluster-level and component-level
    # nodeSelector, the component's keys winning.
    merged: dict[str, str] = dict(spec.get("nodeSelector") or {})
    merged.update(get_path(spec, component, "nodeSelector") or {})
    return merged


def _component_tolerations(spec: Mapping[str, Any], component: str) -> list[Mapping[str, Any]]:
    # Component-level tolerations replace the cluster-level ones when set (ComponentAccessor).
    own = get_path(spec, component, "tolerations")
    return list(own) if own else list(spec.get("tolerations") or [])


def _matches_selector(node: Mapping[str, Any], selector: Mapping[str, str]) -> bool:
    labels = object_labels(node)
    return all(labels.get(k) == v for k, v in selector.items())


def _domain_of(node: Mapping[str, Any] | None, node_name: str, key: str) -> str | None:
    if node is not None:
        value = object_labels(node).get(key)
        if value is not None:
            return value
    # The kubelet always sets kubernetes.io/hostname to the node name; hand-made Node
    # objects (the local test bed) may lack the label, so fall back to the name.
    if key == HOSTNAME_KEY:
        return node_name
    return None


def _render_counts(display: str, key: str, counts: Mapping[str, list[str]]) -> str:
    # Busiest first, ties by name: reads like `TiKV node2:2 node3:1 node1:0` (docs/field-story.md).
    order = sorted(counts.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    body = " ".join(f"{domain}:{len(names)}" for domain, names in order)
    prefix = display if key == HOSTNAME_KEY else f"{display} ({key})"
    return f"{prefix} {body}"


def _patch_command(
    tc_name: str, namespace: str, components: Sequence[str], cluster_wide: bool
) -> str:
    constraint = [{"topologyKey": HOSTNAME_KEY, "maxSkew": 1}]
    spec: dict[str, Any]
    if cluster_wide:
        spec = {"topologySpreadConstraints": constraint}
    else:
        spec = {c: {"topologySpreadConstraints": constraint} for c in components}
    patch = json.dumps({"spec": spec}, separators=(",", ":"))
    ns = f"-n {namespace} " if namespace else ""
    return f"kubectl {ns}patch tc {tc_name} --type=merge -p '{patch}'"


def check_topology_spread(
    tidb_cluster: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]],
) -> CheckResult:
    """Per component (pd/tikv/tidb) and topology domain: actual pod skew vs the TC's maxSkew."""
    tc_name = object_name(tidb_cluster)
    namespace = str(get_path(tidb_cluster, "metadata", "namespace") or "")
    spec: Mapping[str, Any] = get_path(tidb_cluster, "spec") or {}
    db_pods = _database_pods(pods, tc_name or None, namespace or None)
    nodes_by_name = {object_name(n): n for n in nodes}
    occupied_nodes = {
        str(get_path(p, "spec", "nodeName")) for p in db_pods if get_path(p, "spec", "nodeName")
    }

    statuses: list[CheckStatus] = []
    lines: list[str] = []
    missing: list[str] = []
    taint_notes: dict[str, str] = {}
    any_constraints = False

    for component in DATABASE_COMPONENTS:
        display = _DISPLAY[component]
        comp_pods = [p for p in db_pods if object_labels(p).get(_COMPONENT_LABEL) == component]
        replicas = get_path(spec, component, "replicas")
        if not comp_pods and not replicas:
            continue
        constraints, source = _component_constraints(spec, component)
        if constraints:
            any_constraints = True
        else:
            missing.append(component)
            # Without constraints, judge against what the suggested patch would add.
            constraints = [{"topologyKey": HOSTNAME_KEY, "maxSkew": 1}]
        selector = _component_node_selector(spec, component)
        tolerations = _component_tolerations(spec, component)
        unscheduled = sorted(
            object_name(p) for p in comp_pods if not get_path(p, "spec", "nodeName")
        )

        for constraint in constraints:
            key = str(constraint.get("topologyKey") or HOSTNAME_KEY)
            max_skew = int(constraint.get("maxSkew") or 1)
            min_domains = constraint.get("minDomains")
            honor_affinity = constraint.get("nodeAffinityPolicy", "Honor") != "Ignore"
            # Kubernetes counts as domains the nodes that pass the pod's node selector
            # (nodeAffinityPolicy Honor, the default) whatever their taints
            # (nodeTaintsPolicy Ignore, the default; TidbCluster cannot set it, docs/preflight.md),
            # so a tainted empty node still counts with 0 pods.
            counts: dict[str, list[str]] = {}
            domain_nodes: dict[str, list[Mapping[str, Any]]] = {}
            for node in nodes:
                if honor_affinity and not _matches_selector(node, selector):
                    continue
                domain = _domain_of(node, object_name(node), key)
                if domain is None:
                    continue
                counts.setdefault(domain, [])
                domain_nodes.setdefault(domain, []).append(node)
            for pod in comp_pods:
                node_name = get_path(pod, "spec", "nodeName")
                if not node_name:
                    continue
                domain = _domain_of(nodes_by_name.get(str(node_name)), str(node_name), key)
                if domain is None:
                    continue
                counts.setdefault(domain, []).append(object_name(pod))
            if not counts:
                statuses.append("Warn")
                lines.append(f"{display}: no node carries topology key {key}.")
                continue
            sizes = [len(v) for v in counts.values()]
            global_min = min(sizes)
            if isinstance(min_domains, int) and len(counts) < min_domains:
                global_min = 0  # fewer domains than minDomains: the global minimum is 0
            skew = max(sizes) - global_min
            printout = _render_counts(display, key, counts)
            where = f" ({source})" if source else " (no constraint set; default)"
            if skew > max_skew:
                top = max(sizes)
                loaded = sorted(d for d, names in counts.items() if len(names) == top)
                empty = sorted(d for d, names in counts.items() if len(names) == global_min)
                pods_on = "; ".join(f"{d}: {', '.join(sorted(counts[d]))}" for d in loaded)
                statuses.append("Fail")
                lines.append(
                    f"{printout} — skew {skew} > maxSkew {max_skew} on {key}{where}: "
                    f"{', '.join(loaded)} over-loaded ({pods_on}) while "
                    f"{', '.join(empty)} has {global_min}."
                )
            else:
                statuses.append("Pass")
                lines.append(f"{printout} — skew {skew} <= maxSkew {max_skew} on {key}{where}.")
            for domain, names in counts.items():
                if names:
                    continue
                for node in domain_nodes.get(domain, []):
                    node_name = object_name(node)
                    if node_name in occupied_nodes or node_name in taint_notes:
                        continue
                    # Only the control-plane taint gets a sentence: it is the one that
                    # silently skewed the field story (docs/field-story.md: a node kept it
                    # after kubeadm); other taints (a dedicated bench node) are deliberate.
                    cp = [
                        t
                        for t in untolerated_taints(node, tolerations)
                        if t.get("key") in _CONTROL_PLANE_TAINTS
                    ]
                    if not cp:
                        continue
                    taint = cp[0]
                    remove = f"kubectl taint nodes {node_name} {_taint_text(taint)}-"
                    taint_notes[node_name] = (
                        f"{node_name} carries {_taint_text(taint)}, which keeps database pods "
                        f"off it (remove it with `{remove}` if it should hold them)."
                    )
        if unscheduled:
            statuses.append("Warn")
            lines.append(f"{display} pods not scheduled yet: {', '.join(unscheduled)}.")

    if not lines:
        return CheckResult(
            name=TOPOLOGY_SPREAD,
            status="Warn",
            message=f"no pd/tikv/tidb pods found for TidbCluster {tc_name or '?'}",
        )
    if missing:
        statuses.append("Warn")
        which = "/".join(_DISPLAY[c] for c in missing)
        patch = _patch_command(tc_name, namespace, missing, cluster_wide=not any_constraints)
        lines.append(
            f"{which}: no topologySpreadConstraints; add them with: {patch} "
            "(existing PD/TiKV pods stay on their volume's node: spread applies to new pods)."
        )
    lines.extend(taint_notes.values())
    return CheckResult(name=TOPOLOGY_SPREAD, status=worst_status(statuses), message=" ".join(lines))


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
    for node in sorted(nodes, key=object_name):
        name = object_name(node)
        labels = object_labels(node)
        wrong = {k: v for k, v in node_selector.items() if labels.get(k) != v}
        if wrong:
            reasons.append(f"{name}: labels do not match {_selector_text(wrong)}")
            continue
        blocking = untolerated_taints(node, tolerations)
        if blocking:
            reasons.append(f"{name}: untolerated taint {_taint_text(blocking[0])}")
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
    for pod in _database_pods(pods, cluster_name):
        node_name = get_path(pod, "spec", "nodeName")
        if node_name in eligible_set:
            component = _component(object_labels(pod)) or "?"
            problems.append(f"pod {object_name(pod)} ({component}) runs on bench node {node_name}")
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
