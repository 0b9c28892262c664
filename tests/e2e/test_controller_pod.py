"""The controller as users run it: `kubectl apply -k` of deploy/, a pod, watched by Prometheus.

The node agent runs the Deployment's pod: the image's entrypoint is the installed
`tidb-bench`, the ServiceAccount token, CA and namespace are at
/var/run/secrets/kubernetes.io/serviceaccount inside the pod's mount namespace, and
KUBERNETES_SERVICE_HOST/PORT name the API server, so the controller logs in with the
in-cluster config. Its probes are run by the agent and acted on. Debian's Prometheus scrapes
the pod as deploy/overlays/monitoring's ServiceMonitor says and evaluates its PrometheusRule.
"""

from __future__ import annotations

import base64
import json
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from testbed import prometheus
from testbed.cluster import Testbed
from testbed.deploy import (
    SYSTEM_NS,
    delete_namespace,
    kubectl,
    run_namespace,
    uninstall,
)
from testbed.kube import namespace_exists, wait_for
from testbed.runs import (
    create_run,
    fast_example,
    get_run,
    run_manifest,
    wait_run,
)

# Serial (`make e2e`): its probes have periods of seconds, and under the other worker's load
# the liveness probe restarted the pod before the test hung it (a parallel run failed both).
pytestmark = [pytest.mark.e2e, pytest.mark.serial]

REPO = Path(__file__).resolve().parents[2]
POD_OVERLAY = REPO / "tests" / "data" / "deploy-pod"
DASHBOARD = REPO / "deploy" / "grafana" / "tidb-bench-dashboard.json"
SELECTOR = "app.kubernetes.io/name=tidb-bench-operator"
RUN_TIMEOUT = 240


def ports_overlay(tb: Testbed, directory: Path) -> tuple[int, int]:
    """An overlay of tests/data/deploy-pod setting the health and metrics ports from the test
    bed's port base; returns (health, metrics)."""
    health, metrics = tb.ports.base + 6, tb.ports.base + 7
    patch = [
        {"op": "replace", "path": "/spec/template/spec/containers/0/env/1/value",
         "value": f"http://127.0.0.1:{health}/healthz"},
        {"op": "replace", "path": "/spec/template/spec/containers/0/env/2/value",
         "value": str(metrics)},
        {"op": "replace", "path": "/spec/template/spec/containers/0/ports/0/containerPort",
         "value": health},
        {"op": "replace", "path": "/spec/template/spec/containers/0/ports/1/containerPort",
         "value": metrics},
    ]  # fmt: skip
    directory.mkdir(parents=True, exist_ok=True)
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(POD_OVERLAY, directory)],
        "patches": [
            {
                "target": {"kind": "Deployment", "name": "tidb-bench-operator"},
                "patch": yaml.safe_dump(patch),
            }
        ],
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return health, metrics


def controller_pod(core: client.CoreV1Api) -> Any:
    pods = core.list_namespaced_pod(SYSTEM_NS, label_selector=SELECTOR).items
    live = [p for p in pods if p.metadata.deletion_timestamp is None]
    return live[0] if len(live) == 1 else None


def ready_pod(core: client.CoreV1Api) -> Any:
    pod = controller_pod(core)
    if pod is None or not pod.status.container_statuses:
        return None
    (status,) = pod.status.container_statuses
    return pod if status.ready and status.state.running is not None else None


def controller_pid(namespace_glob: str) -> int | None:
    """The pod's `tidb-bench operator` process on this machine (the agent's child)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in argv if a]
        if (
            "operator" in words
            and f"--namespace={namespace_glob}" in words
            and any(w.endswith("/tidb-bench") for w in words[:3])
        ):
            return int(proc.name)
    return None


@pytest.fixture(scope="module")
def installed(
    testbed: Testbed, crds: None, core: client.CoreV1Api, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """deploy/ applied with `kubectl apply -k` (controller as a pod), Prometheus scraping it."""
    uninstall(testbed)  # a previous session killed mid-test may have left it
    overlay = tmp_path_factory.mktemp("deploy-pod")
    health, metrics = ports_overlay(testbed, overlay)
    out = kubectl(testbed, "apply", "-k", str(overlay)).stdout
    try:
        assert "deployment.apps/tidb-bench-operator created" in out, out
        pod = wait_for(lambda: ready_pod(core), 90, "the controller pod Running and Ready")
        job = prometheus.scrape_config(pod.status.pod_ip, pod.metadata.name, metrics)
        url = prometheus.start(testbed, job)
        yield {"url": url, "pod": pod, "health": health, "metrics": metrics}
    finally:
        prometheus.stop(testbed)
        uninstall(testbed)


@pytest.fixture(scope="module")
def run_ns(
    testbed: Testbed, installed: dict[str, Any], core: client.CoreV1Api, mariadb: dict[str, Any]
) -> Iterator[str]:
    """A namespace the pod watches (pod-*), enabled by deploy/run-namespace, Secret `db`."""
    ns = run_namespace(testbed, "pod", mariadb)
    yield ns
    # Deleted while the pod still runs, so kopf takes its finalizers off the runs (the
    # namespace would stay Terminating otherwise).
    delete_namespace(testbed, ns)
    wait_for(lambda: not namespace_exists(core, ns), 90, f"namespace {ns} gone")


def test_the_pod_logs_in_in_cluster_gets_ready_and_a_hung_controller_is_restarted_by_liveness(
    testbed: Testbed,
    api: client.ApiClient,
    core: client.CoreV1Api,
    installed: dict[str, Any],
    run_ns: str,
    mariadb: dict[str, Any],
) -> None:
    pod = installed["pod"]
    spec = pod.spec.containers[0]
    assert spec.command is None and spec.args == ["operator", "--namespace=pod-*"]
    mounts = {m.mount_path: m for m in spec.volume_mounts}
    assert "/var/run/secrets/kubernetes.io/serviceaccount" in mounts  # added by the API server
    log = testbed.state / "agent" / "pod-logs" / f"{SYSTEM_NS}_{pod.metadata.name}_operator.log"
    assert "tidb-bench-operator ready" in log.read_text()
    # The pod's process: the installed `tidb-bench`, the pod's environment (no kubeconfig;
    # HOME=/tmp has none either), and the ServiceAccount's token, CA and namespace mounted at
    # the standard path in its own mount namespace, so the only way it can log in (as it
    # did: it is ready and serves runs below) is the in-cluster config.
    pid = wait_for(lambda: controller_pid("pod-*"), 10, "the controller process")
    environ = dict(
        item.split("=", 1)
        for item in Path(f"/proc/{pid}/environ").read_text().split("\0")
        if "=" in item
    )
    assert "KUBECONFIG" not in environ and environ["HOME"] == "/tmp"
    assert environ["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"
    assert environ["KUBERNETES_SERVICE_PORT"] == str(testbed.ports.apiserver)
    sa_dir = "/run/secrets/kubernetes.io/serviceaccount"
    mountinfo = Path(f"/proc/{pid}/mountinfo").read_text()
    assert f" {sa_dir} " in mountinfo, mountinfo
    assert not Path(sa_dir).exists()  # only inside the pod's mount namespace
    root = Path(f"/proc/{pid}/root")  # the process' view of the file system
    token = (root / sa_dir.lstrip("/") / "token").read_text()
    secret = next(
        s
        for s in core.list_namespaced_secret(SYSTEM_NS).items
        if s.type == "kubernetes.io/service-account-token"
        and s.metadata.annotations["kubernetes.io/service-account.name"] == "tidb-bench-operator"
    )
    assert token == base64.b64decode(secret.data["token"]).decode()
    assert (root / sa_dir.lstrip("/") / "namespace").read_text() == SYSTEM_NS
    assert "BEGIN CERTIFICATE" in (root / sa_dir.lstrip("/") / "ca.crt").read_text()
    assert (pod.status.container_statuses[0].restart_count or 0) == 0

    # The example run, served by the pod; the controller hangs (SIGSTOP) while it runs.
    body = fast_example("point-select-sweep.yaml", mariadb, preflight={"policy": "Off"})
    name = body["metadata"]["name"]
    create_run(api, run_ns, body)
    wait_run(api, run_ns, name, phases=("Running",), timeout=RUN_TIMEOUT)
    os.kill(pid, signal.SIGSTOP)
    stopped = time.monotonic()

    def restarted() -> Any:
        p = controller_pod(core)
        status = p.status.container_statuses[0] if p and p.status.container_statuses else None
        return p if status and (status.restart_count or 0) >= 1 else None

    pod = wait_for(restarted, 60, "the container restarted after failing its liveness probe")
    print(f"\nliveness: hung controller restarted after {time.monotonic() - stopped:.1f} s")
    status = pod.status.container_statuses[0]
    assert status.restart_count == 1
    assert status.last_state.terminated.exit_code == 137  # SIGKILLed by the agent
    events = core.list_namespaced_event(
        SYSTEM_NS, field_selector=f"involvedObject.name={pod.metadata.name}"
    ).items
    reasons = {(e.reason, e.message.split(":")[0]) for e in events}
    assert ("Unhealthy", "Liveness probe failed") in reasons, reasons
    assert any(e.reason == "Killing" and "liveness" in e.message for e in events)
    wait_for(lambda: controller_pid("pod-*") not in (None, pid), 30, "a new controller process")

    run = wait_run(api, run_ns, name, timeout=RUN_TIMEOUT)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    assert [s["threads"] for s in run["status"]["steps"]] == [2, 4]
    assert all(s["qps"] > 0 for s in run["status"]["steps"])
    pod = wait_for(lambda: ready_pod(core), 60, "the restarted pod Ready again")
    assert pod.status.container_statuses[0].restart_count == 1


def dashboard_queries() -> list[tuple[str, str]]:
    """(title, PromQL) of every panel target, and the series selector of every template
    variable's label_values(SELECTOR, LABEL) with `LABEL!=""` added (its values exist)."""
    doc = json.loads(DASHBOARD.read_text())
    queries = [
        (panel["title"], target["expr"])
        for panel in doc["panels"]
        for target in panel.get("targets", [])
    ]
    for var in doc["templating"]["list"]:
        if var.get("type") != "query":
            continue
        match = re.fullmatch(r"label_values\((.+), *(\w+)\)", var["definition"])
        assert match, var["definition"]
        selector, label = match.groups()
        matcher = f'{label}!=""'
        query = (
            f"{selector[:-1]}, {matcher}}}"
            if selector.endswith("}")
            else f"{selector}{{{matcher}}}"
        )
        queries.append((f"variable ${var['name']}", query))
    return queries


def test_prometheus_scrapes_the_pod_every_dashboard_query_has_data_and_alerts_fire(
    testbed: Testbed,
    api: client.ApiClient,
    installed: dict[str, Any],
    run_ns: str,
    mariadb: dict[str, Any],
) -> None:
    url = installed["url"]
    # A nightly schedule firing every minute, so the schedule panels have a night to show.
    schedule = yaml.safe_load(
        (REPO / "examples" / "gitops" / "benchmarks" / "nightly-point-select.yaml").read_text()
    )
    template = run_manifest("t", mariadb, threads=[2], durationSeconds=2)["spec"]
    schedule["metadata"] = {"name": "nightly-point-select"}
    schedule["spec"].update(schedule="* * * * *", startingDeadlineSeconds=120, template=template)
    schedule["spec"].pop("timeZone")
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        "tidbbench.io", "v1alpha1", run_ns, "benchmarkschedules", schedule
    )
    # A run that fails: PD unreachable under Enforce (a preflight failure, then Failed).
    failing = run_manifest(
        "no-pd",
        mariadb,
        threads=[2],
        preflight={"policy": "Enforce", "timeoutSeconds": 4},
    )
    failing["spec"]["target"]["pdURL"] = f"http://127.0.0.1:{testbed.ports.base + 9}"
    create_run(api, run_ns, failing)
    assert wait_run(api, run_ns, "no-pd", timeout=RUN_TIMEOUT)["status"]["phase"] == "Failed"

    # The scrape target is up and carries the example run of the previous test.
    up = wait_for(
        lambda: prometheus.query(url, 'up{job="tidb-bench-operator-metrics"} == 1'), 30, "up == 1"
    )
    assert up[0]["metric"]["namespace"] == SYSTEM_NS
    example = "point-select-sweep"
    series = wait_for(
        lambda: prometheus.query(url, f'tidb_bench_step_qps{{run="{example}"}}'),
        30,
        "the example run's QPS in Prometheus",
    )
    # The run's own namespace, not the scraped Service's (the ServiceMonitor honours labels).
    assert {s["metric"]["namespace"] for s in series} == {run_ns}

    def schedule_succeeded() -> bool:
        return bool(
            prometheus.query(url, f'tidb_bench_schedule_last_peak_qps{{namespace="{run_ns}"}}')
        )

    wait_for(schedule_succeeded, 150, "a successful run of the every-minute schedule")

    # Every query of the Grafana dashboard, with its variables set as a user would.
    values = {
        "$namespace": run_ns,
        "$schedule": ".*",
        "$run": example,
        "$__range": "10m",
    }
    empty = []
    for title, expr in dashboard_queries():
        for var, value in values.items():
            expr = expr.replace(var, value)
        assert "$" not in expr, (title, expr)
        result = prometheus.query(url, expr)
        print(f"\n{title}: {expr}\n  -> {[(r['metric'], r['value'][1]) for r in result][:4]}")
        if not result:
            empty.append((title, expr))
    assert not empty, f"dashboard queries without data: {empty}"

    # The failed run fires its alert.
    alert = wait_for(
        lambda: prometheus.firing(url, "TidbBenchRunFailed"), 30, "TidbBenchRunFailed firing"
    )
    assert alert[0]["labels"]["namespace"] == run_ns
    # A planted regression: the Regressed condition the controller sets on a regressed run of
    # a schedule, written onto the example run (tests/e2e/test_schedule.py shows the
    # controller setting it itself).
    run = get_run(api, run_ns, example)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    conditions = [
        *run["status"].get("conditions", []),
        {
            "type": "Regressed",
            "status": "True",
            "reason": "QpsDropped",
            "message": "planted by the e2e test",
            "lastTransitionTime": now,
        },
    ]
    client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
        "tidbbench.io",
        "v1alpha1",
        run_ns,
        "benchmarkruns",
        example,
        {"status": {"conditions": conditions}},
    )
    alert = wait_for(
        lambda: prometheus.firing(url, "TidbBenchRunRegressed"),
        30,
        "TidbBenchRunRegressed firing",
    )
    assert alert[0]["labels"]["run"] == example
    assert re.search(r"regressed against its baseline", alert[0]["annotations"]["summary"])
    # The controller down: nothing fires while it is scraped.
    assert not prometheus.firing(url, "TidbBenchControllerDown")
