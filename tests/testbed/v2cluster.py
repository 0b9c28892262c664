"""TiDB Operator v2 on the test bed: its CRDs made installable on 1.20, stand-in clusters.

Two shapes of the v2 CRDs are vendored: v2.0.1's (tests/data/vendor/tidb-operator-v2.0.1/
crd/, seven CRDs, what the bed installs at start) and v2.1.0-beta.6's (tests/data/vendor/
tidb-operator-v2.1.0-beta.6/crd/: the same seven, a superset of v2.0.1's fields — feature
gates, `customizedPDServiceName`, `dns`, `security.tls.client`, TLSSecret `ca`/`certKeyPair`,
TiDB `mode` and `maxSurge` — plus TiKVWorkerGroup and TiKVWorker). They have the same names,
so one API server serves one shape at a time: `install_v2_crds(ext, "v2.1")` replaces the
installed ones with v2.1's and adds the TiKVWorker CRDs; `install_v2_crds(ext, "v2.0.1")`
puts v2.0.1's back and removes those (the v2.1 e2e suite does both, around its tests).

Both are generated for current Kubernetes. The 1.20 API server refuses them as they are,
so `v2_crd_for_1_20` transforms each, of either shape, at load time:

- `x-kubernetes-validations` (CEL rules, Kubernetes >= 1.25) are removed;
- `selectableFields` (Kubernetes >= 1.30) is removed;
- `default: ""` is removed (1.20 reads an empty-string default as null and refuses it);
- `x-kubernetes-list-type: map` becomes `atomic` and `x-kubernetes-list-map-keys` goes
  (the keys would require the removed defaults).

What is lost is server-side validation (CEL rules, list-map merge semantics), not the
shape of the objects: the stand-ins below are stored and served as on a real cluster.

A stand-in cluster is what TiDB Operator v2 would leave behind, without the operator: the
Cluster (with the status the operator writes), one group per entry, one instance per
replica (`<group>-<suffix>`, topology assigned) and its pod (`<group>-<component>-<suffix>`)
carrying v2's labels, bound to the node chosen; the node agent marks the pods Running.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from testbed.agent import STANDIN_ANNOTATION
from testbed.cluster import REPO_ROOT
from testbed.kube import standin_pod, wait_crd_established

V2_VENDOR = REPO_ROOT / "tests" / "data" / "vendor" / "tidb-operator-v2.0.1"
V21_VENDOR = REPO_ROOT / "tests" / "data" / "vendor" / "tidb-operator-v2.1.0-beta.6"
SHAPES = {"v2.0.1": V2_VENDOR, "v2.1": V21_VENDOR}
GROUP, VERSION = "core.pingcap.com", "v1alpha1"
VERSION_TAG = "v8.5.2"
GROUP_KIND = {"pd": ("PDGroup", "pdgroups"), "tikv": ("TiKVGroup", "tikvgroups"),
              "tidb": ("TiDBGroup", "tidbgroups"),
              "tikv-worker": ("TiKVWorkerGroup", "tikvworkergroups")}  # fmt: skip
INSTANCE_KIND = {"pd": ("PD", "pds"), "tikv": ("TiKV", "tikvs"), "tidb": ("TiDB", "tidbs"),
                 "tikv-worker": ("TiKVWorker", "tikvworkers")}  # fmt: skip
ZONE_KEY = "topology.kubernetes.io/zone"


def v2_crd_for_1_20(crd: Any) -> Any:
    """The CRD with what Kubernetes 1.20 cannot read taken out (see the module docstring)."""
    if isinstance(crd, list):
        return [v2_crd_for_1_20(x) for x in crd]
    if not isinstance(crd, dict):
        return crd
    out: dict[str, Any] = {}
    for key, value in crd.items():
        if key in ("x-kubernetes-validations", "selectableFields", "x-kubernetes-list-map-keys"):
            continue
        if key == "default" and value == "":
            continue
        if key == "x-kubernetes-list-type" and value == "map":
            out[key] = "atomic"
            continue
        out[key] = v2_crd_for_1_20(value)
    return out


def install_v2_crds(ext: client.ApiextensionsV1Api, shape: str = "v2.0.1") -> list[str]:
    """Install the CRDs of one shape (transformed for 1.20), replacing the other's; wait.

    At the bed's start nothing is installed and v2.0.1's seven are created. Asked for the
    other shape, the installed ones are replaced by it and the CRDs only the old shape has
    (v2.1's TiKVWorker ones) deleted.
    """
    names = []
    for path in sorted((SHAPES[shape] / "crd").glob("*.yaml")):
        body = v2_crd_for_1_20(yaml.safe_load(path.read_text()))
        name = body["metadata"]["name"]
        try:
            ext.create_custom_resource_definition(body)
        except ApiException as exc:
            if exc.status != 409:
                raise
            now = ext.read_custom_resource_definition(name)
            body["metadata"]["resourceVersion"] = now.metadata.resource_version
            ext.replace_custom_resource_definition(name, body)
        names.append(name)
    for other in {n for p in SHAPES.values() for n in _crd_names(p)} - set(names):
        try:
            ext.delete_custom_resource_definition(other)
        except ApiException as exc:
            if exc.status != 404:
                raise
    for name in names:
        wait_crd_established(ext, name)
    return names


def _crd_names(vendor: Any) -> list[str]:
    # core.pingcap.com_tikvworkers.yaml -> tikvworkers.core.pingcap.com
    return [f"{p.stem.split('_', 1)[1]}.{GROUP}" for p in (vendor / "crd").glob("*.yaml")]


@dataclass
class StandinGroup:
    """One v2 group of a stand-in: its component, the node of each instance, its policy.

    `topologies` lists EvenlySpread topologies as (labels, weight); None gives the group no
    schedule policy at all.
    """

    component: str
    nodes: list[str]
    topologies: list[tuple[dict[str, str], int]] | None = None
    version: str = VERSION_TAG
    exec_commands: Mapping[str, Sequence[str]] | None = None
    status: dict[str, Any] = field(default_factory=dict)
    #: More of the group's spec (v2.1: TiDBGroup `maxSurge`, `minReadySeconds`).
    spec: dict[str, Any] = field(default_factory=dict)


def cluster_manifest(
    name: str, namespace: str, tls: bool = False, feature_gates: Sequence[str] = ()
) -> dict[str, Any]:
    spec: dict[str, Any] = {"tlsCluster": {"enabled": True}} if tls else {}
    if feature_gates:  # v2.1 shape only: v2.0.1's Cluster has no featureGates
        spec["featureGates"] = [{"name": g} for g in feature_gates]
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Cluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def group_manifest(
    cluster: str, namespace: str, group: str, g: StandinGroup, tls: bool = False
) -> dict[str, Any]:
    kind, _ = GROUP_KIND[g.component]
    template: dict[str, Any] = {"version": g.version}
    if tls and g.component == "tidb":
        template["security"] = {"tls": {"mysql": {"enabled": True}}}
    if g.component in ("pd", "tikv"):
        template["volumes"] = [{"name": "data", "mounts": [{"type": "data"}], "storage": "1Gi"}]
    spec: dict[str, Any] = {
        "cluster": {"name": cluster},
        "replicas": len(g.nodes),
        "template": {"spec": template},
        **g.spec,
    }
    if g.topologies is not None:
        spec["schedulePolicies"] = [
            {
                "type": "EvenlySpread",
                "evenlySpread": {
                    "topologies": [{"topology": t, "weight": w} for t, w in g.topologies]
                },
            }
        ]
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": kind,
        "metadata": {
            "name": group,
            "namespace": namespace,
            "labels": v2_labels(cluster, g.component, group),
        },
        "spec": spec,
    }


def v2_labels(
    cluster: str, component: str, group: str, instance: str | None = None
) -> dict[str, str]:
    labels = {
        "pingcap.com/managed-by": "tidb-operator",
        "pingcap.com/cluster": cluster,
        "pingcap.com/component": component,
        "pingcap.com/group": group,
    }
    if instance is not None:
        labels["pingcap.com/instance"] = instance
    return labels


def v2_standin_pod(
    name: str,
    namespace: str,
    cluster: str,
    component: str,
    group: str,
    instance: str,
    node: str,
    exec_commands: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    """A pod as TiDB Operator v2 creates it for one instance, bound to `node`."""
    labels = v2_labels(cluster, component, group, instance)
    pod = standin_pod(
        name, namespace, cluster, component, node, exec_commands, labels=labels, version=VERSION_TAG
    )
    # The node agent knows v1's component label; v2 pods say by annotation that they stand in.
    pod["metadata"].setdefault("annotations", {})[STANDIN_ANNOTATION] = "true"
    return pod


def _topology_of(node_labels: Mapping[str, str], g: StandinGroup) -> dict[str, str] | None:
    for topo, _ in g.topologies or []:
        if all(node_labels.get(k) == v for k, v in topo.items()):
            return dict(topo)
    return None


def create_v2_standin_cluster(
    api_client_: client.ApiClient,
    namespace: str,
    name: str,
    groups: Mapping[str, StandinGroup],
    *,
    pd_status: bool = True,
    progressing: str = "True",
    tls: bool = False,
    feature_gates: Sequence[str] = (),
    pd_services: bool = False,
) -> list[str]:
    """A v2 Cluster, its groups, instances and pods (see the module docstring).

    `groups` maps group name -> StandinGroup. The Cluster's status gets what TiDB Operator
    v2 writes: `pd` (the first PD group's Service; with the v2.1 `MultiPDGroup` gate in
    `feature_gates`, the cluster's `<cluster>-pd`), `components` and the conditions.
    `tls`: the Cluster's tlsCluster and the TiDBGroups' MySQL TLS on (PD then `https://`).
    `pd_services`: the PD client Service(s) the operator makes too — with MultiPDGroup only
    the cluster's `<cluster>-pd`, else each PD group's `<pdgroup>-pd`
    (pkg/controllers/{cluster,pdgroup}/tasks/svc.go).
    Returns the pod names.
    """
    custom = client.CustomObjectsApi(api_client_)
    core = client.CoreV1Api(api_client_)
    node_labels = {n.metadata.name: dict(n.metadata.labels or {}) for n in core.list_node().items}
    cluster = custom.create_namespaced_custom_object(
        GROUP, VERSION, namespace, "clusters", cluster_manifest(name, namespace, tls, feature_gates)
    )
    pods = []
    totals: dict[str, int] = {}
    for group, g in groups.items():
        _, plural = GROUP_KIND[g.component]
        custom.create_namespaced_custom_object(
            GROUP, VERSION, namespace, plural, group_manifest(name, namespace, group, g, tls)
        )
        n = len(g.nodes)
        status = {"replicas": n, "readyReplicas": n, "updatedReplicas": n, "currentReplicas": n,
                  "selector": f"pingcap.com/cluster={name},pingcap.com/group={group}",
                  "version": g.version, **g.status}  # fmt: skip
        custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, namespace, plural, group, {"status": status}
        )
        totals[g.component] = totals.get(g.component, 0) + n
        ikind, iplural = INSTANCE_KIND[g.component]
        for i, node in enumerate(g.nodes):
            instance = f"{group}-{i:03d}x"
            spec: dict[str, Any] = {
                "cluster": {"name": name},
                "subdomain": f"{group}-{g.component}-peer",
                "version": g.version,
            }
            if g.component in ("pd", "tikv"):
                spec["volumes"] = [{"name": "data", "mounts": [{"type": "data"}], "storage": "1Gi"}]
            topo = _topology_of(node_labels.get(node, {}), g)
            if topo is not None:
                spec["topology"] = topo
            custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, iplural,
                {"apiVersion": f"{GROUP}/{VERSION}", "kind": ikind,
                 "metadata": {"name": instance, "namespace": namespace,
                              "labels": v2_labels(name, g.component, group, instance)},
                 "spec": spec},
            )  # fmt: skip
            pod = v2_standin_pod(
                f"{group}-{g.component}-{i:03d}x", namespace, name, g.component, group, instance,
                node, g.exec_commands,
            )  # fmt: skip
            core.create_namespaced_pod(namespace, pod)
            pods.append(pod["metadata"]["name"])
    pd_groups = [gn for gn, g in groups.items() if g.component == "pd"]
    order = {"pd": "PD", "tikv": "TiKV", "tidb": "TiDB", "tikv-worker": "TiKVWorker"}
    status: dict[str, Any] = {
        "id": "7380000000000000001",  # PD's cluster id; the schema requires it
        "components": sorted(
            ({"kind": order[c], "replicas": r} for c, r in totals.items()), key=lambda c: c["kind"]
        ),
        "conditions": [
            _condition("Progressing", progressing, "ClusterCreation", "Cluster is being created"),
            _condition("Available", "True", "Available", "Cluster is available"),
            _condition("Suspended", "False", "Suspend", "Cluster is not suspended"),
        ],
        "observedGeneration": cluster["metadata"].get("generation", 1),
    }
    if pd_status and pd_groups:
        service = f"{name}-pd" if "MultiPDGroup" in feature_gates else f"{pd_groups[0]}-pd"
        status["pd"] = f"{'https' if tls else 'http'}://{service}.{namespace}:2379"
    custom.patch_namespaced_custom_object_status(
        GROUP, VERSION, namespace, "clusters", name, {"status": status}
    )
    if pd_services:
        multi = "MultiPDGroup" in feature_gates
        for service, group in (
            [(f"{name}-pd", None)] if multi else [(f"{g}-pd", g) for g in pd_groups]
        ):
            selector = {**v2_labels(name, "pd", group or "")}
            del selector["pingcap.com/group"]
            if group is not None:
                selector["pingcap.com/group"] = group
            core.create_namespaced_service(namespace, {
                "metadata": {"name": service, "labels": dict(selector)},
                "spec": {"selector": selector,
                         "ports": [{"name": "client", "port": 2379, "targetPort": 2379}]},
            })  # fmt: skip
    return pods


def _condition(type_: str, status: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
        "observedGeneration": 1,
    }


def zone_nodes(core: client.CoreV1Api, zones: Mapping[str, str]) -> None:
    """Label nodes with topology.kubernetes.io/zone (node -> zone); the bed's nodes are kept."""
    for node, zone in zones.items():
        core.patch_node(node, {"metadata": {"labels": {ZONE_KEY: zone}}})


def unzone_nodes(core: client.CoreV1Api, nodes: Sequence[str]) -> None:
    for node in nodes:
        core.patch_node(node, {"metadata": {"labels": {ZONE_KEY: None}}})


def v2_example_objects(name: str, shape: str = "v2.0.1") -> list[dict[str, Any]]:
    """The vendored example's objects (Cluster first), as TiDB Operator ships them."""
    return [
        copy.deepcopy(doc)
        for p in sorted((SHAPES[shape] / "examples" / name).glob("*.yaml"))
        for doc in yaml.safe_load_all(p.read_text())
        if isinstance(doc, dict)
    ]
