"""Benchmark: N queued runs and M idle schedules on one controller (the queue's cost).

On the running test bed, with one controller watching one namespace:

1. alone: `--alone` short runs (one step of `--step-seconds`, 1 thread) one after another,
   nothing else in the namespace: each run's start-to-Succeeded time, and the API server's
   request rate meanwhile (the baseline: one active run, its Jobs, the test bed's own
   controllers);
2. queue: M BenchmarkSchedules that are not due (yearly cron), then N runs on the same
   target created at once. Once every run has arrived (has a phase), over the next
   `--window` completions: each run's start-to-Succeeded time, the gap between one run's
   Succeeded and the next one's start, the API server's request rate; the requests above
   the alone baseline are what the waiting runs and idle schedules cost;
3. delete: the remaining runs deleted at once (one deletecollection call, as
   `kubectl delete benchmarkruns --all` does per object): the time until none is left.

Times are taken by this script from a watch on the runs (client clock, millisecond
resolution): "start" is the first event showing a phase past Pending, "end" the first
showing Succeeded. Request counts are the sum of `apiserver_request_total` on the API
server's /metrics. The controller's CPU seconds and peak RSS come from /proc.

    make testbed-up && .venv/bin/python bench/scale.py [--runs 500 --schedules 100]
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import secrets
import statistics
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "operator"), str(ROOT / "tests")]

from kubernetes import client, watch  # noqa: E402

from testbed.benching import bench_namespace, open_bed, start_controller, stop_controller  # noqa: E402
from testbed.kube import wait_for as _wait_for  # noqa: E402
from testbed.runs import GROUP, PLURAL, VERSION, create_run, run_manifest  # noqa: E402

ACTIVE = ("Preflight", "Preparing", "Running")
DONE = ("Succeeded", "Failed", "Cancelled")
METRIC = re.compile(r"^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$")


class Watcher:
    """Client-side times of each run's start and end, from one watch on the namespace."""

    def __init__(self, api: client.ApiClient, ns: str) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.ns = ns
        self.phase: dict[str, str] = {}
        self.start: dict[str, float] = {}
        self.end: dict[str, float] = {}
        self.stop = False
        self.lock = threading.Lock()
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        rv = None
        while not self.stop:
            w = watch.Watch()
            try:
                for ev in w.stream(
                    self.custom.list_namespaced_custom_object, GROUP, VERSION, self.ns, PLURAL,
                    resource_version=rv, timeout_seconds=60,
                ):  # fmt: skip
                    obj = ev["object"]
                    rv = obj["metadata"].get("resourceVersion", rv)
                    name, now = obj["metadata"]["name"], time.monotonic()
                    phase = (obj.get("status") or {}).get("phase") or ""
                    with self.lock:
                        if ev["type"] == "DELETED":
                            self.phase.pop(name, None)
                            continue
                        self.phase[name] = phase
                        if (phase in ACTIVE or phase in DONE) and name not in self.start:
                            self.start[name] = now
                        if phase in DONE and name not in self.end:
                            self.end[name] = now
                    if self.stop:
                        return
            except Exception:
                rv = None
                time.sleep(0.5)

    def done(self) -> int:
        with self.lock:
            return len(self.end)


def api_requests(api: client.ApiClient) -> tuple[float, Counter[str]]:
    """The API server's request counter: total, and by verb and resource."""
    headers = {"Accept": "text/plain"}
    token = api.configuration.get_api_key_with_prefix("BearerToken")
    if token:
        headers["Authorization"] = token
    resp = api.call_api("GET", f"{api.configuration.host}/metrics", header_params=headers)
    resp.read()
    text = resp.data.decode()
    total, by = 0.0, Counter[str]()
    for line in text.splitlines():
        m = METRIC.match(line)
        if not m:
            continue
        labels = dict(kv.split("=", 1) for kv in m.group(1).split(","))
        value = float(m.group(2))
        total += value
        what = (
            f"{labels.get('verb', '').strip(chr(34))} {labels.get('resource', '').strip(chr(34))}"
        )
        by[what] += value
    return total, by


def wait_for(predicate: Any, timeout: float, what: str, interval: float = 0.3) -> Any:
    """testbed.kube.wait_for, resumed when a sleep is interrupted (seen once as errno 514)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return _wait_for(predicate, max(0.1, deadline - time.monotonic()), what, interval)
        except OSError:
            if time.monotonic() >= deadline:
                raise


def proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def schedule_manifest(name: str, run_spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "BenchmarkSchedule",
        "metadata": {"name": name},
        "spec": {"schedule": "0 0 1 1 *", "template": run_spec},
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=500)
    p.add_argument("--schedules", type=int, default=100)
    p.add_argument("--alone", type=int, default=5)
    p.add_argument("--window", type=int, default=20)
    p.add_argument("--step-seconds", type=int, default=2)
    args = p.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    bed = open_bed()
    if bed is None:
        return 2
    tb, api, core, db = bed.tb, bed.api, bed.core, bed.db
    custom = client.CustomObjectsApi(api)
    ns = "bench-" + secrets.token_hex(2) + "-scale"
    bench_namespace(core, ns, db)

    def manifest(name: str) -> dict[str, Any]:
        return run_manifest(name, db, threads=[1], durationSeconds=args.step_seconds)

    ctl, _ = start_controller(tb, ns, TIDB_BENCH_METRICS_PORT="0")
    watcher = Watcher(api, ns)
    try:
        create_run(api, ns, manifest("warm"))  # prepares the dataset the others reuse
        wait_for(lambda: "warm" in watcher.end, 300, "warm-up run")

        # ---- alone
        alone: list[float] = []
        r0, c0, t0 = api_requests(api)[0], proc_cpu(ctl.pid), time.monotonic()
        for i in range(args.alone):
            name = f"alone-{i}"
            create_run(api, ns, manifest(name))
            wait_for(lambda n=name: n in watcher.end, 300, name)  # type: ignore[misc]
            alone.append(watcher.end[name] - watcher.start[name])
        r1, c1, t1 = api_requests(api)[0], proc_cpu(ctl.pid), time.monotonic()
        alone_rate = (r1 - r0) / (t1 - t0)
        alone_cpu = (c1 - c0) / (t1 - t0)

        # ---- queue
        spec = manifest("template")["spec"]
        ta = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(
                lambda i: custom.create_namespaced_custom_object(
                    GROUP, VERSION, ns, "benchmarkschedules",
                    schedule_manifest(f"idle-{i:03d}", spec),
                ),
                range(args.schedules),
            ))  # fmt: skip
            names = [f"q-{i:03d}" for i in range(args.runs)]
            for name in names:  # in order: creation order is the queue's order
                create_run(api, ns, manifest(name))
        created = time.monotonic() - ta

        def arrived() -> bool:
            with watcher.lock:
                return all(watcher.phase.get(n) for n in names)

        wait_for(arrived, 600, "every queued run to arrive", interval=1)
        arrival = time.monotonic() - ta
        k0 = sum(1 for n in names if n in watcher.end)
        (q0, by0), c2, t2 = api_requests(api), proc_cpu(ctl.pid), time.monotonic()
        target = k0 + args.window

        def window_done() -> bool:
            return sum(1 for n in names if n in watcher.end) >= target

        wait_for(window_done, 60 * args.window, "the measured completions", interval=0.5)
        (q1, by1), c3, t3 = api_requests(api), proc_cpu(ctl.pid), time.monotonic()
        queue_rate = (q1 - q0) / (t3 - t2)
        queue_cpu = (c3 - c2) / (t3 - t2)
        measured = [n for n in names if n in watcher.end and watcher.start[n] >= t2 - 0.001]
        measured.sort(key=lambda n: watcher.start[n])
        in_queue = [watcher.end[n] - watcher.start[n] for n in measured]
        pairs = list(itertools.pairwise(measured))
        gaps = [watcher.start[b] - watcher.end[a] for a, b in pairs]
        order_kept = measured == sorted(measured)
        overlaps = sum(1 for a, b in pairs if watcher.start[b] < watcher.end[a])
        rss_queue = proc_peak_rss_mb(ctl.pid)
        med = statistics.median
        diff = {k: (by1[k] - by0[k]) / (t3 - t2) for k in by1}
        top = sorted(diff.items(), key=lambda kv: -kv[1])[:8]
        print(
            f"N={args.runs} queued runs (1 step of {args.step_seconds} s, 1 thread, one target), "
            f"M={args.schedules} idle schedules, window = {len(measured)} completions after all "
            f"had arrived ({created:.0f} s to create them, all arrived after {arrival:.0f} s)"
        )
        print(f"{'':38} {'alone':>12} {'in the queue':>14}")
        print(
            f"{'start -> Succeeded, median (s)':38} {med(alone):12.2f} {med(in_queue):14.2f}"
            f"   ratio {med(in_queue) / med(alone):.2f} (target <= 1.2)"
        )
        print(f"{'start -> Succeeded, max (s)':38} {max(alone):12.2f} {max(in_queue):14.2f}")
        print(
            f"{'gap Succeeded -> next start, median':38} {'':>12} {med(gaps):14.2f}"
            f"   max {max(gaps):.2f} (target median < 2 s)"
        )
        print(
            f"{'API server requests/s':38} {alone_rate:12.2f} {queue_rate:14.2f}"
            f"   attributable to the waiting runs and schedules: {queue_rate - alone_rate:+.2f} "
            f"(target < 2)"
        )
        print(f"{'controller CPU (cores)':38} {alone_cpu:12.3f} {queue_cpu:14.3f}")
        print(
            f"controller peak RSS {rss_queue:.0f} MB at the end of the window (target < 200); "
            f"CPU {c3:.1f} s in all by then"
        )
        print(f"queue order kept (creation order): {order_kept}; overlapping runs: {overlaps}")
        print("API requests/s in the window by verb and resource (top):")
        for what, rate in top:
            print(f"  {what:40} {rate:6.2f}")

        # ---- delete the rest
        remaining = sum(1 for n in names if n not in watcher.end)
        td = time.monotonic()
        custom.delete_collection_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)

        def gone() -> bool:
            return not custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)["items"]

        wait_for(gone, 600, "every run deleted", interval=0.2)
        deleted = time.monotonic() - td
        alive = ctl.poll() is None
        cpu_total = proc_cpu(ctl.pid)
        rss_peak = proc_peak_rss_mb(ctl.pid)
        print(
            f"deleting the remaining {remaining} runs: {deleted:.1f} s (target < 30); "
            f"controller alive: {alive}, peak RSS {rss_peak:.0f} MB, CPU {cpu_total:.1f} s in all"
        )
    finally:
        watcher.stop = True
        stop_controller(ctl)
        core.delete_namespace(ns)

    return 0


if __name__ == "__main__":
    sys.exit(main())
