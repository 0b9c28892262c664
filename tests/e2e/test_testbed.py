"""The test bed is real: schema validation, the scheduler, pods that run sysbench, RBAC."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from testbed.cluster import NOBODY_USER, Testbed
from testbed.kube import (
    api_client,
    standin_pod,
    tidbcluster_manifest,
    wait_for,
)
from testbed.runs import BENCH_PLACEMENT, add_db_secret

pytestmark = pytest.mark.e2e

ANTI_AFFINITY = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {
                    "matchExpressions": [
                        {
                            "key": "app.kubernetes.io/component",
                            "operator": "In",
                            "values": ["pd", "tikv", "tidb"],
                        }
                    ]
                },
                "topologyKey": "kubernetes.io/hostname",
            }
        ]
    }
}


def job(
    name: str, command: list[str], *, env: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "affinity": ANTI_AFFINITY,
                    **BENCH_PLACEMENT,
                    "containers": [
                        {
                            "name": "bench",
                            "image": "tidb-bench:test",
                            "command": command,
                            "env": env or [],
                        }
                    ],
                },
            },
        },
    }


def job_pods(core: client.CoreV1Api, ns: str, name: str) -> list[Any]:
    return list(core.list_namespaced_pod(ns, label_selector=f"job-name={name}").items)


def test_a_crd_is_served_and_a_bad_object_is_rejected_by_schema_validation(
    api: client.ApiClient, namespace: str
) -> None:
    custom = client.CustomObjectsApi(api)
    good = tidbcluster_manifest("basic", namespace, replicas={"pd": 1, "tikv": 3, "tidb": 2})
    created = custom.create_namespaced_custom_object(
        "pingcap.com", "v1alpha1", namespace, "tidbclusters", good
    )
    assert created["spec"]["tikv"]["replicas"] == 3
    bad = tidbcluster_manifest("broken", namespace, replicas={"pd": 1, "tikv": 3, "tidb": 2})
    bad["spec"]["tikv"]["replicas"] = "three"
    with pytest.raises(ApiException) as err:
        custom.create_namespaced_custom_object(
            "pingcap.com", "v1alpha1", namespace, "tidbclusters", bad
        )
    assert err.value.status == 422
    body = json.loads(err.value.body)
    assert body["reason"] == "Invalid"
    assert "spec.tikv.replicas" in body["message"]


def test_the_scheduler_keeps_the_bench_pod_off_a_node_with_tikv_until_it_leaves(
    core: client.CoreV1Api, api: client.ApiClient, namespace: str
) -> None:
    tikv = standin_pod("basic-tikv-3", namespace, "basic", "tikv", "node1")
    core.create_namespaced_pod(namespace, tikv)
    wait_for(
        lambda: core.read_namespaced_pod("basic-tikv-3", namespace).status.phase == "Running",
        30,
        "stand-in TiKV pod Running",
    )
    client.BatchV1Api(api).create_namespaced_job(
        namespace, job("placement", ["sysbench", "--version"])
    )

    def failed_scheduling() -> str:
        events = core.list_namespaced_event(namespace).items
        for ev in events:
            if ev.reason == "FailedScheduling" and ev.involved_object.kind == "Pod":
                return str(ev.message)
        return ""

    message = wait_for(failed_scheduling, 60, "a FailedScheduling event")
    assert "didn't match pod anti-affinity rules" in message
    pods = job_pods(core, namespace, "placement")
    assert len(pods) == 1 and pods[0].spec.node_name is None

    core.delete_namespaced_pod("basic-tikv-3", namespace)
    pod = wait_for(
        lambda: next((p for p in job_pods(core, namespace, "placement") if p.spec.node_name), None),
        90,
        "the bench pod to be scheduled once TiKV left node1",
    )
    assert pod.spec.node_name == "node1"
    done = wait_for(
        lambda: (
            client.BatchV1Api(api)
            .read_namespaced_job_status("placement", namespace)
            .status.succeeded
        ),
        60,
        "Job success",
    )
    assert done == 1


def test_a_bench_pod_runs_real_sysbench_against_mariadb_with_log_and_termination_message(
    core: client.CoreV1Api, api: client.ApiClient, namespace: str, mariadb: dict[str, Any]
) -> None:
    add_db_secret(core, namespace, mariadb)
    common = (
        f"--mysql-host={mariadb['host']} --mysql-port={mariadb['port']} "
        "--mysql-user=$DB_USER --mysql-password=$DB_PASSWORD "
        f"--mysql-db={mariadb['database']} "
        f"--tables=1 --table-size=1000 --threads=2"
    )
    script = (
        "set -e; sysbench --version; "
        f"sysbench oltp_point_select {common} cleanup >/dev/null; "
        f"sysbench oltp_point_select {common} prepare >/dev/null; "
        f"sysbench oltp_point_select {common} --time=3 run | tee /tmp/sb.$$; "
        "grep -E 'queries:' /tmp/sb.$$ > /dev/termination-log; rm -f /tmp/sb.$$"
    )
    env = [
        {"name": "DB_USER", "valueFrom": {"secretKeyRef": {"name": "db", "key": "user"}}},
        {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}},
    ]
    client.BatchV1Api(api).create_namespaced_job(
        namespace, job("sysbench", ["sh", "-c", script], env=env)
    )
    pod = wait_for(
        lambda: next(
            (
                p
                for p in job_pods(core, namespace, "sysbench")
                if p.status.phase in ("Succeeded", "Failed")
            ),
            None,
        ),
        120,
        "the sysbench pod to finish",
    )
    logs = core.read_namespaced_pod_log(pod.metadata.name, namespace, container="bench")
    assert pod.status.phase == "Succeeded", logs
    assert pod.spec.node_name == "node1"
    assert logs.startswith("sysbench 1.0.20")
    assert "SQL statistics:" in logs and "95th percentile:" in logs
    term = pod.status.container_statuses[0].state.terminated
    assert term.exit_code == 0
    assert term.message.strip().startswith("queries:")
    qps = float(term.message.split("(")[1].split()[0])
    assert qps > 100, term.message


def test_a_token_without_role_bindings_is_denied_by_rbac(testbed: Testbed, namespace: str) -> None:
    path = testbed.state / "nobody.kubeconfig"
    testbed.write_kubeconfig_for_token(path, testbed.token(NOBODY_USER))
    nobody = client.CoreV1Api(api_client(testbed, path))
    with pytest.raises(ApiException) as err:
        nobody.list_namespaced_pod(namespace)
    assert err.value.status == 403
    assert (
        f'User "{NOBODY_USER}" cannot list resource "pods"' in json.loads(err.value.body)["message"]
    )
