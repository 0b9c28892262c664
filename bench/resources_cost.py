"""Benchmark: what measuring server resources costs per step (#26, docs/resources.md).

On the running test bed, a controller watching one namespace measures the same sweep of the
stand-in cluster `basic` (TiDB bound to MariaDB) twice per round: with `spec.metrics.source:
none` (the baseline) and reading the bed's Prometheus (cAdvisor series from the node agent).
Per step it prints the controller's CPU seconds (its process group, from /proc), the
Prometheus queries (Prometheus's own prometheus_http_requests_total for /api/v1/query) and
the wall time from create to Succeeded; medians over the rounds, and each against the
baseline.

    make testbed-up && .venv/bin/python bench/resources_cost.py [--rounds 3 --steps 6]
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "operator"), str(ROOT / "tests")]

from testbed import prometheus  # noqa: E402
from testbed.benching import bench_namespace, open_bed, start_controller, stop_controller  # noqa: E402
from testbed.cadvisor import CPU_OF_ANNOTATION  # noqa: E402
from testbed.kube import create_standin_cluster, wait_for  # noqa: E402
from testbed.procstat import CLK_TCK  # noqa: E402
from testbed.runs import create_run, run_manifest, wait_run  # noqa: E402


def group_cpu_seconds(pgid: int) -> float:
    """utime+stime (with reaped children) of every process in the process group."""
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid:  # field 5, pgrp, counted after the name
            total += sum(int(fields[i]) for i in (11, 12, 13, 14)) / CLK_TCK
    return total


def queries(url: str) -> float:
    found = prometheus.query(url, 'sum(prometheus_http_requests_total{handler="/api/v1/query"})')
    return float(found[0]["value"][1]) if found else 0.0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--step-seconds", type=int, default=3)
    args = p.parse_args()
    bed = open_bed()
    if bed is None:
        return 2
    tb, api, core, db = bed.tb, bed.api, bed.core, bed.db
    ns = "bench-" + secrets.token_hex(2) + "-res"
    bench_namespace(core, ns, db)
    create_standin_cluster(api, ns, "basic", {"pd": ["node2"], "tikv": ["node2", "node3", "node3"],
                                              "tidb": ["node3"]})  # fmt: skip
    core.patch_namespaced_pod(
        "basic-tidb-0", ns, {"metadata": {"annotations": {CPU_OF_ANNOTATION: "mariadb"}}}
    )
    url = prometheus.start(tb, prometheus.kubelet_job(tb))
    wait_for(lambda: prometheus.query(url, 'up{job="kubelet"} == 1'), 30, "kubelet job up")
    ctl, _ = start_controller(tb, ns)
    rows: dict[str, list[tuple[float, float, float]]] = {"none": [], "prometheus": []}
    try:
        threads = list(range(1, args.steps + 1))
        spec = {"cluster": {"name": "basic"}, "threads": threads,
                "durationSeconds": args.step_seconds}  # fmt: skip
        create_run(api, ns, run_manifest("warm", db, **spec, metrics={"source": "none"}))
        wait_run(api, ns, "warm", timeout=600)
        for r in range(args.rounds):
            for kind, metrics in (("none", {"source": "none"}), ("prometheus",
                                  {"source": "prometheus", "prometheusURL": url})):  # fmt: skip
                name = f"{kind}-{r}"
                cpu0, q0, t0 = group_cpu_seconds(ctl.pid), queries(url), time.monotonic()
                create_run(api, ns, run_manifest(name, db, **spec, metrics=metrics))
                run = wait_run(api, ns, name, timeout=600)
                assert run["status"]["phase"] == "Succeeded", run["status"].get("message")
                wall = time.monotonic() - t0
                n = len(run["status"]["steps"])
                # The query counter includes this script's own two reads of it.
                rows[kind].append(((group_cpu_seconds(ctl.pid) - cpu0) / n,
                                   (queries(url) - q0 - 1) / n, wall / n))  # fmt: skip
    finally:
        stop_controller(ctl)
        prometheus.stop(tb)
        core.delete_namespace(ns)
    med = {k: [statistics.median(c) for c in zip(*v, strict=True)] for k, v in rows.items()}
    print(f"{args.rounds} rounds of {args.steps} steps of {args.step_seconds} s; medians per step:")
    print(f"{'':28}{'metrics: none':>16}{'prometheus':>14}{'ratio':>8}")
    for i, what in enumerate(("controller CPU (s)", "Prometheus queries", "wall (s)")):
        base, with_ = med["none"][i], med["prometheus"][i]
        ratio = f"{with_ / base:.2f}" if base else "-"
        print(f"{what:28}{base:16.3f}{with_:14.3f}{ratio:>8}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
