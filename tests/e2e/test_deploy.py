"""deploy/ on the test bed's real API server: it applies, its RBAC suffices, and it denies the rest.

The controller runs in-process (a `tidb-bench operator` subprocess) with the token of the
ServiceAccount deploy/ creates, never as the admin, and watches only namespaces made here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from e2e.conftest import Controller
from testbed.cluster import Testbed
from testbed.deploy import (
    DEPLOY,
    OPERATOR_SA,
    RUNNER_SA,
    SYSTEM_NS,
    create_namespace,
    delete_namespace,
    install,
    install_namespaced,
    kubectl,
    operator_kubeconfig,
    run_namespace,
    status_code,
    uninstall,
)
from testbed.kube import api_client
from testbed.runs import (
    add_db_secret,
    create_run,
    fast_example,
    jobs_of,
    run_manifest,
    wait_run,
)

# On one xdist worker with the other files that install deploy/ (SHARED in conftest.py).
pytestmark = pytest.mark.e2e

CONTROLLER_ENV = {"TIDB_BENCH_LIVENESS": "", "TIDB_BENCH_SCHEDULING_TIMEOUT_SECONDS": "20"}


def assert_no_permission_errors(log: Path) -> None:
    text = log.read_text()
    for word in ("403", "Forbidden", "forbidden", "Not enough permissions to watch for resources"):
        assert word not in text, f"{word!r} in the controller log:\n{text[-3000:]}"


@pytest.fixture(scope="class")
def cluster_install(testbed: Testbed, crds: None) -> Iterator[str]:
    uninstall(testbed)  # a previous session killed mid-test may have left it
    out = install(testbed)
    yield out
    uninstall(testbed)


@pytest.fixture(scope="class")
def enabled_ns(
    testbed: Testbed, core: client.CoreV1Api, mariadb: dict[str, Any], cluster_install: str
) -> Iterator[str]:
    ns = run_namespace(testbed, "tbdeploy", mariadb)
    yield ns
    delete_namespace(testbed, ns)


@pytest.fixture(scope="class")
def other_ns(testbed: Testbed, core: client.CoreV1Api) -> Iterator[str]:
    """A namespace nobody enabled, with a Secret the controller must not be able to read."""
    ns = create_namespace(testbed, "tbother")
    core.create_namespaced_secret(
        ns, {"metadata": {"name": "unrelated"}, "stringData": {"token": "not-for-benchmarks"}}
    )
    yield ns
    delete_namespace(testbed, ns)


@pytest.fixture(scope="class")
def operator(
    testbed: Testbed, tmp_path_factory: pytest.TempPathFactory, enabled_ns: str, other_ns: str
) -> Iterator[Controller]:
    kubeconfig = operator_kubeconfig(testbed, tmp_path_factory.mktemp("sa") / "kubeconfig")
    ctl = Controller(
        testbed,
        kubeconfig,
        testbed.logs / f"controller-deploy-{enabled_ns}.log",
        CONTROLLER_ENV,
        namespaces=(enabled_ns, other_ns),
    )
    ctl.start()
    yield ctl
    ctl.stop()


@pytest.fixture(scope="class")
def sa_api(operator: Controller) -> client.ApiClient:
    return api_client(operator.testbed, operator.kubeconfig)


class TestClusterWideInstall:
    def test_kubectl_apply_k_deploy_creates_everything_and_the_real_deploy_passes_a_server_dry_run(
        self, testbed: Testbed, api: client.ApiClient, cluster_install: str
    ) -> None:
        for line in (
            "namespace/tidb-bench-system",
            "customresourcedefinition.apiextensions.k8s.io/benchmarkruns.tidbbench.io",
            "serviceaccount/tidb-bench-operator",
            "clusterrole.rbac.authorization.k8s.io/tidb-bench-operator",
            "clusterrole.rbac.authorization.k8s.io/tidb-bench-secret-reader",
            "clusterrolebinding.rbac.authorization.k8s.io/tidb-bench-operator",
            "service/tidb-bench-operator-metrics",
            "deployment.apps/tidb-bench-operator",
        ):
            assert line in cluster_install, cluster_install
        dep = client.AppsV1Api(api).read_namespaced_deployment("tidb-bench-operator", SYSTEM_NS)
        assert dep.spec.replicas == 0  # only the e2e overlay's patch differs from deploy/
        # deploy/ itself, unpatched, accepted by the API server (admission and validation run).
        dry = kubectl(testbed, "apply", "-k", str(DEPLOY), "--dry-run=server")
        assert "deployment.apps/tidb-bench-operator configured (server dry run)" in dry.stdout
        assert "error" not in dry.stderr.lower(), dry.stderr

    def test_the_controller_as_the_deploy_service_account_completes_an_example_run(
        self,
        testbed: Testbed,
        api: client.ApiClient,
        core: client.CoreV1Api,
        mariadb: dict[str, Any],
        enabled_ns: str,
        operator: Controller,
    ) -> None:
        body = fast_example(
            "point-select-sweep.yaml",
            mariadb,
            threads=[1, 2],
            durationSeconds=2,
            preflight={"policy": "Warn"},  # exercises the preflight's reads as this identity
        )
        name = body["metadata"]["name"]
        create_run(api, enabled_ns, body)
        run = wait_run(api, enabled_ns, name, timeout=300)
        assert run["status"]["phase"] == "Succeeded", run["status"]
        assert [s["phase"] for s in run["status"]["steps"]] == ["Succeeded", "Succeeded"]
        assert core.read_namespaced_config_map(run["status"]["resultsConfigMap"], enabled_ns)
        # Benchmark pods ran as the permission-less runner, which mounts no token.
        pods = core.list_namespaced_pod(enabled_ns, label_selector=f"tidbbench.io/run={name}")
        assert pods.items and {p.spec.service_account_name for p in pods.items} == {RUNNER_SA}
        runner = core.read_namespaced_service_account(RUNNER_SA, enabled_ns)
        assert runner.automount_service_account_token is False
        bindings = client.RbacAuthorizationV1Api(api).list_namespaced_role_binding(enabled_ns)
        assert all(s.name != RUNNER_SA for b in bindings.items for s in b.subjects or [])
        assert_no_permission_errors(operator.log)

    def test_the_deploy_identity_is_denied_what_it_must_not_do(
        self,
        sa_api: client.ApiClient,
        enabled_ns: str,
        other_ns: str,
        operator: Controller,
        mariadb: dict[str, Any],
    ) -> None:
        core = client.CoreV1Api(sa_api)
        rbac = client.RbacAuthorizationV1Api(sa_api)
        batch = client.BatchV1Api(sa_api)
        # Allowed, as a control: the denials below are RBAC, not a broken token.
        assert status_code(lambda: core.read_namespaced_secret("db", enabled_ns)) == 200
        assert status_code(lambda: core.list_node()) == 200
        job = jobs_of(api_client(operator.testbed), enabled_ns, "point-select-sweep")
        assert job, "the example run's Jobs are the template for the Job created below"
        denied = {
            "read a Secret in a namespace not enabled": lambda: core.read_namespaced_secret(
                "unrelated", other_ns
            ),
            "list kube-system Secrets": lambda: core.list_namespaced_secret("kube-system"),
            "list Secrets where it may get them": lambda: core.list_namespaced_secret(enabled_ns),
            "watch Secrets cluster-wide": lambda: core.list_secret_for_all_namespaces(),
            "delete a node": lambda: core.delete_node("node3"),
            "patch a node": lambda: core.patch_node("node3", {"metadata": {"labels": {"x": "y"}}}),
            "create a ClusterRole": lambda: rbac.create_cluster_role(
                {"metadata": {"name": "tidb-bench-escalate"}, "rules": []}
            ),
            "bind itself to cluster-admin": lambda: rbac.create_namespaced_role_binding(
                enabled_ns,
                {
                    "metadata": {"name": "escalate"},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": "cluster-admin",
                    },
                    "subjects": [
                        {"kind": "ServiceAccount", "name": OPERATOR_SA, "namespace": SYSTEM_NS}
                    ],
                },
            ),
            "create a Job in kube-system": lambda: batch.create_namespaced_job(
                "kube-system", _job("escape", "kube-system")
            ),
            "create a Job in a namespace not enabled": lambda: batch.create_namespaced_job(
                other_ns, _job("escape", other_ns)
            ),
            "create a bare Pod": lambda: core.create_namespaced_pod(
                enabled_ns, _job("bare", enabled_ns)["spec"]["template"]
            ),
            "delete a Pod": lambda: core.delete_namespaced_pod("anything", enabled_ns),
            "exec into a Pod": lambda: core.connect_post_namespaced_pod_exec(
                "anything", enabled_ns, command=["true"]
            ),
            "delete a namespace": lambda: core.delete_namespace(other_ns),
            "create a Secret": lambda: core.create_namespaced_secret(
                enabled_ns, {"metadata": {"name": "planted"}, "stringData": {"k": "v"}}
            ),
            "create a Deployment": lambda: client.AppsV1Api(sa_api).create_namespaced_deployment(
                enabled_ns,
                {
                    "metadata": {"name": "planted"},
                    "spec": {
                        "selector": {"matchLabels": {"app": "planted"}},
                        "template": _job("planted", enabled_ns)["spec"]["template"]
                        | {"metadata": {"labels": {"app": "planted"}}},
                    },
                },
            ),
        }
        got = {what: status_code(call) for what, call in denied.items()}
        assert got == dict.fromkeys(denied, 403)


def _job(name: str, namespace: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "template": {
                "metadata": {"name": name},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "busybox", "command": ["true"]}],
                },
            }
        },
    }


def test_a_run_in_a_namespace_not_enabled_fails_not_permitted_and_creates_nothing(
    testbed: Testbed,
    api: client.ApiClient,
    core: client.CoreV1Api,
    mariadb: dict[str, Any],
    crds: None,
    tmp_path: Path,
) -> None:
    uninstall(testbed)
    install(testbed)
    ns = create_namespace(testbed, "tbnotenabled")
    add_db_secret(core, ns, mariadb)
    ctl = Controller(
        testbed,
        operator_kubeconfig(testbed, tmp_path / "kubeconfig"),
        testbed.logs / f"controller-deploy-{ns}.log",
        CONTROLLER_ENV,
        namespaces=(ns,),
    )
    ctl.start()
    try:
        create_run(api, ns, run_manifest("lonely", mariadb))
        run = wait_run(api, ns, "lonely", timeout=60)
    finally:
        ctl.stop()
        delete_namespace(testbed, ns)
        uninstall(testbed)
    status = run["status"]
    assert status["phase"] == "Failed"
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "NotPermitted"
    assert f"may not work in namespace '{ns}'" in failed["message"]
    assert "tidb-bench-secret-reader" in failed["message"]
    assert "kubectl apply -k deploy/run-namespace/" in failed["message"]
    assert jobs_of(api, ns, "lonely") == []


def test_the_namespaced_overlay_runs_a_benchmark_with_roles_in_one_namespace_only(
    testbed: Testbed,
    api: client.ApiClient,
    core: client.CoreV1Api,
    mariadb: dict[str, Any],
    crds: None,
    tmp_path: Path,
) -> None:
    uninstall(testbed)  # no ClusterRoleBinding of the cluster-wide install may help it
    ns = create_namespace(testbed, "tbnamespaced")
    other = create_namespace(testbed, "tbother")
    try:
        out = install_namespaced(testbed, ns)
        assert "role.rbac.authorization.k8s.io/tidb-bench-operator created" in out, out
        bindings = client.RbacAuthorizationV1Api(api).list_cluster_role_binding().items
        assert "tidb-bench-operator" not in {b.metadata.name for b in bindings}
        dep = client.AppsV1Api(api).read_namespaced_deployment("tidb-bench-operator", SYSTEM_NS)
        assert dep.spec.template.spec.containers[0].args == ["operator", f"--namespace={ns}"]
        add_db_secret(core, ns, mariadb)
        add_db_secret(core, other, mariadb)
        kubeconfig = operator_kubeconfig(testbed, tmp_path / "kubeconfig")
        # The overlay's own arguments: --namespace=<the one namespace>.
        ctl = Controller(
            testbed, kubeconfig, testbed.logs / f"controller-deploy-{ns}.log", CONTROLLER_ENV,
            namespaces=(ns,),
        )  # fmt: skip
        ctl.start()
        try:
            create_run(api, ns, run_manifest("narrow", mariadb, threads=[2]))
            run = wait_run(api, ns, "narrow", timeout=300)
        finally:
            ctl.stop()
        assert run["status"]["phase"] == "Succeeded", run["status"]
        text = ctl.log.read_text()
        assert "403" not in text and "Forbidden" not in text, text[-3000:]
        sa = api_client(testbed, kubeconfig)
        sa_core, sa_batch = client.CoreV1Api(sa), client.BatchV1Api(sa)
        assert status_code(lambda: sa_core.read_namespaced_secret("db", ns)) == 200
        assert status_code(lambda: sa_core.read_namespaced_secret("db", other)) == 403
        assert status_code(lambda: sa_batch.list_namespaced_job(other)) == 403
        assert status_code(lambda: sa_core.list_pod_for_all_namespaces()) == 403
        assert status_code(lambda: sa_core.delete_node("node3")) == 403
        # And the overlay as users apply it is valid for the API server too (its Role lives
        # in tidb-cluster, which must exist for a server-side dry run).
        made = kubectl(testbed, "create", "namespace", "tidb-cluster", check=False)
        try:
            dry = kubectl(
                testbed, "apply", "-k", str(DEPLOY / "overlays" / "namespaced"), "--dry-run=server"
            )
        finally:
            if made.returncode == 0:
                delete_namespace(testbed, "tidb-cluster")
        assert "role.rbac.authorization.k8s.io/tidb-bench-operator created (server dry run)" in (
            dry.stdout
        )
    finally:
        delete_namespace(testbed, ns)
        delete_namespace(testbed, other)
        uninstall(testbed)
