"""A long run through the in-memory API (fake_kube), measuring what it writes per trial.

The run reconciler runs against FakeKube; each trial's client Jobs finish with a result and
an interval series, and each status patch is written as the Driver writes it (a JSON patch
of the changed steps when `steps_json_patch` exists in the code measured, else the merge
patch). Per trial it counts: the run's status size, the status patch bytes sent, the results
store bytes written and held, and the Jobs alive. The unit tests (tests/unit/reconcile/run/
test_status_size.py) and the benchmark (bench/status_size.py) share it; the benchmark also
runs it against an earlier checkout of the package for its baseline column, so it uses
nothing newer than the reconciler's constructor and FakeKube.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from testbed.fake_kube import FakeClock, FakeKube, merge_patch

NS = "bench"
BENCH = {"tidbbench.io/bench-node": "true"}
JSON = dict[str, Any]


def _size(doc: Any) -> int:
    """Bytes of `doc` as compact JSON (what goes over the wire, near enough)."""
    return len(json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode())


@dataclass(frozen=True)
class Row:
    """What a run had written once `trials` trials were recorded."""

    trials: int
    status_bytes: int
    patch_bytes: int
    store_written: int
    store_bytes: int
    jobs_alive: int


class CountingKube(FakeKube):
    """FakeKube that counts the results-store bytes written."""

    def __init__(self, clock: Callable[..., Any]) -> None:
        super().__init__(clock)
        self.store_written = 0

    def upsert_configmap(self, body: JSON) -> None:
        self.store_written += _size(body.get("data") or {})
        super().upsert_configmap(body)


def _result(threads: int, qps: float) -> JSON:
    p95 = 1.0 + threads / 100
    return {
        "v": 1, "ok": True,
        "result": {
            "workload": "oltp_read_write", "threads": threads, "clients": 1, "tps": qps / 20,
            "qps": qps, "readQps": qps * 0.7, "writeQps": qps * 0.2, "otherQps": qps * 0.1,
            "latencyMs": {"min": 0.2, "avg": p95 / 2, "max": p95 * 10, "percentile": 95,
                          "value": p95},
            "errorsPerSec": 0.0, "reconnectsPerSec": 0.0, "events": int(qps * 60),
            "durationSeconds": 60.0, "sysbenchVersion": "1.0.20",
        },
        "startedAt": "2024-06-01T02:00:00+00:00", "lateSeconds": 0.0, "late": False,
        "cpu": {"used": 0.4, "available": 4.0, "saturated": False},
        "notes": ["warm-up: a separate 30s run before measuring, discarded"],
        "histogram": [],
    }  # fmt: skip


def _log(qps: float) -> str:
    series = [{"t": 10.0 * (i + 1), "qps": qps} for i in range(6)]
    return "sysbench output...\nTIDB-BENCH-SERIES " + json.dumps({"series": series}) + "\n"


def _preflight(spec: Any, namespace: str, endpoint: Any) -> Any:
    from tidb_bench_operator.domain.preflight import CHECK_NAMES, CheckResult, evaluate
    from tidb_bench_operator.reconcile.run import PreflightOutcome

    found = [CheckResult(name=n, status="Pass", message="ok", stores=[]) for n in CHECK_NAMES]
    return PreflightOutcome(
        checks=found, verdict=evaluate(found, spec.preflight.policy),
        tidb_version="v8.1.0", server_version="8.0.11-TiDB-v8.1.0",
    )  # fmt: skip


def _steps_json_patch() -> Callable[[JSON, JSON], list[JSON] | None]:
    try:
        from tidb_bench_operator.domain.status import steps_json_patch
    except ImportError:  # an earlier checkout: merge patches only
        return lambda old, patch: None
    return steps_json_patch


def run_trials(threads: int, repeats: int, clients: int = 1) -> Iterator[Row]:
    """A run of `threads` thread counts x `repeats` rounds; a Row after every recorded trial."""
    from tidb_bench_operator.reconcile.run import RunReconciler

    clock = FakeClock()
    kube = CountingKube(clock)
    kube.add_secret(NS, "creds", {"user": "bench", "password": "secret"})
    for n in range(clients):
        kube.add_node(f"bench-{n}", BENCH)
    kube.add_node("db-1", {})
    kube.add_tidb_cluster(
        {
            "apiVersion": "pingcap.com/v1alpha1", "kind": "TidbCluster",
            "metadata": {"name": "basic", "namespace": NS},
            "spec": {"version": "v8.1.0", "pd": {"replicas": 3}, "tikv": {"replicas": 3},
                     "tidb": {"replicas": 2}},
        }
    )  # fmt: skip
    spec = {
        "cluster": {"name": "basic"}, "credentials": {"secretRef": {"name": "creds"}},
        "workloads": ["oltp_read_write"], "threads": [8 * (i + 1) for i in range(threads)],
        "clients": clients, "repeats": repeats, "durationSeconds": 60,
        "placement": {"nodeSelector": dict(BENCH)}, "preflight": {"policy": "Warn"},
    }  # fmt: skip
    body: JSON = {
        "apiVersion": "tidbbench.io/v1alpha1", "kind": "BenchmarkRun",
        "metadata": {"name": "long", "namespace": NS, "uid": "uid-long", "generation": 1,
                     "creationTimestamp": "2024-06-01T01:00:00Z"},
        "spec": spec,
    }  # fmt: skip
    kube.add_run(body)
    reconciler = RunReconciler(
        kube, preflight=_preflight, clock=clock, image="tidb-bench:test",
        scheduling_timeout=timedelta(seconds=120),
    )  # fmt: skip
    json_patch = _steps_json_patch()
    sent = 0

    def look() -> JSON:
        nonlocal sent
        stored = kube.runs[(NS, "long")]
        out = reconciler.reconcile(copy.deepcopy(stored))
        if out.status:
            ops = json_patch(stored.get("status") or {}, out.status)
            if ops is not None:
                sent += _size(ops)
                kube.json_patch_benchmark_run_status(NS, "long", ops)
            else:
                sent += _size({"status": out.status})
                stored["status"] = merge_patch(stored.get("status") or {}, out.status)
        clock.advance(1)
        return dict(kube.runs[(NS, "long")].get("status") or {})

    status = look()
    for _ in range(10):
        if status.get("phase") == "Preparing":
            prepared = {"v": 1, "ok": True, "action": "prepared", "reason": "missing",
                        "tables": 1, "seconds": 1.0}  # fmt: skip
            kube.finish_job(NS, "long-prepare", prepared)
        if status.get("phase") == "Running":
            break
        status = look()
    recorded = 0
    while status.get("phase") == "Running":
        step = status["steps"][status["currentStep"]]
        names = step.get("jobNames") or []
        if step.get("phase") != "Running" or not names:
            status = look()
            continue
        look()  # a look while the trial runs, as the Driver's every second
        for c, name in enumerate(names):
            qps = 1000.0 * step["threads"] * (1 + 0.01 * ((recorded + c) % 7))
            kube.finish_job(NS, name, _result(step["threads"], qps), log=_log(qps),
                            node=f"bench-{c}")  # fmt: skip
        clock.advance(60)
        status = look()
        recorded += 1
        yield Row(
            trials=recorded,
            status_bytes=_size(status),
            patch_bytes=sent,
            store_written=kube.store_written,
            store_bytes=sum(_size(cm.get("data") or {}) for cm in kube.configmaps.values()),
            jobs_alive=len(kube.job_names(NS)),
        )


def largest_run_steps_bytes() -> tuple[int, int, int]:
    """status.steps of the largest run the schema allows, at its widest: (bytes, steps,
    trials each step lists in status).

    11 workloads x 32 thread counts, 20 repeats plus 10 guard retries a step, 64 clients;
    every number the widest the parser lets through (2^64-1), every name and text the
    longest, notes and disturbances by the hundred: what status keeps of it is bounded
    whatever they are (StepStatus.bounded).
    """
    from datetime import UTC, datetime

    from tidb_bench_operator.domain.api.guard import MAX_DISTURBANCES, Disturbance, Guard
    from tidb_bench_operator.domain.api.results import Latency, StepResult
    from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec
    from tidb_bench_operator.domain.api.run_status import StepStatus
    from tidb_bench_operator.domain.api.trial import (
        MAX_STATUS_DISTURBANCES,
        MAX_STATUS_TRIALS,
        STATUS_DISTURBANCES,
        Trial,
    )
    from tidb_bench_operator.domain.api.verdicts import TrialSummary
    from tidb_bench_operator.domain.resources.bound import status_resources

    def limit(fields: Any, name: str, kind: str) -> int:
        return int(next(getattr(m, kind) for m in fields[name].metadata if hasattr(m, kind)))

    spec = BenchmarkRunSpec.model_fields
    steps = limit(spec, "workloads", "max_length") * limit(spec, "threads", "max_length")
    per_step = limit(spec, "repeats", "le") + limit(Guard.model_fields, "retries", "le")
    clients = limit(spec, "clients", "le")
    big, now = float(2**64 - 1), datetime(2026, 12, 2, tzinfo=UTC)
    result = StepResult(
        workload="oltp_read_write", threads=4096, clients=clients, tps=big, qps=big,
        read_qps=big, write_qps=big, other_qps=big, errors_per_sec=big,
        reconnects_per_sec=big, latency_ms=Latency(min=big, avg=big, max=big, percentile=100,
        value=big), events=2**53 - 1, duration_seconds=86400.0, sysbench_version="1" * 64,
    )  # fmt: skip
    seen = [
        Disturbance(at=now, source="Kubernetes", what="PodRestarted",
                    object="o" * 250 + f"{i:03}", message="m" * 4000)
        for i in range(MAX_DISTURBANCES)
    ]  # fmt: skip
    trial = Trial(
        round=19, qps=big, result=result, valid=False, client_saturated=True, finished_at=now,
        disturbed=MAX_DISTURBANCES, notes=["n" * 4000] * 50, disturbances=seen,
        cpu_ms_per_query=big,
    )  # fmt: skip
    step = StepStatus(
        index=steps - 1, workload="oltp_read_write", threads=4096, phase="Succeeded",
        started_at=now, finished_at=now, valid=False, client_saturated=True,
        notes=["n" * 4000] * 200, job_names=["j" * 63] * clients,
        pod_names=["p" * 63] * clients, trials=[trial] * per_step, disturbances=seen,
        qps_trials=TrialSummary(n=per_step, median=big, mean=big, ci_low=big, ci_high=big,
                                cv_percent=big, noisy=True),
        attempt=10, guard_retries=10, guard_wait_since=now,
    ).with_result(result)  # fmt: skip
    kept = step.bounded(
        max(1, MAX_STATUS_TRIALS // steps),
        max(STATUS_DISTURBANCES, MAX_STATUS_DISTURBANCES // steps),
    )
    kept.resources = status_resources(widest_resources(big, now), steps, steps - 1)
    one = _size(kept.model_dump(by_alias=True, exclude_none=True, mode="json"))
    return one * steps + 2, steps, len(kept.trials)


def widest_resources(big: float, now: Any) -> Any:
    """A step's resources block at its widest: 500 pods on 100 nodes, every text the longest
    the schema allows, every number 2^64 - 1 (what status keeps of it is bounded)."""
    from tidb_bench_operator.domain.api.step_resources import (
        Bottleneck,
        ComponentUsage,
        NodeResources,
        PodResources,
        StepResources,
    )  # fmt: skip

    pods = [
        PodResources(name=f"{i:03}" + "p" * 250, component="c" * 63, node="n" * 253, cores=big,
                     cpu_request=big, cpu_limit=big, utilization_percent=big, memory_bytes=big,
                     rx_bytes_per_sec=big, tx_bytes_per_sec=big)
        for i in range(500)
    ]  # fmt: skip
    return StepResources(
        source="s" * 512, window_start=now, window_end=now, server_cores=big, qps_per_core=big,
        cpu_ms_per_query=big, client_cores=big,
        components=[ComponentUsage(component="c" * 63, pods=2**53 - 1, cores=big,
                                   cpu_ms_per_query=big)] * 12,
        pods=pods,
        nodes=[NodeResources(name="n" * 253, cores=big, allocatable_cores=big,
                             pods=[p.name for p in pods[:50]])] * 100,
        bottleneck=Bottleneck(kind="component", subject="s" * 253, message="m" * 1024),
        notes=["n" * 2000] * 10,
    )  # fmt: skip
