"""The end of a run: results, summary, cleanup, fingerprint, and the TTL after it.

Driven through an in-memory Kubernetes and a fake clock (support.Bed).
"""

from __future__ import annotations

import copy
import dataclasses

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from tidb_bench_operator.adapters.metrics import Metrics
from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec
from tidb_bench_operator.domain.fingerprint import Fingerprint, server_fingerprint
from tidb_bench_operator.domain.manifests import Endpoint
from unit.reconcile.run.support import (
    CLUSTER_NS,
    NS,
    Bed,
    result_doc,
    run_spec,
    series_log,
    stored,
)


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


def test_a_run_whose_every_step_is_invalid_fails_no_valid_step_shows_the_peak_and_recommends_nothing() -> (
    None
):
    bed = Bed(run_spec(threads=[8]))
    bed.to_running()
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 9000.0, 2.0, late=True, late_seconds=9))
    bed.reconcile()
    # Failed, so the failed-run alerts fire for a night that measured nothing usable.
    assert bed.status["phase"] == "Failed"
    failed = next(c for c in bed.status["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True" and failed["reason"] == "NoValidStep"
    assert bed.status["message"].startswith("none of the 1 step(s) is valid")
    assert "EVERY STEP INVALID" in bed.status["message"]
    summary = bed.status["summary"]
    assert summary["peakQps"] == 9000.0 and "recommendedThreads" not in summary
    assert bed.status["invalidSteps"] == 1
    assert bed.status["steps"][0]["qps"] == 9000.0, "the measured step stays in status"
    assert bed.status["resultsConfigMap"] == "sweep-results"
    assert bed.kube.job_names(NS) == [], "a Failed run's Jobs are deleted, as for any failure"
    # What the failed-run alerts count: the run, seen finishing, has the outcome Failed.
    metrics = Metrics()
    running = copy.deepcopy(bed.body)
    running["status"] = {**running["status"], "phase": "Running"}
    metrics.observe_run(running)
    metrics.observe_run(bed.body)
    counted = {
        s.labels["outcome"]: s.value
        for family in text_string_to_metric_families(generate_latest(metrics.registry).decode())
        for s in family.samples
        if s.name == "tidb_bench_runs_finished_total"
    }
    assert counted == {"Failed": 1.0}


def test_a_run_with_one_valid_step_among_invalid_ones_succeeds() -> None:
    bed = Bed(run_spec(threads=[8, 16]))
    bed.to_running()
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 9000.0, 2.0, late=True, late_seconds=9))
    bed.reconcile()
    bed.kube.finish_job(NS, "sweep-s1-c0", result_doc(16, 12000.0, 2.0))
    bed.reconcile()
    assert bed.status["phase"] == "Succeeded"
    assert bed.status["invalidSteps"] == 1


def test_a_finished_run_is_left_alone_until_its_ttl_deletes_its_jobs() -> None:
    bed = Bed(run_spec(threads=[8], ttlSecondsAfterFinished=600))
    bed.to_running()
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 9000.0, 2.0))
    bed.reconcile()
    assert bed.status["phase"] == "Succeeded"
    assert bed.reconcile().status == {}
    assert bed.kube.job_names(NS) == ["sweep-prepare"], "the step's Job went once stored"
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
