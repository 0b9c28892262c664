"""Server resources per step (#26) on the test bed: real CPU of real processes, measured the
way kubelet and Prometheus measure it, in each step of a real run.

The TiDB stand-in pod is bound to MariaDB (the process that answers the run's SQL), so its
cores are MariaDB's; a TiKV stand-in with a CPU limit burns CPU during step 2 only. The run
reads the test's Prometheus (spec.metrics.prometheusURL), which scrapes the node agent's
cAdvisor series; the test reads the same processes from /proc over each step's window.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Any

import pytest

from e2e.conftest import Controller
from testbed import prometheus
from testbed.cadvisor import BURN_ANNOTATION, CPU_OF_ANNOTATION
from testbed.cluster import Testbed
from testbed.kube import standin_pod, wait_for
from testbed.procstat import CpuSampler, burner_pids, mariadb_pid
from testbed.runs import RunBed, why_not

pytestmark = pytest.mark.e2e

#: The TiKV stand-in's CPU limit, and what its burner asks for (capped at the limit).
LIMIT, BURN = "250m", "1.0"
#: Seconds between steps, in which the burner starts or stops.
PAUSE = 6


def cluster(bed: RunBed) -> None:
    """`basic`: PD and TiKV-1 on node2, TiKV-0 (limited to a quarter core) and TiDB on node3;
    TiDB bound to MariaDB."""
    bed.cluster("basic", {"pd": ["node2"], "tikv": ["node2"], "tidb": ["node3"]})
    pod = standin_pod("basic-tikv-1", bed.namespace, "basic", "tikv", "node3")
    pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": LIMIT}}
    bed.core.create_namespaced_pod(bed.namespace, pod)
    bed.annotate("basic-tidb-0", {CPU_OF_ANNOTATION: "mariadb"})


def run_body(bed: RunBed, name: str, url: str, **spec: Any) -> dict[str, Any]:
    settings: dict[str, Any] = {"threads": [2, 3, 4], "durationSeconds": 10, **spec}
    return bed.manifest(name, cluster={"name": "basic"}, metrics={"prometheusURL": url}, **settings)


def step_state(bed: RunBed, name: str, index: int) -> str | None:
    steps = (bed.get(name).get("status") or {}).get("steps") or []
    return steps[index].get("phase") if len(steps) > index else None


def at(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def pod_of(resources: dict[str, Any], name: str) -> dict[str, Any]:
    found = [p for p in resources.get("pods") or [] if p["name"] == name]
    assert found, f"{name} not in {resources}"
    return found[0]


def test_every_step_has_cores_per_component_pod_and_node_and_a_burner_in_step_2_is_named_there_only(
    bed: RunBed, testbed: Testbed, kubelet_prometheus: str, controller: Controller
) -> None:
    cluster(bed)
    ns = bed.namespace

    def burner(procs: dict[int, Any]) -> list[int]:
        return burner_pids(ns, "basic-tikv-1", procs)

    # A pause between steps lets the burner start before step 2's Job and stop before step
    # 3's: step 2's whole window has it, steps 1 and 3 none of it, however slow the machine.
    body = run_body(bed, "sweep", kubelet_prometheus, pauseSeconds=PAUSE)
    with (
        CpuSampler(lambda procs: [mariadb_pid(testbed.state) or 0]) as db_proc,
        CpuSampler(burner) as burn_proc,
    ):
        bed.create(body)
        wait_for(lambda: step_state(bed, "sweep", 0) == "Succeeded", 120, "step 1 recorded")
        bed.annotate("basic-tikv-1", {BURN_ANNOTATION: BURN})
        wait_for(lambda: burner_pids(ns, "basic-tikv-1"), 10, "the burner")
        assert step_state(bed, "sweep", 1) in (None, "Pending"), "step 2 began before the burner"
        wait_for(lambda: step_state(bed, "sweep", 1) == "Succeeded", 120, "step 2 recorded")
        bed.annotate("basic-tikv-1", {BURN_ANNOTATION: None})
        wait_for(lambda: not burner_pids(ns, "basic-tikv-1"), 10, "the burner gone")
        assert step_state(bed, "sweep", 2) in (None, "Pending"), "step 3 began with the burner"
        run = bed.wait("sweep", timeout=240)
    st = run["status"]
    assert st["phase"] == "Succeeded", why_not(st)
    lines = []
    for step in st["steps"]:
        r = step.get("resources") or {}
        assert not r.get("unavailable"), r
        start, end = at(r["windowStart"]), at(r["windowEnd"])
        proc = db_proc.cores(start, end)
        tidb = pod_of(r, "basic-tidb-0")
        components = {c["component"]: c for c in r["components"]}
        nodes = {n["name"]: n for n in r["nodes"]}
        lines.append(
            f"step {step['index'] + 1} ({step['threads']} threads, {end - start:.1f} s): "
            f"{step['qps']:,.0f} QPS; basic-tidb-0 status {tidb['cores']:.3f} /proc {proc:.3f} "
            f"cores; burner /proc {burn_proc.cores(start, end):.3f} cores; "
            f"{r['qpsPerCore']:,.0f} QPS per core; components "
            f"{ {k: v['cores'] for k, v in components.items()} }; verdict {r['bottleneck']}"
        )
        assert {"pd", "tikv", "tidb"} <= set(components), r
        assert {"node2", "node3"} <= set(nodes), r
        assert "basic-tidb-0" in nodes["node3"]["pods"], r
        assert r["qpsPerCore"] > 0 and r["cpuMsPerQuery"] > 0, r
        assert proc > 0.05, f"MariaDB used {proc:.3f} cores in step {step['index'] + 1}"
        assert abs(tidb["cores"] - proc) <= 0.10 * proc, lines[-1]
    print("\n" + "\n".join(lines))
    burnt = [
        burn_proc.cores(at(s["resources"]["windowStart"]), at(s["resources"]["windowEnd"]))
        for s in st["steps"]
    ]
    assert burnt[1] > 0.6 * 0.25 and burnt[0] < 0.01 and burnt[2] < 0.01, (
        f"burner /proc cores per step {burnt}"
    )
    verdicts = [s["resources"]["bottleneck"] for s in st["steps"]]
    assert verdicts[1]["kind"] == "component" and verdicts[1]["subject"] == "basic-tikv-1", verdicts
    assert "basic-tikv-1" in verdicts[1]["message"], verdicts
    for v in (verdicts[0], verdicts[2]):
        assert v.get("subject") != "basic-tikv-1" and "basic-tikv-1" not in v["message"], verdicts
    # Without the burner the bound is where the CPU went: MariaDB, whose CPU the TiDB pod
    # carries, is the busiest server process (/proc above), and the verdict names that pod.
    for s in (st["steps"][0], st["steps"][2]):
        r = s["resources"]
        server = [p for p in r["pods"] if p["component"] != "client"]
        busiest = max(server, key=lambda p: p.get("cores") or 0)
        assert busiest["name"] == "basic-tidb-0", r["pods"]
        assert r["bottleneck"]["kind"] in ("none", "component"), r["bottleneck"]
        assert "basic-tidb-0" in r["bottleneck"]["message"], r["bottleneck"]


def test_prometheus_stopped_mid_run_makes_the_later_steps_say_unavailable_and_the_run_succeeds(
    bed: RunBed, testbed: Testbed, kubelet_prometheus: str, controller: Controller
) -> None:
    cluster(bed)
    bed.create(run_body(bed, "blind", kubelet_prometheus, threads=[2, 3], durationSeconds=4))
    wait_for(lambda: step_state(bed, "blind", 0) == "Succeeded", 120, "step 1 recorded")
    prometheus.stop(testbed, worker=os.environ.get("PYTEST_XDIST_WORKER"))
    run = bed.wait("blind", timeout=180)
    st = run["status"]
    assert st["phase"] == "Succeeded", why_not(st)
    first, second = (s["resources"] for s in st["steps"])
    assert first.get("unavailable") is None and first["serverCores"] > 0, first
    assert second["unavailable"], second
    assert second["bottleneck"]["message"].startswith("server metrics unavailable: "), second
    assert st["steps"][1]["valid"] is True, why_not(st)
    print(f"\nstep 2 with Prometheus stopped: {second['bottleneck']['message']}")
