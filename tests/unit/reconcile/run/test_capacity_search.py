"""A capacity search run through the reconciler: steps appended as it learns, each measured
spec.repeats times before the next is chosen, the verdict in status.summary.capacity.

Driven through an in-memory Kubernetes and a fake clock (support.Bed).
"""

from __future__ import annotations

import copy
from typing import Any

from tidb_bench_operator.domain.manifests import step_job_name
from unit.reconcile.run.support import NS, Bed, result_doc, run_spec, stored


def search_spec(**overrides: Any) -> dict[str, Any]:
    search = {"minThreads": 1, "maxThreads": 64, "precision": 4}
    spec = run_spec(**{"slo": {"latencyMs": 20}, "capacitySearch": search, **overrides})
    del spec["threads"]
    return spec


def p95(workload: str, threads: int, round_: int) -> float:
    """A curve crossing 20 ms at 30.5 threads (point selects) or 10.5 (read-write); the second
    trial reads 10% higher, the first 10% lower. The second has the lower QPS, so it is the
    median trial of two (the lower one) whose latency the step shows."""
    knee = 30.5 if workload == "oltp_point_select" else 10.5
    return round(20.0 * threads / knee * (1.1 if round_ else 0.9), 2)


def measure(bed: Bed, limit: int = 60) -> list[tuple[str, int, int]]:
    """Play every Job the run starts until it ends; (workload, threads, round) as measured."""
    seen = []
    for _ in range(limit):
        st = bed.status
        if st["phase"] != "Running":
            return seen
        index, round_ = st["currentStep"], st.get("currentRound") or 0
        step = st["steps"][index]
        workload, threads = step["workload"], step["threads"]
        qps = 1000.0 * min(threads, 16) * (2.0 - round_)
        doc = result_doc(threads, qps, p95(workload, threads, round_), workload=workload)
        bed.kube.finish_job(NS, step_job_name(bed.name, index, 0, round_), doc)
        bed.reconcile()
        seen.append((workload, threads, round_))
    raise AssertionError(f"the run did not end: {bed.status}")


def test_a_search_appends_its_steps_measures_each_repeats_times_and_reports_its_capacity() -> None:
    bed = Bed(search_spec(repeats=2, workloads=["oltp_point_select", "oltp_read_write"]))
    bed.to_running()
    assert [(s["workload"], s["threads"]) for s in bed.status["steps"]] == [
        ("oltp_point_select", 1)
    ], "a search starts with one step: minThreads of the first workload"
    assert "searching the capacity between 1 and 64 threads to 4" in bed.status["message"]
    seen = measure(bed)
    st = bed.status
    assert st["phase"] == "Succeeded", st
    point_select = [1, 64, 32, 16, 24, 28]
    read_write = [1, 64, 32, 16, 8, 12]
    assert [(w, t) for w, t, r in seen if r == 0] == [
        *(("oltp_point_select", t) for t in point_select),
        *(("oltp_read_write", t) for t in read_write),
    ]
    assert [r for _, _, r in seen] == [0, 1] * 12, "each step's trials one after the other"
    assert [s["index"] for s in st["steps"]] == list(range(12))
    for step in st["steps"]:
        assert step["phase"] == "Succeeded" and [t["round"] for t in step["trials"]] == [0, 1]
        # The step's numbers are its median trial's (by QPS: the lower of two, the second).
        assert step["latencyMs"]["value"] == p95(step["workload"], step["threads"], 1)
    capacity = st["summary"]["capacity"]
    assert [(c["workload"], c["verdict"], c["sloThreads"], c["missThreads"]) for c in capacity] == [
        ("oltp_point_select", "Found", 24, 28),
        ("oltp_read_write", "Found", 8, 12),
    ], "decided on the median trial: 28 threads read 20.2 ms there (16.52 in its first trial)"
    first = capacity[0]
    # A step's QPS is the median of its trials' (24,000 from 32,000 and 16,000).
    assert (first["bestThreads"], first["bestQps"]) == (16, 24_000.0)
    assert (first["maxThreads"], first["maxQps"]) == (16, 24_000.0)
    assert (first["stepsMeasured"], first["precision"], first["percentile"]) == (6, 4, 95)
    assert st["message"].startswith(first["headline"] + " | " + capacity[1]["headline"])
    assert st["message"] == st["summary"]["headline"]
    # The results store holds every step the search appended, and says how many there are.
    assert [s["threads"] for s in stored(bed).steps] == point_select + read_write
    assert bed.kube.configmaps[(NS, "sweep-results")]["data"]["steps"] == "12"


def test_a_search_whose_min_threads_misses_ends_that_workload_after_its_ends() -> None:
    bed = Bed(search_spec(slo={"latencyMs": 0.5}))
    bed.to_running()
    seen = measure(bed)
    assert [t for _, t, _ in seen] == [1, 64]
    capacity = bed.status["summary"]["capacity"]
    assert capacity[0]["verdict"] == "MinThreadsMisses" and "sloThreads" not in capacity[0]
    assert bed.status["phase"] == "Succeeded"
    events = [e["message"] for e in bed.kube.events if e["reason"] == "StepSucceeded"]
    assert events[0].startswith("search step 1 (of at most 6): oltp_point_select at 1 threads")


def test_a_search_step_whose_status_was_lost_is_taken_from_the_store_and_the_search_goes_on() -> (
    None
):
    # The look that recorded minThreads (and appended maxThreads) deleted its Jobs, and the
    # controller was killed before its status patch: status still has one step, Running.
    bed = Bed(search_spec())
    bed.to_running()
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(1, 1000.0, 1.0))
    bed.clock.advance(40)
    before = copy.deepcopy(bed.body)
    bed.reconcile()
    assert [s["threads"] for s in bed.status["steps"]] == [1, 64]
    bed.body = before  # the patch never reached the API server
    bed.kube.add_run(bed.body)
    bed.kube.job_store.pop((NS, "sweep-s1-c0"))  # nor did the next step's Job
    assert len(bed.status["steps"]) == 1 and bed.step(0)["phase"] == "Running"

    bed.reconcile()
    assert [(s["threads"], s["phase"]) for s in bed.status["steps"]] == [
        (1, "Succeeded"),
        (64, "Running"),
    ], "the step was taken from the store, not measured again, and the search chose 64 next"
    assert bed.step(0)["qps"] == 1000.0 and bed.step(0)["attempt"] == 0
    assert "sweep-s0-c0-a1" not in bed.kube.job_names(NS)


def test_an_invalid_search_step_counts_as_missing_the_slo() -> None:
    # 32 threads read 5 ms, well under the SLO, but a client started late: not trusted, so the
    # search looks below it next.
    bed = Bed(search_spec())
    bed.to_running()
    for index, (threads, p95_ms, late) in enumerate([(1, 1.0, False), (64, 90.0, False),
                                                     (32, 5.0, True)]):  # fmt: skip
        doc = result_doc(threads, 100.0 * threads, p95_ms, late=late, late_seconds=9 * late)
        bed.kube.finish_job(NS, f"sweep-s{index}-c0", doc)
        bed.reconcile()
    assert bed.step(2)["valid"] is False
    assert [s["threads"] for s in bed.status["steps"]] == [1, 64, 32, 16]
