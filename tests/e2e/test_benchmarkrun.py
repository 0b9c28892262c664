"""BenchmarkRun end to end on the test bed: real scheduler, real Jobs, real sysbench, MariaDB."""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from testbed.cluster import Testbed
from testbed.kube import BENCH_LABEL, ensure_node, wait_for
from testbed.runs import (
    GROUP,
    PLURAL,
    VERSION,
    RunBed,
    assert_quiet,
    create_run,
    fast_example,
    run_manifest,
)
from tidb_bench_operator.domain.manifests import label_value
from tidb_bench_operator.domain.results_store import read_store

pytestmark = pytest.mark.e2e


def test_an_example_run_goes_pending_running_succeeded_with_real_numbers_in_every_step(
    bed: RunBed, controller: Any, testbed: Testbed
) -> None:
    body = fast_example(
        "point-select-sweep.yaml",
        bed.mariadb,
        threads=[1, 2, 4],
        warmupSeconds=1,
        dataset={"tables": 1, "tableSize": 2000},
        preflight={"policy": "Warn"},
    )
    name = body["metadata"]["name"]
    bed.create(body)
    run = bed.wait(name)
    status = run["status"]
    assert status["phase"] == "Succeeded", status
    assert_quiet(run)
    phases = [e.reason for e in bed.events(name)]
    seq = [p for p in phases if p in ("Pending", "Preflight", "Preparing", "Running", "Succeeded")]
    assert seq == ["Pending", "Preflight", "Preparing", "Running", "Succeeded"], phases
    assert [s["threads"] for s in status["steps"]] == [1, 2, 4]
    for step in status["steps"]:
        assert step["phase"] == "Succeeded" and step["valid"] is True
        assert step["qps"] > 500 and step["events"] > 1000
        assert step["latencyMs"]["percentile"] == 95 and step["latencyMs"]["value"] > 0
        assert step["sysbenchVersion"] == "1.0.20"
        assert any("warm-up" in n for n in step["notes"])
    summary = status["summary"]
    peak = max(status["steps"], key=lambda s: s["qps"])
    assert summary["peakQps"] == peak["qps"] and summary["peakThreads"] == peak["threads"]
    assert status["environment"]["nodes"] == ["node1"]
    # The preflight ran against a server that is not TiDB: it says so instead of failing.
    checks = {c["name"]: c for c in status["preflight"]["checks"]}
    assert "not TiDB" in checks["table-leader-distribution"]["message"]

    # `kubectl get benchmarkruns` is the report.
    out = subprocess.run(
        ["kubectl", "--kubeconfig", str(testbed.kubeconfig), "-n", bed.namespace, "get",
         "benchmarkruns"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    header, row = out.splitlines()[:2]
    assert header.split()[:6] == ["NAME", "PHASE", "CLUSTER", "WORKLOAD", "QPS", "THREADS"]
    assert f"{peak['qps']}" in row and "Succeeded" in row and "oltp_point_select" in row

    # The full per-interval series is kept in ConfigMaps owned by the run.
    cms = bed.core.list_namespaced_config_map(
        bed.namespace, label_selector=f"tidbbench.io/run={label_value(name)}"
    ).items
    stored = read_store(status["resultsConfigMap"], {cm.metadata.name: cm.data for cm in cms})
    assert len(stored.series["0"]["clients"]["0"]) >= 2
    assert {cm.metadata.owner_references[0].name for cm in cms} == {name}


# Serial (`make e2e`): a fourth bench node for the whole test bed; other suites' clients would
# land on it and be lost when it is deleted.
@pytest.mark.serial
def test_a_two_client_step_runs_on_two_bench_nodes_and_combines_both_clients(
    bed: RunBed, controller: Any, testbed: Testbed
) -> None:
    ensure_node(bed.core, "node4", kubelet_port=testbed.ports.kubelet, labels={BENCH_LABEL: "true"})
    # The step's Jobs and pods are deleted once its result is stored: each client's message
    # is read here while its pod is still there.
    messages: dict[str, tuple[str, str]] = {}
    try:
        bed.create(bed.manifest("two", clients=2, threads=[2]))
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and len(messages) < 2:
            for p in bed.core.list_namespaced_pod(
                bed.namespace, label_selector="tidbbench.io/run=two,tidbbench.io/role=step"
            ).items:
                done = (p.status.container_statuses or [None])[0]
                if done is not None and done.state.terminated and done.state.terminated.message:
                    messages[p.metadata.name] = (p.spec.node_name, done.state.terminated.message)
            time.sleep(0.1)
        run = bed.wait("two")
    finally:
        bed.core.delete_node("node4")
    step = run["status"]["steps"][0]
    assert run["status"]["phase"] == "Succeeded", run["status"]
    assert_quiet(run)
    assert step["clients"] == 2
    assert sorted(node for node, _ in messages.values()) == ["node1", "node4"]
    assert run["status"]["environment"]["nodes"] == ["node1", "node4"]
    steps_jobs = [
        j.metadata.name for j in bed.jobs("two") if j.metadata.labels["tidbbench.io/role"] == "step"
    ]
    assert steps_jobs == [], "the step's Jobs went once its result was stored"
    per_client = [json.loads(text)["result"] for _, text in messages.values()]
    assert step["qps"] == pytest.approx(sum(r["qps"] for r in per_client), rel=1e-6)
    assert step["events"] == sum(r["events"] for r in per_client)
    assert step["latencyMs"]["max"] == max(r["latencyMs"]["max"] for r in per_client)
    assert any("merged" in n or "histogram" in n for n in step["notes"]), step["notes"]


def test_the_bench_pod_never_lands_next_to_tikv_and_an_unschedulable_run_says_why(
    bed: RunBed, controller: Any
) -> None:
    # TiKV on node1, the only bench node: the scheduler must refuse the benchmark pod.
    bed.cluster(
        "basic",
        {"pd": ["node2"], "tikv": ["node1", "node2", "node3"], "tidb": ["node3"]},
    )
    body = bed.manifest("crowded", threads=[2])
    body["spec"]["cluster"] = {"name": "basic"}
    bed.create(body)

    def live_reason() -> str:
        st = bed.get("crowded").get("status") or {}
        for c in st.get("conditions", []):
            if c["type"] == "Progressing" and c["reason"] == "Unschedulable":
                return str(c["message"])
        return ""

    message = wait_for(live_reason, 60, "the scheduler's reason in status, live")
    assert "didn't match pod anti-affinity rules" in message
    pods = bed.core.list_namespaced_pod(
        bed.namespace, label_selector="tidbbench.io/run=crowded"
    ).items
    assert pods and all(p.spec.node_name is None for p in pods)
    run = bed.wait("crowded", timeout=90)
    assert run["status"]["phase"] == "Failed"
    assert "could not be scheduled" in run["status"]["message"]
    assert "didn't match pod anti-affinity rules" in run["status"]["message"]
    wait_for(lambda: not bed.jobs("crowded"), 30, "the run's Jobs to be removed")


@pytest.mark.parametrize(
    ("case", "expect"),
    [
        # The user comes from a Secret, so messages name where it is, never what it is.
        ("wrong-password", "Access denied for user '<user>'"),
        ("no-server", "cannot connect to 127.0.0.1:1 as the user in "),
        ("bad-spec", "spec.threads[1]: 4 is listed twice"),
        ("no-secret", "Secret 'missing' not found"),
    ],
)
def test_bad_input_ends_failed_with_a_precise_message_and_no_leftover_jobs(
    bed: RunBed, controller: Any, case: str, expect: str
) -> None:
    body = bed.manifest(case)
    if case == "wrong-password":
        bed.core.create_namespaced_secret(
            bed.namespace,
            {"metadata": {"name": "bad"}, "stringData": {"user": "sbtest", "password": "nope"}},
        )
        body["spec"]["credentials"] = {"secretRef": {"name": "bad"}}
    elif case == "no-server":
        body["spec"]["target"]["port"] = 1
    elif case == "bad-spec":
        body["spec"]["threads"] = [4, 4]
    elif case == "no-secret":
        body["spec"]["credentials"] = {"secretRef": {"name": "missing"}}
    bed.create(body)
    run = bed.wait(case, timeout=90)
    assert run["status"]["phase"] == "Failed"
    assert expect in run["status"]["message"], run["status"]["message"]
    failed = [c for c in run["status"]["conditions"] if c["type"] == "Failed"]
    assert failed and expect in failed[0]["message"]
    assert "sbtest'@" not in failed[0]["message"] and "sbtest@" not in failed[0]["message"]
    wait_for(lambda: not bed.jobs(case), 30, "no Jobs left behind")
    warnings = [e for e in bed.events(case) if e.type == "Warning"]
    assert warnings, "a Warning event explains the failure"


def test_the_api_server_rejects_a_malformed_spec_at_apply(
    api: client.ApiClient, namespace: str, mariadb: dict[str, Any], crds: None
) -> None:
    body = run_manifest("malformed", mariadb, threads=[0, 5000])
    with pytest.raises(ApiException) as err:
        create_run(api, namespace, body)
    assert err.value.status == 422
    assert "spec.threads" in json.loads(err.value.body)["message"]


def test_a_controller_killed_mid_step_continues_the_run_without_duplicates_or_lost_steps(
    bed: RunBed, controller: Any
) -> None:
    bed.create(bed.manifest("restart", threads=[2, 4], durationSeconds=6))

    def step0_running() -> bool:
        st = bed.get("restart").get("status") or {}
        return bool(st.get("steps")) and st["steps"][0]["phase"] == "Running"

    wait_for(step0_running, 90, "step 1 running")
    controller.kill()
    time.sleep(3)
    controller.start()
    run = bed.wait("restart")
    assert run["status"]["phase"] == "Succeeded", run["status"]
    assert [s["phase"] for s in run["status"]["steps"]] == ["Succeeded", "Succeeded"]
    # Nothing ran twice: no step was retried, each started once (a step's Jobs are deleted
    # once its result is stored, so only the prepare Job is left).
    assert [s["attempt"] for s in run["status"]["steps"]] == [0, 0]
    reasons = [e.reason for e in bed.events("restart")]
    assert "StepRetried" not in reasons and reasons.count("StepSucceeded") == 2, reasons
    names = sorted(j.metadata.name for j in bed.jobs("restart"))
    assert names == ["restart-prepare"]
    # The last step's pod goes with its Job, through the garbage collector and its grace
    # period: only the prepare Job's pod stays.
    wait_for(
        lambda: len(
            bed.core.list_namespaced_pod(
                bed.namespace, label_selector="tidbbench.io/run=restart"
            ).items
        ) == 1,
        30, "the stored steps' pods gone",
    )  # fmt: skip


def test_deleting_a_run_mid_step_stops_and_removes_its_jobs(bed: RunBed, controller: Any) -> None:
    bed.create(bed.manifest("doomed", threads=[2], durationSeconds=30))
    wait_for(
        lambda: any(
            p.status.phase == "Running"
            for p in bed.core.list_namespaced_pod(
                bed.namespace, label_selector="tidbbench.io/role=step"
            ).items
        ),
        90,
        "the step pod running",
    )
    client.CustomObjectsApi(bed.api).delete_namespaced_custom_object(
        GROUP, VERSION, bed.namespace, PLURAL, "doomed"
    )
    wait_for(lambda: not bed.jobs("doomed"), 60, "Jobs garbage-collected")
    wait_for(
        lambda: (
            not bed.core.list_namespaced_pod(
                bed.namespace, label_selector="tidbbench.io/run=doomed"
            ).items
        ),
        60,
        "pods gone (sysbench stopped)",
    )


def test_a_second_run_on_the_same_cluster_waits_for_the_first(bed: RunBed, controller: Any) -> None:
    bed.create(bed.manifest("first", threads=[2], durationSeconds=6))
    wait_for(
        lambda: (bed.get("first").get("status") or {}).get("phase") == "Running",
        180,
        "first running",
    )
    bed.create(bed.manifest("second", threads=[2], durationSeconds=2))

    def waiting() -> dict[str, Any] | None:
        st = bed.get("second").get("status") or {}
        return st if st.get("waitingFor") else None

    st = wait_for(waiting, 30, "the second run to wait")
    assert st["phase"] == "Pending"
    assert st["waitingFor"] == f"{bed.namespace}/first"
    cond = next(c for c in st["conditions"] if c["type"] == "Waiting")
    assert cond["status"] == "True" and "first" in cond["message"]
    first = bed.wait("first")
    second = bed.wait("second")
    assert first["status"]["phase"] == second["status"]["phase"] == "Succeeded"
    assert second["status"]["startedAt"] >= first["status"]["finishedAt"]
    assert "waitingFor" not in second["status"]


def test_the_read_write_example_runs_with_its_ignore_errors_and_extra_args(
    bed: RunBed, controller: Any
) -> None:
    body = fast_example("read-write-sweep.yaml", bed.mariadb, preflight={"policy": "Warn"})
    bed.create(body)
    run = bed.wait(body["metadata"]["name"], timeout=240)
    assert run["status"]["phase"] == "Succeeded", run["status"].get("message")
    assert_quiet(run)  # its ignored errors stay under the guard's 1% of transactions
    for step in run["status"]["steps"]:
        # oltp_read_write: 14 reads, 4 writes and 2 others per transaction (the defaults of
        # https://github.com/akopytov/sysbench/blob/1.0.20/src/lua/oltp_common.lua).
        assert step["qps"] == pytest.approx(20 * step["tps"], rel=0.02)
        assert step["writeQps"] > 0 and step["otherQps"] > 0


def test_a_run_named_with_more_than_63_characters_runs_and_is_selectable_by_its_label(
    bed: RunBed, controller: Any
) -> None:
    # Names may have 253 characters, label values 63: the run label is shortened with a hash.
    name = "nightly-point-select-" + "-".join(["sweep"] * 14) + "-2026-11-30"
    assert len(name) > 63
    bed.create(bed.manifest(name, threads=[1], durationSeconds=2))
    run = bed.wait(name)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    assert run["status"]["steps"][0]["qps"] > 0
    label = label_value(name)
    assert len(label) <= 63
    cms = (
        client.CoreV1Api(bed.api)
        .list_namespaced_config_map(bed.namespace, label_selector=f"tidbbench.io/run={label}")
        .items
    )
    index = run["status"]["resultsConfigMap"]
    assert sorted(cm.metadata.name for cm in cms) == [index, f"{index}-s0-p0", f"{index}-st0-p0"]
