"""Fault injection on the test bed: every case ends in a defined state within a stated bound,
with no step result lost and no Job left behind.

Faults are real where the test bed has the part: the API server, MariaDB and the controller
are processes that are stopped and started again; pods are deleted through the API. What a
kubelet does on its own (an OOM kill, an image that cannot be pulled) is played by the node
agent (tests/testbed/agent.py: the `testbed.tidbbench.io/fault` annotation, `.invalid`
registries). Steps are short and use one thread; the bounds count from the moment the run
is actually being worked on (runs of other tests on the same MariaDB queue before it).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from testbed.cluster import Testbed, stop_pidfile
from testbed.fake_pd import FakePD
from testbed.kube import wait_for
from testbed.runs import (
    GROUP,
    PLURAL,
    VERSION,
    RunBed,
    controller_log_tail,
    get_run,
    jobs_of,
    run_manifest,
    why_not,
)
from testbed.services import start_mariadb
from tidb_bench_operator.domain.results_store import read_store

pytestmark = pytest.mark.e2e

#: Results per ConfigMap in this module (the controller's TIDB_BENCH_RESULTS_OBJECT_BYTES):
#: small, so that a few seconds of interval lines span several objects.
SMALL_OBJECTS = 1024
#: How long a run may queue behind the runs of other tests before its own bound starts.
QUEUE = 240


@pytest.fixture(scope="module")
def ctl(controller: Any) -> Iterator[Any]:
    """The session's controller, restarted with small results objects for this module (and
    image overrides allowed: the wrong-image case names an image of its own)."""
    controller.stop()
    controller.env["TIDB_BENCH_RESULTS_OBJECT_BYTES"] = str(SMALL_OBJECTS)
    controller.env["TIDB_BENCH_ALLOW_IMAGE_OVERRIDE"] = "true"
    controller.start()
    yield controller
    controller.stop()
    controller.env.pop("TIDB_BENCH_RESULTS_OBJECT_BYTES", None)
    controller.env.pop("TIDB_BENCH_ALLOW_IMAGE_OVERRIDE", None)
    controller.start()


def fault_run(name: str, mariadb: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """One thread, short steps, Jobs deleted as soon as the run ends (no Job left behind)."""
    base: dict[str, Any] = {
        "threads": [1],
        "durationSeconds": 6,
        "reportIntervalSeconds": 1,
        "ttlSecondsAfterFinished": 0,
    }
    merged = {k: v for k, v in {**base, **spec}.items() if v is not None}
    return run_manifest(name, mariadb, **merged)


def status(api: client.ApiClient, ns: str, name: str) -> dict[str, Any]:
    return dict(get_run(api, ns, name).get("status") or {})


def wait_status(
    api: client.ApiClient, ns: str, name: str, what: str, timeout: float, pred: Any
) -> dict[str, Any]:
    """Poll the run's status until `pred(status)` holds (API server errors polled through)."""

    def look() -> dict[str, Any] | None:
        try:
            st = status(api, ns, name)
        except Exception:
            return None
        return st if pred(st) else None

    try:
        return dict(wait_for(look, timeout, f"{name}: {what}", interval=0.2))
    except TimeoutError as exc:
        try:
            now = why_not(status(api, ns, name))
        except Exception as read:  # the API server may be what is down
            now = f"status unreadable: {read}"
        raise TimeoutError(f"{exc}\n{now}{controller_log_tail()}") from exc


def step_seen(index: int, attempt: int = 0) -> Any:
    """The step is running and the controller has seen its pod."""

    def pred(st: dict[str, Any]) -> bool:
        steps = st.get("steps") or []
        return (
            len(steps) > index
            and steps[index]["phase"] == "Running"
            and steps[index].get("attempt", 0) == attempt
            and bool(steps[index].get("podNames"))
        )

    return pred


def phase_is(*phases: str) -> Any:
    return lambda st: st.get("phase") in phases


def finished(api: client.ApiClient, ns: str, name: str, timeout: float) -> dict[str, Any]:
    return wait_status(api, ns, name, "terminal", timeout, phase_is("Succeeded", "Failed"))


def no_jobs_left(api: client.ApiClient, ns: str, name: str) -> None:
    wait_for(lambda: not jobs_of(api, ns, name), 30, f"{name}: its Jobs deleted")


def all_measured(st: dict[str, Any]) -> None:
    """Every step has its numbers: none lost to the fault."""
    assert st["phase"] == "Succeeded", why_not(st)
    for step in st["steps"]:
        assert step["phase"] == "Succeeded" and step["qps"] > 0 and step["events"] > 0, step


def sysbench_pids(marker: str) -> list[int]:
    """Local sysbench processes (the agent runs pods on this machine) whose argv has `marker`."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if argv and argv[0].endswith(b"sysbench") and marker.encode() in argv and state != "Z":
            found.append(int(proc.name))
    return found


def pod_of_step(core: client.CoreV1Api, ns: str, st: dict[str, Any], index: int) -> Any:
    return core.read_namespaced_pod(st["steps"][index]["podNames"][0], ns)


# ---------------------------------------------------------------------------- results storage


def test_a_run_whose_results_span_several_objects_completes_and_its_report_renders(
    bed: RunBed, ctl: Any, testbed: Testbed, tmp_path: Path
) -> None:
    body = fault_run("spread", bed.mariadb, threads=[1, 2], ttlSecondsAfterFinished=None)
    bed.create(body)
    st = finished(bed.api, bed.namespace, "spread", QUEUE + 90)
    all_measured(st)
    cms = bed.core.list_namespaced_config_map(
        bed.namespace, label_selector="tidbbench.io/run=spread"
    )
    data = {cm.metadata.name: dict(cm.data or {}) for cm in cms.items}
    assert len(data) >= 5, sorted(data)  # the index and at least two parts per step
    for name, values in data.items():
        assert sum(len(k) + len(v) for k, v in values.items()) <= SMALL_OBJECTS + 64, name
    stored = read_store(st["resultsConfigMap"], data)
    assert [s["qps"] for s in stored.steps] == [s["qps"] for s in st["steps"]]
    for index in ("0", "1"):
        points = stored.series[index]["clients"]["0"]
        # Every interval line is kept; one of them may carry no query when the machine
        # stalls the client for a second (seen with the other e2e worker's load).
        assert len(points) >= 5 and sum(p["qps"] > 0 for p in points) >= 4, points
    # `tidb-bench report` renders from the saved ConfigMaps, and from the cluster.
    saved = tmp_path / "results.yaml"
    saved.write_text(
        subprocess.run(
            [
                "kubectl",
                "--kubeconfig",
                str(testbed.kubeconfig),
                "-n",
                bed.namespace,
                "get",
                "configmaps",
                "-l",
                "tidbbench.io/run=spread",
                "-o",
                "yaml",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    tool = str(Path(sys.executable).parent / "tidb-bench")
    for source in ([str(saved)], ["spread", "-n", bed.namespace]):
        out = subprocess.run(
            [tool, "report", *source], capture_output=True, text=True, check=False,
            env={"KUBECONFIG": str(testbed.kubeconfig), "PATH": "/usr/bin:/bin"},
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert "spread" in out.stdout and "| 1 |" in out.stdout and "| 2 |" in out.stdout


# ---------------------------------------------------------------------------- stuck pods


def test_a_wrong_image_fails_fast_naming_the_image_and_the_kubelets_reason(
    bed: RunBed, ctl: Any
) -> None:
    image = "registry.invalid/tidb-bench:no-such-tag"
    bed.create(fault_run("typo", bed.mariadb, image=image))
    wait_status(bed.api, bed.namespace, "typo", "preparing", QUEUE, phase_is("Preparing", "Failed"))
    t0 = time.monotonic()
    st = finished(bed.api, bed.namespace, "typo", 30)  # bound: 30 s from the prepare Job
    took = time.monotonic() - t0
    assert st["phase"] == "Failed", st
    assert image in st["message"] and "ImagePullBackOff" in st["message"], st["message"]
    no_jobs_left(bed.api, bed.namespace, "typo")
    print(f"wrong image: Failed {took:.1f}s after the prepare Job")


# ---------------------------------------------------------------------------- lost clients


def test_a_client_pod_deleted_and_one_oom_killed_mid_step_are_retried_and_the_run_succeeds(
    bed: RunBed, ctl: Any
) -> None:
    bed.create(fault_run("lossy", bed.mariadb, threads=[1, 2]))
    st = wait_status(bed.api, bed.namespace, "lossy", "step 1 running", QUEUE + 60, step_seen(0))
    time.sleep(2)
    bed.core.delete_namespaced_pod(st["steps"][0]["podNames"][0], bed.namespace)
    st = wait_status(bed.api, bed.namespace, "lossy", "step 2 running", 90, step_seen(1))
    time.sleep(2)
    pod = pod_of_step(bed.core, bed.namespace, st, 1)
    bed.core.patch_namespaced_pod(
        pod.metadata.name, bed.namespace,
        {"metadata": {"annotations": {"testbed.tidbbench.io/fault": "OOMKilled"}}},
    )  # fmt: skip
    st = finished(bed.api, bed.namespace, "lossy", 90)
    all_measured(st)
    first, second = st["steps"]
    assert first["attempt"] == 1 and second["attempt"] == 1
    assert any("was deleted mid-step" in n for n in first["notes"]), first["notes"]
    assert any("was OOM-killed" in n for n in second["notes"]), second["notes"]
    no_jobs_left(bed.api, bed.namespace, "lossy")


# ---------------------------------------------------------------------------- dependencies


@pytest.mark.serial  # restarts a part every other test uses
def test_the_database_restarted_mid_step_retries_the_step_and_the_run_succeeds(
    bed: RunBed, ctl: Any, testbed: Testbed
) -> None:
    # A restart takes MariaDB a few seconds: enough retries to outlast it (3 s, 6 s, 9 s ...).
    bed.create(fault_run("dbgone", bed.mariadb, durationSeconds=10, stepRetries=4))
    wait_status(bed.api, bed.namespace, "dbgone", "step 1 running", QUEUE + 60, step_seen(0))
    time.sleep(3)
    stop_pidfile(testbed.state / "mariadb.pid")
    start_mariadb(testbed)
    st = finished(bed.api, bed.namespace, "dbgone", 120)
    all_measured(st)
    step = st["steps"][0]
    assert step["attempt"] >= 1, step
    assert any("run again" in n for n in step["notes"]), step["notes"]
    no_jobs_left(bed.api, bed.namespace, "dbgone")


@pytest.mark.serial  # restarts a part every other test uses
def test_the_api_server_restarted_mid_step_loses_nothing(
    bed: RunBed, ctl: Any, testbed: Testbed
) -> None:
    bed.create(fault_run("apigone", bed.mariadb, threads=[1, 2]))
    wait_status(bed.api, bed.namespace, "apigone", "step 1 running", QUEUE + 60, step_seen(0))
    stop_pidfile(testbed.state / "kube-apiserver.pid")
    time.sleep(5)
    testbed._start_apiserver()
    st = finished(bed.api, bed.namespace, "apigone", 150)
    all_measured(st)
    assert [s["threads"] for s in st["steps"]] == [1, 2]
    no_jobs_left(bed.api, bed.namespace, "apigone")


# ---------------------------------------------------------------------------- the controller


def test_the_controller_killed_in_preflight_with_pd_down_preparing_running_and_finishing(
    bed: RunBed, ctl: Any
) -> None:
    pd = FakePD().start()
    port = int(pd.url.rsplit(":", 1)[1])
    pd.stop()  # PD down from the start of preflight
    body = fault_run(
        "phases", bed.mariadb,
        preflight={"policy": "Enforce", "timeoutSeconds": 300},
        dataset={"tables": 1, "tableSize": 20000, "prepare": "Always", "cleanup": True},
    )  # fmt: skip
    body["spec"]["target"]["pdURL"] = f"http://127.0.0.1:{port}"
    bed.create(body)
    try:

        def pd_named(st: dict[str, Any]) -> bool:
            checks = (st.get("preflight") or {}).get("checks") or []
            return st.get("phase") == "Preflight" and any(
                c["status"] == "Fail" and str(port) in c["message"] for c in checks
            )

        st = wait_status(bed.api, bed.namespace, "phases", "waiting on PD", QUEUE, pd_named)
        ctl.kill()
        pd.start(port=port)
        ctl.start()
        wait_status(bed.api, bed.namespace, "phases", "Preparing", 60, phase_is("Preparing"))
        ctl.kill()
        ctl.start()
        wait_status(bed.api, bed.namespace, "phases", "step running", 90, step_seen(0))
        ctl.kill()
        time.sleep(2)
        ctl.start()
        try:
            wait_for(
                lambda: any(j.metadata.name == "phases-cleanup" for j in bed.jobs("phases")),
                90, "the cleanup Job",
            )  # fmt: skip
        except TimeoutError as exc:
            jobs = [j.metadata.name for j in bed.jobs("phases")]
            raise AssertionError(
                f"{exc}; Jobs {jobs}; {why_not(status(bed.api, bed.namespace, 'phases'))}"
            ) from exc
        ctl.kill()
        ctl.start()
        st = finished(bed.api, bed.namespace, "phases", 90)
    finally:
        pd.stop()
    all_measured(st)
    assert st["steps"][0]["attempt"] == 0, "a controller restart is not a lost client"
    no_jobs_left(bed.api, bed.namespace, "phases")


def test_the_controller_killed_while_a_run_is_pending_and_between_job_create_and_status_patch(
    bed: RunBed, ctl: Any
) -> None:
    bed.create(fault_run("first", bed.mariadb))
    wait_status(bed.api, bed.namespace, "first", "step running", QUEUE + 60, step_seen(0))
    bed.create(fault_run("second", bed.mariadb))
    wait_status(bed.api, bed.namespace, "second", "queued", 30, lambda st: st.get("waitingFor"))
    ctl.kill()
    # As if the controller had died after creating step 1's Job but before the status
    # patch saying so: the step is Pending again, with its Job already there.
    st = status(bed.api, bed.namespace, "first")
    step = {**st["steps"][0], "phase": "Pending", "jobNames": [], "podNames": []}
    step.pop("startedAt", None)
    client.CustomObjectsApi(bed.api).patch_namespaced_custom_object_status(
        GROUP,
        VERSION,
        bed.namespace,
        PLURAL,
        "first",
        {"status": {"steps": [step]}},
        _content_type="application/merge-patch+json",
    )
    ctl.start()
    first = finished(bed.api, bed.namespace, "first", 90)
    second = finished(bed.api, bed.namespace, "second", QUEUE)
    all_measured(first)
    all_measured(second)
    # The Job already there was taken up, not run again (status lists no Job names once a
    # step is recorded: its Jobs are deleted then).
    assert first["steps"][0]["attempt"] == 0
    assert "StepRetried" not in [e.reason for e in bed.events("first")]
    assert second["startedAt"] >= first["finishedAt"]
    no_jobs_left(bed.api, bed.namespace, "first")
    no_jobs_left(bed.api, bed.namespace, "second")


# ---------------------------------------------------------------------------- deletion


def test_a_run_deleted_mid_step_stops_sysbench_within_seconds_before_the_next_run_starts(
    bed: RunBed, ctl: Any
) -> None:
    marker = "--time=37"  # this test's sysbench, told from any other by its duration
    bed.create(fault_run("doomed", bed.mariadb, durationSeconds=37))
    wait_status(bed.api, bed.namespace, "doomed", "step running", QUEUE + 60, step_seen(0))
    wait_for(lambda: sysbench_pids(marker), 30, "sysbench measuring")
    bed.create(fault_run("next", bed.mariadb))
    wait_status(bed.api, bed.namespace, "next", "queued", 30, lambda st: st.get("waitingFor"))
    t0 = time.monotonic()
    client.CustomObjectsApi(bed.api).delete_namespaced_custom_object(
        GROUP, VERSION, bed.namespace, PLURAL, "doomed"
    )
    wait_for(lambda: not sysbench_pids(marker), 15, "sysbench stopped", interval=0.05)
    gone = time.monotonic() - t0
    gone_at = time.time()
    print(f"run deleted mid-step: sysbench gone {gone:.2f}s after the delete")
    # The bound: the run deleted, its Jobs and pods garbage-collected, SIGTERM to the runner,
    # which stops sysbench at once (it would otherwise run on for the 10 s grace period).
    assert gone < 10.0, gone
    st = finished(bed.api, bed.namespace, "next", 120)
    all_measured(st)
    started = time.mktime(time.strptime(st["startedAt"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    assert started >= int(gone_at) - 1, (st["startedAt"], gone_at)
    assert not bed.jobs("doomed")
