"""Benchmark: what the guard costs — the same sweep with spec.guard Off and Flag, side by side.

One controller (a subprocess, so its CPU time is its own), one stand-in TidbCluster `basic`
and a FakePD in this process. Runs alternate in ABBA order (off, on, on, off, …) so the
machine's drift falls on both; each pair's QPS ratio (on / off, per step, then the median
over the steps) and the controller's CPU seconds per run (utime + stime from /proc) are
printed, with their medians. The guard polls PD every `--pd-interval` seconds (default 10,
the spec's default) and looks at the cluster on every look at the running step.

    make testbed-up && make bench-guard        # or: .venv/bin/python bench/guard_overhead.py
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "operator"), str(ROOT / "tests")]

from testbed.benching import bench_namespace, open_bed, start_controller, stop_controller  # noqa: E402
from testbed.fake_pd import FakePD  # noqa: E402
from testbed.kube import create_standin_cluster  # noqa: E402
from testbed.runs import create_run, run_manifest, wait_run  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads) from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def sweep(name: str, db: dict[str, Any], pd_url: str, policy: str, args: Any) -> dict[str, Any]:
    body = run_manifest(
        name, db, threads=args.threads, durationSeconds=args.step_seconds,
        cluster={"name": "basic"}, preflight={"policy": "Off"},
        guard={"policy": policy, "pdIntervalSeconds": args.pd_interval},
    )  # fmt: skip
    body["spec"]["target"]["pdURL"] = pd_url
    return body


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pairs", type=int, default=2, help="ABBA pairs (each: one off, one on)")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--step-seconds", type=int, default=5)
    p.add_argument("--pd-interval", type=int, default=10)
    args = p.parse_args()
    bed = open_bed()
    if bed is None:
        return 2
    tb, api, core, db = bed.tb, bed.api, bed.core, bed.db
    ns = "bench-" + secrets.token_hex(2) + "-guard"
    bench_namespace(core, ns, db)
    create_standin_cluster(
        api, ns, "basic", {"pd": ["node2"], "tikv": ["node2", "node3"], "tidb": ["node3"]}
    )
    ctl, _ = start_controller(tb, ns, TIDB_BENCH_METRICS_PORT="0")
    results: dict[str, list[tuple[list[float], float, int]]] = {"Off": [], "Flag": []}
    try:
        with FakePD() as pd:
            create_run(api, ns, run_manifest("warm", db, threads=[1], durationSeconds=1))
            wait_run(api, ns, "warm", timeout=300)
            order = []
            for i in range(args.pairs):
                order += ["Off", "Flag"] if i % 2 == 0 else ["Flag", "Off"]
            for i, policy in enumerate(order):
                name = f"{policy.lower()}-{i}"
                cpu0 = cpu_seconds(ctl.pid)
                create_run(api, ns, sweep(name, db, pd.url, policy, args))
                run = wait_run(api, ns, name, timeout=600)
                cpu = cpu_seconds(ctl.pid) - cpu0
                steps = run["status"]["steps"]
                qps = [float(s["qps"]) for s in steps]
                disturbed = sum(len(s.get("disturbances") or []) for s in steps)
                results[policy].append((qps, cpu, disturbed))
                print(f"{name:8} {run['status']['phase']:9} QPS by step "
                      + " ".join(f"{q:,.0f}" for q in qps)
                      + f"  controller CPU {cpu:.2f} s  disturbances {disturbed}")  # fmt: skip
    finally:
        stop_controller(ctl)
        core.delete_namespace(ns)
    ratios = [
        statistics.median(on / off for on, off in zip(on_qps, off_qps, strict=True))
        for (off_qps, _, _), (on_qps, _, _) in zip(results["Off"], results["Flag"], strict=True)
    ]
    cpu_off = statistics.median(c for _, c, _ in results["Off"])
    cpu_on = statistics.median(c for _, c, _ in results["Flag"])
    print()
    print("| | guard Off | guard Flag |")
    print("|---|---:|---:|")
    for k, t in enumerate(args.threads):
        off = statistics.median(q[k] for q, _, _ in results["Off"])
        on = statistics.median(q[k] for q, _, _ in results["Flag"])
        print(f"| QPS at {t} thread(s), median of {args.pairs} | {off:,.0f} | {on:,.0f} |")
    print(f"| controller CPU per run (s), median | {cpu_off:.2f} | {cpu_on:.2f} |")
    print("per-pair QPS ratio on/off (median over steps): "
          + " ".join(f"{r:.3f}" for r in ratios)
          + f"; median {statistics.median(ratios):.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
