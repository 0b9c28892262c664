"""`make soak`: a schedule firing every minute for SOAK_MINUTES (default 30) on the test bed,
with faults injected at random — the controller killed, a client pod deleted, the API server
restarted. At the end every run must be terminal and none may have blocked the queue.

    TIDB_BENCH_SOAK_MINUTES   how long the schedule fires (30)
    TIDB_BENCH_SOAK_SEED      the faults' random seed (printed, so a run can be replayed)

Prints the counts (runs, Succeeded, Failed and why, faults of each kind) and exits 1 when a
run is left non-terminal, a run stayed active longer than ACTIVE_BOUND, or the schedule
created fewer runs than its minutes allow (a stuck run would hold the queue: Forbid).
"""

from __future__ import annotations

import collections
import os
import random
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException

from testbed.bed import bring_up, tear_down
from testbed.cluster import Testbed, stop_pidfile
from testbed.crds import install_project_crds
from testbed.kube import api_client, wait_for
from testbed.runs import GROUP, VERSION, run_manifest
from testbed.services import mariadb_info

#: A run that is not terminal this long after its creation counts as stuck.
ACTIVE_BOUND = 600.0
#: Seconds between two faults: uniform in this range.
FAULT_GAP = (20.0, 70.0)


def log(text: str) -> None:
    print(time.strftime("%H:%M:%S ") + text, flush=True)


class Controller:
    """`tidb-bench operator` as a subprocess that can be killed and started again."""

    def __init__(self, tb: Testbed, namespace: str) -> None:
        self.tb, self.namespace = tb, namespace
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = tb.logs / f"controller-soak-{namespace}.log"

    def start(self) -> None:
        env = {**os.environ, "KUBECONFIG": str(self.tb.kubeconfig), "TIDB_BENCH_LIVENESS": "",
               "TIDB_BENCH_METRICS_PORT": "0"}  # fmt: skip
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [str(Path(sys.executable).parent / "tidb-bench"), "operator",
                 f"--namespace={self.namespace}"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                start_new_session=True,
            )  # fmt: skip

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def schedule_body(mariadb: dict[str, Any]) -> dict[str, Any]:
    template = run_manifest(
        "soak", mariadb, threads=[1, 2], durationSeconds=5, ttlSecondsAfterFinished=0
    )["spec"]
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "BenchmarkSchedule",
        "metadata": {"name": "soak"},
        "spec": {
            "schedule": "* * * * *",
            "successfulRunsHistoryLimit": 100,
            "failedRunsHistoryLimit": 100,
            "template": template,
        },
    }


def main() -> int:
    minutes = float(os.environ.get("TIDB_BENCH_SOAK_MINUTES", "30"))
    seed = int(os.environ.get("TIDB_BENCH_SOAK_SEED", str(secrets.randbits(32))))
    rng = random.Random(seed)
    log(f"soak: {minutes:g} min, seed {seed}")
    tb = Testbed()
    started = bring_up(tb)
    try:
        return soak(tb, minutes, rng)
    finally:
        if started:
            for _ in range(3):  # a stop interrupted by a dying child's signal is tried again
                try:
                    tear_down(tb)
                    break
                except OSError as exc:
                    log(f"test bed stop interrupted ({exc}): again")


def soak(tb: Testbed, minutes: float, rng: random.Random) -> int:
    """The soak on a test bed that is up; 0 when every run ended and none held the queue."""
    api = api_client(tb)
    install_project_crds(api)
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    ns = f"soak-{secrets.token_hex(2)}"
    core.create_namespace({"metadata": {"name": ns}})
    wait_for(lambda: core.list_namespaced_service_account(ns).items, 30, "default SA")
    db = mariadb_info(tb)
    core.create_namespaced_secret(
        ns, {"metadata": {"name": "db"},
             "stringData": {"user": str(db["user"]), "password": str(db["password"])}},
    )  # fmt: skip
    ctl = Controller(tb, ns)
    ctl.start()
    custom.create_namespaced_custom_object(GROUP, VERSION, ns, "benchmarkschedules",
                                           schedule_body(db))  # fmt: skip
    seen: dict[str, dict[str, Any]] = {}
    first_seen: dict[str, float] = {}
    ended_at: dict[str, float] = {}
    faults: collections.Counter[str] = collections.Counter()

    def look() -> None:
        try:
            runs = custom.list_namespaced_custom_object(GROUP, VERSION, ns, "benchmarkruns")
        except (ApiException, OSError, Exception):
            return
        now = time.monotonic()
        for run in runs["items"]:
            name = run["metadata"]["name"]
            seen[name] = run
            first_seen.setdefault(name, now)
            if (run.get("status") or {}).get("phase") in ("Succeeded", "Failed", "Cancelled"):
                ended_at.setdefault(name, now)

    def fault() -> None:
        kind = rng.choice(["controller", "pod", "apiserver"])
        if kind == "controller":
            ctl.kill()
            time.sleep(rng.uniform(1, 8))
            ctl.start()
        elif kind == "pod":
            pods = [p for p in core.list_namespaced_pod(ns, label_selector="tidbbench.io/role=step").items
                    if p.status.phase == "Running" and not p.metadata.deletion_timestamp]  # fmt: skip
            if not pods:
                return
            core.delete_namespaced_pod(rng.choice(pods).metadata.name, ns)
        else:
            stop_pidfile(tb.state / "kube-apiserver.pid")
            time.sleep(rng.uniform(1, 5))
            tb._start_apiserver()
        faults[kind] += 1
        log(f"fault: {kind}")

    end = time.monotonic() + minutes * 60
    next_fault = time.monotonic() + rng.uniform(*FAULT_GAP)
    try:
        while time.monotonic() < end:
            look()
            if time.monotonic() >= next_fault:
                try:
                    fault()
                except Exception as exc:
                    log(f"fault not injected: {exc}")
                next_fault = time.monotonic() + rng.uniform(*FAULT_GAP)
            time.sleep(2)
        custom.patch_namespaced_custom_object(GROUP, VERSION, ns, "benchmarkschedules", "soak",
                                              {"spec": {"suspend": True}})  # fmt: skip
        deadline = time.monotonic() + ACTIVE_BOUND
        while time.monotonic() < deadline:
            look()
            if all(n in ended_at for n in seen):
                break
            time.sleep(2)
    finally:
        ctl.kill()
    phases: collections.Counter[str] = collections.Counter()
    reasons: collections.Counter[str] = collections.Counter()
    longest = 0.0
    for name, run in seen.items():
        st = run.get("status") or {}
        phases[st.get("phase", "none")] += 1
        if st.get("phase") == "Failed":
            failed = next((c for c in st.get("conditions") or [] if c["type"] == "Failed"), {})
            reasons[str(failed.get("reason"))] += 1
        longest = max(longest, ended_at.get(name, time.monotonic()) - first_seen[name])
    stuck = [n for n in seen if n not in ended_at]
    log(f"runs: {len(seen)}; phases: {dict(phases)}; failed by reason: {dict(reasons)}")
    log(f"faults: {dict(faults)}; longest active run: {longest:.0f}s; not terminal: {stuck}")
    problems = []
    if stuck:
        problems.append(f"runs left non-terminal: {stuck}")
    if longest > ACTIVE_BOUND:
        problems.append(f"a run was active {longest:.0f}s (> {ACTIVE_BOUND:.0f}s)")
    if len(seen) < 0.6 * minutes:
        problems.append(f"only {len(seen)} runs in {minutes:g} min: the queue was held")
    for p in problems:
        log("FAIL: " + p)
    if not problems:
        core.delete_namespace(ns)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
