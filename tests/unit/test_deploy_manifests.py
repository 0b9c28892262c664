"""Static checks of deploy/: it renders with kubectl's kustomize, asks for no wildcard, keeps
Secrets out of cluster-wide roles, hardens every pod, and covers what kopf watches.

Whether the RBAC is *sufficient* is proven on the test bed (tests/e2e/test_deploy.py).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tidb_bench_operator.domain.api.resources import parse_run_spec
from tidb_bench_operator.domain.manifests import (
    RUNNER_SERVICE_ACCOUNT,
    RunRef,
    build_runner_job,
    build_runner_service_account,
    compute_endpoint,
)

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
KUSTOMIZATIONS = {
    "cluster-wide": DEPLOY,
    "namespaced": DEPLOY / "overlays" / "namespaced",
    "run-namespace": DEPLOY / "run-namespace",
    "experiments": DEPLOY / "overlays" / "experiments",
}
RBAC_FILES = [
    DEPLOY / "rbac-cluster.yaml",
    DEPLOY / "rbac-run-namespace.yaml",
    DEPLOY / "overlays" / "namespaced" / "role.yaml",
    DEPLOY / "overlays" / "experiments" / "rbac.yaml",
]
OPERATOR_SUBJECT = {
    "kind": "ServiceAccount",
    "name": "tidb-bench-operator",
    "namespace": "tidb-bench-system",
}


def render(directory: Path) -> list[dict[str, Any]]:
    """`kubectl kustomize DIR` with kubectl's built-in kustomize (what `apply -k` sends)."""
    kubectl = shutil.which("kubectl")
    assert kubectl, "kubectl is needed to render deploy/ (Debian: apt-get install kubectl)"
    proc = subprocess.run(
        [kubectl, "kustomize", str(directory)], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, f"kubectl kustomize {directory} failed:\n{proc.stderr}"
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


@pytest.fixture(scope="module")
def rendered() -> dict[str, list[dict[str, Any]]]:
    return {name: render(path) for name, path in KUSTOMIZATIONS.items()}


def of_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    [doc] = [d for d in of_kind(docs, kind) if d["metadata"]["name"] == name]
    return doc


def test_kubectl_kustomize_renders_deploy_with_the_crds_namespace_and_controller(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    docs = rendered["cluster-wide"]
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert {
        ("Namespace", "tidb-bench-system"),
        ("CustomResourceDefinition", "benchmarkruns.tidbbench.io"),
        ("CustomResourceDefinition", "benchmarkschedules.tidbbench.io"),
        ("CustomResourceDefinition", "benchmarkexperiments.tidbbench.io"),
        ("ServiceAccount", "tidb-bench-operator"),
        ("ClusterRole", "tidb-bench-operator"),
        ("ClusterRoleBinding", "tidb-bench-operator"),
        ("ClusterRole", "tidb-bench-secret-reader"),
        ("ClusterRole", "tidb-bench-run-namespace"),
        ("Deployment", "tidb-bench-operator"),
        ("Service", "tidb-bench-operator-metrics"),
    } <= kinds
    for d in docs:
        if d["kind"] not in ("Namespace", "CustomResourceDefinition") and not d["kind"].startswith(
            "Cluster"
        ):
            assert d["metadata"]["namespace"] == "tidb-bench-system", d["metadata"]
    # crds/ is the same generated text, not a copy that could drift.
    crds = {d["metadata"]["name"]: d for d in of_kind(docs, "CustomResourceDefinition")}
    for path in ("benchmarkrun.yaml", "benchmarkschedule.yaml", "benchmarkexperiment.yaml"):
        committed = yaml.safe_load((ROOT / "crds" / path).read_text())
        assert crds[committed["metadata"]["name"]] == committed


def test_no_role_anywhere_uses_a_wildcard_verb_resource_or_api_group(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    for name, docs in rendered.items():
        for role in of_kind(docs, "ClusterRole") + of_kind(docs, "Role"):
            for rule in role["rules"]:
                for key in ("verbs", "resources", "apiGroups"):
                    assert "*" not in " ".join(rule.get(key, [])), (name, role["metadata"], rule)
                assert "nonResourceURLs" not in rule
                # Nothing that edits permissions or acts as someone else.
                assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), rule


def test_no_role_bound_cluster_wide_grants_anything_on_secrets(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    for name, docs in rendered.items():
        roles = {r["metadata"]["name"]: r for r in of_kind(docs, "ClusterRole")}
        for binding in of_kind(docs, "ClusterRoleBinding"):
            role = roles[binding["roleRef"]["name"]]
            for rule in role["rules"]:
                assert "secrets" not in rule["resources"], (name, role["metadata"]["name"], rule)
                # Writes to workloads happen only where a namespace was enabled.
                assert not {"jobs", "pods/exec", "configmaps", "serviceaccounts"} & set(
                    rule["resources"]
                ), (name, rule)


def test_secrets_are_readable_only_with_get_through_per_namespace_role_bindings(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    reader = one(rendered["cluster-wide"], "ClusterRole", "tidb-bench-secret-reader")
    assert reader["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]
    bindings = of_kind(rendered["run-namespace"], "RoleBinding")
    assert {b["roleRef"]["name"] for b in bindings} == {
        "tidb-bench-secret-reader",
        "tidb-bench-run-namespace",
    }
    for b in bindings:
        assert b["metadata"]["namespace"] == "tidb-cluster"  # the shipped example
        assert b["subjects"] == [OPERATOR_SUBJECT]
    role = one(rendered["namespaced"], "Role", "tidb-bench-operator")
    assert role["metadata"]["namespace"] == "tidb-cluster"
    secret_rules = [r for r in role["rules"] if "secrets" in r["resources"]]
    assert [r["verbs"] for r in secret_rules] == [["get"]]


def test_every_rbac_rule_has_a_comment_saying_why() -> None:
    for path in RBAC_FILES:
        lines = [line for line in path.read_text().splitlines() if line.strip()]
        for i, line in enumerate(lines):
            if re.match(r"\s*- apiGroups:", line):
                assert lines[i - 1].strip().startswith("#"), f"{path}: no comment above {line!r}"


def test_the_controller_may_watch_and_patch_everything_kopf_handles() -> None:
    import kopf

    import tidb_bench_operator.controller.handlers  # noqa: F401  (registers the handlers)

    registry: Any = kopf.get_default_registry()
    plurals = {
        h.selector.any_name
        for attr in ("_spawning", "_changing", "_watching", "_indexing")
        for h in getattr(registry, attr).get_all_handlers()
        if h.selector is not None
    }
    assert "benchmarkruns" in plurals
    for path, kind in (
        (DEPLOY / "rbac-cluster.yaml", "ClusterRole"),
        (DEPLOY / "overlays" / "namespaced" / "role.yaml", "Role"),
    ):
        [role] = [d for d in yaml.safe_load_all(path.read_text()) if d["kind"] == kind]
        granted = {
            (res, verb)
            for rule in role["rules"]
            if "tidbbench.io" in rule["apiGroups"]
            for res in rule["resources"]
            for verb in rule["verbs"]
        }
        for plural in plurals:
            for verb in ("list", "watch", "patch"):
                assert (plural, verb) in granted, (path, plural, verb)
            assert (f"{plural}/status", "patch") in granted, (path, plural)


def test_tidb_operator_objects_are_read_only_exactly_what_resolving_a_cluster_reads() -> None:
    """adapters.k8s.Kube gets TidbClusters and v2 Clusters by name and lists v2 groups."""
    for path, kind in (
        (DEPLOY / "rbac-cluster.yaml", "ClusterRole"),
        (DEPLOY / "overlays" / "namespaced" / "role.yaml", "Role"),
    ):
        [role] = [d for d in yaml.safe_load_all(path.read_text()) if d["kind"] == kind]
        granted = {
            (group, res, verb)
            for rule in role["rules"]
            for group in rule["apiGroups"]
            if group in ("pingcap.com", "core.pingcap.com")
            for res in rule["resources"]
            for verb in rule["verbs"]
        }
        assert granted == {
            ("pingcap.com", "tidbclusters", "get"),
            ("core.pingcap.com", "clusters", "get"),
            *(("core.pingcap.com", f"{g}groups", "list") for g in V2_GROUPS),
        }, path


#: The v2 group kinds the controller lists (domain/cluster/view.py V2_GROUP_PLURALS).
V2_GROUPS = ("pd", "tikv", "tidb", "tiflash", "ticdc", "tiproxy", "tikvworker", "tso",
             "scheduling", "router", "resourcemanager")  # fmt: skip


def _containers_hardened(pod: dict[str, Any], where: str) -> None:
    assert pod["securityContext"]["runAsNonRoot"] is True, where
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, where
    for c in pod["containers"]:
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False, where
        assert sc["readOnlyRootFilesystem"] is True, where
        assert sc["runAsNonRoot"] is True, where
        assert sc["capabilities"] == {"drop": ["ALL"]}, where
        assert sc["seccompProfile"] == {"type": "RuntimeDefault"}, where
        mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert "emptyDir" in volumes[mounts["/tmp"]], where  # writable /tmp, nothing else


def test_the_deployment_is_hardened_probed_and_configured(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    for name in ("cluster-wide", "namespaced"):
        dep = one(rendered[name], "Deployment", "tidb-bench-operator")
        pod = dep["spec"]["template"]["spec"]
        _containers_hardened(pod, f"{name} Deployment")
        assert pod["serviceAccountName"] == OPERATOR_SUBJECT["name"]
        assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"]["type"] == "Recreate"
        [c] = pod["containers"]
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert env["TIDB_BENCH_RUNNER_IMAGE"]
        assert env["TIDB_BENCH_LIVENESS"] == "http://0.0.0.0:8080/healthz"
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        assert ports == {"health": 8080, "metrics": int(env["TIDB_BENCH_METRICS_PORT"])}
        for probe in ("livenessProbe", "readinessProbe"):
            assert c[probe]["httpGet"] == {"path": "/healthz", "port": "health"}, probe
        assert c["resources"]["requests"] and c["resources"]["limits"]["memory"]
        svc = one(rendered[name], "Service", "tidb-bench-operator-metrics")
        assert svc["spec"]["ports"] == [
            {"name": "metrics", "port": 9090, "targetPort": "metrics", "protocol": "TCP"}
        ]
        assert (
            svc["spec"]["selector"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
        )
    namespaced = one(rendered["namespaced"], "Deployment", "tidb-bench-operator")
    args = namespaced["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args == ["operator", "--namespace=tidb-cluster"]


def test_benchmark_jobs_are_hardened_and_run_as_the_permission_less_runner(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    spec = parse_run_spec(
        {"cluster": {"name": "basic"}, "credentials": {"secretRef": {"name": "db"}}}
    )
    run = RunRef("r", "tidb-cluster", "uid-1")
    job = build_runner_job(
        run, spec, compute_endpoint(spec, run.namespace), name="r-s0-c0", role="step",
        runner_args=["step"], step=0, client=0, active_deadline_seconds=60, queue="cluster/tidb/basic",
    )  # fmt: skip
    pod = job["spec"]["template"]["spec"]
    _containers_hardened(pod, "runner Job")
    assert pod["serviceAccountName"] == RUNNER_SERVICE_ACCOUNT
    assert pod["automountServiceAccountToken"] is False
    sa = build_runner_service_account("tidb-cluster")
    assert sa["metadata"]["name"] == RUNNER_SERVICE_ACCOUNT
    assert sa["automountServiceAccountToken"] is False
    # The controller may read only that ServiceAccount by name, and nothing binds it.
    role = one(rendered["cluster-wide"], "ClusterRole", "tidb-bench-run-namespace")
    reads = [
        r for r in role["rules"] if "serviceaccounts" in r["resources"] and "get" in r["verbs"]
    ]
    assert [r["resourceNames"] for r in reads] == [[RUNNER_SERVICE_ACCOUNT]]
    for docs in rendered.values():
        for b in of_kind(docs, "RoleBinding") + of_kind(docs, "ClusterRoleBinding"):
            assert all(s["name"] != RUNNER_SERVICE_ACCOUNT for s in b["subjects"]), b
    # The password reaches the pod by env from the Secret, never as a literal.
    for env in pod["containers"][0]["env"]:
        assert "value" not in env and "secretKeyRef" in env["valueFrom"], env


def test_only_the_experiments_overlay_lets_the_controller_change_a_cluster_and_only_by_patch(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    cluster_groups = {"pingcap.com", "core.pingcap.com"}

    def writes(docs: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
        found = []
        for role in of_kind(docs, "ClusterRole") + of_kind(docs, "Role"):
            for rule in role["rules"]:
                if cluster_groups & set(rule.get("apiGroups", [])):
                    for verb in set(rule["verbs"]) - {"get", "list", "watch"}:
                        found += [(verb, r, role["metadata"]["name"]) for r in rule["resources"]]
        return found

    for name in ("cluster-wide", "namespaced", "run-namespace"):
        assert writes(rendered[name]) == [], name
    granted = writes(rendered["experiments"])
    assert {verb for verb, _, _ in granted} == {"patch"}, granted
    assert {"tidbclusters", "tikvgroups", "tidbgroups", "pdgroups"} <= {r for _, r, _ in granted}
    [binding] = of_kind(rendered["experiments"], "ClusterRoleBinding")
    assert binding["subjects"] == [OPERATOR_SUBJECT]
    assert binding["roleRef"]["name"] == "tidb-bench-operator-experiments"
