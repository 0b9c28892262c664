"""What the BenchmarkRun reconciler's tests share: a run, the world around it, a fake clock.

Each test plays the API server (status is merged back the way a merge patch is), the Job
controller and the scheduler (FakeKube.finish_job / leave_unschedulable), and the
preflight gate (a scripted function), and reads what the reconciler did from the status
it patched, the Jobs it created and the Events it posted.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from testbed.fake_kube import FakeClock, FakeKube, merge_patch
from tidb_bench_operator.domain.api.results import Latency, StepResult
from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec
from tidb_bench_operator.domain.api.runner_message import SERIES_MARKER
from tidb_bench_operator.domain.manifests import Endpoint
from tidb_bench_operator.domain.preflight import CHECK_NAMES, CheckResult, evaluate
from tidb_bench_operator.domain.queue import ADMITTED, Turn, queue_entry, turn
from tidb_bench_operator.domain.results_store import StoredResults, read_store
from tidb_bench_operator.domain.sysbench import parse_sysbench_output, to_step_result
from tidb_bench_operator.domain.trust.reach import Reach
from tidb_bench_operator.reconcile.run import Outcome, PreflightOutcome, RunReconciler

NS = "bench"
CLUSTER_NS = "tidb-cluster"
SECRET = "bench-creds"
PASSWORD = "pa55-w0rd-never-shown"
BENCH_LABEL = {"tidbbench.io/bench-node": "true"}
SYSBENCH = Path(__file__).resolve().parents[3] / "data" / "sysbench"
JSON = dict[str, Any]
#: The bed's platform team lets runs name the clusters of CLUSTER_NS (the shared run is in NS);
#: tests/unit/reconcile/run/test_reach.py tests the defaults.
BED_REACH = Reach(cluster_namespaces=frozenset({CLUSTER_NS}))


# --- building blocks ----------------------------------------------------------------------------


def run_spec(**overrides: Any) -> JSON:
    spec: JSON = {
        "cluster": {"name": "basic", "namespace": CLUSTER_NS},
        "credentials": {"secretRef": {"name": SECRET}},
        "dataset": {"tables": 2, "tableSize": 1000},
        "workloads": ["oltp_point_select"],
        "threads": [8, 16, 32],
        "durationSeconds": 30,
        "reportIntervalSeconds": 10,
        "placement": {"nodeSelector": dict(BENCH_LABEL)},
        "preflight": {"policy": "Enforce", "timeoutSeconds": 60},
    }
    spec.update(overrides)
    return spec


def run_body(
    name: str = "sweep",
    spec: JSON | None = None,
    *,
    namespace: str = NS,
    created: str = "2024-06-01T01:00:00Z",
    status: JSON | None = None,
) -> JSON:
    body: JSON = {
        "apiVersion": "tidbbench.io/v1alpha1",
        "kind": "BenchmarkRun",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}",
            "generation": 1,
            "creationTimestamp": created,
        },
        "spec": spec if spec is not None else run_spec(),
    }
    if status is not None:
        body["status"] = status
    return body


def tidb_cluster() -> JSON:
    return {
        "apiVersion": "pingcap.com/v1alpha1",
        "kind": "TidbCluster",
        "metadata": {"name": "basic", "namespace": CLUSTER_NS},
        "spec": {
            "version": "v8.1.0",
            "pd": {"baseImage": "pingcap/pd", "replicas": 3},
            "tikv": {"baseImage": "pingcap/tikv", "replicas": 4},
            "tidb": {"baseImage": "pingcap/tidb", "replicas": 2},
        },
    }


def result_doc(
    threads: int,
    qps: float,
    p95: float,
    *,
    workload: str = "oltp_point_select",
    late: bool = False,
    late_seconds: float = 0.0,
    notes: Sequence[str] = (),
) -> JSON:
    """A runner's result document (runner.run_step's shape) with chosen numbers."""
    result = StepResult(
        workload=workload,
        threads=threads,
        tps=qps,
        qps=qps,
        read_qps=qps,
        write_qps=0.0,
        other_qps=0.0,
        latency_ms=Latency(min=0.2, avg=round(p95 / 2, 2), max=p95 * 10, percentile=95, value=p95),
        errors_per_sec=0.0,
        reconnects_per_sec=0.0,
        events=int(qps * 30),
        duration_seconds=30.0,
        sysbench_version="1.0.20",
    )
    return {
        "v": 1,
        "ok": True,
        "result": result.to_json_dict(),
        "startedAt": "2024-06-01T02:00:00+00:00",
        "lateSeconds": late_seconds,
        "late": late,
        "cpu": {"used": 0.4, "available": 4.0, "saturated": False},
        "notes": list(notes),
        "histogram": [],
    }


def recorded_doc(filename: str) -> JSON:
    """A result document built from a recorded sysbench output, histogram included."""
    parsed = parse_sysbench_output((SYSBENCH / filename).read_text())
    step = to_step_result(parsed, None)
    return {
        "v": 1,
        "ok": True,
        "result": step.to_json_dict(),
        "lateSeconds": 0.1,
        "late": False,
        "cpu": {"used": 0.5, "available": 2.0, "saturated": False},
        "notes": list(parsed.notes),
        "histogram": [[v, c] for v, c in parsed.histogram or []],
    }


def series_log(qps: Sequence[float]) -> str:
    series = [{"t": 10.0 * (i + 1), "qps": q} for i, q in enumerate(qps)]
    return "sysbench output...\n" + SERIES_MARKER + json.dumps({"series": series}) + "\n"


def checks(**statuses: str) -> list[CheckResult]:
    """All seven checks Pass, except those named (with `_` for `-`)."""
    out = []
    for name in CHECK_NAMES:
        status = statuses.get(name.replace("-", "_"), "Pass")
        message = "ok" if status == "Pass" else f"{name} is not fair: leader_size 689 vs 120"
        out.append(CheckResult(name=name, status=status, message=message, stores=[]))  # type: ignore[arg-type]
    return out


class ScriptedPreflight:
    """The preflight gate as a function: each call returns the next scripted round of checks."""

    def __init__(self, *rounds: list[CheckResult]) -> None:
        self.rounds = list(rounds) or [checks()]
        self.calls: list[tuple[str, Endpoint]] = []

    def __call__(
        self, spec: BenchmarkRunSpec, namespace: str, endpoint: Endpoint
    ) -> PreflightOutcome:
        self.calls.append((namespace, endpoint))
        found = self.rounds[min(len(self.calls), len(self.rounds)) - 1]
        return PreflightOutcome(
            checks=found,
            verdict=evaluate(found, spec.preflight.policy),
            tidb_version="v8.1.0",
            server_version="8.0.11-TiDB-v8.1.0",
        )


class Bed:
    """One BenchmarkRun, the world around it, and the controller reconciling it."""

    def __init__(
        self,
        spec: JSON | None = None,
        *,
        name: str = "sweep",
        preflight: ScriptedPreflight | None = None,
        with_secret: bool = True,
        reach: Reach = BED_REACH,
    ) -> None:
        self.clock = FakeClock()
        self.kube = FakeKube(self.clock)
        if with_secret:
            self.kube.add_secret(NS, SECRET, {"user": "bench", "password": PASSWORD})
        self.kube.add_node("db-1", {"tidbbench.test/db": "true"})
        self.kube.add_node("bench-1", BENCH_LABEL)
        self.kube.add_node("bench-2", BENCH_LABEL)
        self.kube.add_tidb_cluster(tidb_cluster())
        self.preflight = preflight or ScriptedPreflight()
        self.reconciler = RunReconciler(
            self.kube,
            preflight=self.preflight,
            clock=self.clock,
            image="tidb-bench:test",
            scheduling_timeout=timedelta(seconds=120),
            reach=reach,
        )
        self.body = run_body(name, spec if spec is not None else run_spec())
        self.kube.add_run(self.body)
        self.patches: list[JSON] = []

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])

    @property
    def status(self) -> JSON:
        return dict(self.body.get("status") or {})

    def turn(self) -> Turn:
        """The run's place in its cluster's queue, as the controller's in-memory queue says."""
        found = queue_entry(self.body)
        if found is None:
            return ADMITTED
        key, me = found
        listed = [queue_entry(r) for r in self.kube.benchmark_runs()]
        return turn([e for k, e in filter(None, listed) if k == key], me.uid)

    def reconcile(self) -> Outcome:
        """One reconcile; its status patch is merged into the stored run."""
        out = self.reconciler.reconcile(copy.deepcopy(self.body), self.turn())
        self.patches.append(out.status)
        self.body["status"] = merge_patch(self.body.get("status") or {}, out.status)
        self.kube.add_run(self.body)
        return out

    def reconcile_until(self, phase: str, limit: int = 10) -> None:
        for _ in range(limit):
            if self.status.get("phase") == phase:
                return
            self.reconcile()
        assert self.status.get("phase") == phase, self.status

    def to_running(self) -> None:
        """Through Pending, Preflight and a prepared dataset, to the first step's Jobs.

        The reconcile that sees the dataset ready also starts the first step, so on return
        its Jobs exist and it is Running.
        """
        self.prepare()
        self.reconcile_until("Running")
        assert self.step(0)["phase"] == "Running", self.status

    def prepare(self) -> None:
        """Through Pending and Preflight to Preparing; the dataset Job then reports it prepared."""
        self.reconcile_until("Preparing")
        self.kube.finish_job(NS, f"{self.name}-prepare", PREPARED)

    def failed_with(self, reason: str) -> JSON:
        """Assert the run Failed with this reason (its Failed condition); its status."""
        st = self.status
        assert st["phase"] == "Failed", st
        assert self.condition("Failed")["reason"] == reason
        return st

    def condition(self, type_: str) -> JSON:
        return next(c for c in self.status.get("conditions", []) if c["type"] == type_)

    def step(self, index: int) -> JSON:
        return dict(self.status["steps"][index])


PREPARED = {
    "v": 1,
    "ok": True,
    "action": "prepared",
    "reason": "missing",
    "tables": 2,
    "seconds": 4.2,
}


def stored(bed: Bed) -> StoredResults:
    """The run's results as the store holds them (every ConfigMap of the namespace)."""
    maps = {name: dict(cm["data"]) for (ns, name), cm in bed.kube.configmaps.items() if ns == NS}
    return read_store("sweep-results", maps)


def everything_written(bed: Bed) -> str:
    """All the reconciler ever wrote: status patches, Jobs, ConfigMaps, Events."""
    return json.dumps(
        [
            bed.patches,
            list(bed.kube.job_store.values()),
            list(bed.kube.configmaps.values()),
            bed.kube.events,
        ],
        default=str,
    )


SCHEDULER_SAYS = (
    "0/3 nodes are available: 1 node(s) didn't match pod anti-affinity rules, "
    "2 node(s) didn't match Pod's node affinity/selector."
)
