"""deploy/ on the test bed: apply it with kubectl's kustomize, enable namespaces, act as its SA.

The objects deploy/ creates are cluster-wide and have fixed names (users rely on them), so
`uninstall` removes them by name afterwards. It never deletes the CRDs: other suites on the
same test bed have runs in them.
"""

from __future__ import annotations

import base64
import json
import secrets
import subprocess
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from testbed import kube
from testbed.cluster import REPO_ROOT, Testbed
from testbed.kube import api_client, has_default_service_account, wait_for
from testbed.runs import add_db_secret

KUBECTL = "/usr/bin/kubectl"
DEPLOY = REPO_ROOT / "deploy"
E2E_OVERLAY = REPO_ROOT / "tests" / "data" / "deploy-e2e"
SYSTEM_NS = "tidb-bench-system"
OPERATOR_SA = "tidb-bench-operator"
RUNNER_SA = "tidb-bench-runner"
# Every cluster-scoped object deploy/ and its overlays create, except the CRDs.
CLUSTER_ROLES = (
    "tidb-bench-operator",
    "tidb-bench-secret-reader",
    "tidb-bench-run-namespace",
    "tidb-bench-pd-exec",
    "tidb-bench-operator-namespaced",
)
CLUSTER_ROLE_BINDINGS = ("tidb-bench-operator", "tidb-bench-operator-namespaced")


def kubectl(
    tb: Testbed, *args: str, stdin: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """kubectl (1.32, built-in kustomize v5) as the test bed admin."""
    proc = subprocess.run(
        [KUBECTL, "--kubeconfig", str(tb.kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}")
    return proc


def apply_yaml(tb: Testbed, docs: list[dict[str, Any]]) -> str:
    """`kubectl apply -f -` of the documents, sent as one JSON List: PyYAML writes `n`
    unquoted, and kubectl reads YAML 1.1, where that is the boolean false."""
    items = {"apiVersion": "v1", "kind": "List", "items": docs}
    return kubectl(tb, "apply", "-f", "-", stdin=json.dumps(items)).stdout


def render(tb: Testbed, directory: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize DIR`: what `kubectl apply -k DIR` would send."""
    out = kubectl(tb, "kustomize", str(directory)).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def install(tb: Testbed) -> str:
    """`kubectl apply -k tests/data/deploy-e2e` (deploy/ with replicas 0); waits for its SA."""
    out = kubectl(tb, "apply", "-k", str(E2E_OVERLAY)).stdout
    wait_sa_token(tb)
    return out


def install_namespaced(tb: Testbed, namespace: str) -> str:
    """deploy/overlays/namespaced rendered by kubectl, `tidb-cluster` replaced by `namespace`."""
    docs = render(tb, DEPLOY / "overlays" / "namespaced")
    text = yaml.safe_dump_all(docs).replace("tidb-cluster", namespace)
    docs = list(yaml.safe_load_all(text))
    for d in docs:
        if d["kind"] == "Deployment":
            d["spec"]["replicas"] = 0  # the node agent would run it as a local process
    out = apply_yaml(tb, docs)
    wait_sa_token(tb)
    return out


def enable_namespace(tb: Testbed, namespace: str) -> str:
    """deploy/run-namespace (the shipped RoleBindings) applied to `namespace`."""
    docs = render(tb, DEPLOY / "run-namespace")
    for d in docs:
        d["metadata"]["namespace"] = namespace
    return apply_yaml(tb, docs)


def uninstall(tb: Testbed) -> None:
    """Delete what deploy/ created, by name (never the CRDs), and wait for the namespace."""
    kubectl(tb, "delete", "clusterrolebinding", *CLUSTER_ROLE_BINDINGS, "--ignore-not-found")
    kubectl(tb, "delete", "clusterrole", *CLUSTER_ROLES, "--ignore-not-found")
    kubectl(tb, "delete", "namespace", SYSTEM_NS, "--ignore-not-found", "--timeout=90s")


def wait_sa_token(
    tb: Testbed, timeout: float = 60, *, name: str = OPERATOR_SA, namespace: str = SYSTEM_NS
) -> str:
    """The ServiceAccount's token from the Secret v1.20's token controller makes for it."""
    core = client.CoreV1Api(_admin(tb))

    def token() -> str | None:
        try:
            sa = core.read_namespaced_service_account(name, namespace)
        except ApiException:
            return None
        for ref in sa.secrets or []:
            sec = core.read_namespaced_secret(ref.name, namespace)
            if sec.type == "kubernetes.io/service-account-token" and (sec.data or {}).get("token"):
                return base64.b64decode(sec.data["token"]).decode()
        return None

    return str(wait_for(token, timeout, f"token of ServiceAccount {namespace}/{name}"))


def operator_kubeconfig(tb: Testbed, path: Path) -> Path:
    """A kubeconfig holding the token of deploy/'s ServiceAccount (not the admin's)."""
    return tb.write_kubeconfig_for_token(path, wait_sa_token(tb))


def create_namespace(tb: Testbed, prefix: str) -> str:
    """A namespace no session's admin controller watches (theirs match `e????-*`)."""
    core = client.CoreV1Api(_admin(tb))
    name = f"{prefix}-{secrets.token_hex(3)}"
    core.create_namespace({"metadata": {"name": name}})
    wait_for(
        lambda: has_default_service_account(core, name), 30, f"ServiceAccount default in {name}"
    )
    return name


def run_namespace(tb: Testbed, prefix: str, mariadb: dict[str, Any]) -> str:
    """A namespace enabled for runs (deploy/run-namespace) holding the Secret `db`."""
    name = create_namespace(tb, prefix)
    enable_namespace(tb, name)
    add_db_secret(client.CoreV1Api(_admin(tb)), name, mariadb)
    return name


def delete_namespace(tb: Testbed, name: str) -> None:
    kube.delete_namespace(client.CoreV1Api(_admin(tb)), name)


_CLIENTS: dict[str, client.ApiClient] = {}


def _admin(tb: Testbed) -> client.ApiClient:
    key = str(tb.kubeconfig)
    if key not in _CLIENTS:
        _CLIENTS[key] = api_client(tb)
    return _CLIENTS[key]


def status_code(call: Any) -> int:
    """The HTTP status an API call ends with (2xx as 200): for asserting denials."""
    try:
        call()
    except ApiException as exc:
        return int(exc.status)
    return 200
