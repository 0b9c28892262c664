"""One view of a TiDB cluster, whichever TiDB Operator generation manages it (v1 or v2).

TiDB Operator v1 describes a cluster as one `TidbCluster` (group `pingcap.com`); v2 splits
it into a `Cluster` and per-component groups (`PDGroup`, `TiKVGroup`, `TiDBGroup`, group
`core.pingcap.com`) that own instances, each instance one pod. Everything downstream —
target resolution, placement, preflight, provenance, the report — reads a `ClusterView`
built by `read_tidb_cluster` or `read_v2_cluster` and does not care which one it came from.
How the two generations label pods, name Services and spread instances is written up in
docs/tidb-operator-v2.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tidb_bench_operator.domain.objects import HOSTNAME_KEY, get_path, metadata_labels
from tidb_bench_operator.errors import SpecError

ClusterKind = Literal["TidbCluster", "Cluster"]
V1_KIND: ClusterKind = "TidbCluster"
V2_KIND: ClusterKind = "Cluster"
CLUSTER_KINDS: tuple[ClusterKind, ...] = (V1_KIND, V2_KIND)

V1_API_GROUP = "pingcap.com"
V2_API_GROUP = "core.pingcap.com"
API_VERSION = "v1alpha1"

# The components a benchmark client must not share a node with, in display order.
DATABASE_COMPONENTS = ("pd", "tikv", "tidb")
DISPLAY = {"pd": "PD", "tikv": "TiKV", "tidb": "TiDB", "tiflash": "TiFlash"}

# v2 group kinds, their plural resource names and the component each one runs.
V2_GROUP_KINDS = {"pd": "PDGroup", "tikv": "TiKVGroup", "tidb": "TiDBGroup"}
V2_GROUP_PLURALS = {"pd": "pdgroups", "tikv": "tikvgroups", "tidb": "tidbgroups"}

# Default client ports (v1 and v2 alike): PD 2379, TiDB's MySQL protocol 4000.
PD_CLIENT_PORT = 2379
TIDB_CLIENT_PORT = 4000
ZONE_KEY = "topology.kubernetes.io/zone"
EVENLY_SPREAD = "EvenlySpread"


@dataclass(frozen=True)
class PodLabels:
    """The label keys one operator generation puts on the pods it creates."""

    cluster: str
    component: str
    group: str | None = None


V1_LABELS = PodLabels(cluster="app.kubernetes.io/instance", component="app.kubernetes.io/component")
V2_LABELS = PodLabels(
    cluster="pingcap.com/cluster", component="pingcap.com/component", group="pingcap.com/group"
)


def labels_of(kind: str) -> PodLabels:
    """The pod label keys of the operator generation that manages `kind`."""
    return V2_LABELS if kind == V2_KIND else V1_LABELS


def database_pod_selector(kind: str, name: str | None, component: str | None = None) -> str:
    """A label selector for the cluster's pd/tikv/tidb pods (one component if given).

    With no cluster name: every pd/tikv/tidb pod that generation labels, whatever the cluster.
    """
    labels = labels_of(kind)
    parts = [] if name is None else [f"{labels.cluster}={name}"]
    if component is not None:
        parts.append(f"{labels.component}={component}")
    else:
        parts.append(f"{labels.component} in ({','.join(DATABASE_COMPONENTS)})")
    return ",".join(parts)


def anti_affinity_selector(kind: str, name: str) -> dict[str, Any]:
    """labelSelector of an anti-affinity term matching the cluster's pd/tikv/tidb pods."""
    labels = labels_of(kind)
    return {
        "matchLabels": {labels.cluster: name},
        "matchExpressions": [
            {"key": labels.component, "operator": "In", "values": list(DATABASE_COMPONENTS)}
        ],
    }


# ---------------------------------------------------------------------------
# The view


@dataclass(frozen=True)
class WeightedTopology:
    """One topology an `EvenlySpread` schedule policy lists: node labels and a weight."""

    labels: tuple[tuple[str, str], ...]
    weight: int = 1

    def text(self) -> str:
        """`zone=a` (several labels joined by commas), as the topology check prints it."""
        return ",".join(f"{k}={v}" for k, v in self.labels)

    def holds(self, node: Mapping[str, Any] | None, node_name: str) -> bool:
        """True when the node carries every label of this topology."""
        labels = metadata_labels(node) if node is not None else {}
        for key, value in self.labels:
            # Hand-made nodes may lack kubernetes.io/hostname; the kubelet sets it to the name.
            got = labels.get(key, node_name if key == HOSTNAME_KEY else None)
            if got != value:
                return False
        return True


@dataclass(frozen=True)
class Condition:
    """A status condition as the view exposes it (type, status, reason, message)."""

    type: str
    status: str
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class ComponentGroup:
    """One component's pods as one operator object manages them.

    v1: the TidbCluster's `spec.<component>` (the group name is the TidbCluster's); v2: one
    PDGroup/TiKVGroup/TiDBGroup. `topologies` is None when the group has no EvenlySpread
    policy (v2) or when the generation spreads differently (v1: topologySpreadConstraints).
    """

    component: str
    name: str
    kind: str = ""
    replicas: int | None = None
    version: str | None = None
    image: str | None = None
    topologies: tuple[WeightedTopology, ...] | None = None
    client_port: int | None = None
    ready_replicas: int | None = None
    updated_replicas: int | None = None
    status_version: str | None = None
    conditions: tuple[Condition, ...] = ()
    #: v2 TiDBGroup: `spec.template.spec.security.tls.mysql.enabled`.
    mysql_tls: bool = False

    def condition(self, type_: str) -> Condition | None:
        """The group's condition of that type, if it reports one."""
        return next((c for c in self.conditions if c.type == type_), None)


@dataclass(frozen=True)
class ClusterTls:
    """TLS as the cluster object turns it on, and the client Secrets TiDB Operator names.

    `cluster`: TLS between components (v1 and v2 `spec.tlsCluster.enabled`): PD serves its
    API over HTTPS only and demands a client certificate, the one in `cluster_client_secret`
    (`<cluster>-cluster-client-secret` in both generations). `mysql`: TiDB accepts TLS from
    MySQL clients (v1 `spec.tidb.tlsClient.enabled`, v2 the TiDBGroup's
    `spec.template.spec.security.tls.mysql.enabled`), whose client certificate TiDB Operator
    keeps in `mysql_client_secret` (v1 `<cluster>-tidb-client-secret`, v2
    `<tidbgroup>-tidb-client-secret`). See docs/tls.md.
    """

    cluster: bool = False
    mysql: bool = False
    cluster_client_secret: str = ""
    mysql_client_secret: str = ""


def cluster_client_secret_name(cluster: str) -> str:
    """The shared client certificate's Secret, `<cluster>-cluster-client-secret` (v1 and v2)."""
    return f"{cluster}-cluster-client-secret"


def mysql_client_secret_name(owner: str) -> str:
    """The MySQL client certificate's Secret: `<owner>-tidb-client-secret`.

    The owner is the TidbCluster (v1) or the TiDBGroup (v2).
    """
    return f"{owner}-tidb-client-secret"


@dataclass(frozen=True)
class TidbEndpoint:
    """Where clients reach TiDB, and which group that is when there are several."""

    host: str
    port: int
    group: str | None = None
    note: str = ""


@dataclass(frozen=True)
class ClusterView:
    """A TiDB cluster as the benchmark sees it, from either operator generation."""

    kind: ClusterKind
    name: str
    namespace: str
    groups: tuple[ComponentGroup, ...]
    pd_url: str | None
    tidb: TidbEndpoint | None
    # v2 Cluster conditions (Available, Progressing, Suspended); v1 keeps none here.
    conditions: tuple[Condition, ...] = ()
    tls: ClusterTls = field(default_factory=ClusterTls)
    # The TidbCluster object (v1): its topologySpreadConstraints are judged as they are.
    source: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def labels(self) -> PodLabels:
        """The label keys on this cluster's pods."""
        return labels_of(self.kind)

    @property
    def where(self) -> str:
        """`Cluster tidb-cluster/basic`, for messages."""
        return f"{self.kind} {self.namespace}/{self.name}"

    def database_pods(self, pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """The pods that are this cluster's live pd/tikv/tidb pods."""
        keys = self.labels
        out = []
        for pod in pods:
            labels = metadata_labels(pod)
            if labels.get(keys.cluster) != self.name:
                continue
            if labels.get(keys.component) not in DATABASE_COMPONENTS:
                continue
            ns = get_path(pod, "metadata", "namespace")
            if ns and ns != self.namespace:
                continue
            if get_path(pod, "status", "phase") in ("Succeeded", "Failed"):
                continue
            out.append(pod)
        return out

    def pods_of(
        self, group: ComponentGroup, pods: Sequence[Mapping[str, Any]]
    ) -> list[Mapping[str, Any]]:
        """The group's pods among the cluster's pods."""
        keys = self.labels
        out = []
        for pod in self.database_pods(pods):
            labels = metadata_labels(pod)
            if labels.get(keys.component) != group.component:
                continue
            if keys.group is not None and labels.get(keys.group) != group.name:
                continue
            out.append(pod)
        return out

    def groups_of(self, component: str) -> list[ComponentGroup]:
        """The component's groups, by name."""
        return sorted((g for g in self.groups if g.component == component), key=lambda g: g.name)

    def _key(self, group: ComponentGroup) -> str:
        # One group per component (always in v1): key by component, as status always has;
        # several v2 groups of a component: `tidb/<group>` each.
        return (
            group.component
            if len(self.groups_of(group.component)) == 1
            else f"{group.component}/{group.name}"
        )

    def images(self) -> dict[str, str]:
        """Image per component (or per `component/group` when a component has several)."""
        return {self._key(g): g.image for g in self.groups if g.image}

    def replicas(self) -> dict[str, int]:
        """Desired replicas, keyed like `images()`."""
        return {self._key(g): g.replicas for g in self.groups if g.replicas is not None}

    def versions(self) -> dict[str, str]:
        """Desired version, keyed like `images()`."""
        return {self._key(g): g.version for g in self.groups if g.version}

    def condition(self, type_: str) -> Condition | None:
        """The Cluster's condition of that type (v2), if present."""
        return next((c for c in self.conditions if c.type == type_), None)

    @property
    def progressing(self) -> Condition | None:
        """v2's `Progressing` condition on the Cluster, the operator's upgrade/scale signal.

        TiDB Operator v2.0.1 sets it to True on every reconcile (reason ClusterCreation,
        `pkg/controllers/cluster/tasks/status.go`), so a guard should also read
        `unsettled_groups()`; see docs/tidb-operator-v2.md.
        """
        return self.condition("Progressing")

    def unsettled_groups(self) -> list[str]:
        """Groups in a rollout or scale: not Synced, or fewer updated/ready than desired."""
        out = []
        for g in self.groups:
            synced = g.condition("Synced")
            why = []
            if synced is not None and synced.status != "True":
                why.append(f"Synced={synced.status} ({synced.reason})")
            if g.status_version and g.version and g.status_version != g.version:
                why.append(f"at {g.status_version}, upgrading to {g.version}")
            if g.replicas is not None:
                if g.updated_replicas is not None and g.updated_replicas < g.replicas:
                    why.append(f"{g.updated_replicas}/{g.replicas} updated")
                if g.ready_replicas is not None and g.ready_replicas < g.replicas:
                    why.append(f"{g.ready_replicas}/{g.replicas} ready")
            if why:
                out.append(f"{g.kind} {g.name}: {', '.join(why)}")
        return out


# ---------------------------------------------------------------------------
# Which kind `spec.cluster` names


def choose_kind(
    requested: str | None,
    *,
    namespace: str,
    name: str,
    tidbcluster_exists: bool,
    cluster_exists: bool,
) -> ClusterKind:
    """The kind spec.cluster names: the requested one if it exists, else the one that exists.

    Raises SpecError naming the field when the requested kind is missing, or, with no kind
    given, when both kinds or neither exist under that name.
    """
    exists = {V1_KIND: tidbcluster_exists, V2_KIND: cluster_exists}
    look = f"kubectl -n {namespace} get tidbclusters.{V1_API_GROUP},clusters.{V2_API_GROUP}"
    if requested is not None:
        if requested not in exists:
            raise SpecError(
                "cluster.kind", f"unknown kind {requested!r}", "use TidbCluster or Cluster"
            )
        if not exists[requested]:
            other = V2_KIND if requested == V1_KIND else V1_KIND
            hint = (
                f"a {other} of that name exists: set cluster.kind to {other} or remove it"
                if exists[other]
                else f"check cluster.name and cluster.namespace ({look})"
            )
            raise SpecError("cluster.name", f"{requested} {namespace}/{name} not found", hint)
        return requested
    if tidbcluster_exists and cluster_exists:
        raise SpecError(
            "cluster.kind",
            f"both a TidbCluster and a Cluster named {namespace}/{name} exist",
            "set cluster.kind to TidbCluster (TiDB Operator v1) or Cluster (v2) to say which",
        )
    if tidbcluster_exists:
        return V1_KIND
    if cluster_exists:
        return V2_KIND
    raise SpecError(
        "cluster.name",
        f"neither a TidbCluster nor a Cluster named {namespace}/{name} exists",
        f"check cluster.name and cluster.namespace ({look})",
    )
