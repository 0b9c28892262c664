"""Kubernetes objects of the test bed: fake nodes, the TidbCluster CRD, stand-in TiDB clusters."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from testbed.agent import EXEC_ANNOTATION
from testbed.cluster import REPO_ROOT, Testbed

BENCH_LABEL = "tidbbench.io/bench-node"
CONTROL_PLANE_TAINT = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
TIDB_CRD = (
    REPO_ROOT.parent
    / "shared"
    / "vendor"
    / "tidb-operator-v1.6.3"
    / "pingcap.com_tidbclusters.yaml"
)
TIDB_CRD_LOCAL = REPO_ROOT / "tests" / "data" / "vendor" / "pingcap.com_tidbclusters.yaml"


def api_client(tb: Testbed, kubeconfig: Path | None = None) -> client.ApiClient:
    """An ApiClient for the admin (or for the given kubeconfig)."""
    return config.new_client_from_config(config_file=str(kubeconfig or tb.kubeconfig))


def ensure_node(
    api: client.CoreV1Api,
    name: str,
    *,
    kubelet_port: int,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    cpu: str = "8",
    memory: str = "32Gi",
) -> None:
    """Create (or reset) a fake node that the real scheduler will place pods on."""
    all_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
    all_labels.update(labels or {})
    body = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels},
        "spec": {"taints": taints or []},
    }
    try:
        api.create_node(body)
    except ApiException as exc:
        if exc.status != 409:
            raise
        current = api.read_node(name)
        old_labels = current.metadata.labels or {}
        patch_labels: dict[str, Any] = {k: None for k in old_labels if k not in all_labels}
        patch_labels.update(all_labels)
        api.patch_node(name, {"metadata": {"labels": patch_labels}})
    # The TaintNodesByCondition admission adds not-ready:NoSchedule at creation; nothing
    # removes it with nodelifecycle off, so set the full taint list ourselves.
    api.patch_node(name, {"spec": {"taints": taints or None}})
    if taints:
        api.patch_node(name, {"spec": {"taints": taints}})
    t = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    api.patch_node_status(
        name,
        {
            "status": {
                "capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
                "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "test bed node agent",
                        "lastHeartbeatTime": t,
                        "lastTransitionTime": t,
                    }
                ],
                # No Hostname address: the apiserver would try to resolve it first and fail.
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},
                "nodeInfo": {
                    "architecture": "amd64",
                    "bootID": "",
                    "containerRuntimeVersion": "testbed://0",
                    "kernelVersion": "",
                    "kubeProxyVersion": "v1.20.2",
                    "kubeletVersion": "v1.20.2",
                    "machineID": "",
                    "operatingSystem": "linux",
                    "osImage": "tidb-bench test bed",
                    "systemUUID": "",
                },
            }
        },
    )


def default_nodes(api: client.CoreV1Api, kubelet_port: int) -> None:
    """The three-node home lab of docs/field-story.md: node1 is the tainted bench node."""
    ensure_node(
        api,
        "node1",
        kubelet_port=kubelet_port,
        labels={BENCH_LABEL: "true", "node-role.kubernetes.io/control-plane": ""},
        taints=[CONTROL_PLANE_TAINT],
    )
    ensure_node(api, "node2", kubelet_port=kubelet_port)
    ensure_node(api, "node3", kubelet_port=kubelet_port)


def install_tidb_crd(ext: client.ApiextensionsV1Api) -> None:
    """Install TiDB Operator's real TidbCluster CRD (v1.6.3) with create, never apply.

    Client-side apply would put the 1.2 MB object into the last-applied annotation, which
    is capped at 256 KiB (docs/tidb-operator.md).
    """
    path = TIDB_CRD_LOCAL if TIDB_CRD_LOCAL.exists() else TIDB_CRD
    body = yaml.safe_load(path.read_text())
    create_crd(ext, body)
    wait_crd_established(ext, body["metadata"]["name"])


def create_crd(ext: client.ApiextensionsV1Api, body: dict[str, Any]) -> bool:
    """Create the CRD; False when one of its name exists already."""
    try:
        ext.create_custom_resource_definition(body)
    except ApiException as exc:
        if exc.status != 409:
            raise
        return False
    return True


def wait_crd_established(ext: client.ApiextensionsV1Api, name: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        crd = ext.read_custom_resource_definition(name)
        for c in crd.status.conditions or []:
            if c.type == "Established" and c.status == "True":
                return
        time.sleep(0.2)
    raise TimeoutError(f"CRD {name} not Established within {timeout} s")


def tidbcluster_manifest(
    name: str,
    namespace: str,
    *,
    replicas: dict[str, int],
    spread: dict[str, int] | None = None,
    tls: bool = False,
) -> dict[str, Any]:
    """A TidbCluster like docs/field-story.md's `basic`, with optional per-component maxSkew.

    `tls`: TLS between components and for MySQL clients, as TiDB Operator's TLS guides set it.
    """
    spec: dict[str, Any] = {"version": "v8.1.0", "timezone": "UTC"}
    if tls:
        spec["tlsCluster"] = {"enabled": True}
    for comp in ("pd", "tikv", "tidb"):
        c: dict[str, Any] = {
            "baseImage": f"pingcap/{comp}",
            "replicas": replicas.get(comp, 0),
            "config": {},
        }
        if comp in ("pd", "tikv"):
            c["requests"] = {"storage": "1Gi"}
        if comp == "tidb":
            c["service"] = {"type": "ClusterIP"}
            if tls:
                c["tlsClient"] = {"enabled": True}
        if spread and comp in spread:
            c["topologySpreadConstraints"] = [
                {"topologyKey": "kubernetes.io/hostname", "maxSkew": spread[comp]}
            ]
        spec[comp] = c
    return {
        "apiVersion": "pingcap.com/v1alpha1",
        "kind": "TidbCluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def standin_pod(
    name: str,
    namespace: str,
    cluster: str,
    component: str,
    node: str,
    exec_commands: Mapping[str, Sequence[str]] | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    version: str = "v8.1.0",
) -> dict[str, Any]:
    """A pod with TiDB Operator's labels bound to `node`; the node agent marks it Running.

    `exec_commands` maps an executable path "in the pod" to the local argv prefix the agent
    runs for `kubectl exec` (annotation testbed.tidbbench.io/exec, see testbed.agent).
    `labels` replaces TiDB Operator v1's labels (v2 stand-ins pass theirs).
    """
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "labels": dict(labels)
        if labels is not None
        else {
            "app.kubernetes.io/name": "tidb-cluster",
            "app.kubernetes.io/managed-by": "tidb-operator",
            "app.kubernetes.io/instance": cluster,
            "app.kubernetes.io/component": component,
        },
    }
    if exec_commands:
        metadata["annotations"] = {
            EXEC_ANNOTATION: json.dumps({k: list(v) for k, v in exec_commands.items()})
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": False,
            "containers": [{"name": component, "image": f"pingcap/{component}:{version}"}],
        },
    }


def create_standin_cluster(
    api_client_: client.ApiClient,
    namespace: str,
    name: str,
    placement: dict[str, list[str]],
    spread: dict[str, int] | None = None,
    exec_commands: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
    tls: bool = False,
) -> list[str]:
    """A TidbCluster plus stand-in pods: placement maps component -> the node of each replica.

    `exec_commands` maps a component to its pods' exec map (see `standin_pod`), e.g.
    {"pd": pd_ctl_exec(fake_pd.url)}. Returns the pod names, `<name>-<component>-<i>` as
    TiDB Operator's StatefulSets name them.
    """
    custom = client.CustomObjectsApi(api_client_)
    core = client.CoreV1Api(api_client_)
    replicas = {comp: len(nodes) for comp, nodes in placement.items()}
    custom.create_namespaced_custom_object(
        "pingcap.com",
        "v1alpha1",
        namespace,
        "tidbclusters",
        tidbcluster_manifest(name, namespace, replicas=replicas, spread=spread, tls=tls),
    )
    names = []
    for comp, nodes in placement.items():
        for i, node in enumerate(nodes):
            pod = standin_pod(
                f"{name}-{comp}-{i}", namespace, name, comp, node, (exec_commands or {}).get(comp)
            )
            core.create_namespaced_pod(namespace, pod)
            names.append(pod["metadata"]["name"])
    return names


def pd_ctl_exec(pd_url: str) -> dict[str, list[str]]:
    """A PD pod's exec map: `/pd-ctl` is the pd-ctl emulator, its 127.0.0.1:2379 is `pd_url`."""
    emulator = [sys.executable, "-m", "testbed.pd_ctl_emulator"]
    return {"/pd-ctl": [*emulator, "--pd-url-override", pd_url]}


def wait_for(predicate: Any, timeout: float, what: str, interval: float = 0.3) -> Any:
    """Poll `predicate` until it returns a truthy value; raise naming `what` on timeout."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


def namespace_exists(core: client.CoreV1Api, name: str) -> bool:
    try:
        core.read_namespace(name)
        return True
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise


def has_default_service_account(core: client.CoreV1Api, namespace: str) -> bool:
    """The service-account controller has created `default`: pods are refused until then."""
    try:
        core.read_namespaced_service_account("default", namespace)
        return True
    except ApiException:
        return False


def delete_namespace(core: client.CoreV1Api, name: str) -> None:
    """Delete a namespace (pods with it, via the namespace controller); gone already is fine."""
    try:
        core.delete_namespace(name)
    except ApiException as exc:
        if exc.status != 404:
            raise


def stop_process(proc: subprocess.Popen[Any], timeout: float) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `timeout` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
