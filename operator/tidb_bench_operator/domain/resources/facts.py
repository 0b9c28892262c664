"""The facts of pods and nodes a step's resources need, read from plain Kubernetes objects.

A pod's name, namespace, node, component and CPU request and limit (summed over its
containers), and a node's allocatable CPU, from the camelCase dicts the API returns. The
component comes from the label each TiDB Operator generation puts on its pods
(domain/cluster/view.py); a benchmark client pod, labelled with its run (domain/manifests.py),
is the component `client`. Nothing here raises on a malformed object: what cannot be read
is None.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidb_bench_operator.domain.cluster.view import V1_LABELS, V2_LABELS
from tidb_bench_operator.domain.manifests import LABEL_RUN
from tidb_bench_operator.domain.objects import JSONView, get_path, metadata_labels, metadata_name
from tidb_bench_operator.domain.resources.quantity import parse_quantity

#: The component of the benchmark's own pods.
CLIENT = "client"


@dataclass(frozen=True)
class PodFacts:
    """One pod as a step's resources name it."""

    namespace: str
    name: str
    component: str
    node: str | None = None
    #: Cores, summed over the containers; None when no container asks.
    cpu_request: float | None = None
    #: Cores, summed over the containers; None when any container is unlimited.
    cpu_limit: float | None = None


@dataclass(frozen=True)
class NodeFacts:
    """One node: its name and allocatable cores (None when unreadable)."""

    name: str
    allocatable_cores: float | None = None


def pod_component(pod: JSONView) -> str | None:
    """`client` for a benchmark pod, else the TiDB Operator component label (v2, then v1)."""
    labels = metadata_labels(pod)
    if LABEL_RUN in labels:
        return CLIENT
    for keys in (V2_LABELS, V1_LABELS):
        value = labels.get(keys.component)
        if value:
            return str(value)
    return None


def _cpu_sum(pod: JSONView, kind: str, *, all_needed: bool) -> float | None:
    containers = get_path(pod, "spec", "containers")
    if not isinstance(containers, list) or not containers:
        return None
    total, seen = 0.0, 0
    for container in containers:
        value = parse_quantity(get_path(container, "resources", kind, "cpu"))
        if value is None:
            if all_needed:
                return None
            continue
        total, seen = total + value, seen + 1
    return total if seen else None


def pod_facts(pod: JSONView, component: str | None = None) -> PodFacts:
    """The facts of one pod; `component` overrides what its labels say (else `unknown`)."""
    node = get_path(pod, "spec", "nodeName")
    return PodFacts(
        namespace=str(get_path(pod, "metadata", "namespace") or ""),
        name=metadata_name(pod),
        component=component or pod_component(pod) or "unknown",
        node=str(node) if node else None,
        cpu_request=_cpu_sum(pod, "requests", all_needed=False),
        # One unlimited container makes the pod unlimited (its cgroup has no quota).
        cpu_limit=_cpu_sum(pod, "limits", all_needed=True),
    )


def node_facts(node: JSONView) -> NodeFacts:
    """A node's name and `status.allocatable.cpu` in cores."""
    return NodeFacts(
        name=metadata_name(node),
        allocatable_cores=parse_quantity(get_path(node, "status", "allocatable", "cpu")),
    )
