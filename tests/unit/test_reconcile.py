"""The BenchmarkRun state machine, driven through an in-memory Kubernetes and a fake clock.

Each test plays the API server (status is merged back the way a merge patch is), the Job
controller and the scheduler (FakeKube.finish_job / leave_unschedulable), and the
preflight gate (a scripted function), and reads what the reconciler did from the status
it patched, the Jobs it created and the Events it posted.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from testbed.fake_kube import FakeClock, FakeKube
from tidb_bench_operator.domain.api.results import Latency, StepResult
from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec
from tidb_bench_operator.domain.api.runner_message import SERIES_MARKER
from tidb_bench_operator.domain.fingerprint import Fingerprint, server_fingerprint
from tidb_bench_operator.domain.manifests import Endpoint
from tidb_bench_operator.domain.preflight import CHECK_NAMES, CheckResult, evaluate
from tidb_bench_operator.domain.queue import ADMITTED, Turn, queue_entry, turn
from tidb_bench_operator.domain.results_store import StoredResults, read_store
from tidb_bench_operator.domain.sysbench import parse_sysbench_output, to_step_result
from tidb_bench_operator.errors import KubeError
from tidb_bench_operator.reconcile.run import Outcome, PreflightOutcome, RunReconciler
from tidb_bench_operator.reconcile.run.preflight import RETRY as PREFLIGHT_RETRY

NS = "bench"
CLUSTER_NS = "tidb-cluster"
SECRET = "bench-creds"
PASSWORD = "pa55-w0rd-never-shown"
BENCH_LABEL = {"tidbbench.io/bench-node": "true"}
SYSBENCH = Path(__file__).resolve().parents[1] / "data" / "sysbench"
JSON = dict[str, Any]


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


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386, as the API server applies kopf's status patch (null removes a key)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


class Bed:
    """One BenchmarkRun, the world around it, and the controller reconciling it."""

    def __init__(
        self,
        spec: JSON | None = None,
        *,
        name: str = "sweep",
        preflight: ScriptedPreflight | None = None,
        with_secret: bool = True,
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
        self.reconcile_until("Preparing")
        self.kube.finish_job(NS, f"{self.name}-prepare", PREPARED)
        self.reconcile_until("Running")
        assert self.step(0)["phase"] == "Running", self.status

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


# --- the happy path -----------------------------------------------------------------------------


def test_a_run_walks_pending_preflight_preparing_running_and_succeeds() -> None:
    bed = Bed(run_spec(slo={"latencyMs": 20}))

    # Pending → Preflight → Preparing in one reconcile: nothing makes the run wait.
    bed.reconcile()
    assert bed.status["phase"] == "Preparing"
    assert bed.status["startedAt"] == "2024-06-01T02:00:00Z"
    assert bed.condition("Waiting")["status"] == "False"
    assert [c["status"] for c in bed.status["preflight"]["checks"]] == ["Pass"] * 7
    assert bed.condition("PreflightPassed")["reason"] == "Passed"
    assert bed.status["environment"]["tidbVersion"] == "v8.1.0"
    assert bed.preflight.calls[0][1].host == "basic-tidb.tidb-cluster"
    assert bed.kube.job_names(NS) == ["sweep-prepare"]

    bed.clock.advance(1)
    bed.reconcile()
    assert bed.status["phase"] == "Preparing", "an unfinished prepare Job keeps the run waiting"
    assert bed.kube.job_names(NS) == ["sweep-prepare"]
    bed.kube.finish_job(NS, "sweep-prepare", PREPARED)
    bed.reconcile()
    assert bed.status["phase"] == "Running"
    assert bed.condition("DatasetReady")["reason"] == "Prepared"
    assert [(s["workload"], s["threads"], s["phase"]) for s in bed.status["steps"]] == [
        ("oltp_point_select", 8, "Running"),
        ("oltp_point_select", 16, "Pending"),
        ("oltp_point_select", 32, "Pending"),
    ], "the reconcile that sees the dataset ready starts the first step"

    numbers = {8: (20_000.0, 5.0), 16: (36_000.0, 9.0), 32: (38_000.0, 25.0)}
    for index, threads in enumerate((8, 16, 32)):
        # Started by the reconcile that entered Running or finished the previous step.
        job = f"sweep-s{index}-c0"
        assert job in bed.kube.job_names(NS)
        assert bed.step(index)["phase"] == "Running"
        bed.clock.advance(30)
        bed.reconcile()
        assert bed.step(index)["phase"] == "Running", "the Job has not finished yet"
        qps, p95 = numbers[threads]
        bed.kube.finish_job(NS, job, result_doc(threads, qps, p95), log=series_log([qps]))
        bed.clock.advance(2)
        bed.reconcile()
        assert bed.step(index)["phase"] == "Succeeded"
        assert bed.step(index)["qps"] == qps
        assert bed.step(index)["valid"] is True

    st = bed.status
    assert st["phase"] == "Succeeded"
    assert st["currentStep"] == 3
    assert st["summary"]["peakQps"] == 38_000.0
    assert st["summary"]["peakThreads"] == 32
    assert st["summary"]["recommendedThreads"] == 16, "32 threads break the 20 ms SLO"
    assert st["summary"]["recommendedQps"] == 36_000.0
    assert st["summary"]["headline"] == st["message"]
    assert bed.condition("Complete")["reason"] == "Succeeded"
    env = st["environment"]
    assert env["sysbenchVersion"] == "1.0.20"
    assert env["nodes"] == ["bench-1"]
    assert env["images"] == {
        "pd": "pingcap/pd:v8.1.0",
        "tikv": "pingcap/tikv:v8.1.0",
        "tidb": "pingcap/tidb:v8.1.0",
    }
    assert env["replicas"] == {"pd": 3, "tikv": 4, "tidb": 2}
    reasons = bed.kube.event_reasons()
    phases = [r for r in reasons if r in ("Preflight", "Preparing", "DatasetReady", "Running")]
    assert phases == ["Preflight", "Preparing", "DatasetReady", "Running"]
    steps = [r for r in reasons if r in ("StepStarted", "StepSucceeded")]
    assert steps == ["StepStarted", "StepSucceeded"] * 3
    assert reasons.count("StepSucceeded") == 3
    assert reasons[-1] == "Succeeded"
    assert all(e["involvedObject"]["uid"] == "uid-bench-sweep" for e in bed.kube.events)


def test_a_new_run_with_nothing_in_its_way_gets_its_prepare_job_from_the_first_reconcile() -> None:
    bed = Bed()
    out = bed.reconcile()
    assert bed.status["phase"] == "Preparing"
    assert bed.kube.job_names(NS) == ["sweep-prepare"]
    assert bed.kube.create_job_calls == ["sweep-prepare"]
    assert len(bed.preflight.calls) == 1
    assert [(e["type"], e["reason"]) for e in bed.kube.events] == [
        ("Normal", "Pending"),
        ("Normal", "Preflight"),
        ("Normal", "Preparing"),
    ]
    assert out.requeue_seconds is not None


def test_the_reconcile_that_sees_a_steps_jobs_finish_records_it_and_starts_the_next_step() -> None:
    bed = Bed(run_spec(threads=[8, 16], clients=2))
    bed.to_running()
    assert bed.kube.job_names(NS) == ["sweep-prepare", "sweep-s0-c0", "sweep-s0-c1"]
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 9000.0, 2.0), log=series_log([9000.0]))
    bed.kube.finish_job(NS, "sweep-s0-c1", result_doc(8, 8000.0, 2.5), log=series_log([8000.0]))
    bed.clock.advance(40)
    seen = len(bed.kube.events)

    bed.reconcile()
    first, second = bed.step(0), bed.step(1)
    assert (first["phase"], first["qps"], first["valid"]) == ("Succeeded", 17_000.0, True)
    series = stored(bed).series
    assert sorted(series["0"]["clients"]) == ["0", "1"]
    assert bed.status["currentStep"] == 1
    assert second["phase"] == "Running"
    assert second["jobNames"] == ["sweep-s1-c0", "sweep-s1-c1"]
    assert second["startedAt"] == "2024-06-01T02:00:40Z"
    args = bed.kube.job(NS, "sweep-s1-c1")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--start-at=2024-06-01T02:00:48+00:00" in args, "8 s ahead of this reconcile"
    assert bed.kube.job_names(NS) == [
        "sweep-prepare", "sweep-s0-c0", "sweep-s0-c1", "sweep-s1-c0", "sweep-s1-c1",
    ]  # fmt: skip
    assert [e["reason"] for e in bed.kube.events[seen:]] == ["StepSucceeded", "StepStarted"]
    assert bed.condition("Progressing")["message"].startswith("step 2/2: oltp_point_select at 16")
    assert bed.status["phase"] == "Running"


def test_the_results_configmap_keeps_every_steps_series_and_numbers() -> None:
    bed = Bed(run_spec(threads=[8, 16]))
    bed.to_running()
    for index, threads in enumerate((8, 16)):
        bed.kube.finish_job(
            NS, f"sweep-s{index}-c0", result_doc(threads, 1000.0 * threads, 3.0),
            log=series_log([990.0 * threads, 1010.0 * threads]),
        )  # fmt: skip
        bed.reconcile()
    assert bed.status["resultsConfigMap"] == "sweep-results"
    results = stored(bed)
    series = results.series
    assert sorted(series) == ["0", "1"], "the second step's write keeps the first step's series"
    assert series["1"]["threads"] == 16
    assert [p["qps"] for p in series["1"]["clients"]["0"]] == [15_840.0, 16_160.0]
    steps = results.steps
    assert [(s["threads"], s["qps"]) for s in steps] == [(8, 8000.0), (16, 16000.0)]


def test_a_run_with_dataset_cleanup_runs_the_cleanup_job_before_it_succeeds() -> None:
    bed = Bed(run_spec(threads=[8], dataset={"tables": 1, "tableSize": 100, "cleanup": True}))
    bed.to_running()
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 5000.0, 2.0))
    bed.reconcile()
    assert bed.status["phase"] == "Running"
    assert "sweep-cleanup" in bed.kube.job_names(NS)
    args = bed.kube.job(NS, "sweep-cleanup")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "cleanup"
    bed.kube.finish_job(NS, "sweep-cleanup", {"v": 1, "ok": True, "action": "cleaned", "tables": 1})
    bed.reconcile()
    assert bed.status["phase"] == "Succeeded"


def test_the_password_appears_nowhere_the_reconciler_writes() -> None:
    bed = Bed(run_spec(threads=[8]))
    bed.to_running()
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 5000.0, 2.0))
    bed.reconcile()
    assert bed.status["phase"] == "Succeeded"
    assert PASSWORD not in everything_written(bed)


# --- inputs the schema cannot check -------------------------------------------------------------


def test_an_invalid_spec_fails_the_run_with_the_field_path_and_creates_no_job() -> None:
    bed = Bed(run_spec(threads=[8, 8]))
    bed.reconcile()
    st = bed.status
    assert st["phase"] == "Failed"
    assert st["message"].startswith("spec.threads[1]: 8 is listed twice")
    assert bed.condition("Failed")["reason"] == "InvalidSpec"
    assert bed.kube.create_job_calls == []
    assert bed.kube.event_reasons() == ["InvalidSpec"]
    assert bed.kube.events[0]["type"] == "Warning"


def test_an_unknown_spec_field_is_named_in_the_failure() -> None:
    bed = Bed(run_spec(placement={"nodeSelectr": BENCH_LABEL}))
    bed.reconcile()
    assert bed.status["phase"] == "Failed"
    assert bed.status["message"].startswith("spec.placement.nodeSelectr: ")
    assert bed.kube.create_job_calls == []


def test_a_missing_secret_fails_with_the_command_that_creates_it() -> None:
    bed = Bed(with_secret=False)
    bed.reconcile()
    assert bed.status["phase"] == "Failed"
    assert bed.condition("Failed")["reason"] == "SecretNotFound"
    assert bed.status["message"] == (
        "spec.credentials.secretRef.name: Secret 'bench-creds' not found in namespace 'bench'; "
        "create it: kubectl -n bench create secret generic bench-creds "
        "--from-literal=user=<user> --from-literal=password=<password>"
    )
    assert bed.kube.create_job_calls == []
    assert bed.preflight.calls == []


def test_a_secret_without_the_password_key_fails_naming_the_key_and_the_keys_it_has() -> None:
    bed = Bed(with_secret=False)
    bed.kube.add_secret(NS, SECRET, {"user": "bench", "pass": PASSWORD})
    bed.reconcile()
    assert bed.status["phase"] == "Failed"
    assert bed.condition("Failed")["reason"] == "SecretKeyMissing"
    assert bed.status["message"] == (
        "spec.credentials.passwordKey: Secret bench/bench-creds has no key 'password' "
        "(it has: pass, user); add the key or set spec.credentials.passwordKey to one of those"
    )
    assert PASSWORD not in everything_written(bed)


def test_custom_secret_keys_are_the_ones_looked_for() -> None:
    spec = run_spec(credentials={"secretRef": {"name": SECRET}, "userKey": "u", "passwordKey": "p"})
    bed = Bed(spec, with_secret=False)
    bed.kube.add_secret(NS, SECRET, {"user": "bench", "password": PASSWORD})
    bed.reconcile()
    assert bed.status["message"].startswith(
        "spec.credentials.userKey: Secret bench/bench-creds has no key 'u'"
    )


def test_a_node_selector_matching_no_node_fails_with_no_bench_node() -> None:
    bed = Bed(run_spec(placement={"nodeSelector": {"tidbbench.io/bench-node": "yes"}}))
    bed.reconcile()
    assert bed.status["phase"] == "Failed"
    assert bed.condition("Failed")["reason"] == "NoBenchNode"
    assert bed.status["message"] == (
        "spec.placement.nodeSelector {tidbbench.io/bench-node=yes} matches no node; label the "
        "dedicated benchmark node: kubectl label node <node> tidbbench.io/bench-node=yes"
    )
    assert bed.kube.create_job_calls == []


def test_without_a_node_selector_any_node_will_do() -> None:
    bed = Bed(run_spec(placement={}))
    bed.reconcile()
    assert bed.status["phase"] == "Preparing"
    assert "Preflight" in bed.kube.event_reasons(), "the inputs passed: the run went on"


# --- one run per cluster ------------------------------------------------------------------------


def test_an_older_pending_run_on_the_same_cluster_makes_a_newer_one_wait() -> None:
    bed = Bed()
    bed.kube.add_run(run_body("older", created="2024-06-01T00:00:00Z"))
    out = bed.reconcile()
    st = bed.status
    assert st["phase"] == "Pending"
    assert st["waitingFor"] == "bench/older"
    waiting = bed.condition("Waiting")
    assert (waiting["status"], waiting["reason"]) == ("True", "ClusterBusy")
    assert "bench/older" in waiting["message"]
    assert out.parked and out.requeue_seconds is None, "waits for the queue, not for a timer"
    assert bed.preflight.calls == []
    assert bed.kube.create_job_calls == []
    bed.reconcile()
    assert bed.kube.event_reasons().count("Waiting") == 1, "one Waiting event, not one per look"


def test_an_active_run_on_the_same_cluster_blocks_even_when_it_is_newer() -> None:
    bed = Bed()
    bed.kube.add_run(
        run_body(
            "newer", namespace="other", created="2024-06-01T05:00:00Z", status={"phase": "Running"}
        )
    )
    bed.reconcile()
    assert bed.status["waitingFor"] == "other/newer"


def test_a_newer_pending_run_does_not_block_an_older_one() -> None:
    bed = Bed()
    bed.kube.add_run(run_body("newer", created="2024-06-01T05:00:00Z"))
    bed.reconcile()
    assert bed.status["phase"] == "Preparing"
    assert "waitingFor" not in bed.status
    assert "Waiting" not in bed.kube.event_reasons()


@pytest.mark.parametrize(
    "other",
    [
        pytest.param(
            run_body("elsewhere", spec=run_spec(cluster={"name": "other-tc", "namespace": CLUSTER_NS}),
                     created="2024-06-01T00:00:00Z", status={"phase": "Running"}),
            id="another TidbCluster",
        ),
        pytest.param(
            run_body("same-name-other-ns", spec=run_spec(cluster={"name": "basic", "namespace": "staging"}),
                     created="2024-06-01T00:00:00Z", status={"phase": "Running"}),
            id="a TidbCluster of the same name in another namespace",
        ),
        pytest.param(
            run_body("done", created="2024-06-01T00:00:00Z", status={"phase": "Succeeded"}),
            id="a finished run on the same cluster",
        ),
        pytest.param(
            run_body("broken", spec={"cluster": {"name": "basic"}, "threads": "many"},
                     created="2024-06-01T00:00:00Z"),
            id="an invalid run that will never measure",
        ),
    ],
)  # fmt: skip
def test_runs_that_cannot_interfere_do_not_block(other: JSON) -> None:
    bed = Bed()
    bed.kube.add_run(other)
    bed.reconcile()
    assert bed.status["phase"] == "Preparing"
    assert "waitingFor" not in bed.status


def test_explicit_targets_block_each_other_by_host_and_port() -> None:
    target = {"target": {"host": "10.0.0.5", "port": 4000}, "cluster": None}
    bed = Bed(run_spec(**target))
    bed.kube.add_run(run_body("same-host", run_spec(**target), status={"phase": "Preparing"}))
    bed.kube.add_run(
        run_body("other-port", run_spec(target={"host": "10.0.0.5", "port": 4001}, cluster=None),
                 status={"phase": "Running"})
    )  # fmt: skip
    bed.reconcile()
    assert bed.status["waitingFor"] == "bench/same-host"


def test_waiting_for_is_removed_with_a_merge_patch_null_once_the_blocker_finishes() -> None:
    bed = Bed()
    blocker = run_body("older", created="2024-06-01T00:00:00Z", status={"phase": "Running"})
    bed.kube.add_run(blocker)
    bed.reconcile()
    assert bed.status["waitingFor"] == "bench/older"

    blocker["status"] = {"phase": "Succeeded"}
    bed.kube.add_run(blocker)
    bed.clock.advance(5)
    out = bed.reconcile()
    assert "waitingFor" in out.status and out.status["waitingFor"] is None
    assert "waitingFor" not in bed.status
    assert bed.status["phase"] == "Preparing", "once free, the run goes on without waiting"
    waiting = bed.condition("Waiting")
    assert (waiting["status"], waiting["reason"]) == ("False", "ClusterFree")
    assert waiting["lastTransitionTime"] == "2024-06-01T02:00:05Z"


def test_the_status_patch_holds_only_what_changed() -> None:
    bed = Bed()
    bed.kube.add_run(run_body("older", created="2024-06-01T00:00:00Z"))
    bed.reconcile()
    out = bed.reconcile()
    assert "phase" not in out.status
    assert "waitingFor" not in out.status


# --- restarts ------------------------------------------------------------------------------------


def test_reconciling_twice_from_the_same_status_creates_no_duplicate_jobs() -> None:
    bed = Bed(run_spec(clients=2))
    bed.reconcile_until("Preparing")
    bed.kube.finish_job(NS, "sweep-prepare", PREPARED)
    before = copy.deepcopy(bed.body)

    bed.reconcile()  # the dataset is ready: Running, and the first step's Jobs
    jobs = bed.kube.job_names(NS)
    assert jobs == ["sweep-prepare", "sweep-s0-c0", "sweep-s0-c1"]
    # The controller died before its status patch landed: the next one starts from `before`.
    bed.body = before
    bed.clock.advance(3)
    bed.reconcile()
    assert bed.kube.job_names(NS) == jobs
    assert bed.kube.created_jobs == jobs
    assert bed.kube.create_job_calls.count("sweep-s0-c0") == 2


def test_a_restart_reuses_the_start_at_of_a_job_created_before_it() -> None:
    bed = Bed(run_spec(clients=2))
    bed.reconcile_until("Preparing")
    bed.kube.finish_job(NS, "sweep-prepare", PREPARED)
    before = copy.deepcopy(bed.body)
    bed.reconcile()  # the dataset is ready: Running, and the first step's Jobs

    def start_at(job: str) -> str:
        args = bed.kube.job(NS, job)["spec"]["template"]["spec"]["containers"][0]["args"]
        return next(a for a in args if a.startswith("--start-at="))

    first = start_at("sweep-s0-c0")
    assert first == "--start-at=2024-06-01T02:00:08+00:00", (
        "8 s ahead so both clients start together"
    )
    # Died after creating the first client's Job only; restarted 20 s later.
    bed.kube.job_store.pop((NS, "sweep-s0-c1"))
    bed.body = before
    bed.clock.advance(20)
    bed.reconcile()
    assert start_at("sweep-s0-c1") == first


def test_a_vanished_client_job_restarts_the_step() -> None:
    bed = Bed(run_spec(clients=2))
    bed.to_running()
    bed.kube.job_store.pop((NS, "sweep-s0-c1"))
    bed.reconcile()
    assert bed.step(0)["phase"] == "Pending"
    assert "a client Job was deleted" in bed.step(0)["notes"][0]
    assert "sweep-s0-c0" in bed.kube.deleted_jobs
    bed.reconcile()
    assert {"sweep-s0-c0-a1", "sweep-s0-c1-a1"} <= set(bed.kube.job_names(NS))


# --- scheduling -------------------------------------------------------------------------------


SCHEDULER_SAYS = (
    "0/3 nodes are available: 1 node(s) didn't match pod anti-affinity rules, "
    "2 node(s) didn't match Pod's node affinity/selector."
)


def test_an_unschedulable_pod_shows_in_a_condition_then_fails_the_run_after_the_timeout() -> None:
    bed = Bed(run_spec(threads=[8]))
    bed.to_running()
    bed.kube.leave_unschedulable(NS, "sweep-s0-c0", SCHEDULER_SAYS)

    bed.clock.advance(30)
    bed.reconcile()
    progressing = bed.condition("Progressing")
    assert (progressing["status"], progressing["reason"]) == ("False", "Unschedulable")
    assert SCHEDULER_SAYS in progressing["message"]
    assert bed.status["phase"] == "Running"
    bed.clock.advance(30)
    bed.reconcile()
    assert bed.kube.event_reasons().count("Unschedulable") == 1, "one Warning, not one per look"

    bed.clock.advance(60)
    bed.reconcile()
    st = bed.status
    assert st["phase"] == "Failed"
    assert bed.condition("Failed")["reason"] == "Unschedulable"
    assert st["message"] == (
        "step 1 (oltp_point_select, 8 threads): the benchmark pod could not be scheduled for "
        f"120s: pod sweep-s0-c0-pod: {SCHEDULER_SAYS}"
    )
    assert st["steps"][0]["phase"] == "Failed"
    assert bed.kube.job_names(NS) == [], "a failed run leaves no Jobs behind"
    assert bed.kube.pod_store == {}


def test_a_pod_scheduled_late_clears_the_unschedulable_condition() -> None:
    bed = Bed(run_spec(threads=[8]))
    bed.to_running()
    bed.kube.leave_unschedulable(NS, "sweep-s0-c0")
    bed.clock.advance(10)
    bed.reconcile()
    bed.kube.schedule(NS, "sweep-s0-c0", "bench-2")
    bed.clock.advance(10)
    bed.reconcile()
    progressing = bed.condition("Progressing")
    assert (progressing["status"], progressing["reason"]) == ("True", "StepRunning")


def test_an_unschedulable_prepare_pod_fails_the_run_after_the_timeout() -> None:
    bed = Bed()
    bed.reconcile_until("Preparing")
    bed.kube.leave_unschedulable(NS, "sweep-prepare", SCHEDULER_SAYS)
    bed.reconcile()
    assert bed.condition("Progressing")["reason"] == "Unschedulable"
    bed.clock.advance(121)
    bed.reconcile()
    assert bed.status["phase"] == "Failed"
    assert bed.status["message"] == (
        f"the dataset pod could not be scheduled: pod sweep-prepare-pod: {SCHEDULER_SAYS}"
    )
    assert bed.kube.job_names(NS) == []


# --- failures and client results --------------------------------------------------------------


def test_a_failed_client_job_fails_the_run_with_the_runners_message_and_deletes_jobs() -> None:
    bed = Bed(run_spec(clients=2))
    bed.to_running()
    failure = {
        "v": 1,
        "ok": False,
        "kind": "sql-error",
        "message": "sysbench 1.0.20: SQL error 1146 (Table 'sbtest.sbtest1' doesn't exist)",
    }
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 5000.0, 2.0))
    bed.kube.finish_job(NS, "sweep-s0-c1", failure)
    bed.reconcile()
    st = bed.status
    assert st["phase"] == "Failed"
    assert bed.condition("Failed")["reason"] == "StepFailed"
    assert st["message"] == (
        "step 1 (oltp_point_select, 8 threads), Job sweep-s0-c1: sysbench 1.0.20: SQL error "
        "1146 (Table 'sbtest.sbtest1' doesn't exist)"
    )
    assert st["steps"][0]["phase"] == "Failed"
    assert bed.kube.job_names(NS) == []


def test_a_runner_that_crashed_without_a_document_fails_with_its_exit_code() -> None:
    bed = Bed(run_spec(threads=[8], stepRetries=0))
    bed.to_running()
    bed.kube.finish_job(NS, "sweep-s0-c0", None, exit_code=137)
    bed.reconcile()
    assert bed.status["phase"] == "Failed"
    assert bed.status["message"] == (
        "step 1 (oltp_point_select, 8 threads): pod sweep-s0-c0-pod: runner exited 137 (Error) "
        "without a result; it ran 1 time(s) and spec.stepRetries is 0"
    )


# --- lost clients: retried, the cause named ---------------------------------------------------


def test_an_oom_killed_client_is_named_and_its_step_retried_then_recorded() -> None:
    bed = Bed(run_spec(threads=[8, 16], resources={"limits": {"memory": "256Mi"}}))
    bed.to_running()
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 8000.0, 2.0), log=series_log([8000.0]))
    bed.reconcile()
    bed.kube.kill_pod(NS, "sweep-s1-c0", reason="OOMKilled")
    bed.reconcile()
    step = bed.step(1)
    assert (step["phase"], step["attempt"]) == ("Pending", 1)
    assert "pod sweep-s1-c0-pod was OOM-killed (memory limit 256Mi)" in step["notes"][0]
    assert bed.kube.job_names(NS)[-1] != "sweep-s1-c0", "the lost attempt's Job is deleted"
    retried = bed.kube.events_of(["StepRetried"])[0]["message"]
    assert retried.startswith("step 2 (oltp_point_select, 16 threads): pod sweep-s1-c0-pod was")
    assert retried.endswith("retry 1 of 2")
    bed.reconcile()
    assert bed.step(1)["jobNames"] == ["sweep-s1-c0-a1"]
    bed.kube.finish_job(NS, "sweep-s1-c0-a1", result_doc(16, 9000.0, 3.0))
    bed.reconcile()
    assert bed.status["phase"] == "Succeeded"
    assert [s["qps"] for s in bed.status["steps"]] == [8000.0, 9000.0]
    assert bed.step(0)["attempt"] == 0 and bed.step(1)["attempt"] == 1


def test_a_lost_client_in_a_later_round_is_retried_as_an_attempt_of_that_trial() -> None:
    bed = Bed(run_spec(threads=[8], clients=1, repeats=2, stepRetries=1))
    bed.to_running()
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 8000.0, 2.0), log=series_log([8000.0]))
    bed.reconcile()
    assert bed.step(0)["jobNames"] == ["sweep-s0-r1-c0"]
    bed.kube.kill_pod(NS, "sweep-s0-r1-c0", reason="OOMKilled")
    bed.reconcile()
    assert (bed.step(0)["phase"], bed.step(0)["attempt"]) == ("Pending", 1)
    assert "sweep-s0-c0" in bed.kube.job_names(NS), "the first trial's Job is kept"
    bed.reconcile()
    assert bed.step(0)["jobNames"] == ["sweep-s0-r1-c0-a1"], "round in -r, attempt in -a"
    bed.kube.finish_job(
        NS, "sweep-s0-r1-c0-a1", result_doc(8, 8200.0, 2.0), log=series_log([8200.0])
    )
    bed.reconcile()
    assert bed.status["phase"] == "Succeeded"
    assert [t["result"]["qps"] for t in bed.step(0)["trials"]] == [8000.0, 8200.0]
    assert sorted(stored(bed).series) == ["0", "0.1"], "each trial's series kept, as before"


def test_an_evicted_client_is_named() -> None:
    bed = Bed(run_spec(threads=[8], stepRetries=0))
    bed.to_running()
    bed.kube.kill_pod(NS, "sweep-s0-c0", reason="Error", evicted=True)
    bed.reconcile()
    assert bed.status["phase"] == "Failed"
    assert (
        "pod sweep-s0-c0-pod was evicted: The node was low on resource: memory."
        in (bed.status["message"])
    )


def test_a_client_pod_deleted_mid_step_is_retried_and_the_retries_are_bounded() -> None:
    bed = Bed(run_spec(threads=[8], stepRetries=1))
    bed.to_running()
    bed.kube.schedule(NS, "sweep-s0-c0")
    bed.reconcile()
    assert bed.step(0)["podNames"] == ["sweep-s0-c0-pod"]
    bed.kube.delete_pod(NS, "sweep-s0-c0")
    bed.reconcile()
    assert bed.step(0)["attempt"] == 1
    assert "client pod sweep-s0-c0-pod was deleted mid-step" in bed.step(0)["notes"][0]
    bed.reconcile()
    bed.kube.kill_pod(NS, "sweep-s0-c0-a1", reason="OOMKilled")
    bed.reconcile()
    assert bed.status["phase"] == "Failed"
    assert "it ran 2 time(s) and spec.stepRetries is 1" in bed.status["message"]
    assert bed.kube.job_names(NS) == []


def test_a_client_that_lost_the_database_is_retried() -> None:
    bed = Bed(run_spec(threads=[8]))
    bed.to_running()
    lost = {"v": 1, "ok": False, "kind": "sql-error",
            "message": "sysbench 1.0.20: SQL error 2013 (Lost connection to MySQL server)"}  # fmt: skip
    bed.kube.finish_job(NS, "sweep-s0-c0", lost)
    bed.reconcile()
    assert bed.step(0)["attempt"] == 1 and bed.status["phase"] == "Running"


def test_pods_deleted_after_their_step_finished_rerun_the_step_instead_of_failing_it() -> None:
    bed = Bed(run_spec(threads=[8]))
    bed.to_running()
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 8000.0, 2.0))
    bed.kube.delete_pod(NS, "sweep-s0-c0")  # while the controller was away
    bed.reconcile()
    assert bed.status["phase"] == "Running"
    assert (
        "the pods of Job sweep-s0-c0 were deleted before the controller read"
        in (bed.step(0)["notes"][0])
    )


@pytest.mark.parametrize(
    ("reason", "age", "fails"),
    [("ImagePullBackOff", 0, True), ("ErrImagePull", 5, False), ("ErrImagePull", 31, True),
     ("CreateContainerConfigError", 0, True), ("ContainerCreating", 300, False)],
)  # fmt: skip
def test_a_container_that_cannot_start_fails_the_run_naming_the_image(
    reason: str, age: int, fails: bool
) -> None:
    bed = Bed(run_spec(threads=[8], image="registry.invalid/tidb-bench:typo"))
    bed.to_running()
    said = 'Back-off pulling image "registry.invalid/tidb-bench:typo"'
    bed.kube.container_waiting(NS, "sweep-s0-c0", reason, said)
    bed.clock.advance(age)
    bed.reconcile()
    if not fails:
        assert bed.status["phase"] == "Running"
        return
    assert bed.status["phase"] == "Failed"
    assert bed.condition("Failed")["reason"] == "ContainerCannotStart"
    assert f"image registry.invalid/tidb-bench:typo: {reason}: {said}" in bed.status["message"]
    assert bed.kube.job_names(NS) == []


def test_a_termination_message_that_is_not_json_is_quoted_as_the_reason() -> None:
    bed = Bed(run_spec(threads=[8]))
    bed.to_running()
    bed.kube.finish_job(NS, "sweep-s0-c0", "Traceback (most recent call last): boom", exit_code=1)
    bed.reconcile()
    assert bed.status["message"].endswith("exit 1: Traceback (most recent call last): boom")


def test_a_result_of_another_version_fails_the_step_naming_both_versions() -> None:
    bed = Bed(run_spec(threads=[8, 16]))
    bed.to_running()
    bed.kube.finish_job(NS, "sweep-s0-c0", {**result_doc(8, 9000.0, 2.0), "v": 2}, exit_code=0)
    bed.reconcile()
    assert bed.status["phase"] == "Failed"
    assert bed.condition("Failed")["reason"] == "StepFailed"
    message = bed.status["message"]
    assert "step 1 (oltp_point_select, 8 threads), Job sweep-s0-c0" in message
    assert "version 2" in message and "reads version 1" in message
    assert bed.step(0)["phase"] == "Failed"
    assert bed.kube.job_names(NS) == [], "a failed run leaves no Job behind"


def test_a_failed_prepare_job_fails_the_run_with_the_runners_message() -> None:
    bed = Bed()
    bed.reconcile_until("Preparing")
    bed.kube.finish_job(
        NS, "sweep-prepare",
        {"v": 1, "ok": False, "kind": "TidbBenchError", "message": "database 'sbtest' does not exist"},
    )  # fmt: skip
    bed.reconcile()
    assert bed.status["phase"] == "Failed"
    assert bed.condition("Failed")["reason"] == "DatasetFailed"
    assert bed.status["message"] == "dataset failed: database 'sbtest' does not exist"
    assert bed.kube.job_names(NS) == []


def test_two_clients_are_combined_into_one_step_with_qps_summed() -> None:
    bed = Bed(run_spec(workloads=["oltp_read_write"], threads=[2], clients=2))
    bed.to_running()
    a = recorded_doc("sysbench-1.0.20_oltp_read_write_client-a-of-2_histogram_recorded.txt")
    b = recorded_doc("sysbench-1.0.20_oltp_read_write_client-b-of-2_histogram_recorded.txt")
    bed.kube.finish_job(NS, "sweep-s0-c0", a, node="bench-1", log=series_log([12_100.0]))
    bed.kube.finish_job(NS, "sweep-s0-c1", b, node="bench-2", log=series_log([12_700.0]))
    bed.reconcile()
    step = bed.step(0)
    assert step["phase"] == "Succeeded"
    assert step["clients"] == 2
    assert step["qps"] == pytest.approx(a["result"]["qps"] + b["result"]["qps"])
    assert step["tps"] == pytest.approx(a["result"]["tps"] + b["result"]["tps"])
    assert step["events"] == a["result"]["events"] + b["result"]["events"]
    assert step["latencyMs"]["max"] == max(
        a["result"]["latencyMs"]["max"], b["result"]["latencyMs"]["max"]
    )
    assert any("histogram" in n for n in step["notes"]), step["notes"]
    assert step["valid"] is True
    series = stored(bed).series
    assert sorted(series["0"]["clients"]) == ["0", "1"]
    assert bed.status["phase"] == "Succeeded"
    assert bed.status["environment"]["nodes"] == ["bench-1", "bench-2"]


def test_a_late_client_makes_the_step_invalid_with_an_invalid_note() -> None:
    bed = Bed(run_spec(threads=[8, 16], clients=2))
    bed.to_running()
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 9000.0, 2.0))
    bed.kube.finish_job(NS, "sweep-s0-c1", result_doc(8, 9000.0, 2.0, late=True, late_seconds=4.5))
    bed.reconcile()
    step = bed.step(0)
    assert step["valid"] is False
    assert "INVALID: 1 client(s) started late (max 4.5s after the agreed start)" in step["notes"]
    succeeded = bed.kube.events_of(["StepSucceeded"])
    assert len(succeeded) == 1
    assert succeeded[0]["message"].endswith("(INVALID: late start)")
    assert bed.kube.event_reasons()[-2:] == ["StepSucceeded", "StepStarted"]

    bed.kube.finish_job(NS, "sweep-s1-c0", result_doc(16, 7000.0, 4.0))
    bed.kube.finish_job(NS, "sweep-s1-c1", result_doc(16, 7000.0, 4.0))
    bed.reconcile()
    assert bed.status["phase"] == "Succeeded"
    assert bed.status["summary"]["peakQps"] == 14_000.0, "the invalid 18k step is not the peak"
    assert bed.status["summary"]["peakThreads"] == 16


def test_a_run_whose_every_step_is_invalid_shows_the_invalid_peak_and_recommends_nothing() -> None:
    bed = Bed(run_spec(threads=[8]))
    bed.to_running()
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 9000.0, 2.0, late=True, late_seconds=9))
    bed.reconcile()
    assert bed.status["phase"] == "Succeeded"
    summary = bed.status["summary"]
    assert summary["peakQps"] == 9000.0 and "recommendedThreads" not in summary
    assert bed.status["message"].startswith("EVERY STEP INVALID")
    assert bed.status["invalidSteps"] == 1


# --- the guard ---------------------------------------------------------------------------------


def cluster_pod(name: str, node: str, component: str = "tikv", restarts: int = 0) -> JSON:
    return {
        "metadata": {
            "name": name, "namespace": CLUSTER_NS, "uid": f"uid-{name}",
            "labels": {"app.kubernetes.io/instance": "basic", "app.kubernetes.io/component": component},
        },
        "spec": {"nodeName": node},
        "status": {"phase": "Running", "containerStatuses": [{"name": component, "restartCount": restarts}]},
    }  # fmt: skip


def guarded_bed(policy: str, threads: Sequence[int] = (8, 16)) -> Bed:
    bed = Bed(run_spec(threads=list(threads), guard={"policy": policy}))
    bed.kube.add_pod(cluster_pod("basic-tikv-0", "db-1"))
    bed.to_running()
    return bed


def test_a_tikv_pod_landing_on_the_bench_node_mid_step_flags_it_and_the_summary_skips_it() -> None:
    bed = guarded_bed("Flag")
    assert bed.status["guardLook"]["benchNodes"] == ["bench-1", "bench-2"]
    bed.kube.add_pod(cluster_pod("basic-tikv-3", "bench-1"))
    bed.clock.advance(1)
    bed.reconcile()
    landed = bed.step(0)["disturbances"]
    assert [(d["what"], d["object"]) for d in landed][:1] == [("PodOnBenchNode", "basic-tikv-3")]
    assert bed.kube.event_reasons().count("StepDisturbed") == 2  # landed, created
    bed.kube.pod_store.pop((CLUSTER_NS, "basic-tikv-3"))  # gone before step 2 starts
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 20_000.0, 2.0))
    bed.reconcile()
    step = bed.step(0)
    assert step["valid"] is False and step["disturbances"]
    assert any(
        n.startswith("INVALID: disturbed while measured: PodOnBenchNode basic-tikv-3")
        for n in step["notes"]
    )
    assert bed.kube.events_of(["StepSucceeded"])[0]["message"].endswith(
        "(INVALID: PodOnBenchNode basic-tikv-3: TiKV pod basic-tikv-3 on bench-1: a database pod on a "
        "node the benchmark clients use competes with them for CPU and I/O (+1 more))"
    )
    bed.kube.finish_job(NS, "sweep-s1-c0", result_doc(16, 9000.0, 4.0))
    bed.reconcile()
    assert bed.status["phase"] == "Succeeded"
    assert bed.step(1)["valid"] is True and not bed.step(1).get("disturbances")
    assert bed.status["summary"]["peakThreads"] == 16, "the disturbed 20k step is not the peak"
    assert bed.status["invalidSteps"] == 1


def test_under_retry_a_disturbed_step_waits_for_the_gate_then_is_measured_again() -> None:
    bed = guarded_bed("Retry", threads=(8,))
    bed.kube.add_pod(cluster_pod("basic-tikv-3", "bench-1"))
    bed.clock.advance(1)
    bed.reconcile()
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 20_000.0, 2.0))
    fail = checks(bench_node_isolation="Fail")
    bed.preflight.rounds = [checks()] * len(bed.preflight.calls) + [fail]
    bed.reconcile()
    step = bed.step(0)
    assert step["phase"] == "Pending" and step["guardWaitSince"] and step["guardRetries"] == 1
    assert [t["valid"] for t in step["trials"]] == [False]
    assert "StepMeasuredAgain" in bed.kube.event_reasons()
    assert bed.condition("Progressing")["reason"] == "GuardWaiting"
    assert "sweep-s0-c0-a1" not in bed.kube.job_names(NS)
    bed.kube.pod_store.pop((CLUSTER_NS, "basic-tikv-3"))
    bed.preflight.rounds = [*bed.preflight.rounds[: len(bed.preflight.calls)], checks()]
    bed.clock.advance(6)
    bed.reconcile()  # the gate passes now: measured again with new Jobs
    assert "sweep-s0-c0-a1" in bed.kube.job_names(NS)
    bed.kube.finish_job(NS, "sweep-s0-c0-a1", result_doc(8, 9000.0, 2.0))
    bed.reconcile()
    assert bed.status["phase"] == "Succeeded", bed.status
    step = bed.step(0)
    assert step["valid"] is True and step["qps"] == 9000.0
    assert [t["valid"] for t in step["trials"]] == [False, True]
    assert step["trials"][0]["disturbances"][0]["object"] == "basic-tikv-3"


def test_under_abort_a_disturbance_fails_the_run_naming_it_and_deletes_the_jobs() -> None:
    bed = guarded_bed("Abort")
    pod = bed.kube.pod_store[(CLUSTER_NS, "basic-tikv-0")]
    pod["status"]["containerStatuses"][0]["restartCount"] = 1
    bed.clock.advance(1)
    bed.reconcile()
    assert bed.status["phase"] == "Failed"
    assert bed.condition("Failed")["reason"] == "StepDisturbed"
    assert (
        "PodRestarted basic-tikv-0: TiKV pod basic-tikv-0 on db-1: restart count 0 → 1"
        in bed.status["message"]
    )
    assert bed.kube.job_names(NS) == []


def test_guard_off_watches_nothing() -> None:
    bed = guarded_bed("Off")
    bed.kube.add_pod(cluster_pod("basic-tikv-3", "bench-1"))
    bed.reconcile()
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 20_000.0, 2.0))
    bed.reconcile()
    assert bed.step(0)["valid"] is True and "guardLook" not in bed.status


# --- preflight --------------------------------------------------------------------------------


def test_a_failing_enforced_preflight_waits_rechecks_and_fails_after_its_timeout() -> None:
    failing = checks(leader_size_balance="Fail")
    bed = Bed(preflight=ScriptedPreflight(failing))
    # The reconcile that enters Preflight also runs the first check.
    out = bed.reconcile()
    assert bed.status["phase"] == "Preflight"
    assert len(bed.preflight.calls) == 1
    cond = bed.condition("PreflightPassed")
    assert (cond["status"], cond["reason"]) == ("False", "Waiting")
    assert "leader-size-balance" in cond["message"]
    assert out.requeue_seconds == PREFLIGHT_RETRY.total_seconds()
    assert bed.kube.event_reasons() == ["Pending", "Preflight", "PreflightWaiting"]

    out = bed.reconcile()
    assert len(bed.preflight.calls) == 1, "re-checked no sooner than PREFLIGHT_RETRY"
    assert out.requeue_seconds == PREFLIGHT_RETRY.total_seconds()

    bed.clock.advance(2)
    bed.reconcile()
    assert len(bed.preflight.calls) == 1, "re-checked no sooner than PREFLIGHT_RETRY"

    bed.clock.advance(3)
    bed.reconcile()
    assert len(bed.preflight.calls) == 2
    assert bed.status["preflight"]["attempts"] == 2
    assert bed.status["phase"] == "Preflight"
    assert bed.kube.event_reasons().count("PreflightWaiting") == 1, "one Warning, not one per try"

    bed.clock.advance(56)
    bed.reconcile()
    st = bed.status
    assert st["phase"] == "Failed"
    assert bed.condition("Failed")["reason"] == "PreflightFailed"
    assert st["message"] == (
        "preflight still failing after 61s (timeoutSeconds 60): leader-size-balance: "
        "leader-size-balance is not fair: leader_size 689 vs 120"
    )
    assert bed.kube.create_job_calls == []


def test_a_preflight_that_recovers_while_waiting_lets_the_run_proceed() -> None:
    bed = Bed(preflight=ScriptedPreflight(checks(pending_operators="Fail"), checks()))
    bed.reconcile()
    assert bed.status["phase"] == "Preflight"
    bed.clock.advance(5)
    bed.reconcile()
    assert len(bed.preflight.calls) == 2
    assert bed.status["phase"] == "Preparing"
    assert bed.kube.job_names(NS) == ["sweep-prepare"]
    assert bed.condition("PreflightPassed")["status"] == "True"


def test_a_warn_preflight_proceeds_and_posts_a_warning_event_per_failing_check() -> None:
    found = checks(leader_size_balance="Fail", topology_spread="Warn")
    spec = run_spec(preflight={"policy": "Warn"})
    bed = Bed(spec, preflight=ScriptedPreflight(found))
    bed.reconcile_until("Preparing")
    warnings = [(e["reason"], e["message"]) for e in bed.kube.events if e["type"] == "Warning"]
    assert warnings == [
        ("PreflightWarn", "topology-spread: topology-spread is not fair: leader_size 689 vs 120"),
        (
            "PreflightFail",
            "leader-size-balance: leader-size-balance is not fair: leader_size 689 vs 120",
        ),
    ]
    cond = bed.condition("PreflightPassed")
    assert (cond["status"], cond["reason"]) == ("False", "ProceededFail")
    assert [c["status"] for c in bed.status["preflight"]["checks"]].count("Fail") == 1


def test_preflight_off_skips_the_gate() -> None:
    bed = Bed(run_spec(preflight={"policy": "Off"}))
    bed.reconcile_until("Preparing")
    assert bed.preflight.calls == []
    assert bed.condition("PreflightPassed")["reason"] == "Skipped"


# --- after the end ----------------------------------------------------------------------------


def test_a_finished_run_is_left_alone_until_its_ttl_deletes_its_jobs() -> None:
    bed = Bed(run_spec(threads=[8], ttlSecondsAfterFinished=600))
    bed.to_running()
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 9000.0, 2.0))
    bed.reconcile()
    assert bed.status["phase"] == "Succeeded"
    assert bed.reconcile().status == {}
    assert bed.kube.job_names(NS) == ["sweep-prepare", "sweep-s0-c0"]
    bed.clock.advance(600)
    assert bed.reconcile().status == {}
    assert bed.kube.job_names(NS) == []


def test_every_workload_gets_the_full_sweep_and_the_summary_leads_with_the_first() -> None:
    bed = Bed(run_spec(workloads=["oltp_read_only", "oltp_point_select"], threads=[8, 16]))
    bed.to_running()
    assert [(s["workload"], s["threads"]) for s in bed.status["steps"]] == [
        ("oltp_read_only", 8),
        ("oltp_read_only", 16),
        ("oltp_point_select", 8),
        ("oltp_point_select", 16),
    ]
    qps = [3000.0, 5000.0, 40_000.0, 60_000.0]
    for index, step in enumerate(bed.status["steps"]):
        doc = result_doc(step["threads"], qps[index], 4.0, workload=step["workload"])
        bed.kube.finish_job(NS, f"sweep-s{index}-c0", doc)
        bed.reconcile()
    summary = bed.status["summary"]
    assert bed.status["phase"] == "Succeeded"
    assert (summary["workload"], summary["peakQps"]) == ("oltp_read_only", 5000.0)
    assert [(w["workload"], w["peakQps"]) for w in summary["perWorkload"]] == [
        ("oltp_read_only", 5000.0),
        ("oltp_point_select", 60_000.0),
    ]


def test_a_running_run_without_steps_fails_instead_of_looping() -> None:
    bed = Bed()
    bed.body["status"] = {"phase": "Running", "startedAt": "2024-06-01T02:00:00Z"}
    bed.reconcile()
    assert bed.status["phase"] == "Failed"
    assert bed.condition("Failed")["reason"] == "Internal"


# --- repeated trials and dataset practice -------------------------------------------------------


def test_repeats_run_the_sweep_in_rounds_and_the_step_shows_the_median_and_interval() -> None:
    bed = Bed(run_spec(threads=[1, 2], clients=1, repeats=3))
    bed.to_running()
    assert bed.status["currentRound"] == 0
    qps = {0: [1000.0, 1100.0, 900.0], 1: [2000.0, 2600.0, 2100.0]}
    order = []
    for round_ in range(3):
        for index in (0, 1):
            job = f"sweep-s{index}" + (f"-r{round_}" if round_ else "") + "-c0"
            assert bed.step(index)["phase"] == "Running" and bed.status["currentRound"] == round_
            bed.kube.finish_job(NS, job, result_doc(index + 1, qps[index][round_], 2.0))
            order.append(job)
            bed.clock.advance(10)
            bed.reconcile()
            if (round_, index) != (2, 1):
                waiting = bed.step(index)
                assert waiting["phase"] == ("Pending" if round_ < 2 else "Succeeded")
    assert [j for j in bed.kube.job_names(NS) if j != "sweep-prepare"] == sorted(order)
    assert bed.status["phase"] == "Succeeded"
    first, second = bed.step(0), bed.step(1)
    assert [t["result"]["qps"] for t in first["trials"]] == [1000.0, 1100.0, 900.0]
    assert [t["round"] for t in first["trials"]] == [0, 1, 2]
    assert first["qps"] == 1000.0 and second["qps"] == 2100.0
    assert first["qpsTrials"]["n"] == 3 and first["qpsTrials"]["noisy"] is False
    low, high = first["qpsTrials"]["ciLow"], first["qpsTrials"]["ciHigh"]
    assert low == pytest.approx(1000 - 4.303 * 100 / 3**0.5, abs=0.5)
    assert high == pytest.approx(1000 + 4.303 * 100 / 3**0.5, abs=0.5)
    assert second["qpsTrials"]["noisy"] is True, "CV 14% > 10%"
    assert bed.status["summary"]["peakQps"] == 2100.0, "kubectl get shows the median"
    last = [e["message"] for e in bed.kube.events if e["reason"] == "StepSucceeded"][-1]
    assert "(trial 3/3); median 2,100 QPS, 95% CI" in last and "(NOISY)" in last


def test_one_trial_keeps_the_step_as_it_was_without_trials() -> None:
    bed = Bed(run_spec(threads=[4], clients=1))
    bed.to_running()
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(4, 5000.0, 2.0))
    bed.reconcile()
    step = bed.step(0)
    assert (
        not step.get("trials") and not step.get("qpsTrials") and not bed.status.get("currentRound")
    )
    assert (step["qps"], step["phase"]) == (5000.0, "Succeeded")


def test_analyze_and_warm_up_reported_by_the_prepare_job_become_conditions_and_events() -> None:
    bed = Bed(run_spec(threads=[4]))
    bed.reconcile_until("Preparing")
    args = bed.kube.job(NS, "sweep-prepare")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--analyze=on" in args and "--warm-up=on" in args
    done = {**PREPARED, "action": "reused", "analyzed": 2, "analyzeSeconds": 0.4,
            "warmed": 2, "warmUpSeconds": 1.25}  # fmt: skip
    bed.kube.finish_job(NS, "sweep-prepare", done)
    bed.reconcile_until("Running")
    analyzed, warmed = bed.condition("DatasetAnalyzed"), bed.condition("CacheWarmed")
    assert (analyzed["status"], warmed["status"]) == ("True", "True")
    assert analyzed["message"] == "ANALYZE TABLE on 2 table(s) in 0.4s (reused dataset)"
    assert (
        "USE INDEX (k_N)" in warmed["message"] and "in 1.25s (reused dataset)" in warmed["message"]
    )
    reasons = [e["reason"] for e in bed.kube.events]
    assert (
        reasons.index("DatasetReady")
        < reasons.index("DatasetAnalyzed")
        < reasons.index("CacheWarmed")
    )


def test_switched_off_analyze_and_warm_up_say_so() -> None:
    bed = Bed(run_spec(threads=[4], dataset={"analyze": False, "warmUp": False}))
    bed.reconcile_until("Preparing")
    args = bed.kube.job(NS, "sweep-prepare")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--analyze=off" in args and "--warm-up=off" in args
    bed.kube.finish_job(NS, "sweep-prepare", PREPARED)
    bed.reconcile_until("Running")
    assert bed.condition("DatasetAnalyzed")["reason"] == "Disabled"
    assert bed.condition("CacheWarmed")["status"] == "False"
    assert "CacheWarmed" not in [e["reason"] for e in bed.kube.events]


def test_a_finished_run_records_its_fingerprint_from_sql_pods_and_spec() -> None:
    bed = Bed(run_spec(threads=[4], clients=1))
    asked: list[str] = []

    def server_facts(spec: BenchmarkRunSpec, namespace: str, endpoint: Endpoint) -> Fingerprint:
        asked.append(f"{namespace}/{endpoint.host}:{endpoint.port}")
        return server_fingerprint(
            {"tidb_enable_prepared_plan_cache": "ON"},
            [("tikv", "10.0.0.7:20160", "storage.block-cache.capacity", "8GiB")],
            "8.0.11-TiDB-v8.1.0",
        )

    bed.reconciler.deps = dataclasses.replace(bed.reconciler.deps, server_facts=server_facts)
    for i, digest in enumerate(("sha256:aa", "sha256:aa")):
        bed.kube.add_pod(
            {
                "metadata": {
                    "name": f"basic-tidb-{i}",
                    "namespace": CLUSTER_NS,
                    "labels": {
                        "app.kubernetes.io/instance": "basic",
                        "app.kubernetes.io/component": "tidb",
                    },
                },
                "spec": {"nodeName": "db-1"},
                "status": {
                    "containerStatuses": [{"name": "tidb", "imageID": f"pingcap/tidb@{digest}"}]
                },
            }
        )
    bed.to_running()
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(4, 5000.0, 2.0))
    bed.reconcile()
    fp = bed.status["fingerprint"]
    assert len(asked) == 1 and asked[0].startswith(f"{NS}/basic-tidb")
    assert fp["images"]["tidb"] == "pingcap/tidb:v8.1.0"
    assert fp["imageDigests"] == {"tidb": "sha256:aa"}
    assert fp["replicas"] == {"pd": 3, "tikv": 4, "tidb": 2}
    assert fp["variables"] == {"tidb_enable_prepared_plan_cache": "ON"}
    assert fp["config"] == {"tikv.storage.block-cache.capacity": "8GiB"}
    assert fp["sysbenchVersion"] == "1.0.20"
    assert fp["spec"]["threads"] == "[4]" and "credentials.secretRef.name" not in fp["spec"]


def test_a_killed_pod_whose_message_is_its_log_tail_is_retried_not_misread() -> None:
    bed = Bed(run_spec(threads=[8]))
    bed.to_running()
    bed.kube.kill_pod(NS, "sweep-s0-c0", reason="OOMKilled")
    pod = bed.kube.pod_of(NS, "sweep-s0-c0")
    assert pod is not None
    term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    term["message"] = "[ 10s ] thds: 1 tps: 100.00 qps: 100.00"  # FallbackToLogsOnError
    bed.reconcile()
    assert bed.status["phase"] == "Running" and bed.step(0)["attempt"] == 1
    assert "was OOM-killed" in bed.step(0)["notes"][0]


# --- a reconcile that keeps failing, a status edited by hand --------------------------------


def stored_status(bed: Bed) -> JSON:
    return dict(bed.kube.runs[(NS, bed.name)].get("status") or {})


def look(reconciler: RunReconciler, kube: FakeKube, body: JSON) -> float | None:
    """What the Driver's look does with a run: reconcile and write, or count the failure."""
    meta = body["metadata"]
    try:
        out = reconciler.reconcile(body)
        status = reconciler.settled(body, out.status)
        if status:
            kube.patch_benchmark_run_status(meta["namespace"], meta["name"], status)
        return out.requeue_seconds
    except Exception as exc:
        return reconciler.failed(body, exc)


def test_a_failing_reconcile_shows_in_status_and_health_and_fails_the_run_after_its_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bed = Bed(run_spec(threads=[8]))
    bed.to_running()

    def broken(*_: Any) -> list[JSON]:
        raise KubeError("listing Jobs in namespace bench: 503 Service Unavailable")

    monkeypatch.setattr(bed.kube, "jobs", broken)
    hint = look(bed.reconciler, bed.kube, bed.kube.runs[(NS, bed.name)])
    assert hint == 2.0
    cond = next(c for c in stored_status(bed)["conditions"] if c["type"] == "ReconcileFailing")
    assert cond["status"] == "True" and "503 Service Unavailable" in cond["message"]
    assert stored_status(bed)["phase"] == "Running"
    assert bed.reconciler.health() == {}, "not red at the first failure"
    bed.clock.advance(150)
    look(bed.reconciler, bed.kube, bed.kube.runs[(NS, bed.name)])
    assert "503 Service Unavailable" in bed.reconciler.health()[bed.body["metadata"]["uid"]]
    # A controller restarted meanwhile keeps counting from the condition's time.
    fresh = RunReconciler(bed.kube, clock=bed.clock, image="tidb-bench:test")
    bed.clock.advance(151)
    monkeypatch.undo()
    monkeypatch.setattr(bed.kube, "jobs", broken)
    look(fresh, bed.kube, bed.kube.runs[(NS, bed.name)])
    st = stored_status(bed)
    assert st["phase"] == "Failed"
    assert st["message"].startswith("the controller could not reconcile this run for 301s")
    assert fresh.health() == {}


def test_a_reconcile_that_recovers_clears_its_condition() -> None:
    bed = Bed(run_spec(threads=[8]))
    bed.to_running()
    real = bed.kube.jobs
    bed.kube.jobs = lambda *_: (_ for _ in ()).throw(KubeError("timed out"))  # type: ignore[method-assign]
    look(bed.reconciler, bed.kube, bed.kube.runs[(NS, bed.name)])
    bed.kube.jobs = real  # type: ignore[method-assign]
    look(bed.reconciler, bed.kube, bed.kube.runs[(NS, bed.name)])
    cond = next(c for c in stored_status(bed)["conditions"] if c["type"] == "ReconcileFailing")
    assert (cond["status"], cond["reason"]) == ("False", "Recovered")


def test_a_status_edited_by_hand_fails_the_run_naming_the_field_and_deletes_its_jobs() -> None:
    bed = Bed(run_spec(threads=[8, 16]))
    bed.to_running()
    bed.body["status"]["steps"][0]["threads"] = "many"
    bed.reconcile()
    st = bed.status
    assert st["phase"] == "Failed"
    assert bed.condition("Failed")["reason"] == "InvalidStatus"
    assert st["message"].startswith("status.steps.0.threads: Input should be a valid integer")
    assert "'many'" in st["message"]
    assert bed.kube.job_names(NS) == []
    assert not st.get("steps"), "the unreadable status is replaced, not merged"


def test_a_finished_runs_unreadable_status_is_left_alone() -> None:
    bed = Bed(run_spec(threads=[8]))
    bed.body["status"] = {"phase": "Succeeded", "steps": [{"index": "x"}]}
    assert bed.reconcile().status == {}
