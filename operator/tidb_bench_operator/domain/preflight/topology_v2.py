"""topology-spread for a TiDB Operator v2 Cluster: each group's instances per topology
against its EvenlySpread weights (v1's topologySpreadConstraints: domain/preflight/placement.py)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from tidb_bench_operator.domain.cluster.view import (
    DATABASE_COMPONENTS,
    DISPLAY,
    EVENLY_SPREAD,
    ZONE_KEY,
    ClusterView,
    ComponentGroup,
)
from tidb_bench_operator.domain.objects import get_path, object_labels, object_name
from tidb_bench_operator.domain.preflight.placement import HOSTNAME_KEY
from tidb_bench_operator.domain.preflight.verdict import (
    TOPOLOGY_SPREAD,
    CheckResult,
    CheckStatus,
    worst_status,
)

# ---------------------------------------------------------------------------
# topology-spread for v2: instances per listed topology against the EvenlySpread weights


def _share_text(low: int, high: int) -> str:
    return str(low) if low == high else f"{low}-{high}"


def _suggested_topologies(
    view: ClusterView, pods: Sequence[Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Topologies for a suggested policy: the zones of the cluster's nodes, else their hosts."""
    by_name = {object_name(n): n for n in nodes}
    used = sorted(
        {str(get_path(p, "spec", "nodeName")) for p in view.database_pods(pods)} - {"None"}
    )
    hosts = used or sorted(by_name)
    zones = sorted(
        {z for n in (by_name.get(h) for h in hosts) if n and (z := object_labels(n).get(ZONE_KEY))}
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
    nodes_by_name = {object_name(n): n for n in nodes}
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
            object_name(p) for p in group_pods if not get_path(p, "spec", "nodeName")
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
                    outside.append(f"{object_name(p)} on {node_name}")
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
