"""Benchmark: the controller's own cost on the test bed.

1. `apply` → first Job created: a BenchmarkRun is created and the Job list is polled every
   20 ms until its first Job exists; repeated (default 10), median and spread printed.
2. A 10-step sweep (threads 1..10, 3 s each): wall time from create to Succeeded, minus the
   time sysbench itself measured in each step = the controller's total overhead.

    make testbed-up && .venv/bin/python bench/controller_overhead.py [--repeat 10]
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "operator"), str(ROOT / "tests")]


from testbed.benching import bench_namespace, open_bed, start_controller, stop_controller  # noqa: E402
from testbed.runs import create_run, jobs_of, run_manifest, wait_run  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--step-seconds", type=int, default=3)
    args = p.parse_args()
    bed = open_bed()
    if bed is None:
        return 2
    tb, api, core, db = bed.tb, bed.api, bed.core, bed.db
    ns = "bench-" + secrets.token_hex(2) + "-ctl"
    bench_namespace(core, ns, db)
    ctl, _ = start_controller(tb, ns)
    try:
        time.sleep(2)
        # Warm: prepare the dataset once so the measured runs reuse it.
        create_run(api, ns, run_manifest("warm", db, threads=[1], durationSeconds=1))
        wait_run(api, ns, "warm", timeout=300)

        firsts = []
        for i in range(args.repeat):
            name = f"first-{i}"
            t0 = time.monotonic()
            create_run(api, ns, run_manifest(name, db, threads=[1], durationSeconds=1))
            while not jobs_of(api, ns, name):
                time.sleep(0.02)
            firsts.append(time.monotonic() - t0)
            wait_run(api, ns, name, timeout=300)
        print(f"apply -> first Job created, {args.repeat} runs (s): "
              + " ".join(f"{x:.2f}" for x in firsts))  # fmt: skip
        print(f"  median {statistics.median(firsts):.2f} s, min {min(firsts):.2f}, "
              f"max {max(firsts):.2f}")  # fmt: skip

        threads = list(range(1, args.steps + 1))
        t0 = time.monotonic()
        create_run(
            api, ns, run_manifest("sweep", db, threads=threads, durationSeconds=args.step_seconds)
        )
        run = wait_run(api, ns, "sweep", timeout=900)
        wall = time.monotonic() - t0
        steps = run["status"]["steps"]
        measured = sum(float(s["durationSeconds"]) for s in steps)
        print(f"{len(steps)}-step sweep, {args.step_seconds} s per step: wall {wall:.1f} s, "
              f"sysbench measured {measured:.1f} s, controller overhead {wall - measured:.1f} s "
              f"({(wall - measured) / len(steps):.2f} s per step, includes prepare check and "
              f"per-step pod start)")  # fmt: skip
    finally:
        stop_controller(ctl)
        core.delete_namespace(ns)
    return 0


if __name__ == "__main__":
    sys.exit(main())
