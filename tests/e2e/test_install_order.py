"""The controller and its CRDs applied together (`kubectl apply -k deploy/` does that).

A second, empty control plane (its own etcd and API server, no CRDs) so the session's
shared test bed and its controller keep their CRDs. The controller must not scan API
discovery before its resources are listed there, or it would never serve them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from e2e.conftest import Controller
from testbed.cluster import PORT_BASE, REPO_ROOT, Ports, Testbed
from testbed.deploy import kubectl
from testbed.kube import api_client, wait_for
from testbed.runs import create_run, wait_run

# Serial (`make e2e`): a second, empty control plane beside the shared one.
pytestmark = [pytest.mark.e2e, pytest.mark.serial]

NS = "install-order"


@pytest.fixture
def empty_cluster(tmp_path: Path) -> Iterator[Testbed]:
    """etcd, API server, scheduler and controller-manager with nothing installed."""
    tb = Testbed(state=tmp_path / "bed", ports=Ports(base=PORT_BASE + 50))
    try:
        tb.start()
        yield tb
    finally:
        tb.stop()


def operator(tb: Testbed, log: Path, wait_seconds: int) -> Controller:
    """The controller as a subprocess, started without waiting for it to be ready."""
    ctl = Controller(
        tb, tb.kubeconfig, log,
        {"TIDB_BENCH_CRD_WAIT_SECONDS": str(wait_seconds), "TIDB_BENCH_METRICS_PORT": "0",
         "TIDB_BENCH_LIVENESS": ""},
        namespaces=(NS,),
    )  # fmt: skip
    ctl.start(wait_ready=False)
    return ctl


def test_a_controller_started_with_its_crds_waits_for_discovery_then_serves_runs(
    empty_cluster: Testbed, tmp_path: Path
) -> None:
    tb = empty_cluster
    # No CRDs at all and a short wait: the controller exits and says how to install them.
    log = tmp_path / "no-crds.log"
    ctl = operator(tb, log, wait_seconds=3)
    assert ctl.proc is not None
    try:
        code = ctl.proc.wait(timeout=60)
    finally:
        ctl.kill()
    text = log.read_text()
    assert code != 0, text
    assert (
        "API discovery does not list benchmarkruns.tidbbench.io/v1alpha1, "
        "benchmarkschedules.tidbbench.io/v1alpha1 after 3 s; install the CRDs first "
        "(kubectl apply -k crds/" in text
    ), text
    assert "tidb-bench-operator ready" not in text

    # Now as in production: the controller is already starting when the CRDs are applied.
    # Its namespace exists first, as in an install: kopf (1.45.2) lists the namespaces, then
    # starts their watch with a second listing whose objects it ignores, so a namespace
    # created between the two is not served until the controller restarts.
    api = api_client(tb)
    client.CoreV1Api(api).create_namespace({"metadata": {"name": NS}})
    log = tmp_path / "with-crds.log"
    ctl = operator(tb, log, wait_seconds=60)
    try:
        wait_for(lambda: "waiting for API discovery" in log.read_text(), 30, "the wait")
        kubectl(tb, "apply", "-k", str(REPO_ROOT / "crds"))
        wait_for(lambda: "tidb-bench-operator ready" in log.read_text(), 60, "controller ready")
        # It serves runs: this one names a Secret that does not exist, a quick verdict.
        create_run(api, NS, {
            "apiVersion": "tidbbench.io/v1alpha1", "kind": "BenchmarkRun",
            "metadata": {"name": "first"},
            "spec": {
                "target": {"host": "db.example.internal", "port": 3306},
                "credentials": {"secretRef": {"name": "nope"}},
                "workloads": ["oltp_point_select"], "threads": [1],
            },
        })  # fmt: skip
        try:
            run = wait_run(api, NS, "first", timeout=120)
        except TimeoutError as exc:
            raise AssertionError(f"{exc}\ncontroller log:\n{log.read_text()[-6000:]}") from exc
        reasons = [c.get("reason") for c in run["status"].get("conditions", [])]
        assert run["status"]["phase"] == "Failed"
        assert "SecretNotFound" in reasons, run["status"]
    finally:
        ctl.stop()
