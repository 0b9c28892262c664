"""The guard over every step, on the test bed: disturbances planted mid-step are caught.

Each run has three short steps against the MariaDB stand-in, a stand-in TidbCluster `basic`
(pods on node2/node3; node1 is the benchmark node) and a FakePD the test changes mid-step.
The guard polls PD every second here (spec.guard.pdIntervalSeconds) so that a change lasting
a few seconds is seen.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pymysql
import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from e2e.conftest import REPO, Controller
from testbed.agent import FAULT_ANNOTATION
from testbed.cluster import Testbed
from testbed.deploy import create_namespace, delete_namespace, wait_sa_token
from testbed.fake_pd import API, FakePD
from testbed.kube import standin_pod, wait_for
from testbed.runs import (
    RunBed,
    add_db_secret,
    assert_quiet,
    why_not,
)
from tidb_bench_operator.domain.results_store import read_store

pytestmark = pytest.mark.e2e

RUN_TIMEOUT = 240
DATA = Path(__file__).resolve().parents[1] / "data"
OPERATORS = "/pd/api/v1/operators"
# A real operator string as PD v7.3+ prints it (https://github.com/tikv/pd/blob/v8.1.1/pkg/schedule/operator/operator.go).
PENDING_OPERATOR = (
    "balance-region {mv peer: store [1] to [5]} (kind:region, region:28977(365, 35), "
    "createAt:2024-07-09 16:25:23.105733052 +0800 CST m=+1209042.707881308, startAt:0001-01-01 "
    "00:00:00 +0000 UTC, currentStep:0, size:95, steps:[0:{add learner peer 1 on store 5}], "
    "timeout:[17m0s])"
)


def guarded_run(bed: RunBed, name: str, pd_url: str, **spec: Any) -> dict[str, Any]:
    """Three steps of 4 s on the cluster `basic`, preflight Enforce, the guard polling PD every 1 s."""
    settings: dict[str, Any] = {"threads": [1, 2, 4], "durationSeconds": 4, **spec}
    settings["guard"] = {"pdIntervalSeconds": 1, **settings.get("guard", {})}
    return bed.manifest(
        name, cluster={"name": "basic"},
        preflight={"policy": "Enforce", "timeoutSeconds": 60}, **settings, pd_url=pd_url,
    )  # fmt: skip


def start_guarded(
    bed: RunBed, fake_pd: FakePD, name: str, *, step: int | None = 1, **spec: Any
) -> None:
    """The stand-in cluster `basic`, then a guarded run; back when step `step` (from 0) runs."""
    bed.cluster("basic", {"pd": ["node2"], "tikv": ["node2", "node3"], "tidb": ["node3"]})
    bed.create(guarded_run(bed, name, fake_pd.url, **spec))
    if step is not None:
        wait_step_running(bed, name, step)


def wait_step_running(bed: RunBed, name: str, index: int) -> None:
    """Until step `index` (from 0) has its pods started (a second into the step)."""

    def running() -> bool:
        steps = (bed.get(name).get("status") or {}).get("steps") or []
        return len(steps) > index and steps[index].get("phase") == "Running"

    wait_for(running, RUN_TIMEOUT, f"step {index + 1} of {name} running", interval=0.2)
    time.sleep(1.0)


def succeeded_steps(run: dict[str, Any]) -> list[dict[str, Any]]:
    """The steps of a run that must have succeeded."""
    st = run["status"]
    assert st["phase"] == "Succeeded", why_not(st)
    return list(st["steps"])


def flagged_in_step_two(run: dict[str, Any], what: str) -> list[dict[str, Any]]:
    """Step 2's disturbances of kind `what`, in a run that succeeded with step 1 undisturbed."""
    steps = succeeded_steps(run)
    assert steps[0]["valid"] is True and not steps[0].get("disturbances")
    return [d for d in steps[1]["disturbances"] if d["what"] == what]


def what_of(step: dict[str, Any]) -> list[tuple[str, str]]:
    return [(d["what"], d["object"]) for d in step.get("disturbances") or []]


def test_field_note_tikv_lands_on_the_bench_node_mid_run_step_flagged_recommendation_from_valid(
    bed: RunBed, controller: Any, fake_pd: FakePD
) -> None:
    start_guarded(bed, fake_pd, "fieldnote", slo={"latencyMs": 100})
    # docs/field-story.md: a third TiKV is scheduled onto the benchmark node while the sweep runs.
    # A stand-in pod runs nothing, so a CPU hog on this (one) machine plays its work.
    bed.core.create_namespaced_pod(
        bed.namespace, standin_pod("basic-tikv-2", bed.namespace, "basic", "tikv", "node1")
    )
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        wait_for(
            lambda: bed.get("fieldnote")["status"]["steps"][1]["phase"]
            == "Succeeded",
            RUN_TIMEOUT, "step 2 recorded",
        )  # fmt: skip
    finally:
        hog.kill()
        hog.wait()
    bed.core.delete_namespaced_pod("basic-tikv-2", bed.namespace, grace_period_seconds=0)
    run = bed.wait("fieldnote", timeout=RUN_TIMEOUT)
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
    reasons = [e.reason for e in bed.events("fieldnote")]
    assert "StepDisturbed" in reasons
    print("field story QPS by step:", [(s["threads"], s["qps"], s["valid"]) for s in st["steps"]])


def test_retry_measures_the_disturbed_step_again_after_the_pod_leaves_and_keeps_the_first(
    bed: RunBed, controller: Any, fake_pd: FakePD
) -> None:
    start_guarded(bed, fake_pd, "again", guard={"policy": "Retry"})
    bed.core.create_namespaced_pod(
        bed.namespace, standin_pod("basic-tikv-2", bed.namespace, "basic", "tikv", "node1")
    )

    def waiting() -> bool:
        step = bed.get("again")["status"]["steps"][1]
        return bool(step.get("guardWaitSince"))

    wait_for(waiting, RUN_TIMEOUT, "step 2 waiting to be measured again")
    time.sleep(6)  # the gate is asked again while the pod is still there: the step waits
    assert bed.get("again")["status"]["steps"][1]["phase"] == "Pending"
    bed.core.delete_namespaced_pod("basic-tikv-2", bed.namespace, grace_period_seconds=0)
    run = bed.wait("again", timeout=RUN_TIMEOUT)
    st = run["status"]
    assert st["phase"] == "Succeeded", st
    step = st["steps"][1]
    assert step["valid"] is True and step["guardRetries"] == 1
    assert [t["valid"] for t in step["trials"]] == [False, True]
    assert step["trials"][0]["disturbed"] >= 1, "status counts them, the store lists them"
    # Each trial's result and disturbances are in the run's results store.
    cms = bed.core.list_namespaced_config_map(
        bed.namespace, label_selector="tidbbench.io/run=again"
    ).items
    stored = read_store(st["resultsConfigMap"], {cm.metadata.name: cm.data for cm in cms})
    disturbed, clean = stored.steps[1]["trials"]
    assert ("PodOnBenchNode", "basic-tikv-2") in what_of(disturbed)
    assert clean.get("disturbances", []) == []
    assert step["qps"] == clean["result"]["qps"]
    assert all(s["valid"] for s in st["steps"])
    reasons = [e.reason for e in bed.events("again")]
    assert "StepMeasuredAgain" in reasons


def test_a_quiet_run_has_no_disturbance_on_any_step(
    bed: RunBed, controller: Any, fake_pd: FakePD
) -> None:
    start_guarded(bed, fake_pd, "quiet", step=None)
    run = bed.wait("quiet", timeout=RUN_TIMEOUT)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    assert_quiet(run)
    assert all(s["valid"] for s in run["status"]["steps"])
    assert not run["status"].get("invalidSteps")


def test_a_tikv_restart_mid_step_is_a_disturbance(
    bed: RunBed, controller: Any, fake_pd: FakePD
) -> None:
    start_guarded(bed, fake_pd, "restart")
    pod = bed.core.read_namespaced_pod("basic-tikv-1", bed.namespace)
    # As a kubelet reports a container that exited and was started again.
    statuses = bed.api.sanitize_for_serialization(pod.status.container_statuses)
    statuses = [{**c, "restartCount": 1} for c in statuses]
    bed.core.patch_namespaced_pod_status(
        "basic-tikv-1", bed.namespace, {"status": {"containerStatuses": statuses}}
    )
    run = bed.wait("restart", timeout=RUN_TIMEOUT)
    steps = succeeded_steps(run)
    assert ("PodRestarted", "basic-tikv-1") in what_of(steps[1]), steps[1]
    assert steps[1]["valid"] is False
    assert steps[0]["valid"] is True and not steps[0].get("disturbances")


def test_pending_pd_operators_mid_step_are_a_disturbance(
    bed: RunBed, controller: Any, fake_pd: FakePD
) -> None:
    start_guarded(bed, fake_pd, "operators")
    fake_pd.set_body(OPERATORS, [PENDING_OPERATOR] * 5)
    time.sleep(3)
    fake_pd.set_body(OPERATORS, "[]\n")
    run = bed.wait("operators", timeout=RUN_TIMEOUT)
    found = flagged_in_step_two(run, "PendingOperators")
    assert found and found[0]["source"] == "PD" and "5 pending PD operators" in found[0]["message"]


def test_a_store_going_down_mid_step_under_abort_fails_the_run_naming_the_store(
    bed: RunBed, controller: Any, fake_pd: FakePD
) -> None:
    start_guarded(bed, fake_pd, "storedown", guard={"policy": "Abort"})
    fake_pd.set_store_state(5, "Down")
    run = bed.wait("storedown", timeout=RUN_TIMEOUT)
    st = run["status"]
    assert st["phase"] == "Failed", st
    assert "store 5" in st["message"] and "Down" in st["message"], st["message"]
    assert st["steps"][0]["valid"] is True
    assert ("StoreState", "store 5") in what_of(st["steps"][1])


def test_the_tidbcluster_upgrading_mid_run_is_a_disturbance(
    bed: RunBed, controller: Any, fake_pd: FakePD
) -> None:
    start_guarded(bed, fake_pd, "upgrade")
    client.CustomObjectsApi(bed.api).patch_namespaced_custom_object(
        "pingcap.com", "v1alpha1", bed.namespace, "tidbclusters", "basic",
        {"status": {"tikv": {"phase": "Upgrade"}}},
    )  # fmt: skip
    run = bed.wait("upgrade", timeout=RUN_TIMEOUT)
    found = flagged_in_step_two(run, "ClusterPhase")
    assert found and found[0]["object"] == "basic" and "Upgrade" in found[0]["message"]


def test_a_neighbour_holding_the_table_during_one_step_is_a_stall_from_the_interval_series(
    bed: RunBed, controller: Any, fake_pd: FakePD
) -> None:
    start_guarded(bed, fake_pd, "neighbour", durationSeconds=6)
    time.sleep(1.5)  # into the measured part of step 2
    # Another tenant locks the benchmark's table for 2.5 s: sysbench's point selects wait, so
    # at least one whole 1 s interval has no query at all, and at most three of the step's six
    # are touched (the median stays the undisturbed rate). A CPU contest (a second sysbench
    # hammering the server) was tried first: on a busy 2-core machine it does not always push
    # an interval below a tenth of the median, and the test was flaky.
    conn = pymysql.connect(
        host=bed.mariadb["host"], port=int(bed.mariadb["port"]), user=bed.mariadb["user"],
        password=bed.mariadb["password"], database=bed.mariadb["database"],
    )  # fmt: skip
    try:
        with conn.cursor() as cur:
            cur.execute("LOCK TABLES sbtest1 WRITE")
            time.sleep(2.5)
            cur.execute("UNLOCK TABLES")
    finally:
        conn.close()
    run = bed.wait("neighbour", timeout=RUN_TIMEOUT)
    steps = succeeded_steps(run)
    stalls = [d for d in steps[1]["disturbances"] if d["what"] == "Stall"]
    assert stalls and stalls[0]["source"] == "sysbench", steps[1]
    assert "median" in stalls[0]["message"]
    assert steps[1]["valid"] is False
    # The steps around it, on the same loaded machine, raise no false alarm.
    for quiet in (steps[0], steps[2]):
        assert quiet["valid"] is True and not quiet.get("disturbances"), quiet


def test_a_client_log_the_node_will_not_serve_leaves_its_step_unjudged_and_not_valid(
    bed: RunBed, controller: Any, fake_pd: FakePD
) -> None:
    start_guarded(bed, fake_pd, "nolog", step=0)
    pods = bed.core.list_namespaced_pod(
        bed.namespace,
        label_selector="tidbbench.io/run=nolog,tidbbench.io/role=step,tidbbench.io/step=0",
    ).items
    assert len(pods) == 1, [p.metadata.name for p in pods]
    pod = pods[0].metadata.name
    # The node agent answers 503 for this pod's log from now on (testbed/agent.py).
    bed.core.patch_namespaced_pod(
        pod, bed.namespace, {"metadata": {"annotations": {FAULT_ANNOTATION: "LogsUnavailable"}}}
    )
    run = bed.wait("nolog", timeout=RUN_TIMEOUT)
    steps = succeeded_steps(run)
    first = steps[0]
    assert first["valid"] is False, first
    unjudged = [d for d in first["disturbances"] if d["what"] == "Unjudged"]
    assert unjudged and unjudged[0]["object"] == pod, first
    assert "could not be read" in unjudged[0]["message"]
    assert any(f"the log of client pod {pod} could not be read" in n for n in first["notes"])
    for quiet in steps[1:]:
        assert quiet["valid"] is True and not quiet.get("disturbances"), quiet


def test_a_pd_leader_change_in_the_last_second_of_a_step_is_flagged(
    bed: RunBed, controller: Any, fake_pd: FakePD
) -> None:
    # PD is polled every 30 s, far longer than the 4-s steps: only the steps' first and last
    # looks poll it. The leader changes in step 2's last second.
    start_guarded(bed, fake_pd, "lastsecond", guard={"pdIntervalSeconds": 30})
    time.sleep(2.0)  # wait_step_running returned a second into step 2's pods
    leader = json.loads(
        (DATA / "pd" / "pd-api-v1-leader_v8.1.0_tidb-operator-testdata.json").read_text()
    )
    fake_pd.set_body(f"{API}/leader", {**leader, "name": "basic-pd-elsewhere"})
    run = bed.wait("lastsecond", timeout=RUN_TIMEOUT)
    steps = succeeded_steps(run)
    assert steps[0]["valid"] is True and not steps[0].get("disturbances"), steps[0]
    changed = [d for d in steps[1]["disturbances"] if d["what"] == "PDLeaderChanged"]
    assert changed and changed[0]["message"].endswith("→ basic-pd-elsewhere"), steps[1]
    assert steps[1]["valid"] is False
    # Step 3 starts with the new leader as its baseline: nothing changed while it ran.
    assert steps[2]["valid"] is True and not steps[2].get("disturbances"), steps[2]


# ---------------------------------------------------------------------- a failed first look
#: The one permission the controller loses while step 2 starts (deploy/rbac-cluster.yaml).
CLUSTER_READ = {"apiGroups": ["pingcap.com"], "resources": ["tidbclusters"], "verbs": ["get"]}


def deploy_rules() -> list[dict[str, Any]]:
    """Every rule deploy/ grants the controller, cluster-wide, except reading TidbClusters."""
    rules = []
    for name in ("rbac-cluster.yaml", "rbac-run-namespace.yaml"):
        for doc in yaml.safe_load_all((REPO / "deploy" / name).read_text()):
            if doc and doc["kind"] == "ClusterRole":
                rules += [r for r in doc["rules"] if r != CLUSTER_READ]
    return rules


def bind(rbac: client.RbacAuthorizationV1Api, name: str, ns: str) -> None:
    """The ClusterRole `name` bound to the ServiceAccount `ctl` of `ns`."""
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": "ctl", "namespace": ns}],
        }
    )  # fmt: skip


def grant(rbac: client.RbacAuthorizationV1Api, name: str, ns: str, rules: list[Any]) -> None:
    """A ClusterRole `name` with `rules`, bound to the ServiceAccount `ctl` of `ns`."""
    rbac.create_cluster_role({"metadata": {"name": name}, "rules": rules})
    bind(rbac, name, ns)


def test_a_step_whose_first_look_cannot_read_the_cluster_takes_its_baseline_late_and_floods_nothing(
    testbed: Testbed, api: client.ApiClient, core: client.CoreV1Api, crds: None,
    mariadb: dict[str, Any], fake_pd: FakePD, tmp_path: Path,
) -> None:  # fmt: skip
    # Issue 25: one API error at a step's first look was kept as "no pods", and the next look
    # reported every pod of the cluster as PodCreated. A restarted or hung API server cannot
    # show it here: the look's status write fails as well and the whole look is done again
    # later. A partial failure can: the API server refuses this controller the TidbCluster
    # (403) from after preflight until step 1 has started, while Jobs and the run's status
    # still work. The first step, because no earlier look is left in the status.
    ns = create_namespace(testbed, "guardlate")  # no session's admin controller watches it
    rbac = client.RbacAuthorizationV1Api(api)
    names = (f"{ns}-ctl", f"{ns}-cluster-read")
    ctl = None
    try:
        core.create_namespaced_service_account(ns, {"metadata": {"name": "ctl"}})
        grant(rbac, names[0], ns, deploy_rules())
        grant(rbac, names[1], ns, [CLUSTER_READ])
        kubeconfig = testbed.write_kubeconfig_for_token(
            tmp_path / "kubeconfig", wait_sa_token(testbed, name="ctl", namespace=ns)
        )
        ctl = Controller(
            testbed, kubeconfig, testbed.logs / f"controller-{ns}.log",
            {"TIDB_BENCH_LIVENESS": "", "TIDB_BENCH_METRICS_PORT": "0"}, namespaces=(ns,),
        )  # fmt: skip
        ctl.start()
        add_db_secret(core, ns, mariadb)
        bed = RunBed(api, core, ns, mariadb)
        start_guarded(bed, fake_pd, "late", step=None, threads=[1, 2], durationSeconds=5)
        # Preflight has read the cluster; the dataset Job runs for a few seconds more.
        wait_for(lambda: phase_of(bed, "late") == "Preparing", RUN_TIMEOUT, "Preparing", 0.1)
        rbac.delete_cluster_role_binding(names[1])
        wait_for(
            lambda: step_phase(bed, "late", 0) == "Running", RUN_TIMEOUT, "step 1 started", 0.1
        )
        # Step 1's first look has failed (the status saying Running was written by it); one
        # more look fails too before the permission is back.
        time.sleep(1.5)
        bind(rbac, names[1], ns)
        run = bed.wait("late", timeout=RUN_TIMEOUT)
    finally:
        if ctl is not None:
            ctl.stop()
        for name in names:
            for delete in (rbac.delete_cluster_role_binding, rbac.delete_cluster_role):
                with contextlib.suppress(ApiException):
                    delete(name)
        delete_namespace(testbed, ns)
    first, second = succeeded_steps(run)
    print("step 1:", first.get("disturbances"), first["notes"])
    assert not [d for d in first.get("disturbances") or [] if d["what"] == "PodCreated"], first
    assert first["valid"] is True and not first.get("disturbances"), first
    late = [n for n in first["notes"] if "the guard's baseline of the cluster was taken" in n]
    assert late and late[0].endswith("the first look could not read the cluster"), first["notes"]
    assert second["valid"] is True and not second.get("disturbances"), second
    assert not [n for n in second["notes"] if "baseline" in n], second["notes"]


def phase_of(bed: RunBed, name: str) -> str | None:
    return (bed.get(name).get("status") or {}).get("phase")


def step_phase(bed: RunBed, name: str, index: int) -> str | None:
    steps = (bed.get(name).get("status") or {}).get("steps") or []
    return steps[index].get("phase") if len(steps) > index else None
