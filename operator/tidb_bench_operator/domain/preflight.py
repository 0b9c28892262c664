"""Preflight checks: pure judgements of whether a TiDB cluster is fair to measure right now."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from tidb_bench_operator.domain.pd import STATE_TOMBSTONE, STATE_UP, Operator, Store
from tidb_bench_operator.errors import ParseError

# Check names are part of the interface (status.preflight.checks[].name, metrics labels):
# fixed, never renamed.
BENCH_NODE_ISOLATION = "bench-node-isolation"
TOPOLOGY_SPREAD = "topology-spread"
STORE_STATE = "store-state"
LEADER_SIZE_BALANCE = "leader-size-balance"
REGION_SIZE_BALANCE = "region-size-balance"
PENDING_OPERATORS = "pending-operators"
TABLE_LEADER_DISTRIBUTION = "table-leader-distribution"
CHECK_NAMES = (
    BENCH_NODE_ISOLATION,
    TOPOLOGY_SPREAD,
    STORE_STATE,
    LEADER_SIZE_BALANCE,
    REGION_SIZE_BALANCE,
    PENDING_OPERATORS,
    TABLE_LEADER_DISTRIBUTION,
)

# Defaults for spec.preflight.maxLeaderSizeSkew / maxRegionSizeSkew (recommendations, not
# contract). PD's own sample cluster sits at leader_size skew 0.40 (17/25/18 MiB, sample
# pd-api-v1-stores_v8.1.0) and is healthy; the field story's bad case was 2.32 (86..689 MiB,
# docs/preflight.md).
DEFAULT_MAX_LEADER_SIZE_SKEW = 0.5
DEFAULT_MAX_REGION_SIZE_SKEW = 0.5

CheckStatus = Literal["Pass", "Warn", "Fail"]
Policy = Literal["Enforce", "Warn", "Off"]
_RANK: dict[str, int] = {"Pass": 0, "Warn": 1, "Fail": 2}

DATABASE_COMPONENTS = ("pd", "tikv", "tidb")
_DISPLAY = {"pd": "PD", "tikv": "TiKV", "tidb": "TiDB"}
HOSTNAME_KEY = "kubernetes.io/hostname"
_INSTANCE_LABEL = "app.kubernetes.io/instance"
_COMPONENT_LABEL = "app.kubernetes.io/component"
_CONTROL_PLANE_TAINTS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


class _Camel(BaseModel):
    """Base: snake_case in Python, camelCase on the wire."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class CheckResult(_Camel):
    """One preflight check's verdict, as stored in status.preflight.checks[]."""

    name: str = Field(description="Check name, one of the fixed preflight check names.")
    status: CheckStatus = Field(description="Pass, Warn or Fail.")
    message: str = Field(description="What was found and, if not Pass, what to do about it.")
    stores: list[int] = Field(
        default_factory=list, description="PD store ids involved in the verdict, if any."
    )


class GateVerdict(_Camel):
    """The preflight gate: may the run proceed, and what the checks said overall."""

    policy: Policy = Field(description="spec.preflight.policy that was applied.")
    status: CheckStatus = Field(description="Worst status among the checks (Pass if none).")
    proceed: bool = Field(description="True if the run may start measuring.")
    failed: list[str] = Field(default_factory=list, description="Names of checks that failed.")
    warned: list[str] = Field(default_factory=list, description="Names of checks that warned.")
    message: str = Field(description="One-line summary for conditions and events.")


def worst_status(statuses: Iterable[CheckStatus]) -> CheckStatus:
    """The most severe of the statuses; Pass for none."""
    worst: CheckStatus = "Pass"
    for status in statuses:
        if _RANK[status] > _RANK[worst]:
            worst = status
    return worst


# ---------------------------------------------------------------------------
# store-state


def _store_label(store: Store) -> str:
    return f"store {store.id} ({store.address})" if store.address else f"store {store.id}"


_STATE_HINTS = {
    # Thresholds from PD's BuildStoreInfo: Disconnected after 20 s without heartbeat, Down
    # after max-store-down-time (default 30m) (docs/pd.md "Stores").
    "Disconnected": "no heartbeat for more than 20 s; check the TiKV pod is running and reachable",
    "Down": "no heartbeat for longer than max-store-down-time (default 30m); PD is replacing "
    "its replicas, so balance is moving",
    "Offline": "being taken out (scale-in or store delete); wait until it becomes Tombstone",
}


def check_store_state(stores: Sequence[Store]) -> CheckResult:
    """Every TiKV store must be Up; Tombstone stores are history and TiFlash is not TiKV."""
    tikv = [s for s in stores if s.is_tikv and s.state_name != STATE_TOMBSTONE]
    tiflash = sorted(s.id for s in stores if s.is_tiflash)
    tombstones = sorted(s.id for s in stores if s.is_tikv and s.state_name == STATE_TOMBSTONE)
    notes = []
    if tiflash:
        notes.append(f"TiFlash store(s) {_ids(tiflash)} not counted")
    if tombstones:
        notes.append(f"Tombstone store(s) {_ids(tombstones)} ignored")
    tail = f" ({'; '.join(notes)})" if notes else ""
    if not tikv:
        return CheckResult(
            name=STORE_STATE,
            status="Fail",
            message=f"PD reports no TiKV store{tail}; is this the right PD address?",
        )
    bad = sorted((s for s in tikv if s.state_name != STATE_UP), key=lambda s: s.id)
    if not bad:
        ups = sorted(s.id for s in tikv)
        return CheckResult(
            name=STORE_STATE,
            status="Pass",
            message=f"all {len(ups)} TiKV stores are Up (ids {_ids(ups)}){tail}",
            stores=ups,
        )
    parts = []
    for store in bad:
        hint = _STATE_HINTS.get(store.state_name, "not Up")
        parts.append(f"{_store_label(store)} is {store.state_name}: {hint}")
    return CheckResult(
        name=STORE_STATE,
        status="Fail",
        message=f"{len(bad)} of {len(tikv)} TiKV stores not Up: {'; '.join(parts)}{tail}",
        stores=[s.id for s in bad],
    )


# ---------------------------------------------------------------------------
# leader-size-balance / region-size-balance


def compute_skew(values: Sequence[float]) -> float:
    """(max − min) / mean; 0 for fewer than two values or an all-zero set."""
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    if mean == 0:
        return 0.0
    return (max(values) - min(values)) / mean


def _up_tikv(stores: Sequence[Store]) -> list[Store]:
    return sorted((s for s in stores if s.is_tikv and s.state_name == STATE_UP), key=lambda s: s.id)


def _size_balance(
    stores: Sequence[Store], max_skew: float, *, name: str, field: str, scheduler: str
) -> CheckResult:
    up = _up_tikv(stores)
    if not up:
        return CheckResult(
            name=name, status="Warn", message=f"no Up TiKV store to compare {field} over"
        )
    unknown = [s.id for s in up if getattr(s, field) is None]
    if unknown:
        # A size PD did not report cannot be judged balanced: never compute a skew over it.
        return CheckResult(
            name=name,
            status="Fail",
            message=f"PD reported no status.{field} for Up TiKV store(s) {_ids(unknown)}, so "
            f"their balance cannot be judged; check that the input is complete PD store "
            "output (pd-ctl store / GET /pd/api/v1/stores) and that the stores heartbeat",
            stores=unknown,
        )
    values: list[int] = [getattr(s, field) for s in up]
    per_store = ", ".join(f"{s.id}={v}" for s, v in zip(up, values, strict=True))
    counts = ", ".join(f"{s.id}={'?' if s.region_count is None else s.region_count}" for s in up)
    # region_count is shown for context only: empty and bloated regions mix, so a skewed
    # count can hide an even size (docs/preflight.md, "Why sizes, not counts").
    context = (
        f"Per store {field} MiB: {per_store}; region_count {counts} "
        "(region_count is for reference only and never fails this check)."
    )
    if len(up) < 2:
        return CheckResult(
            name=name,
            status="Pass",
            message=f"only one Up TiKV store ({up[0].id}); nothing to balance. {context}",
            stores=[up[0].id],
        )
    mean = sum(values) / len(values)
    skew = compute_skew(values)
    size = dict(zip((s.id for s in up), values, strict=True))
    high = max(up, key=lambda s: (size[s.id], -s.id))
    low = min(up, key=lambda s: (size[s.id], s.id))
    high_value, low_value = size[high.id], size[low.id]
    if skew <= max_skew:
        return CheckResult(
            name=name,
            status="Pass",
            message=f"{field} skew {skew:.2f} <= {max_skew:.2f} over {len(up)} Up TiKV stores "
            f"(mean {mean:.1f} MiB). {context}",
        )
    return CheckResult(
        name=name,
        status="Fail",
        message=f"{field} skew {skew:.2f} > {max_skew:.2f} over {len(up)} Up TiKV stores: "
        f"{_store_label(high)} holds {high_value} MiB vs mean {mean:.1f} MiB "
        f"(min {low_value} MiB on store {low.id}); wait for PD {scheduler} or check "
        f"pending operators (pd-ctl operator show). {context}",
        stores=[high.id, low.id],
    )


def check_leader_size_balance(stores: Sequence[Store], max_skew: float) -> CheckResult:
    """(max − min)/mean of leader_size over Up TiKV stores must not exceed max_skew."""
    # leader_size, not leader_count: the benchmark's requests follow leaders, and a few big
    # regions' leaders can pile onto one store (docs/preflight.md: 689 MiB on one store vs ~120).
    return _size_balance(
        stores, max_skew, name=LEADER_SIZE_BALANCE, field="leader_size", scheduler="balance-leader"
    )


def check_region_size_balance(stores: Sequence[Store], max_skew: float) -> CheckResult:
    """(max − min)/mean of region_size over Up TiKV stores must not exceed max_skew."""
    return _size_balance(
        stores, max_skew, name=REGION_SIZE_BALANCE, field="region_size", scheduler="balance-region"
    )


# ---------------------------------------------------------------------------
# pending-operators


def check_pending_operators(
    operators: Sequence[Operator], *, status_if_pending: CheckStatus = "Fail", examples: int = 3
) -> CheckResult:
    """The PD operator queue must be empty (finished/timed-out entries do not count)."""
    pending = [op for op in operators if op.pending]
    done = len(operators) - len(pending)
    tail = f" ({done} finished/timed-out entries ignored)" if done else ""
    if not pending:
        return CheckResult(
            name=PENDING_OPERATORS, status="Pass", message=f"no pending PD operators{tail}"
        )
    by_desc: dict[str, int] = {}
    for op in pending:
        by_desc[op.desc] = by_desc.get(op.desc, 0) + 1
    summary = ", ".join(f"{desc} x{n}" for desc, n in sorted(by_desc.items()))
    shown = []
    for op in pending[:examples]:
        region = f"region {op.region_id}: " if op.region_id is not None else ""
        shown.append(f"{region}{op.desc} {{{op.brief}}}" if op.brief else f"{region}{op.desc}")
    stores = sorted({sid for op in pending for sid in op.store_ids})
    return CheckResult(
        name=PENDING_OPERATORS,
        status=status_if_pending,
        message=f"{len(pending)} PD operator(s) pending ({summary}), e.g. {'; '.join(shown)}; "
        f"balance has not settled: wait until `pd-ctl operator show` prints []{tail}",
        stores=stores,
    )


# ---------------------------------------------------------------------------
# Kubernetes helpers (pods and nodes are plain dicts in Kubernetes JSON form)


def _get(obj: Mapping[str, Any] | None, *path: str) -> Any:
    cur: Any = obj
    for key in path:
        if not isinstance(cur, Mapping):
            return None
        cur = cur.get(key)
    return cur


def _labels(obj: Mapping[str, Any]) -> dict[str, str]:
    labels = _get(obj, "metadata", "labels")
    return dict(labels) if isinstance(labels, Mapping) else {}


def _name(obj: Mapping[str, Any]) -> str:
    return str(_get(obj, "metadata", "name") or "")


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
        for t in (_get(node, "spec", "taints") or [])
        if isinstance(t, Mapping) and t.get("effect") in _BLOCKING_EFFECTS
    ]
    # A cordoned node (spec.unschedulable) is refused by the scheduler's NodeUnschedulable
    # plugin unless the pod tolerates this taint; the node lifecycle controller that would
    # add it is not always running (docs/preflight.md), so model it from the field.
    if _get(node, "spec", "unschedulable") and not any(
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


def _database_pods(
    pods: Sequence[Mapping[str, Any]], cluster_name: str | None, namespace: str | None = None
) -> list[Mapping[str, Any]]:
    result = []
    for pod in pods:
        labels = _labels(pod)
        if labels.get(_COMPONENT_LABEL) not in DATABASE_COMPONENTS:
            continue
        if cluster_name is not None and labels.get(_INSTANCE_LABEL) != cluster_name:
            continue
        pod_ns = _get(pod, "metadata", "namespace")
        if namespace and pod_ns and pod_ns != namespace:
            continue
        if _get(pod, "status", "phase") in ("Succeeded", "Failed"):
            continue
        result.append(pod)
    return result


# ---------------------------------------------------------------------------
# topology-spread


def _component_constraints(
    spec: Mapping[str, Any], component: str
) -> tuple[list[Mapping[str, Any]], str]:
    """The component's topologySpreadConstraints and where they came from."""
    # Component-level wins over cluster-level (docs/preflight.md, "Kubernetes details").
    own = _get(spec, component, "topologySpreadConstraints")
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
    merged.update(_get(spec, component, "nodeSelector") or {})
    return merged


def _component_tolerations(spec: Mapping[str, Any], component: str) -> list[Mapping[str, Any]]:
    # Component-level tolerations replace the cluster-level ones when set (ComponentAccessor).
    own = _get(spec, component, "tolerations")
    return list(own) if own else list(spec.get("tolerations") or [])


def _matches_selector(node: Mapping[str, Any], selector: Mapping[str, str]) -> bool:
    labels = _labels(node)
    return all(labels.get(k) == v for k, v in selector.items())


def _domain_of(node: Mapping[str, Any] | None, node_name: str, key: str) -> str | None:
    if node is not None:
        value = _labels(node).get(key)
        if value is not None:
            return value
    # The kubelet always sets kubernetes.io/hostname to the node name; hand-made Node
    # objects (the local test bed) may lack the label, so fall back to the name.
    if key == HOSTNAME_KEY:
        return node_name
    return None


def _render_counts(display: str, key: str, counts: Mapping[str, list[str]]) -> str:
    # Busiest first, ties by name: reads like `TiKV node2:2 node3:1 node1:0` (docs/preflight.md).
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
    tc_name = _name(tidb_cluster)
    namespace = str(_get(tidb_cluster, "metadata", "namespace") or "")
    spec: Mapping[str, Any] = _get(tidb_cluster, "spec") or {}
    db_pods = _database_pods(pods, tc_name or None, namespace or None)
    nodes_by_name = {_name(n): n for n in nodes}
    occupied_nodes = {
        str(_get(p, "spec", "nodeName")) for p in db_pods if _get(p, "spec", "nodeName")
    }

    statuses: list[CheckStatus] = []
    lines: list[str] = []
    missing: list[str] = []
    taint_notes: dict[str, str] = {}
    any_constraints = False

    for component in DATABASE_COMPONENTS:
        display = _DISPLAY[component]
        comp_pods = [p for p in db_pods if _labels(p).get(_COMPONENT_LABEL) == component]
        replicas = _get(spec, component, "replicas")
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
        unscheduled = sorted(_name(p) for p in comp_pods if not _get(p, "spec", "nodeName"))

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
                domain = _domain_of(node, _name(node), key)
                if domain is None:
                    continue
                counts.setdefault(domain, [])
                domain_nodes.setdefault(domain, []).append(node)
            for pod in comp_pods:
                node_name = _get(pod, "spec", "nodeName")
                if not node_name:
                    continue
                domain = _domain_of(nodes_by_name.get(str(node_name)), str(node_name), key)
                if domain is None:
                    continue
                counts.setdefault(domain, []).append(_name(pod))
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
                    node_name = _name(node)
                    if node_name in occupied_nodes or node_name in taint_notes:
                        continue
                    # Only the control-plane taint gets a sentence: it is the one that
                    # silently skewed the field story (docs/preflight.md: a node kept it
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
    eligible: list[str] = []
    reasons: list[str] = []
    for node in sorted(nodes, key=_name):
        name = _name(node)
        labels = _labels(node)
        wrong = {k: v for k, v in node_selector.items() if labels.get(k) != v}
        if wrong:
            reasons.append(f"{name}: labels do not match {_selector_text(wrong)}")
            continue
        blocking = untolerated_taints(node, tolerations)
        if blocking:
            reasons.append(f"{name}: untolerated taint {_taint_text(blocking[0])}")
            continue
        eligible.append(name)
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
        node_name = _get(pod, "spec", "nodeName")
        if node_name in eligible_set:
            component = _labels(pod).get(_COMPONENT_LABEL, "?")
            problems.append(f"pod {_name(pod)} ({component}) runs on bench node {node_name}")
    if problems:
        # A client sharing a node with TiKV/TiDB/PD corrupts the result (docs/preflight.md:
        # adding TiKV-3 onto the benchmark node dropped point-select QPS from 49k to 31k).
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


# ---------------------------------------------------------------------------
# table-leader-distribution


def check_table_leader_distribution(
    rows: Sequence[Sequence[Any]],
    columns: Sequence[str],
    store_ids: Sequence[int],
    *,
    table: str = "",
) -> CheckResult:
    """Leaders of a table's regions per store, from `SHOW TABLE t REGIONS`.

    Bounds: Fail when at least 3 stores and at least as many regions as stores, yet every
    leader sits on one store; Warn when a store holds more than 2x its fair share
    (regions / stores) or the table has fewer regions than there are stores; else Pass.
    """
    # SHOW TABLE ... REGIONS has 13 columns since TiDB v6.2 and 11 before; both carry
    # LEADER_STORE_ID, so look it up by name (docs/preflight.md).
    upper = [str(c).upper() for c in columns]
    if "LEADER_STORE_ID" not in upper:
        raise ParseError(
            f"SHOW TABLE ... REGIONS result has no LEADER_STORE_ID column (columns: "
            f"{', '.join(map(str, columns))}); is the server TiDB?"
        )
    index = upper.index("LEADER_STORE_ID")
    what = f"table {table}" if table else "the table"
    leaders: dict[int, int] = {sid: 0 for sid in store_ids}
    for n, row in enumerate(rows):
        if len(row) != len(columns):
            raise ParseError(
                f"SHOW TABLE ... REGIONS row {n} has {len(row)} values for {len(columns)} columns"
            )
        try:
            sid = int(str(row[index]).strip())
        except ValueError as exc:
            raise ParseError(
                f"SHOW TABLE ... REGIONS row {n}: LEADER_STORE_ID {row[index]!r} is not a number"
            ) from exc
        leaders[sid] = leaders.get(sid, 0) + 1
    total = sum(leaders.values())
    n_stores = len(leaders)
    if total == 0:
        return CheckResult(
            name=TABLE_LEADER_DISTRIBUTION,
            status="Warn",
            message=f"SHOW TABLE REGIONS returned no regions for {what}",
        )
    fair = total / n_stores
    listing = ", ".join(f"{sid}={cnt}" for sid, cnt in sorted(leaders.items()))
    base = f"leaders of {total} region(s) of {what} per store: {listing} (fair share {fair:.1f})"
    if n_stores < 2:
        return CheckResult(
            name=TABLE_LEADER_DISTRIBUTION, status="Pass", message=f"{base}; single store"
        )
    top_sid, top = max(leaders.items(), key=lambda kv: (kv[1], -kv[0]))
    if n_stores >= 3 and total >= n_stores and top == total:
        return CheckResult(
            name=TABLE_LEADER_DISTRIBUTION,
            status="Fail",
            message=f"{base}: every leader is on store {top_sid}, so the benchmark would hit "
            "one TiKV; wait for PD balance-leader or scatter the table's regions",
            stores=[top_sid],
        )
    if total < n_stores:
        return CheckResult(
            name=TABLE_LEADER_DISTRIBUTION,
            status="Warn",
            message=f"{base}: fewer regions than stores, so leaders cannot spread; consider "
            "SPLIT TABLE (or more rows) before measuring",
            stores=[top_sid],
        )
    if top > 2 * fair:
        return CheckResult(
            name=TABLE_LEADER_DISTRIBUTION,
            status="Warn",
            message=f"{base}: store {top_sid} holds {top}, more than twice its fair share",
            stores=[top_sid],
        )
    return CheckResult(name=TABLE_LEADER_DISTRIBUTION, status="Pass", message=base)


def not_tidb_skip(name: str, server_version: str) -> CheckResult:
    """A PD/TiDB-only check against a server that is not TiDB: Pass, saying it was skipped."""
    # Pass, not Warn: the check does not apply (no PD, no regions on MySQL/MariaDB, e.g. the
    # local test bed's stand-in), and a Warn on every non-TiDB run would drown real warnings.
    # The message keeps it visible in status.
    return CheckResult(
        name=name, status="Pass", message=f"not TiDB (server says {server_version}), skipped"
    )


def is_tidb_server_version(version: str) -> bool:
    """True for TiDB's `SELECT VERSION()` form, e.g. '8.0.11-TiDB-v8.1.0'."""
    return "tidb" in version.lower()


def parse_tidb_version(text: str) -> dict[str, str]:
    """`SELECT tidb_version()` text → {'release_version': 'v8.1.0', 'edition': ..., ...}.

    Keys are the printed keys lower-cased with spaces as underscores (e.g. 'git_commit_hash',
    'goversion', 'store'). Tolerates the `tidb_version(): ` prefix of \\G output and the
    `| ... |` borders of table output (sample tidb-tidb_version_v8.1.x.txt).
    """
    result: dict[str, str] = {}
    for raw_line in text.splitlines():
        line = raw_line.strip().strip("|").strip()
        for prefix in ("tidb_version():", "TIDB_VERSION():"):
            if line.startswith(prefix):
                line = line[len(prefix) :].strip()
        key, sep, value = line.partition(":")
        if not sep or not key.strip():
            continue
        result.setdefault(key.strip().lower().replace(" ", "_"), value.strip())
    if "release_version" not in result:
        raise ParseError(
            "tidb_version() output has no 'Release Version:' line; is the server TiDB? "
            f"got: {' '.join(text.split())[:120]}"
        )
    return result


# ---------------------------------------------------------------------------
# The gate


def evaluate(checks: Sequence[CheckResult], policy: Policy) -> GateVerdict:
    """Combine check results under spec.preflight.policy: Enforce blocks on Fail, Warn records."""
    failed = [c.name for c in checks if c.status == "Fail"]
    warned = [c.name for c in checks if c.status == "Warn"]
    status = worst_status(c.status for c in checks)
    if policy == "Off":
        return GateVerdict(
            policy=policy, status=status, proceed=True, message="preflight is off; not checked"
        )
    proceed = not (policy == "Enforce" and failed)
    if failed:
        action = "run blocked" if not proceed else "recorded, run continues (policy Warn)"
        message = f"preflight failed: {', '.join(failed)}; {action}"
    elif warned:
        message = f"preflight passed with warnings: {', '.join(warned)}"
    else:
        message = f"preflight passed ({len(checks)} checks)"
    return GateVerdict(
        policy=policy,
        status=status,
        proceed=proceed,
        failed=failed,
        warned=warned,
        message=message,
    )


def _ids(ids: Iterable[int]) -> str:
    return ", ".join(str(i) for i in ids)
