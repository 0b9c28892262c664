"""The test bed's cAdvisor series, scraped by its real Prometheus, against /proc (#26).

The node agent exports per-container CPU seconds from /proc (testbed.cadvisor); Prometheus
scrapes them as the kubelet job (the `kubelet_prometheus` fixture); the default PromQL of
a pod's cores over a window must agree with this test's own reading of the same processes
from /proc (testbed.procstat).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from testbed import prometheus
from testbed.cadvisor import BURN_ANNOTATION, CPU_OF_ANNOTATION
from testbed.cluster import Testbed
from testbed.kube import standin_pod, wait_for
from testbed.procstat import CpuSampler, burner_pids, mariadb_pid
from testbed.runs import RunBed
from testbed.services import connect

pytestmark = pytest.mark.e2e

WINDOW = 20
#: Series as kube-prometheus's kubelet job has them; container!="" leaves the pods' cgroups.
SELECTOR = 'job="kubelet",metrics_path="/metrics/cadvisor",namespace="{ns}",container!=""'


def promql_cores(url: str, ns: str, at: float, window: int) -> dict[str, float]:
    """The default PromQL of cores per pod over `window` seconds ending at `at`."""
    expr = (
        f"sum by (namespace, pod)(increase(container_cpu_usage_seconds_total"
        f"{{{SELECTOR.format(ns=ns)}}}[{window}s])) / {window}"
    )
    result = prometheus.api(url, "query", query=expr, time=f"{at:.3f}")["result"]
    return {r["metric"]["pod"]: float(r["value"][1]) for r in result}


def sampled_span(
    url: str, ns: str, pod: str, at: float, window: int
) -> tuple[tuple[float, float], tuple[float, float]]:
    """The first and last samples, as scraped, of the pod's CPU counter (its cgroup's series)
    in the `window` seconds ending at `at`: (time, seconds) each."""
    expr = (
        f'container_cpu_usage_seconds_total{{job="kubelet",namespace="{ns}",pod="{pod}",'
        f'container=""}}[{window}s]'
    )
    series = prometheus.api(url, "query", query=expr, time=f"{at:.3f}")["result"]
    assert len(series) == 1, series
    values = [(float(t), float(v)) for t, v in series[0]["values"]]
    return values[0], values[-1]


def settle(url: str, at: float) -> None:
    """Wait until Prometheus has scraped past `at` (its newest kubelet sample is later)."""

    def scraped_after() -> bool:
        last = prometheus.query(url, 'timestamp(up{job="kubelet"})')
        return bool(last) and float(last[0]["value"][1]) > at + 1

    wait_for(scraped_after, 15, "a scrape after the window")


class SqlLoad:
    """One MariaDB connection running CPU-bound SQL until stopped."""

    def __init__(self, mariadb: dict[str, Any]) -> None:
        self.mariadb = mariadb
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        db = self.mariadb
        conn = connect(db)
        try:
            with conn.cursor() as cur:
                while not self.stop.is_set():
                    cur.execute("SELECT BENCHMARK(300000, MD5(RAND()))")
        finally:
            conn.close()

    def __enter__(self) -> SqlLoad:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=30)


def agree(prom_cores: float, proc_cores: float) -> bool:
    return abs(prom_cores - proc_cores) <= 0.10 * proc_cores


def test_prometheus_cores_of_the_tidb_pod_bound_to_mariadb_and_of_a_burning_tikv_match_proc(
    bed: RunBed, testbed: Testbed, kubelet_prometheus: str
) -> None:
    ns, prom = bed.namespace, kubelet_prometheus
    bed.cluster("basic", {"pd": ["node2"], "tikv": ["node2", "node3"], "tidb": ["node3"]})
    bed.annotate("basic-tidb-0", {CPU_OF_ANNOTATION: "mariadb"})
    bed.annotate("basic-tikv-0", {BURN_ANNOTATION: "0.5"})
    wait_for(lambda: burner_pids(ns, "basic-tikv-0"), 10, "the TiKV pod's burner")
    with (
        SqlLoad(bed.mariadb),
        CpuSampler(lambda procs: [mariadb_pid(testbed.state) or 0]) as db_proc,
        CpuSampler(lambda procs: burner_pids(ns, "basic-tikv-0", procs)) as burn_proc,
    ):
        time.sleep(3)  # the load running, two scrapes of it
        start = time.time()
        time.sleep(WINDOW)
        end = time.time()
        time.sleep(1)
    settle(prom, end)
    cores = promql_cores(prom, ns, end, WINDOW)
    tidb, tikv = db_proc.cores(start, end), burn_proc.cores(start, end)
    print(
        f"\nover {WINDOW} s: basic-tidb-0 (MariaDB) Prometheus {cores.get('basic-tidb-0')} "
        f"/proc {tidb:.3f}; basic-tikv-0 (burner 0.5) Prometheus {cores.get('basic-tikv-0')} "
        f"/proc {tikv:.3f}; all pods {cores}"
    )
    assert tidb > 0.2, f"the SQL load did not reach MariaDB: {tidb:.3f} cores"
    # Above 0.5 it would not be the asked rate; below, a busy 2-core machine starves it (a gate
    # beside other work saw 0.26): what matters is that Prometheus agrees with /proc.
    assert 0.1 < tikv < 0.55, f"the 0.5-core burner used {tikv:.3f} cores"
    assert agree(cores["basic-tidb-0"], tidb), (cores, tidb)
    assert agree(cores["basic-tikv-0"], tikv), (cores, tikv)
    assert cores.get("basic-tikv-1", 0.0) < 0.01 and cores.get("basic-pd-0", 0.0) < 0.01
    # The node's root cgroup: at least what its pods used (node2 has the burner and PD).
    node = prometheus.api(
        prom,
        "query",
        query=f'increase(container_cpu_usage_seconds_total{{job="kubelet",id="/",node="node2"}}'
        f"[{WINDOW}s]) / {WINDOW}",
        time=f"{end:.3f}",
    )["result"]
    assert float(node[0]["value"][1]) >= 0.9 * cores["basic-tikv-0"], node

    # The burner annotation removed on the live pod: its cores fall to ~0 within seconds.
    removed = time.time()
    bed.annotate("basic-tikv-0", {BURN_ANNOTATION: None})
    wait_for(lambda: not burner_pids(ns, "basic-tikv-0"), 5, "the burner stopped")
    stopped = time.time() - removed

    def idle() -> bool:
        got = promql_cores(prom, ns, time.time(), 3).get("basic-tikv-0")
        return got is not None and got < 0.02

    wait_for(idle, 10, "basic-tikv-0's cores near 0")
    print(
        f"burner stopped {stopped:.2f} s after the annotation's removal; Prometheus's cores "
        f"over 3 s under 0.02 {time.time() - removed:.1f} s after"
    )
    assert stopped < 2.0


def test_a_cpu_limit_of_a_quarter_core_caps_a_burn_of_one_core(
    bed: RunBed, testbed: Testbed, kubelet_prometheus: str
) -> None:
    ns, prom = bed.namespace, kubelet_prometheus
    pod = standin_pod("capped-tikv-0", ns, "capped", "tikv", "node3")
    pod["metadata"]["annotations"] = {BURN_ANNOTATION: "1.0"}
    pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "250m"}}
    bed.core.create_namespaced_pod(ns, pod)
    wait_for(lambda: burner_pids(ns, "capped-tikv-0"), 10, "the capped pod's burner")
    with CpuSampler(lambda procs: burner_pids(ns, "capped-tikv-0", procs)) as proc:
        time.sleep(3)
        start = time.time()
        time.sleep(15)
        end = time.time()
        time.sleep(1)
    settle(prom, end)
    cores = promql_cores(prom, ns, end, 15)
    # The counter's first and last samples in the window, and /proc over exactly that span:
    # a scrape missed on a busy machine shortens the span increase() extrapolates from, and
    # a burner starved meanwhile would then differ from /proc over the whole window.
    (t0, v0), (t1, v1) = sampled_span(prom, ns, "capped-tikv-0", end, 15)
    measured = proc.cores(start, end)
    spanned = proc.cores(t0, t1)
    counter = (v1 - v0) / (t1 - t0)
    print(
        f"\nburn 1.0 under a 250m limit over 15 s: Prometheus "
        f"{cores.get('capped-tikv-0')} /proc {measured:.3f}; the counter's samples "
        f"{t1 - t0:.1f} s apart: {counter:.3f}, /proc over them {spanned:.3f}"
    )
    # Under 0.25 only when the 2-core machine starves it; above it the cap would not hold.
    assert 0.1 < measured < 0.28, f"the capped burner used {measured:.3f} cores"
    assert cores["capped-tikv-0"] < 0.28, cores
    assert t1 - t0 >= 10 and agree(counter, spanned), (t0, t1, counter, spanned)


#: Two seconds of CPU in a child that exits, then the container idles: the exited child's
#: seconds must stay counted (a cgroup's cpuacct keeps them too).
SPIN_TWO_SECONDS = (
    "python3 -c 'import time\nt = time.process_time()\nwhile time.process_time() - t < 2: pass'"
    "; sleep 30"
)


def test_a_container_the_agent_runs_keeps_the_seconds_of_its_exited_child_in_prometheus(
    bed: RunBed, kubelet_prometheus: str
) -> None:
    ns, prom = bed.namespace, kubelet_prometheus
    bed.core.create_namespaced_pod(
        ns,
        {
            "metadata": {"name": "spinner"},
            "spec": {
                "nodeName": "node2",
                "restartPolicy": "Never",
                "automountServiceAccountToken": False,
                "containers": [
                    {"name": "spin", "image": "busybox", "command": ["sh", "-c", SPIN_TWO_SECONDS]}
                ],
            },
        },
    )
    expr = (
        f'container_cpu_usage_seconds_total{{job="kubelet",namespace="{ns}",pod="spinner",'
        f'container="spin"}}'
    )

    def seconds() -> float:
        got = prometheus.query(prom, expr)
        return float(got[0]["value"][1]) if got else 0.0

    # Reaped by the container's shell, the child's seconds are in the shell's cutime whole.
    wait_for(lambda: seconds() >= 1.9, 30, "the spinner's seconds in Prometheus")
    time.sleep(4)  # the child long gone, two scrapes since
    kept = seconds()
    time.sleep(2)
    later = seconds()
    print(f"\nspinner: 2 s of CPU in an exited child: {kept:.2f} s, {later:.2f} s 2 s later")
    assert 1.9 <= kept <= 2.3
    assert later >= kept, "the counter went down when the child exited"
    node = prometheus.query(
        prom, 'container_cpu_usage_seconds_total{job="kubelet",id="/",node="node2"}'
    )
    assert float(node[0]["value"][1]) >= later
