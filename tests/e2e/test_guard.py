"""The guard over every step, on the test bed: disturbances planted mid-step are caught.

Each run has three short steps against the MariaDB stand-in, a stand-in TidbCluster `basic`
(pods on node2/node3; node1 is the benchmark node) and a FakePD the test changes mid-step.
The guard polls PD every second here (spec.guard.pdIntervalSeconds) so that a change lasting
a few seconds is seen.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from testbed.fake_pd import FakePD
from testbed.kube import create_standin_cluster, standin_pod, wait_for
from testbed.runs import (
    assert_quiet,
    create_run,
    get_run,
    run_events,
    run_manifest,
    wait_run,
)

pytestmark = pytest.mark.e2e

RUN_TIMEOUT = 240
OPERATORS = "/pd/api/v1/operators"
# A real operator string as PD v7.3+ prints it (https://github.com/tikv/pd/blob/v8.1.1/pkg/schedule/operator/operator.go).
PENDING_OPERATOR = (
    "balance-region {mv peer: store [1] to [5]} (kind:region, region:28977(365, 35), "
    "createAt:2024-07-09 16:25:23.105733052 +0800 CST m=+1209042.707881308, startAt:0001-01-01 "
    "00:00:00 +0000 UTC, currentStep:0, size:95, steps:[0:{add learner peer 1 on store 5}], "
    "timeout:[17m0s])"
)


@pytest.fixture
def fake_pd() -> Iterator[FakePD]:
    with FakePD() as pd:
        yield pd


def guarded_run(name: str, mariadb: dict[str, Any], pd_url: str, **spec: Any) -> dict[str, Any]:
    """Three steps of 4 s on the cluster `basic`, preflight Enforce, the guard polling PD every 1 s."""
    settings: dict[str, Any] = {"threads": [1, 2, 4], "durationSeconds": 4, **spec}
    settings["guard"] = {"pdIntervalSeconds": 1, **settings.get("guard", {})}
    body = run_manifest(
        name, mariadb, cluster={"name": "basic"},
        preflight={"policy": "Enforce", "timeoutSeconds": 60}, **settings,
    )  # fmt: skip
    body["spec"]["target"]["pdURL"] = pd_url
    return body


def standin_cluster(api: client.ApiClient, namespace: str) -> None:
    create_standin_cluster(
        api, namespace, "basic", {"pd": ["node2"], "tikv": ["node2", "node3"], "tidb": ["node3"]}
    )


def wait_step_running(api: client.ApiClient, namespace: str, name: str, index: int) -> None:
    """Until step `index` (from 0) has its pods started (a second into the step)."""

    def running() -> bool:
        steps = (get_run(api, namespace, name).get("status") or {}).get("steps") or []
        return len(steps) > index and steps[index].get("phase") == "Running"

    wait_for(running, RUN_TIMEOUT, f"step {index + 1} of {name} running", interval=0.2)
    time.sleep(1.0)


def what_of(step: dict[str, Any]) -> list[tuple[str, str]]:
    return [(d["what"], d["object"]) for d in step.get("disturbances") or []]


def test_field_note_tikv_lands_on_the_bench_node_mid_run_step_flagged_recommendation_from_valid(
    api: client.ApiClient, core: client.CoreV1Api, namespace: str, mariadb: dict[str, Any],
    db_secret: str, controller: Any, fake_pd: FakePD,
) -> None:  # fmt: skip
    standin_cluster(api, namespace)
    body = guarded_run("fieldnote", mariadb, fake_pd.url, slo={"latencyMs": 100})
    create_run(api, namespace, body)
    wait_step_running(api, namespace, "fieldnote", 1)
    # docs/field-story.md: a third TiKV is scheduled onto the benchmark node while the sweep runs.
    # A stand-in pod runs nothing, so a CPU hog on this (one) machine plays its work.
    core.create_namespaced_pod(
        namespace, standin_pod("basic-tikv-2", namespace, "basic", "tikv", "node1")
    )
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        wait_for(
            lambda: get_run(api, namespace, "fieldnote")["status"]["steps"][1]["phase"]
            == "Succeeded",
            RUN_TIMEOUT, "step 2 recorded",
        )  # fmt: skip
    finally:
        hog.kill()
        hog.wait()
    core.delete_namespaced_pod("basic-tikv-2", namespace, grace_period_seconds=0)
    run = wait_run(api, namespace, "fieldnote", timeout=RUN_TIMEOUT)
    st = run["status"]
    assert st["phase"] == "Succeeded", st
    assert st["preflight"]["checks"] and all(
        c["status"] != "Fail" for c in st["preflight"]["checks"]
    )
    first, second = st["steps"][0], st["steps"][1]
    assert first["valid"] is True and first.get("disturbances", []) == [], first
    assert second["valid"] is False, second
    landed = [d for d in second["disturbances"] if d["what"] == "PodOnBenchNode"]
    assert landed and landed[0]["object"] == "basic-tikv-2" and "node1" in landed[0]["message"]
    assert landed[0]["source"] == "Kubernetes"
    assert any("INVALID: disturbed" in n for n in second["notes"])
    valid_threads = {s["threads"] for s in st["steps"] if s["valid"]}
    assert st["summary"]["recommendedThreads"] in valid_threads
    assert st["summary"]["peakThreads"] in valid_threads
    assert st["invalidSteps"] >= 1
    reasons = [e.reason for e in run_events(core, namespace, "fieldnote")]
    assert "StepDisturbed" in reasons
    print("field story QPS by step:", [(s["threads"], s["qps"], s["valid"]) for s in st["steps"]])


def test_retry_measures_the_disturbed_step_again_after_the_pod_leaves_and_keeps_the_first(
    api: client.ApiClient, core: client.CoreV1Api, namespace: str, mariadb: dict[str, Any],
    db_secret: str, controller: Any, fake_pd: FakePD,
) -> None:  # fmt: skip
    standin_cluster(api, namespace)
    create_run(
        api, namespace, guarded_run("again", mariadb, fake_pd.url, guard={"policy": "Retry"})
    )
    wait_step_running(api, namespace, "again", 1)
    core.create_namespaced_pod(
        namespace, standin_pod("basic-tikv-2", namespace, "basic", "tikv", "node1")
    )

    def waiting() -> bool:
        step = get_run(api, namespace, "again")["status"]["steps"][1]
        return bool(step.get("guardWaitSince"))

    wait_for(waiting, RUN_TIMEOUT, "step 2 waiting to be measured again")
    time.sleep(6)  # the gate is asked again while the pod is still there: the step waits
    assert get_run(api, namespace, "again")["status"]["steps"][1]["phase"] == "Pending"
    core.delete_namespaced_pod("basic-tikv-2", namespace, grace_period_seconds=0)
    run = wait_run(api, namespace, "again", timeout=RUN_TIMEOUT)
    st = run["status"]
    assert st["phase"] == "Succeeded", st
    step = st["steps"][1]
    assert step["valid"] is True and step["guardRetries"] == 1
    disturbed, clean = step["trials"]
    assert disturbed["valid"] is False and clean["valid"] is True
    assert ("PodOnBenchNode", "basic-tikv-2") in what_of(disturbed)
    assert clean.get("disturbances", []) == []
    assert step["qps"] == clean["result"]["qps"]
    assert all(s["valid"] for s in st["steps"])
    reasons = [e.reason for e in run_events(core, namespace, "again")]
    assert "StepMeasuredAgain" in reasons


def test_a_quiet_run_has_no_disturbance_on_any_step(
    api: client.ApiClient, namespace: str, mariadb: dict[str, Any], db_secret: str,
    controller: Any, fake_pd: FakePD,
) -> None:  # fmt: skip
    standin_cluster(api, namespace)
    create_run(api, namespace, guarded_run("quiet", mariadb, fake_pd.url))
    run = wait_run(api, namespace, "quiet", timeout=RUN_TIMEOUT)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    assert_quiet(run)
    assert all(s["valid"] for s in run["status"]["steps"])
    assert not run["status"].get("invalidSteps")


def test_a_tikv_restart_mid_step_is_a_disturbance(
    api: client.ApiClient, core: client.CoreV1Api, namespace: str, mariadb: dict[str, Any],
    db_secret: str, controller: Any, fake_pd: FakePD,
) -> None:  # fmt: skip
    standin_cluster(api, namespace)
    create_run(api, namespace, guarded_run("restart", mariadb, fake_pd.url))
    wait_step_running(api, namespace, "restart", 1)
    pod = core.read_namespaced_pod("basic-tikv-1", namespace)
    # As a kubelet reports a container that exited and was started again.
    statuses = api.sanitize_for_serialization(pod.status.container_statuses)
    statuses = [{**c, "restartCount": 1} for c in statuses]
    core.patch_namespaced_pod_status(
        "basic-tikv-1", namespace, {"status": {"containerStatuses": statuses}}
    )
    run = wait_run(api, namespace, "restart", timeout=RUN_TIMEOUT)
    steps = run["status"]["steps"]
    assert run["status"]["phase"] == "Succeeded", run["status"]
    assert ("PodRestarted", "basic-tikv-1") in what_of(steps[1]), steps[1]
    assert steps[1]["valid"] is False
    assert steps[0]["valid"] is True and not steps[0].get("disturbances")


def test_pending_pd_operators_mid_step_are_a_disturbance(
    api: client.ApiClient, namespace: str, mariadb: dict[str, Any], db_secret: str,
    controller: Any, fake_pd: FakePD,
) -> None:  # fmt: skip
    standin_cluster(api, namespace)
    create_run(api, namespace, guarded_run("operators", mariadb, fake_pd.url))
    wait_step_running(api, namespace, "operators", 1)
    fake_pd.set_body(OPERATORS, [PENDING_OPERATOR] * 5)
    time.sleep(3)
    fake_pd.set_body(OPERATORS, "[]\n")
    run = wait_run(api, namespace, "operators", timeout=RUN_TIMEOUT)
    steps = run["status"]["steps"]
    assert run["status"]["phase"] == "Succeeded", run["status"]
    found = [d for d in steps[1]["disturbances"] if d["what"] == "PendingOperators"]
    assert found and found[0]["source"] == "PD" and "5 pending PD operators" in found[0]["message"]
    assert steps[0]["valid"] is True and not steps[0].get("disturbances")


def test_a_store_going_down_mid_step_under_abort_fails_the_run_naming_the_store(
    api: client.ApiClient, namespace: str, mariadb: dict[str, Any], db_secret: str,
    controller: Any, fake_pd: FakePD,
) -> None:  # fmt: skip
    standin_cluster(api, namespace)
    create_run(
        api, namespace, guarded_run("storedown", mariadb, fake_pd.url, guard={"policy": "Abort"})
    )
    wait_step_running(api, namespace, "storedown", 1)
    fake_pd.set_store_state(5, "Down")
    run = wait_run(api, namespace, "storedown", timeout=RUN_TIMEOUT)
    st = run["status"]
    assert st["phase"] == "Failed", st
    assert "store 5" in st["message"] and "Down" in st["message"], st["message"]
    assert st["steps"][0]["valid"] is True
    assert ("StoreState", "store 5") in what_of(st["steps"][1])


def test_the_tidbcluster_upgrading_mid_run_is_a_disturbance(
    api: client.ApiClient, namespace: str, mariadb: dict[str, Any], db_secret: str,
    controller: Any, fake_pd: FakePD,
) -> None:  # fmt: skip
    standin_cluster(api, namespace)
    create_run(api, namespace, guarded_run("upgrade", mariadb, fake_pd.url))
    wait_step_running(api, namespace, "upgrade", 1)
    client.CustomObjectsApi(api).patch_namespaced_custom_object(
        "pingcap.com", "v1alpha1", namespace, "tidbclusters", "basic",
        {"status": {"tikv": {"phase": "Upgrade"}}},
    )  # fmt: skip
    run = wait_run(api, namespace, "upgrade", timeout=RUN_TIMEOUT)
    steps = run["status"]["steps"]
    assert run["status"]["phase"] == "Succeeded", run["status"]
    found = [d for d in steps[1]["disturbances"] if d["what"] == "ClusterPhase"]
    assert found and found[0]["object"] == "basic" and "Upgrade" in found[0]["message"]
    assert steps[0]["valid"] is True and not steps[0].get("disturbances")


def test_a_neighbour_load_during_one_step_is_a_stall_from_the_interval_series(
    api: client.ApiClient, namespace: str, mariadb: dict[str, Any], db_secret: str,
    controller: Any, fake_pd: FakePD,
) -> None:  # fmt: skip
    standin_cluster(api, namespace)
    body = guarded_run("neighbour", mariadb, fake_pd.url, durationSeconds=6)
    create_run(api, namespace, body)
    wait_step_running(api, namespace, "neighbour", 1)
    time.sleep(1.5)  # into the measured part of step 2
    # Another tenant's 128 connections hammer the same database for 3 s.
    neighbour = subprocess.run(
        [
            "sysbench", "oltp_point_select", f"--mysql-host={mariadb['host']}",
            f"--mysql-port={mariadb['port']}", f"--mysql-user={mariadb['user']}",
            f"--mysql-password={mariadb['password']}", "--mysql-db=sbtest", "--tables=1",
            "--table-size=1000", "--threads=128", "--time=3", "run",
        ],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert neighbour.returncode == 0, neighbour.stdout[-2000:] + neighbour.stderr[-2000:]
    run = wait_run(api, namespace, "neighbour", timeout=RUN_TIMEOUT)
    steps = run["status"]["steps"]
    assert run["status"]["phase"] == "Succeeded", run["status"]
    stalls = [d for d in steps[1]["disturbances"] if d["what"] == "Stall"]
    assert stalls and stalls[0]["source"] == "sysbench", steps[1]
    assert "median" in stalls[0]["message"]
    assert steps[1]["valid"] is False
    # The steps around it, on the same loaded machine, raise no false alarm.
    for quiet in (steps[0], steps[2]):
        assert quiet["valid"] is True and not quiet.get("disturbances"), quiet
