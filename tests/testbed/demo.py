"""`make demo`: the whole flow on the local test bed, ending with `kubectl get benchmarkruns`.

What is real: the Kubernetes API server, scheduler and controller-manager, the controller,
the Jobs and their pods' placement, sysbench 1.0.20 and its numbers. What stands in:
MariaDB for TiDB's SQL layer, a fake PD serving recorded v8.1.0 API bodies, stand-in pods
for the TidbCluster `basic`, and the examples' durations and thread counts, shortened so
the demo takes minutes, not an hour.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from testbed.bed import bring_up
from testbed.cluster import REPO_ROOT, Testbed
from testbed.crds import install_project_crds
from testbed.kube import (
    BENCH_LABEL,
    CONTROL_PLANE_TAINT,
    api_client,
    create_standin_cluster,
    ensure_node,
    wait_for,
)
from testbed.services import mariadb_info

NS = "tidb-cluster"
EXAMPLES = ["point-select-sweep.yaml", "read-write-sweep.yaml", "multi-client.yaml"]
# Shortened for the demo (the examples themselves keep production-sized settings).
DEMO_SPEC = {
    "durationSeconds": 8,
    "warmupSeconds": 2,
    "reportIntervalSeconds": 2,
    "dataset": {"tables": 2, "tableSize": 10000},
}
DEMO_THREADS = {"multi-client.yaml": [2, 4, 8]}
BENCH_TOLERATIONS = [
    {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"},
    {"key": BENCH_LABEL, "operator": "Exists", "effect": "NoSchedule"},
]


def start_fake_pd(tb: Testbed) -> str:
    """A fake PD (recorded v8.1.0 bodies, balanced stores) as a detached test bed process."""
    url_file = tb.state / "fake-pd.url"
    url_file.unlink(missing_ok=True)
    code = (
        "import time, pathlib\n"
        "from testbed.fake_pd import FakePD\n"
        "pd = FakePD().start()\n"
        f"pathlib.Path({str(url_file)!r}).write_text(pd.url)\n"
        "while True: time.sleep(3600)\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{REPO_ROOT / 'tests'}:{REPO_ROOT / 'operator'}"}
    tb._spawn("fake-pd", [sys.executable, "-c", code], env=env)
    wait_for(url_file.exists, 20, "the fake PD to start")
    return url_file.read_text().strip()


def start_controller(tb: Testbed) -> None:
    env = {**os.environ, "KUBECONFIG": str(tb.kubeconfig), "TIDB_BENCH_LIVENESS": ""}
    tb._spawn("controller", [str(Path(sys.executable).parent / "tidb-bench"), "operator",
                             f"--namespace={NS}"], env=env)  # fmt: skip
    wait_for(
        lambda: "tidb-bench-operator ready" in tb.log_of("controller").read_text(),
        30,
        "the controller to start",
    )


def demo_run(file: str, db: dict[str, Any], pd_url: str) -> dict[str, Any]:
    doc = yaml.safe_load((REPO_ROOT / "examples" / file).read_text())
    spec = doc["spec"]
    spec.update(copy.deepcopy(DEMO_SPEC))
    spec["threads"] = DEMO_THREADS.get(file, [4, 8, 16])
    # The fake PD's recorded stores have a leader_size skew of 0.40, which read-write-sweep's
    # stricter bound (0.3) refuses under Enforce. The demo records such findings (Warn) so
    # every example shows numbers; `kubectl describe` shows the warning.
    spec["preflight"] = {**spec.get("preflight", {}), "policy": "Warn"}
    # TiDB and PD of `basic` are stand-ins: point at them explicitly.
    spec["target"] = {"host": db["host"], "port": db["port"], "pdURL": pd_url}
    placement = spec.setdefault("placement", {})
    placement["nodeSelector"] = {BENCH_LABEL: "true"}
    placement["tolerations"] = BENCH_TOLERATIONS
    spec.pop("resources", None)
    doc["metadata"]["namespace"] = NS
    doc["metadata"].setdefault("annotations", {})["tidbbench.io/demo"] = (
        "durations, threads and dataset shortened for the local demo"
    )
    return dict(doc)


def main() -> int:
    tb = Testbed()
    print("test bed: bringing it up (first time: builds Kubernetes from Debian's source)")
    bring_up(tb)
    api = api_client(tb)
    core = client.CoreV1Api(api)
    install_project_crds(api)
    # node1 (control-plane taint) and node4 (a dedicated bench node) measure; node2/3 hold TiDB.
    ensure_node(core, "node4", kubelet_port=tb.ports.kubelet, labels={BENCH_LABEL: "true"},
                taints=[{"key": BENCH_LABEL, "value": "true", "effect": "NoSchedule"}])  # fmt: skip
    ensure_node(core, "node1", kubelet_port=tb.ports.kubelet,
                labels={BENCH_LABEL: "true", "node-role.kubernetes.io/control-plane": ""},
                taints=[CONTROL_PLANE_TAINT])  # fmt: skip
    try:
        core.create_namespace({"metadata": {"name": NS}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    wait_for(lambda: core.list_namespaced_service_account(NS).items, 30, "default ServiceAccount")
    custom = client.CustomObjectsApi(api)
    try:
        custom.get_namespaced_custom_object("pingcap.com", "v1alpha1", NS, "tidbclusters", "basic")
    except ApiException:
        create_standin_cluster(
            api, NS, "basic", {"pd": ["node2"], "tikv": ["node2", "node3"], "tidb": ["node3"]},
            spread={"pd": 1, "tikv": 1, "tidb": 1},
        )  # fmt: skip
    db = mariadb_info(tb)
    try:
        core.create_namespaced_secret(NS, {
            "metadata": {"name": "tidb-bench-credentials"},
            "stringData": {"user": str(db["user"]), "password": str(db["password"])},
        })  # fmt: skip
    except ApiException as exc:
        if exc.status != 409:
            raise
    pd_url = start_fake_pd(tb)
    start_controller(tb)
    names = []
    for file in EXAMPLES:
        body = demo_run(file, db, pd_url)
        name = body["metadata"]["name"]
        try:
            custom.delete_namespaced_custom_object(
                "tidbbench.io", "v1alpha1", NS, "benchmarkruns", name
            )
            time.sleep(2)
        except ApiException:
            pass
        custom.create_namespaced_custom_object(
            "tidbbench.io", "v1alpha1", NS, "benchmarkruns", body
        )
        names.append(name)
        print(f"applied examples/{file} as {NS}/{name} (shortened for the demo)")
    print("waiting for the runs (one at a time per cluster, by design); progress as it changes:")
    watch_runs(custom, names, timeout=1200)
    kubectl = ["kubectl", "--kubeconfig", str(tb.kubeconfig)]
    print()
    subprocess.run([*kubectl, "-n", NS, "get", "benchmarkruns"], check=False)
    report = write_report(tb, REPORT_RUN)
    print(f"\nreport of {NS}/{REPORT_RUN} (chart, QPS over time per step, tables): {report}")
    print(f"\nexport KUBECONFIG={tb.kubeconfig}   # then: kubectl -n {NS} describe benchmarkrun "
          f"{names[0]}; `make testbed-down` stops everything")  # fmt: skip
    return 0


#: The run whose report the demo writes: read-write shows QPS, TPS and latency.
REPORT_RUN = "read-write-sweep"


def progress_line(name: str, status: dict[str, Any]) -> str:
    """One line of a run's state: phase, and the step it is on (or what it waits for)."""
    phase = status.get("phase") or "Pending"
    steps = status.get("steps") or []
    line = f"{name}: {phase}"
    if status.get("waitingFor"):
        line += f", waiting for {status['waitingFor']}"
    current = status.get("currentStep")
    if phase == "Running" and isinstance(current, int) and current < len(steps):
        step = steps[current]
        line += (
            f", step {current + 1}/{len(steps)}: {step.get('workload')} at "
            f"{step.get('threads')} threads"
        )
        if step.get("phase", "Pending") != "Running":
            line += f" ({step.get('phase', 'Pending')})"
    done = [s for s in steps if s.get("qps") is not None]
    if done:
        last = done[-1]
        line += f"; last result {last['qps']:,.0f} QPS at {last['threads']} threads"
    if phase in ("Succeeded", "Failed"):
        summary = status.get("summary") or {}
        line += f": {summary.get('headline') or status.get('message') or ''}".rstrip(": ")
    return line


def watch_runs(custom: client.CustomObjectsApi, names: list[str], timeout: float) -> None:
    """Print each run's progress line whenever it changes, until all are finished."""
    shown: dict[str, str] = {}
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        finished = 0
        for name in names:
            try:
                obj = custom.get_namespaced_custom_object(
                    "tidbbench.io", "v1alpha1", NS, "benchmarkruns", name
                )
            except ApiException as exc:  # the API server under load: try again next round
                print(f"  ({name}: API server answered {exc.status}; retrying)")
                continue
            status = obj.get("status") or {}
            line = progress_line(name, status)
            if shown.get(name) != line:
                elapsed = time.monotonic() - start
                print(f"  [{elapsed:5.0f}s] {line}", flush=True)
                shown[name] = line
            finished += status.get("phase") in ("Succeeded", "Failed")
        if finished == len(names):
            return
        time.sleep(2)
    print(f"  gave up waiting after {timeout:.0f} s; the runs go on (kubectl get benchmarkruns)")


def write_report(tb: Testbed, name: str) -> Path:
    """`tidb-bench report NAME --html` into the test bed's state dir; returns the path."""
    out = tb.state / "reports" / f"{name}.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [str(Path(sys.executable).parent / "tidb-bench"), "report", name, "--namespace", NS,
         "--html", str(out)],
        env={**os.environ, "KUBECONFIG": str(tb.kubeconfig)},
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"tidb-bench report {name} failed: {done.stderr.strip()}")
    return out


if __name__ == "__main__":
    sys.exit(main())
