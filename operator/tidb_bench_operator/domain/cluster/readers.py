"""Readers that turn TiDB Operator objects into a ClusterView: v1 TidbCluster, v2 Cluster."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tidb_bench_operator.domain.cluster.view import (
    DATABASE_COMPONENTS,
    EVENLY_SPREAD,
    PD_CLIENT_PORT,
    TIDB_CLIENT_PORT,
    V1_KIND,
    V2_GROUP_KINDS,
    V2_KIND,
    V2_LABELS,
    ClusterTls,
    ClusterView,
    ComponentGroup,
    Condition,
    TidbEndpoint,
    WeightedTopology,
    cluster_client_secret_name,
    component_rank,
    mysql_client_secret_name,
)
from tidb_bench_operator.domain.objects import get_path
from tidb_bench_operator.errors import SpecError

# ---------------------------------------------------------------------------
# v1 reader: TidbCluster


def read_tidb_cluster(tc: Mapping[str, Any], *, namespace: str | None = None) -> ClusterView:
    """A view of a v1 TidbCluster (plain dict as the API returns it)."""
    name = str(get_path(tc, "metadata", "name") or "")
    ns = str(get_path(tc, "metadata", "namespace") or namespace or "")
    spec: Mapping[str, Any] = get_path(tc, "spec") or {}
    cluster_version = spec.get("version")
    groups = []
    for comp in (*DATABASE_COMPONENTS, "tiflash"):
        c = spec.get(comp)
        if not isinstance(c, Mapping):
            continue
        version = c.get("version") or cluster_version
        base = c.get("baseImage") or f"pingcap/{comp}"
        image = c.get("image") or (f"{base}:{version}" if version else base)
        groups.append(
            ComponentGroup(
                component=comp,
                name=name,
                kind=V1_KIND,
                replicas=_int(c.get("replicas")),
                version=str(version) if version else None,
                image=str(image),
            )
        )
    # `<tc>-tidb` is TiDB Operator v1's TiDB Service; `<tc>-pd` its PD Service.
    tidb = TidbEndpoint(host=f"{name}-tidb.{ns}", port=TIDB_CLIENT_PORT)
    tls = ClusterTls(
        cluster=get_path(spec, "tlsCluster", "enabled") is True,
        mysql=get_path(spec, "tidb", "tlsClient", "enabled") is True,
        cluster_client_secret=cluster_client_secret_name(name),
        mysql_client_secret=mysql_client_secret_name(name),
    )
    scheme = "https" if tls.cluster else "http"
    return ClusterView(
        kind=V1_KIND,
        name=name,
        namespace=ns,
        groups=tuple(groups),
        pd_url=f"{scheme}://{name}-pd.{ns}:{PD_CLIENT_PORT}",
        tidb=tidb,
        tls=tls,
        source=tc,
    )


# ---------------------------------------------------------------------------
# v2 reader: Cluster + PDGroup/TiKVGroup/TiDBGroup


def _v2_component(group: Mapping[str, Any]) -> str | None:
    """The component a v2 group runs: by its kind, else its component label, else its kind.

    A kind this version does not know (a later TiDB Operator's) still counts: its label,
    or `FooGroup` → `foo`.
    """
    kind = str(group.get("kind") or "")
    for comp, group_kind in V2_GROUP_KINDS.items():
        if kind == group_kind:
            return comp
    label = get_path(group, "metadata", "labels", V2_LABELS.component)
    if isinstance(label, str) and label:
        return label
    if kind.endswith("Group") and len(kind) > len("Group"):
        return kind.removesuffix("Group").lower()
    return None


def _feature_gates(cluster: Mapping[str, Any]) -> set[str]:
    return {
        str(g.get("name"))
        for g in get_path(cluster, "spec", "featureGates") or []
        if isinstance(g, Mapping) and g.get("name")
    }


def _service_host(cluster: Mapping[str, Any], service: str, ns: str) -> str:
    # `Cluster.spec.dns` (v2.1): InCluster `<svc>.<ns>` (the default), FQDN
    # `<svc>.<ns>.svc.<clusterDomain>` (pkg/apiutil/core/v1alpha1/cluster.go ServiceHost).
    if get_path(cluster, "spec", "dns", "mode") == "FQDN":
        domain = get_path(cluster, "spec", "dns", "clusterDomain") or "cluster.local"
        return f"{service}.{ns}.svc.{domain}"
    return f"{service}.{ns}"


def _secret_ref(obj: Mapping[str, Any], *path: str) -> str:
    name = get_path(obj, *path, "name")
    return str(name) if isinstance(name, str) and name else ""


def _v2_pd(
    cluster: Mapping[str, Any], pd_groups: Sequence[ComponentGroup], ns: str, tls: bool
) -> tuple[str | None, str]:
    """PD's URL and where it came from: `Cluster.status.pd`, else the PD Service the operator
    makes (pkg/apiutil/core/v1alpha1/pd.go PDServiceURL): with the `MultiPDGroup` gate the
    cluster's `spec.customizedPDServiceName` or `<cluster>-pd` on 2379, else the one PD
    group's `<pdgroup>-pd` on its client port.
    """
    name = str(get_path(cluster, "metadata", "name") or "")
    names = ", ".join(g.name for g in pd_groups)
    several = f" ({len(pd_groups)} PDGroups: {names})" if len(pd_groups) > 1 else ""
    multi = "MultiPDGroup" in _feature_gates(cluster)
    status = get_path(cluster, "status", "pd")
    if isinstance(status, str) and status:
        # One PD group: nothing to add to the URL (v2.0.1's Target Event stays as it was).
        return status, f"PD from Cluster.status.pd{several}" if several else ""
    if not pd_groups:
        return None, ""
    scheme = "https" if tls else "http"
    if multi:
        custom = get_path(cluster, "spec", "customizedPDServiceName")
        service = str(custom) if isinstance(custom, str) and custom else f"{name}-pd"
        where = "spec.customizedPDServiceName" if service != f"{name}-pd" else "MultiPDGroup"
        url = f"{scheme}://{_service_host(cluster, service, ns)}:{PD_CLIENT_PORT}"
        return url, f"PD through the cluster's Service {service} ({where}){several}"
    pd = pd_groups[0]
    port = pd.client_port or PD_CLIENT_PORT
    url = f"{scheme}://{_service_host(cluster, f'{pd.name}-pd', ns)}:{port}"
    if several:
        # Several PD groups without the gate is not a shape the operator makes; say which.
        return url, f"PD through PDGroup {pd.name}'s Service {pd.name}-pd, the first{several}"
    return url, f"PD through PDGroup {pd.name}'s Service {pd.name}-pd"


def _v2_tls(
    cluster: Mapping[str, Any], chosen: ComponentGroup | None, name: str, tls: bool
) -> ClusterTls:
    """The client Secrets: those the Cluster names (`spec.security.tls.client`, v2.1: CA and
    cert/key pair apart), else TiDB Operator's `<cluster>-cluster-client-secret`
    (pkg/apiutil/core/v1alpha1/cluster.go ClientCertKeyPairSecretName, ClientCASecretName).
    MySQL: `<tidbgroup>-tidb-client-secret`, the name TiDB Operator's docs give the client
    certificate (no object names it; the TiDBGroup's `tls.mysql.ca`/`certKeyPair` are the
    server's Secrets).
    """
    client = ("spec", "security", "tls", "client")
    pair = _secret_ref(cluster, *client, "certKeyPair")
    ca = _secret_ref(cluster, *client, "ca")
    secret = pair or cluster_client_secret_name(name)
    notes = []
    if pair:
        notes.append(f"PD client certificate from Secret {pair} (Cluster spec.security.tls.client)")
    if ca and ca != secret:
        notes.append(f"PD's CA from Secret {ca} (Cluster spec.security.tls.client.ca)")
    no_client_cert = chosen is not None and chosen.mysql_client_auth == "NoClientCert"
    if chosen is not None and chosen.mysql_tls and no_client_cert:
        notes.append(f"TiDBGroup {chosen.name} asks MySQL clients for no certificate "
                     "(clientAuth: NoClientCert)")  # fmt: skip
    return ClusterTls(
        cluster=tls,
        mysql=chosen is not None and chosen.mysql_tls,
        cluster_client_secret=secret,
        mysql_client_secret=mysql_client_secret_name(chosen.name) if chosen else "",
        cluster_ca_secret=ca if ca and ca != secret else "",
        notes=tuple(notes),
    )


# Components whose binary ships in another component's image (api/core/v1alpha1/
# {tso,scheduling,router,resourcemanager,tikv_worker}_types.go: "Default is pingcap/pd|tikv").
_DEFAULT_IMAGE = {"tso": "pingcap/pd", "scheduling": "pingcap/pd", "router": "pingcap/pd",
                  "resource-manager": "pingcap/pd", "tikv-worker": "pingcap/tikv"}  # fmt: skip


def _image(component: str, image: str | None, version: str | None) -> str:
    # The CRD's rule: the image defaults to pingcap/<component> (or the image that ships
    # it); a tag-less image takes the version as its tag.
    base = image or _DEFAULT_IMAGE.get(component, f"pingcap/{component}")
    last = base.rsplit("/", 1)[-1]
    if "@" in base or ":" in last or not version:
        return base
    return f"{base}:{version}"


def _topologies(spec: Mapping[str, Any]) -> tuple[WeightedTopology, ...] | None:
    found: list[WeightedTopology] = []
    has_policy = False
    for policy in spec.get("schedulePolicies") or []:
        if not isinstance(policy, Mapping) or policy.get("type") != EVENLY_SPREAD:
            continue
        has_policy = True
        for t in get_path(policy, "evenlySpread", "topologies") or []:
            if not isinstance(t, Mapping) or not isinstance(t.get("topology"), Mapping):
                continue
            labels = tuple(sorted((str(k), str(v)) for k, v in t["topology"].items()))
            weight = _int(t.get("weight"))
            found.append(WeightedTopology(labels=labels, weight=weight or 1))
    return tuple(found) if has_policy and found else None


def _conditions(obj: Mapping[str, Any]) -> tuple[Condition, ...]:
    return tuple(
        Condition(
            type=str(c.get("type", "")),
            status=str(c.get("status", "")),
            reason=str(c.get("reason") or ""),
            message=str(c.get("message") or ""),
        )
        for c in get_path(obj, "status", "conditions") or []
        if isinstance(c, Mapping)
    )


def _v2_group(group: Mapping[str, Any], component: str) -> ComponentGroup:
    spec: Mapping[str, Any] = group.get("spec") or {}
    template: Mapping[str, Any] = get_path(spec, "template", "spec") or {}
    version = template.get("version")
    status: Mapping[str, Any] = group.get("status") or {}
    mysql_tls: Mapping[str, Any] = get_path(template, "security", "tls", "mysql") or {}
    return ComponentGroup(
        component=component,
        name=str(get_path(group, "metadata", "name") or ""),
        kind=str(group.get("kind") or V2_GROUP_KINDS.get(component, "")),
        replicas=_int(spec.get("replicas")),
        version=str(version) if version else None,
        image=_image(component, template.get("image"), version),
        topologies=_topologies(spec),
        client_port=_int(get_path(template, "server", "ports", "client", "port")),
        ready_replicas=_int(status.get("readyReplicas")),
        updated_replicas=_int(status.get("updatedReplicas")),
        status_version=status.get("version") or None,
        conditions=_conditions(group),
        mysql_tls=mysql_tls.get("enabled") is True,
        mysql_client_auth=str(mysql_tls.get("clientAuth") or ""),
        standby=component == "tidb" and template.get("mode") == "StandBy",
        max_surge=_int(spec.get("maxSurge")),
        min_ready_seconds=_int(spec.get("minReadySeconds")),
        status_replicas=_int(status.get("replicas")),
    )


def read_v2_cluster(
    cluster: Mapping[str, Any],
    groups: Sequence[Mapping[str, Any]],
    *,
    tidb_group: str | None = None,
) -> ClusterView:
    """A view of a v2 Cluster and its groups (any group list; others' groups are ignored).

    TiDB is `<tidbgroup>-tidb.<ns>:<port>`; with several TiDBGroups `tidb_group` picks one,
    else the first by name is used and the endpoint's note says so. PD is the URL the
    operator writes to `Cluster.status.pd`, else derived from the PDGroup's Service.
    Raises SpecError when `tidb_group` names no TiDBGroup of the cluster.
    """
    name = str(get_path(cluster, "metadata", "name") or "")
    ns = str(get_path(cluster, "metadata", "namespace") or "")
    views = []
    for g in groups:
        comp = _v2_component(g)
        if comp is None or get_path(g, "spec", "cluster", "name") != name:
            continue
        g_ns = get_path(g, "metadata", "namespace")
        if g_ns and ns and g_ns != ns:
            continue
        views.append(_v2_group(g, comp))
    views.sort(key=lambda v: (component_rank(v.component), v.name))

    tls = get_path(cluster, "spec", "tlsCluster", "enabled") is True
    pd_url, pd_note = _v2_pd(cluster, [v for v in views if v.component == "pd"], ns, tls)

    tidb_groups = [v for v in views if v.component == "tidb" and not v.standby]
    standby = [v.name for v in views if v.component == "tidb" and v.standby]
    tidb: TidbEndpoint | None = None
    if tidb_group is not None:
        chosen = next((v for v in tidb_groups if v.name == tidb_group), None)
        if chosen is None:
            have = ", ".join(v.name for v in tidb_groups) or "none"
            what = "TiDBGroups"
            if tidb_group in standby:
                what = f"serving TiDBGroups; {tidb_group} is StandBy and serves no clients"
            raise SpecError(
                "cluster.tidbGroup",
                f"Cluster {ns}/{name} has no TiDBGroup {tidb_group!r} (its {what}: {have})",
                "name one of them, or leave tidbGroup unset when there is one",
            )
        note = f"TiDBGroup {chosen.name} (named in spec.cluster.tidbGroup)"
    elif tidb_groups:
        chosen = tidb_groups[0]
        if len(tidb_groups) > 1:
            others = ", ".join(v.name for v in tidb_groups[1:])
            note = (
                f"TiDBGroup {chosen.name}, the first by name of {len(tidb_groups)} (not "
                f"{others}); set spec.cluster.tidbGroup to choose"
            )
        else:
            note = f"TiDBGroup {chosen.name}"
    else:
        chosen = None
    if chosen is not None:
        if standby:
            note += f"; StandBy, not counted: {', '.join(standby)}"
        tidb = TidbEndpoint(
            host=f"{chosen.name}-tidb.{ns}",
            port=chosen.client_port or TIDB_CLIENT_PORT,
            group=chosen.name,
            note=note,
        )
    return ClusterView(
        kind=V2_KIND,
        name=name,
        namespace=ns,
        groups=tuple(views),
        pd_url=str(pd_url) if pd_url else None,
        tidb=tidb,
        conditions=_conditions(cluster),
        pd_note=pd_note,
        tls=_v2_tls(cluster, chosen, name, tls),
        source=cluster,
    )


# ---------------------------------------------------------------------------
# helpers on plain Kubernetes dicts


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
