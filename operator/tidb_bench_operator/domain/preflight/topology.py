"""topology-spread, the one check for both operator generations: v1's
topologySpreadConstraints against actual skew per topology domain, v2's EvenlySpread
schedule policies against each group's instances per topology (docs/preflight.md)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from tidb_bench_operator.domain.cluster.view import (
    DATABASE_COMPONENTS,
    DISPLAY,
    EVENLY_SPREAD,
    V1_KIND,
    ZONE_KEY,
    ClusterView,
    ComponentGroup,
)
from tidb_bench_operator.domain.objects import (
    HOSTNAME_KEY,
    get_path,
    metadata_labels,
    metadata_name,
)
from tidb_bench_operator.domain.preflight.placement import (
    COMPONENT_LABEL,
    CONTROL_PLANE_TAINTS,
    database_pods,
    taint_text,
    untolerated_taints,
)
from tidb_bench_operator.domain.preflight.verdict import (
    TOPOLOGY_SPREAD,
    CheckResult,
    CheckStatus,
    worst_status,
)

# ---------------------------------------------------------------------------
# v1: a TidbCluster's topologySpreadConstraints


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
    labels = metadata_labels(node)
    return all(labels.get(k) == v for k, v in selector.items())


def _component_node_terms(spec: Mapping[str, Any], component: str) -> list[Mapping[str, Any]]:
    """The required node affinity's terms (the component's affinity, else the cluster's)."""
    affinity = get_path(spec, component, "affinity") or spec.get("affinity") or {}
    terms = get_path(
        affinity, "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
        "nodeSelectorTerms",
    )  # fmt: skip
    return [t for t in terms or [] if isinstance(t, Mapping)]


def _requirement_holds(value: str | None, expr: Mapping[str, Any]) -> bool:
    op, wanted = expr.get("operator"), [str(v) for v in expr.get("values") or []]
    if op == "In":
        return value in wanted
    if op == "NotIn":
        return value not in wanted
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt") and value is not None and wanted:
        try:
            left, right = int(value), int(wanted[0])
        except ValueError:
            return False
        return left > right if op == "Gt" else left < right
    return False


def _matches_terms(node: Mapping[str, Any], terms: Sequence[Mapping[str, Any]]) -> bool:
    """Whether the node passes required node affinity: any term, each of its expressions
    (labels, and the `metadata.name` field), as the scheduler reads them."""
    if not terms:
        return True
    labels = metadata_labels(node)
    for term in terms:
        exprs = [e for e in term.get("matchExpressions") or [] if isinstance(e, Mapping)]
        fields = [e for e in term.get("matchFields") or [] if isinstance(e, Mapping)]
        if not exprs and not fields:
            continue  # an empty term matches nothing
        if all(_requirement_holds(labels.get(str(e.get("key"))), e) for e in exprs) and all(
            _requirement_holds(metadata_name(node), e)
            for e in fields
            if e.get("key") == "metadata.name"
        ):
            return True
    return False


def _domain_of(node: Mapping[str, Any] | None, node_name: str, key: str) -> str | None:
    if node is not None:
        value = metadata_labels(node).get(key)
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
    tc_name = metadata_name(tidb_cluster)
    namespace = str(get_path(tidb_cluster, "metadata", "namespace") or "")
    spec: Mapping[str, Any] = get_path(tidb_cluster, "spec") or {}
    db_pods = database_pods(pods, tc_name or None, namespace or None)
    nodes_by_name = {metadata_name(n): n for n in nodes}
    occupied_nodes = {
        str(get_path(p, "spec", "nodeName")) for p in db_pods if get_path(p, "spec", "nodeName")
    }

    statuses: list[CheckStatus] = []
    lines: list[str] = []
    missing: list[str] = []
    taint_notes: dict[str, str] = {}
    any_constraints = False

    for component in DATABASE_COMPONENTS:
        display = DISPLAY[component]
        comp_pods = [p for p in db_pods if metadata_labels(p).get(COMPONENT_LABEL) == component]
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
        node_terms = _component_node_terms(spec, component)
        tolerations = _component_tolerations(spec, component)
        unscheduled = sorted(
            metadata_name(p) for p in comp_pods if not get_path(p, "spec", "nodeName")
        )

        for constraint in constraints:
            key = str(constraint.get("topologyKey") or HOSTNAME_KEY)
            max_skew = int(constraint.get("maxSkew") or 1)
            min_domains = constraint.get("minDomains")
            honor_affinity = constraint.get("nodeAffinityPolicy", "Honor") != "Ignore"
            # Kubernetes counts as domains the nodes that pass the pod's node selector and
            # required node affinity (nodeAffinityPolicy Honor, the default) whatever their taints
            # (nodeTaintsPolicy Ignore, the default; TidbCluster cannot set it, docs/preflight.md),
            # so a tainted empty node still counts with 0 pods.
            counts: dict[str, list[str]] = {}
            domain_nodes: dict[str, list[Mapping[str, Any]]] = {}
            for node in nodes:
                if honor_affinity and not (
                    _matches_selector(node, selector) and _matches_terms(node, node_terms)
                ):
                    continue
                domain = _domain_of(node, metadata_name(node), key)
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
                counts.setdefault(domain, []).append(metadata_name(pod))
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
                    node_name = metadata_name(node)
                    if node_name in occupied_nodes or node_name in taint_notes:
                        continue
                    # Only the control-plane taint gets a sentence: it is the one that
                    # silently skewed the field story (docs/field-story.md: a node kept it
                    # after kubeadm); other taints (a dedicated bench node) are deliberate.
                    cp = [
                        t
                        for t in untolerated_taints(node, tolerations)
                        if t.get("key") in CONTROL_PLANE_TAINTS
                    ]
                    if not cp:
                        continue
                    taint = cp[0]
                    remove = f"kubectl taint nodes {node_name} {taint_text(taint)}-"
                    taint_notes[node_name] = (
                        f"{node_name} carries {taint_text(taint)}, which keeps database pods "
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
        which = "/".join(DISPLAY[c] for c in missing)
        patch = _patch_command(tc_name, namespace, missing, cluster_wide=not any_constraints)
        lines.append(
            f"{which}: no topologySpreadConstraints; add them with: {patch} "
            "(existing PD/TiKV pods stay on their volume's node: spread applies to new pods)."
        )
    lines.extend(taint_notes.values())
    return CheckResult(name=TOPOLOGY_SPREAD, status=worst_status(statuses), message=" ".join(lines))


# ---------------------------------------------------------------------------
# topology-spread for v2: instances per listed topology against the EvenlySpread weights


def _share_text(low: int, high: int) -> str:
    return str(low) if low == high else f"{low}-{high}"


def _suggested_topologies(
    view: ClusterView, pods: Sequence[Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Topologies for a suggested policy: the zones of the cluster's nodes, else their hosts."""
    by_name = {metadata_name(n): n for n in nodes}
    used = sorted(
        {str(get_path(p, "spec", "nodeName")) for p in view.database_pods(pods)} - {"None"}
    )
    hosts = used or sorted(by_name)
    zones = sorted(
        {
            z
            for n in (by_name.get(h) for h in hosts)
            if n and (z := metadata_labels(n).get(ZONE_KEY))
        }
    )
    if len(zones) >= 2:
        return [{"topology": {ZONE_KEY: z}} for z in zones]
    return [{"topology": {HOSTNAME_KEY: h}} for h in hosts]


def schedule_policy_patch(
    group: ComponentGroup, namespace: str, topologies: Sequence[Mapping[str, Any]]
) -> str:
    """`kubectl patch` that gives the group an EvenlySpread policy over `topologies`."""
    policy = {"type": EVENLY_SPREAD, "evenlySpread": {"topologies": list(topologies)}}
    patch = json.dumps({"spec": {"schedulePolicies": [policy]}}, separators=(",", ":"))
    ns = f"-n {namespace} " if namespace else ""
    return f"kubectl {ns}patch {group.kind.lower()} {group.name} --type=merge -p '{patch}'"


def check_schedule_policies(
    view: ClusterView,
    pods: Sequence[Mapping[str, Any]],
    nodes: Sequence[Mapping[str, Any]],
) -> CheckResult:
    """topology-spread for a v2 Cluster: per group, instances per topology vs the weights.

    TiDB Operator v2 gives each new instance the listed topology that is furthest below its
    weighted share, so a fair group has, in every topology, floor or ceil of
    instances × weight / total weight (`pkg/utils/topology/scheduler.go`). Pods are counted
    where they run (their node's labels), which is what a benchmark competes with. A group
    without an EvenlySpread policy is a Warn with the patch that adds one.
    """
    nodes_by_name = {metadata_name(n): n for n in nodes}
    statuses: list[CheckStatus] = []
    lines: list[str] = []
    suggested: list[dict[str, Any]] | None = None
    for group in view.groups:
        if group.component not in DATABASE_COMPONENTS:
            continue
        display = DISPLAY[group.component]
        where = f"{group.kind} {group.name}"
        group_pods = view.pods_of(group, pods)
        placed = [p for p in group_pods if get_path(p, "spec", "nodeName")]
        unscheduled = sorted(
            metadata_name(p) for p in group_pods if not get_path(p, "spec", "nodeName")
        )
        if group.topologies is None:
            counts: dict[str, int] = {}
            for p in placed:
                host = str(get_path(p, "spec", "nodeName"))
                counts[host] = counts.get(host, 0) + 1
            on = " ".join(
                f"{n}:{c}" for n, c in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
            )
            if suggested is None:
                suggested = _suggested_topologies(view, pods, nodes)
            patch = schedule_policy_patch(group, view.namespace, suggested)
            statuses.append("Warn")
            lines.append(
                f"{display} {on or 'no pods'} ({where}): no EvenlySpread schedulePolicies, so "
                f"nothing spreads its instances; add one with: {patch} (the operator places "
                "instances it creates or replaces from then on)."
            )
        elif placed or group.replicas:
            topologies = group.topologies
            counts_t = [0] * len(topologies)
            outside: list[str] = []
            for p in placed:
                node_name = str(get_path(p, "spec", "nodeName"))
                node = nodes_by_name.get(node_name)
                for i, topo in enumerate(topologies):
                    if topo.holds(node, node_name):
                        counts_t[i] += 1
                        break
                else:
                    outside.append(f"{metadata_name(p)} on {node_name}")
            total = len(placed)
            weight_sum = sum(t.weight for t in topologies)
            body = " ".join(f"{t.text()}:{c}" for t, c in zip(topologies, counts_t, strict=True))
            weights = ":".join(str(t.weight) for t in topologies)
            printout = f"{display} {body} — weights {weights} ({where})"
            off = []
            for topo, count in zip(topologies, counts_t, strict=True):
                share = total * topo.weight / weight_sum
                low, high = math.floor(share), math.ceil(share)
                if not low <= count <= high:
                    off.append(
                        f"{topo.text()} holds {count} where the weights give "
                        f"{_share_text(low, high)}"
                    )
            if outside:
                off.append(f"outside every listed topology: {', '.join(sorted(outside))}")
            if off:
                statuses.append("Fail")
                lines.append(f"{printout}: {'; '.join(off)}.")
            else:
                statuses.append("Pass")
                lines.append(f"{printout}: spread as the weights say.")
        if unscheduled:
            statuses.append("Warn")
            lines.append(f"{display} pods of {where} not scheduled yet: {', '.join(unscheduled)}.")
    if not lines:
        return CheckResult(
            name=TOPOLOGY_SPREAD,
            status="Warn",
            message=f"no PDGroup/TiKVGroup/TiDBGroup with pods found for {view.where}",
        )
    return CheckResult(name=TOPOLOGY_SPREAD, status=worst_status(statuses), message=" ".join(lines))


def check_topology(
    view: ClusterView, pods: Sequence[Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]]
) -> CheckResult:
    """topology-spread for the cluster in `view`, by its operator generation."""
    if view.kind == V1_KIND:
        return check_topology_spread(view.source, pods, nodes)
    return check_schedule_policies(view, pods, nodes)
