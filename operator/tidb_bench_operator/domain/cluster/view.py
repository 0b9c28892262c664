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

# The components a benchmark client must not share a node with, in display order. v1 keeps
# exactly these (its selector `app.kubernetes.io/component in (pd,tikv,tidb)` is the contract;
# v1 also labels non-database pods such as `discovery`); v2 counts every pod the operator
# labels with a component, whatever its value, so kinds added after this list (tikv-worker,
# router, …) are included by label.
DATABASE_COMPONENTS = ("pd", "tikv", "tidb")
DISPLAY = {"pd": "PD", "tikv": "TiKV", "tidb": "TiDB", "tiflash": "TiFlash",
           "tikv-worker": "TiKVWorker", "ticdc": "TiCDC", "tiproxy": "TiProxy", "tso": "TSO",
           "scheduling": "Scheduling", "router": "Router",
           "resource-manager": "ResourceManager"}  # fmt: skip

# v2 group kinds and their plural resource names, by the component each one runs
# (`pingcap.com/component`, api/meta/v1alpha1/types.go); a group of any other kind found by
# API discovery is read as well, its component from its label or its kind.
V2_GROUP_KINDS = {"pd": "PDGroup", "tikv": "TiKVGroup", "tidb": "TiDBGroup",
                  "tiflash": "TiFlashGroup", "ticdc": "TiCDCGroup", "tiproxy": "TiProxyGroup",
                  "tikv-worker": "TiKVWorkerGroup", "tso": "TSOGroup",
                  "scheduling": "SchedulingGroup", "router": "RouterGroup",
                  "resource-manager": "ResourceManagerGroup"}  # fmt: skip
V2_GROUP_PLURALS = {c: k.lower() + "s" for c, k in V2_GROUP_KINDS.items()}
#: Display order of components; others follow by name.
COMPONENT_ORDER = ("pd", "tso", "scheduling", "router", "resource-manager", "tikv",
                   "tikv-worker", "tiflash", "tidb", "tiproxy", "ticdc")  # fmt: skip


def component_rank(component: str) -> tuple[int, str]:
    """Sort key: known components in COMPONENT_ORDER, then any other by name."""
    if component in COMPONENT_ORDER:
        return COMPONENT_ORDER.index(component), ""
    return len(COMPONENT_ORDER), component


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
    """A label selector for the cluster's database pods (one component if given).

    v1: pd/tikv/tidb (`app.kubernetes.io/component in (pd,tikv,tidb)`); v2: every pod with a
    `pingcap.com/component` label, whatever the component. With no cluster name: every such
    pod that generation labels, whatever the cluster.
    """
    labels = labels_of(kind)
    parts = [] if name is None else [f"{labels.cluster}={name}"]
    if component is not None:
        parts.append(f"{labels.component}={component}")
    elif kind == V2_KIND:
        parts.append(labels.component)
    else:
        parts.append(f"{labels.component} in ({','.join(DATABASE_COMPONENTS)})")
    return ",".join(parts)


def anti_affinity_selector(kind: str, name: str) -> dict[str, Any]:
    """labelSelector of an anti-affinity term matching the cluster's database pods."""
    labels = labels_of(kind)
    expression: dict[str, Any] = (
        {"key": labels.component, "operator": "Exists"}
        if kind == V2_KIND
        else {"key": labels.component, "operator": "In", "values": list(DATABASE_COMPONENTS)}
    )
    return {"matchLabels": {labels.cluster: name}, "matchExpressions": [expression]}


def is_database_component(kind: str, component: str | None) -> bool:
    """True for a component label value the benchmark keeps clear of (see DATABASE_COMPONENTS)."""
    if kind == V2_KIND:
        return bool(component)
    return component in DATABASE_COMPONENTS


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
    #: v2.1 TiDBGroup: `spec.template.spec.security.tls.mysql.clientAuth` (`NoClientCert`:
    #: TiDB asks for no client certificate); empty when unset.
    mysql_client_auth: str = ""
    #: v2.1 TiDBGroup `spec.template.spec.mode: StandBy`: instances that do not serve.
    standby: bool = False
    #: v2.1 groups: `spec.maxSurge` (TiDBGroup, default 1) and `spec.minReadySeconds`.
    max_surge: int | None = None
    min_ready_seconds: int | None = None
    #: `status.replicas`: the instances the group has now (above `replicas` while a surge
    #: instance of a rolling restart exists).
    status_replicas: int | None = None

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
    #: v2.1: the Secret with PD's CA (`ca.crt`) when the cluster names one apart from the
    #: cert/key pair (`Cluster.spec.security.tls.client.ca`); empty: the same Secret.
    cluster_ca_secret: str = ""
    #: Where the names came from, for the run's Target Event.
    notes: tuple[str, ...] = ()


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
    # v2 Cluster conditions (Available, Progressing, Suspended; Ready, Synced on main); v1
    # keeps none here.
    conditions: tuple[Condition, ...] = ()
    #: Where `pd_url` came from (the Cluster's status, its PD Service, several PD groups).
    pd_note: str = ""
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
        """The pods that are this cluster's live database pods (see DATABASE_COMPONENTS)."""
        keys = self.labels
        out = []
        for pod in pods:
            labels = metadata_labels(pod)
            if labels.get(keys.cluster) != self.name:
                continue
            if not is_database_component(self.kind, labels.get(keys.component)):
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
        """Desired serving replicas, keyed like `images()` (StandBy TiDB groups left out)."""
        return {
            self._key(g): g.replicas
            for g in self.groups
            if g.replicas is not None and not g.standby
        }

    def versions(self) -> dict[str, str]:
        """Desired version, keyed like `images()`."""
        return {self._key(g): g.version for g in self.groups if g.version}

    def condition(self, type_: str) -> Condition | None:
        """The Cluster's condition of that type (v2), if present."""
        return next((c for c in self.conditions if c.type == type_), None)

    def aggregated_unsettled(self) -> list[str]:
        """The Cluster's aggregated `Ready`/`Synced` conditions when not True (main's
        `pkg/controllers/cluster/tasks/status.go`); empty where the Cluster has none."""
        out = []
        for type_ in ("Synced", "Ready"):
            c = self.condition(type_)
            if c is not None and c.status != "True":
                detail = f": {c.message}" if c.message else ""
                out.append(f"Cluster {type_}: {type_}={c.status} ({c.reason}){detail}")
        return out

    @property
    def progressing(self) -> Condition | None:
        """v2's `Progressing` condition on the Cluster, the operator's upgrade/scale signal.

        TiDB Operator v2.0.1 sets it to True on every reconcile (reason ClusterCreation,
        `pkg/controllers/cluster/tasks/status.go`), so a guard should also read
        `unsettled_groups()`; see docs/tidb-operator-v2.md.
        """
        return self.condition("Progressing")

    def unsettled_groups(self) -> list[str]:
        """Groups in a rollout or scale: not Synced, fewer updated/ready than desired, or more
        instances than desired (a `maxSurge` instance of a rolling restart).

        Each entry is `<Kind> <group>: <why>`; the part before `: ` names the group, so a
        rollout whose counts move during a step is still the one rollout (domain/guard.py).
        """
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
                if g.status_replicas is not None and g.status_replicas > g.replicas:
                    surge = f"maxSurge {g.max_surge}" if g.max_surge is not None else "surge"
                    why.append(f"{g.status_replicas} instances for {g.replicas} replicas ({surge})")
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
