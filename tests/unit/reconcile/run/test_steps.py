"""Running: the steps' client Jobs, their scheduling, failures, retries, results and trials.

Driven through an in-memory Kubernetes and a fake clock (support.Bed).
"""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from unit.reconcile.run.support import (
    BED_REACH,
    NS,
    SCHEDULER_SAYS,
    Bed,
    recorded_doc,
    result_doc,
    run_spec,
    series_log,
    stored,
)


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
        "sweep-prepare", "sweep-s1-c0", "sweep-s1-c1",
    ], "the recorded step's Jobs are deleted"  # fmt: skip
    assert [e["reason"] for e in bed.kube.events[seen:]] == ["StepSucceeded", "StepStarted"]
    assert bed.condition("Progressing")["message"].startswith("step 2/2: oltp_point_select at 16")
    assert bed.status["phase"] == "Running"


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


def test_a_recorded_step_whose_status_was_lost_is_taken_from_the_store_not_measured_again() -> None:
    # The look that recorded step 1 deleted its Jobs (its results were stored), and the
    # controller was killed before that look's status patch: status still says Running.
    bed = Bed(run_spec(threads=[8, 16], clients=2))
    bed.to_running()
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 9000.0, 2.0), log=series_log([9000.0]))
    bed.kube.finish_job(NS, "sweep-s0-c1", result_doc(8, 8000.0, 2.5), log=series_log([8000.0]))
    bed.clock.advance(40)
    before = copy.deepcopy(bed.body)
    bed.reconcile()
    assert bed.step(0)["phase"] == "Succeeded"
    lost = bed.kube.job_names(NS)
    bed.body = before  # the patch never reached the API server
    bed.kube.add_run(bed.body)
    for name in ("sweep-s1-c0", "sweep-s1-c1"):  # nor did the next step's Jobs
        bed.kube.job_store.pop((NS, name))
    assert bed.step(0)["phase"] == "Running" and "sweep-s0-c0" not in lost
    seen = len(bed.kube.events)

    bed.reconcile()
    first = bed.step(0)
    assert (first["phase"], first["qps"], first["attempt"]) == ("Succeeded", 17_000.0, 0)
    assert not any("run again" in n for n in first.get("notes") or []), first["notes"]
    assert bed.status["currentStep"] == 1 and bed.step(1)["phase"] == "Running"
    assert "sweep-s0-c0-a1" not in bed.kube.job_names(NS), "step 1 was not measured again"
    reasons = [e["reason"] for e in bed.kube.events[seen:]]
    assert reasons == ["StepSucceeded", "StepStarted"], reasons
    assert "taken from the results store" in bed.kube.events[seen]["message"]


def test_a_client_job_deleted_before_its_step_was_recorded_is_still_measured_again() -> None:
    # The store holds the step as an earlier look left it (not finished after this attempt
    # started): the Job was lost, not recorded.
    bed = Bed(run_spec(threads=[8, 16], clients=1))
    bed.to_running()
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 9000.0, 2.0), log=series_log([9000.0]))
    bed.reconcile()
    bed.kube.job_store.pop((NS, "sweep-s1-c0"))
    bed.reconcile()
    assert "a client Job was deleted" in bed.step(1)["notes"][0]
    assert bed.step(1)["phase"] == "Pending" and bed.status["currentStep"] == 1


def test_a_lost_job_of_a_round_started_as_the_last_was_recorded_is_measured_again() -> None:
    # One step, two rounds: round 1 starts in the reconcile that records round 0, at the
    # same instant; its Job deleted, the store's round-0 step must not be taken for it.
    bed = Bed(run_spec(threads=[4], clients=1, repeats=2))
    bed.to_running()
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(4, 5000.0, 2.0), log=series_log([5000.0]))
    bed.reconcile()
    assert bed.status["currentRound"] == 1 and bed.step(0)["phase"] == "Running"
    bed.kube.job_store.pop((NS, "sweep-s0-r1-c0"))
    bed.reconcile()
    assert "a client Job was deleted" in bed.step(0)["notes"][-1]
    assert bed.status["currentRound"] == 1 and len(bed.step(0)["trials"]) == 1


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
    st = bed.failed_with("Unschedulable")
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
    st = bed.failed_with("StepFailed")
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
    assert "sweep-s0-c0" not in bed.kube.job_names(NS), "the first trial's Job went once stored"
    assert stored(bed).steps[0]["trials"][0]["result"]["qps"] == 8000.0
    bed.reconcile()
    assert bed.step(0)["jobNames"] == ["sweep-s0-r1-c0-a1"], "round in -r, attempt in -a"
    bed.kube.finish_job(
        NS, "sweep-s0-r1-c0-a1", result_doc(8, 8200.0, 2.0), log=series_log([8200.0])
    )
    bed.reconcile()
    assert bed.status["phase"] == "Succeeded"
    assert [t["qps"] for t in bed.step(0)["trials"]] == [8000.0, 8200.0]
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
    bed = Bed(run_spec(threads=[8], image="registry.invalid/tidb-bench:typo"),
              reach=replace(BED_REACH, image_override=True))  # fmt: skip
    bed.to_running()
    said = 'Back-off pulling image "registry.invalid/tidb-bench:typo"'
    bed.kube.container_waiting(NS, "sweep-s0-c0", reason, said)
    bed.clock.advance(age)
    bed.reconcile()
    if not fails:
        assert bed.status["phase"] == "Running"
        return
    bed.failed_with("ContainerCannotStart")
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
    bed.failed_with("StepFailed")
    message = bed.status["message"]
    assert "step 1 (oltp_point_select, 8 threads), Job sweep-s0-c0" in message
    assert "version 2" in message and "reads version 1" in message
    assert bed.step(0)["phase"] == "Failed"
    assert bed.kube.job_names(NS) == [], "a failed run leaves no Job behind"


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


def test_a_running_run_without_steps_fails_instead_of_looping() -> None:
    bed = Bed()
    bed.body["status"] = {"phase": "Running", "startedAt": "2024-06-01T02:00:00Z"}
    bed.reconcile()
    bed.failed_with("Internal")


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
    assert [j for j in bed.kube.job_names(NS) if j != "sweep-prepare"] == [], "stored: deleted"
    assert bed.status["phase"] == "Succeeded"
    first, second = bed.step(0), bed.step(1)
    assert [t["qps"] for t in first["trials"]] == [1000.0, 1100.0, 900.0]
    assert all("result" not in t for t in first["trials"]), "status keeps compact trials"
    full = stored(bed).steps[0]["trials"]
    assert [t["result"]["qps"] for t in full] == [1000.0, 1100.0, 900.0]
    # The median (1000) is the first trial: its full numbers were read back from the store.
    assert first["tps"] == full[0]["result"]["tps"]
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


def _args(bed: Bed, job: str) -> list[str]:
    return list(bed.kube.job(NS, job)["spec"]["template"]["spec"]["containers"][0]["args"])


def test_a_rate_step_gives_each_client_its_share_and_records_the_rate_reached() -> None:
    bed = Bed(run_spec(threads=[8], rates=[1001, 40000], clients=2))
    bed.to_running()
    assert "--rate=501" in _args(bed, "sweep-s0-c0") and "--rate=500" in _args(bed, "sweep-s0-c1")
    queued = {"queueMax": 12, "queueLast": 0}
    bed.kube.finish_job(NS, "sweep-s0-c0", {**result_doc(8, 500.0, 2.0), **queued})
    bed.kube.finish_job(NS, "sweep-s0-c1", {**result_doc(8, 499.0, 2.0), **queued})
    bed.clock.advance(40)
    bed.reconcile()
    first = bed.step(0)
    assert first["targetRate"] == 1001
    assert first["rate"] == {
        "target": 1001, "achieved": 999.0, "shortfallPercent": 0.2, "tolerancePercent": 5.0,
        "reached": True, "queueMax": 12, "queueAtEnd": 0,
    }  # fmt: skip
    bed.kube.finish_job(NS, "sweep-s1-c0", {**result_doc(8, 7000.0, 900.0), "queueMax": 9000,
                                            "queueLast": 9000})  # fmt: skip
    bed.kube.finish_job(NS, "sweep-s1-c1", result_doc(8, 6000.0, 950.0))
    bed.clock.advance(40)
    bed.reconcile()
    second = bed.step(1)
    assert second["rate"]["reached"] is False and second["rate"]["queueAtEnd"] == 9000
    assert any(n.startswith("RATE NOT REACHED: target 40,000/s") for n in second["notes"])
    assert any("NOT REACHED (13,000/s)" in e["message"] for e in bed.kube.events)


def test_the_pause_holds_the_next_step_until_it_has_passed() -> None:
    bed = Bed(run_spec(threads=[8, 16], pauseSeconds=60))
    bed.to_running()
    bed.kube.finish_job(NS, "sweep-s0-c0", result_doc(8, 9000.0, 2.0))
    bed.clock.advance(40)
    bed.reconcile()
    assert bed.step(0)["phase"] == "Succeeded" and bed.step(1)["phase"] == "Pending"
    assert bed.condition("Progressing")["reason"] == "Pausing"
    assert (
        "a 60s pause after the last step (pauseSeconds)" in bed.condition("Progressing")["message"]
    )
    assert "sweep-s1-c0" not in bed.kube.job_names(NS)
    bed.clock.advance(59)
    bed.reconcile()
    assert "sweep-s1-c0" not in bed.kube.job_names(NS)
    bed.clock.advance(2)
    bed.reconcile()
    assert bed.step(1)["phase"] == "Running" and "sweep-s1-c0" in bed.kube.job_names(NS)
