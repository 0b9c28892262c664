"""Helpers for e2e tests of BenchmarkRuns: manifests against the MariaDB stand-in, waiting."""

from __future__ import annotations

import copy
import os
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from testbed.kube import BENCH_LABEL

GROUP, VERSION, PLURAL = "tidbbench.io", "v1alpha1", "benchmarkruns"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BENCH_PLACEMENT = {
    "nodeSelector": {BENCH_LABEL: "true"},
    "tolerations": [
        {
            "key": "node-role.kubernetes.io/control-plane",
            "operator": "Exists",
            "effect": "NoSchedule",
        }
    ],
}


def run_manifest(name: str, mariadb: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A small, fast BenchmarkRun against the MariaDB stand-in on the bench node."""
    body: dict[str, Any] = {
        "target": {"host": str(mariadb["host"]), "port": int(mariadb["port"])},
        "credentials": {"secretRef": {"name": "db"}},
        "workloads": ["oltp_point_select"],
        "threads": [2, 4],
        "durationSeconds": 3,
        "reportIntervalSeconds": 1,
        "dataset": {"tables": 1, "tableSize": 1000},
        "placement": copy.deepcopy(BENCH_PLACEMENT),
        "preflight": {"policy": "Off"},
    }
    body.update(spec)
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "BenchmarkRun",
        "metadata": {"name": name},
        "spec": body,
    }


def example_manifest(file: str, mariadb: dict[str, Any], **overrides: Any) -> dict[str, Any]:
    """An examples/ run pointed at the stand-in: target, Secret and bench placement replaced."""
    doc = yaml.safe_load((EXAMPLES / file).read_text())
    spec = doc["spec"]
    spec.pop("cluster", None)
    spec["target"] = {"host": str(mariadb["host"]), "port": int(mariadb["port"])}
    spec["credentials"] = {"secretRef": {"name": "db"}}
    spec["placement"] = copy.deepcopy(BENCH_PLACEMENT)
    spec.update(overrides)
    doc["metadata"] = {"name": doc["metadata"]["name"]}
    return dict(doc)


def create_run(api: client.ApiClient, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
    return dict(
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, body
        )
    )


def get_run(api: client.ApiClient, namespace: str, name: str) -> dict[str, Any]:
    return dict(
        client.CustomObjectsApi(api).get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name
        )
    )


def wait_run(
    api: client.ApiClient,
    namespace: str,
    name: str,
    phases: tuple[str, ...] = ("Succeeded", "Failed"),
    timeout: float = 180,
) -> dict[str, Any]:
    """Poll until the run's phase is one of `phases`; the last object on timeout in the error.

    A 5xx from the API server is polled through (the regression test plants a CPU hog that
    once starved the 2-core test bed's etcd into a 504), and named if the wait times out.
    """
    deadline = time.monotonic() + timeout
    run: dict[str, Any] = {}
    server_errors: list[str] = []
    while time.monotonic() < deadline:
        try:
            run = get_run(api, namespace, name)
        except ApiException as exc:
            if exc.status is None or exc.status < 500:
                raise
            server_errors.append(f"{exc.status} {exc.reason}")
            time.sleep(1)
            continue
        if (run.get("status") or {}).get("phase") in phases:
            return run
        time.sleep(0.5)
    raise TimeoutError(
        f"run {namespace}/{name} not in {phases} after {timeout}s: {run.get('status')}"
        + (f" (API server errors meanwhile: {server_errors})" if server_errors else "")
    )


def run_events(core: client.CoreV1Api, namespace: str, name: str) -> list[Any]:
    evs = core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name={name},involvedObject.kind=BenchmarkRun"
    ).items
    # etcd revisions grow monotonically: creation order even within one second.
    return sorted(evs, key=lambda e: int(e.metadata.resource_version))


def jobs_of(api: client.ApiClient, namespace: str, run: str) -> list[Any]:
    return list(
        client.BatchV1Api(api)
        .list_namespaced_job(namespace, label_selector=f"tidbbench.io/run={run}")
        .items
    )


def tidb_bench_report(kubeconfig: Path, *args: str) -> str:
    """`tidb-bench report ARGS` against the test bed (the installed command, as users run
    it); its Markdown. Fails with the command's stderr when it exits non-zero."""
    import subprocess
    import sys

    command = [str(Path(sys.executable).parent / "tidb-bench"), "report", *args]
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}: {done.stderr}"
    return done.stdout


def disturbances_of(run: dict[str, Any]) -> list[str]:
    """Every disturbance the guard recorded on the run's steps and trials, as text."""
    out = []
    for step in (run.get("status") or {}).get("steps") or []:
        found = list(step.get("disturbances") or [])
        for trial in step.get("trials") or []:
            found += trial.get("disturbances") or []
        out += [
            f"step {step['index'] + 1}: {d['what']} {d['object']}: {d['message']}" for d in found
        ]
    return out


def assert_quiet(run: dict[str, Any]) -> None:
    """A run nothing disturbed: the guard recorded no disturbance on any step (no false alarm)."""
    found = disturbances_of(run)
    assert found == [], f"the guard flagged a quiet run: {found}"
