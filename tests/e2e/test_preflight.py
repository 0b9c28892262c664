"""Preflight on the test bed: real placement facts, a FakePD, pd-ctl through `kubectl exec`.

MariaDB stands in for TiDB's SQL layer, so the PD checks read a FakePD started in this test
process (the controller subprocess reaches it on 127.0.0.1): by HTTP through
`target.pdURL`, or by pd-ctl exec'd in a stand-in PD pod whose node agent runs the pd-ctl
emulator against that FakePD.
"""

from __future__ import annotations

import socket
import threading
import time
from datetime import datetime
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.stream import stream

from testbed.fake_pd import DATA_DIR, FakePD, field_note_stores
from testbed.kube import create_standin_cluster, pd_ctl_exec, wait_for
from testbed.runs import RunBed, assert_blocked_only_by, checks_of, condition
from tidb_bench_operator.adapters.pd import ExecPDClient
from tidb_bench_operator.domain.pd import parse_stores

pytestmark = pytest.mark.e2e

OPERATORS = "/pd/api/v1/operators"
# A real operator string as PD v7.3+ prints it (https://github.com/tikv/pd/blob/v8.1.1/pkg/schedule/operator/operator.go).
PENDING_OPERATOR = (
    "balance-leader {transfer leader: store 2 to 1} (kind:leader, region:28977(365, 35), "
    "createAt:2024-07-09 16:25:23.105733052 +0800 CST m=+1209042.707881308, startAt:0001-01-01 "
    "00:00:00 +0000 UTC, currentStep:0, size:95, steps:[0:{transfer leader from store 2 to store "
    "1}], timeout:[1m0s])"
)
# Runs against the one MariaDB are serialised across every suite on the test bed.
RUN_TIMEOUT = 240
# Spread every component over hostnames, so only what a test breaks fails topology-spread.
SPREAD = {"pd": 1, "tikv": 1, "tidb": 1}


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def preflight_run(bed: RunBed, name: str, *, pd_url: str | None = None, **spec: Any) -> None:
    """Create a one-step run whose SQL goes to MariaDB and, given pd_url, whose PD reads go there."""
    bed.create(bed.manifest(name, threads=[2], durationSeconds=2, pd_url=pd_url, **spec))


def held_by_pending_operators(bed: RunBed, fake_pd: FakePD, name: str, policy: str) -> None:
    """PD has a pending operator; then a run whose preflight, under `policy`, allows 120 s."""
    fake_pd.set_body(OPERATORS, [PENDING_OPERATOR])
    preflight_run(
        bed, name, pd_url=fake_pd.url, preflight={"policy": policy, "timeoutSeconds": 120}
    )


class JobWatch:
    """Records every Job event in a namespace from now on (a watch misses nothing, a poll may)."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.batch = client.BatchV1Api(api)
        self.namespace = namespace
        self.events: list[str] = []
        self.rv = self.batch.list_namespaced_job(namespace).metadata.resource_version
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set():
            # Short server-side timeouts so stop() returns promptly; each round resumes from
            # the last resourceVersion seen, so no event falls between two rounds.
            stream = watch.Watch().stream(
                self.batch.list_namespaced_job,
                self.namespace,
                resource_version=self.rv,
                timeout_seconds=2,
            )
            for event in stream:
                job = event["object"]
                self.rv = job.metadata.resource_version
                self.events.append(f"{event['type']} {job.metadata.name}")

    def stop(self) -> list[str]:
        self._stop.set()
        self._thread.join(timeout=10)
        return self.events


def test_tikv_pods_piled_on_one_node_fail_topology_spread_naming_the_nodes(
    bed: RunBed, controller: Any, fake_pd: FakePD
) -> None:
    bed.cluster(
        "basic",
        {"pd": ["node3"], "tikv": ["node2", "node2", "node3"], "tidb": ["node2"]},
        spread=SPREAD,
    )
    preflight_run(
        bed,
        "spread",
        pd_url=fake_pd.url,
        cluster={"name": "basic"},
        preflight={"policy": "Enforce", "timeoutSeconds": 8},
    )
    run = bed.wait("spread", timeout=RUN_TIMEOUT)
    assert run["status"]["phase"] == "Failed", run["status"]
    spread = checks_of(run)["topology-spread"]
    assert spread["status"] == "Fail"
    assert "TiKV node2:2 node3:1 node1:0" in spread["message"]
    assert "skew 2 > maxSkew 1" in spread["message"]
    # Everything else was fair: only the spread blocks the run.
    assert_blocked_only_by(run, "topology-spread")


def test_a_tikv_pod_on_the_bench_node_fails_isolation_and_no_job_is_ever_created(
    bed: RunBed, controller: Any, fake_pd: FakePD
) -> None:
    bed.cluster(
        "basic",
        {"pd": ["node2"], "tikv": ["node1", "node2", "node3"], "tidb": ["node3"]},
        spread=SPREAD,
    )
    jobs = JobWatch(bed.api, bed.namespace)
    try:
        preflight_run(
            bed,
            "isolated",
            pd_url=fake_pd.url,
            cluster={"name": "basic"},
            preflight={"policy": "Enforce", "timeoutSeconds": 8},
        )
        run = bed.wait("isolated", timeout=RUN_TIMEOUT)
        time.sleep(3)  # a Job created right after the verdict would still be seen
    finally:
        seen = jobs.stop()
    assert run["status"]["phase"] == "Failed", run["status"]
    isolation = checks_of(run)["bench-node-isolation"]
    assert isolation["status"] == "Fail"
    assert "node1" in isolation["message"] and "basic-tikv-0" in isolation["message"]
    assert "bench-node-isolation" in run["status"]["message"]
    assert seen == [], f"Jobs appeared although the preflight failed under Enforce: {seen}"


def test_pending_operators_hold_the_run_until_they_drain_then_it_proceeds_and_succeeds(
    bed: RunBed, controller: Any, fake_pd: FakePD
) -> None:
    held_by_pending_operators(bed, fake_pd, "settling", "Enforce")

    def waiting() -> dict[str, Any] | None:
        run = bed.get("settling")
        cond = condition(run, "PreflightPassed")
        return run if (cond.get("status"), cond.get("reason")) == ("False", "Waiting") else None

    # The queue may hold the run behind other suites' runs on the same MariaDB: start the
    # drain clock only once this run is actually being held by the operators.
    held = wait_for(waiting, RUN_TIMEOUT, "the run to wait on pending operators")
    assert held["status"]["phase"] == "Preflight"
    pending = checks_of(held)["pending-operators"]
    assert pending["status"] == "Fail" and "balance-leader" in pending["message"]
    assert "pending-operators" in condition(held, "PreflightPassed")["message"]
    drain_after = 10.0
    fake_pd.set_sequence(OPERATORS, [(0, [PENDING_OPERATOR]), (drain_after, [])])
    drained_at = time.monotonic() + drain_after

    run = wait_for(
        lambda: (r := bed.get("settling"))["status"]["phase"] != "Preflight" and r,
        60,
        "the run to leave Preflight once the operators drained",
    )
    left_after_drain = time.monotonic() - drained_at
    assert left_after_drain >= -0.5, "the run proceeded before PD's operator queue was empty"
    # The controller re-evaluates every 5 s: it proceeds within one retry of the drain (plus
    # slack for a test bed shared with other suites).
    assert left_after_drain < 10, left_after_drain
    run = bed.wait("settling", timeout=RUN_TIMEOUT)
    status = run["status"]
    assert status["phase"] == "Succeeded", status
    assert status["preflight"]["attempts"] > 1
    settled = checks_of(run)["pending-operators"]
    assert (settled["status"], settled["message"]) == ("Pass", "no pending PD operators")
    assert condition(run, "PreflightPassed")["status"] == "True"
    events = [(e.type, e.reason, e.message) for e in bed.events("settling")]
    waiting_events = [e for e in events if e[1] == "PreflightWaiting"]
    assert waiting_events and waiting_events[0][0] == "Warning"
    assert "pending-operators" in waiting_events[0][2]
    passed = condition(run, "PreflightPassed")
    assert passed["reason"] == "Passed"
    waited = _seconds_between(status["startedAt"], passed["lastTransitionTime"])
    assert waited >= drain_after
    print(
        f"\npreflight held the run {waited:.0f} s over {status['preflight']['attempts']} "
        f"attempts; it left Preflight {left_after_drain:.1f} s after the operators drained"
    )


def _seconds_between(start: str, end: str) -> float:
    def parse(text: str) -> datetime:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))

    return (parse(end) - parse(start)).total_seconds()


def test_under_warn_pending_operators_are_recorded_and_the_run_proceeds_at_once(
    bed: RunBed, controller: Any, fake_pd: FakePD
) -> None:
    held_by_pending_operators(bed, fake_pd, "hasty", "Warn")
    run = bed.wait("hasty", timeout=RUN_TIMEOUT)
    status = run["status"]
    assert status["phase"] == "Succeeded", status
    assert status["preflight"]["attempts"] == 1
    pending = checks_of(run)["pending-operators"]
    assert pending["status"] == "Fail"
    assert "1 PD operator(s) pending" in pending["message"]
    cond = condition(run, "PreflightPassed")
    assert (cond["status"], cond["reason"]) == ("False", "ProceededFail")
    assert "recorded, run continues (policy Warn)" in cond["message"]
    events = [(e.type, e.reason, e.message) for e in bed.events("hasty")]
    assert ("Warning", "PreflightFail", f"pending-operators: {pending['message']}") in events
    assert not any(e[1] == "PreflightWaiting" for e in events)


@pytest.mark.parametrize("policy", ["Enforce", "Warn"])
def test_an_unreachable_pd_is_a_precise_failure_or_a_recorded_warning_by_policy(
    bed: RunBed, controller: Any, closed_port: int, policy: str
) -> None:
    pd_url = f"http://127.0.0.1:{closed_port}"
    preflight_run(bed, "nopd", pd_url=pd_url, preflight={"policy": policy, "timeoutSeconds": 8})
    run = bed.wait("nopd", timeout=RUN_TIMEOUT)
    status = run["status"]
    checks = checks_of(run)
    expected = f"PD at {pd_url} is unreachable from the controller: connection refused"
    for name in ("store-state", "leader-size-balance", "region-size-balance", "pending-operators"):
        assert checks[name]["status"] == "Fail", (name, checks[name])
        assert expected in checks[name]["message"], (name, checks[name]["message"])
    if policy == "Enforce":
        assert status["phase"] == "Failed", status
        assert "timeoutSeconds 8" in status["message"]
        assert expected in status["message"]
        assert status["preflight"]["attempts"] >= 2  # re-checked until the timeout
    else:
        assert status["phase"] == "Succeeded", status
        assert status["preflight"]["attempts"] == 1
        assert condition(run, "PreflightPassed")["reason"] == "ProceededFail"


# --- pd-ctl through `kubectl exec` ---------------------------------------------------------------


def test_the_exec_client_reads_the_fake_pd_through_pd_ctl_in_a_stand_in_pd_pod(
    api: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    fake_pd: FakePD,
) -> None:
    fake_pd.set_body(OPERATORS, [PENDING_OPERATOR])
    create_standin_cluster(
        api, namespace, "basic", {"pd": ["node2"]}, exec_commands={"pd": pd_ctl_exec(fake_pd.url)}
    )
    wait_for(
        lambda: core.read_namespaced_pod("basic-pd-0", namespace).status.phase == "Running",
        30,
        "the stand-in PD pod to run",
    )
    pd = ExecPDClient(api, namespace, "basic-pd-0")
    recorded = parse_stores(
        (DATA_DIR / "pd-api-v1-stores_v8.1.0_tidb-operator-testdata.json").read_text()
    )
    assert [(s.id, s.leader_size) for s in pd.stores()] == [(s.id, s.leader_size) for s in recorded]
    assert [op.region_id for op in pd.operators()] == [28977]
    assert fake_pd.requests == ["GET /pd/api/v1/stores", "GET /pd/api/v1/operators"]


def test_an_executable_missing_from_the_pod_is_an_exec_failure_with_its_exit_code(
    api: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
) -> None:
    create_standin_cluster(api, namespace, "basic", {"pd": ["node2"]})
    wait_for(
        lambda: core.read_namespaced_pod("basic-pd-0", namespace).status.phase == "Running",
        30,
        "the stand-in PD pod to run",
    )
    # stream() swaps its ApiClient's request method while it runs: give it its own.
    with client.ApiClient(api.configuration) as own:
        ws = stream(
            client.CoreV1Api(own).connect_get_namespaced_pod_exec,
            "basic-pd-0",
            namespace,
            command=["/pd-ctl", "store"],
            stdout=True,
            stderr=True,
            stdin=False,
            tty=False,
            _preload_content=False,
        )
        try:
            ws.run_forever(timeout=30)
            stderr = ws.read_stderr(timeout=0)
            code = ws.returncode
        finally:
            ws.close()
            ws.sock.shutdown()  # close() is a no-op after the server's close frame
    assert code == 126
    assert 'exec: "/pd-ctl"' in stderr


def test_a_run_with_pd_transport_exec_gets_its_pd_checks_through_pd_ctl_in_the_pd_pod(
    bed: RunBed, controller: Any, fake_pd: FakePD
) -> None:
    fake_pd.set_body("/pd/api/v1/stores", field_note_stores(bed.namespace))
    bed.cluster(
        "basic",
        {"pd": ["node2"], "tikv": ["node2", "node3"], "tidb": ["node3"]},
        spread=SPREAD,
        exec_commands={"pd": pd_ctl_exec(fake_pd.url)},
    )
    # No pdURL: the only way to this FakePD is the exec annotation of basic-pd-0.
    preflight_run(
        bed,
        "viaexec",
        cluster={"name": "basic"},
        preflight={"policy": "Enforce", "timeoutSeconds": 8, "pdTransport": "Exec"},
    )
    run = bed.wait("viaexec", timeout=RUN_TIMEOUT)
    assert run["status"]["phase"] == "Failed", run["status"]
    checks = checks_of(run)
    leaders = checks["leader-size-balance"]
    assert leaders["status"] == "Fail"
    assert (
        f"store 4 (basic-tikv-3.basic-tikv-peer.{bed.namespace}.svc:20160) holds 689 MiB"
        in (leaders["message"])
    )
    assert leaders["stores"][0] == 4
    assert checks["region-size-balance"]["status"] == "Pass"  # region_count skew never fails
    assert checks["store-state"]["status"] == "Pass"
    assert checks["pending-operators"]["status"] == "Pass"
    assert "leader-size-balance" in run["status"]["message"]
    assert "GET /pd/api/v1/stores" in fake_pd.requests
    assert "GET /pd/api/v1/operators" in fake_pd.requests
