"""BenchmarkRuns against TiDB Operator v2.1-shaped clusters on the test bed.

The module installs v2.1.0-beta.6's CRDs in place of v2.0.1's (same names, a superset, plus
TiKVWorker groups and instances; transformed for 1.20 like v2.0.1's, see testbed.v2cluster)
and puts v2.0.1's back at its end. Its runs are reconciled by a controller of its own,
watching only this module's namespaces, started with the test bed's Service routes
(testbed.service_routes): there `<service>.<namespace>` resolves when that Service exists
and is routed, as cluster DNS and kube-proxy would resolve it in a cluster. So PD is reached
through the Cluster's PD Service `basic-pd`, and a name the operator never made (a PD
group's `pd-pd` under MultiPDGroup) would resolve nowhere. MariaDB answers the SQL
(spec.target.host), a FakePD the PD API.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from e2e.conftest import SESSION, Controller, module_controller
from e2e.test_v2_cluster import checks_of, v2_example_run
from testbed.cluster import Testbed
from testbed.fake_pd import FakePD
from testbed.kube import wait_for
from testbed.runs import create_run, get_run, jobs_of, run_events, wait_run
from testbed.service_routes import route_service, shim_env
from testbed.v2cluster import (
    GROUP,
    VERSION,
    StandinGroup,
    create_v2_standin_cluster,
    install_v2_crds,
    v2_standin_pod,
)

# Serial (`make e2e`): it replaces the v2 CRDs for the whole test bed (test_v2_cluster.py and
# test_tls.py use v2.0.1's shape).
pytestmark = [pytest.mark.e2e, pytest.mark.serial]

RUN_TIMEOUT = 240
PREFIX = f"v21{SESSION}"
MULTI_PD = ["MultiPDGroup"]


@pytest.fixture(scope="module")
def v21_crds(api: client.ApiClient) -> Iterator[None]:
    """v2.1.0-beta.6's CRDs for this module; v2.0.1's again after it."""
    ext = client.ApiextensionsV1Api(api)
    install_v2_crds(ext, "v2.1")
    yield
    install_v2_crds(ext, "v2.0.1")


@pytest.fixture(scope="module")
def routes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("v21") / "service-routes.json"


@pytest.fixture(scope="module")
def v21_controller(
    testbed: Testbed, crds: None, v21_crds: None, routes: Path
) -> Iterator[Controller]:
    """A controller for this module's namespaces that resolves routed Service names."""
    yield from module_controller(testbed, PREFIX, shim_env(routes))


@pytest.fixture
def ns(
    core: client.CoreV1Api, mariadb: dict[str, Any], v21_controller: Controller
) -> Iterator[str]:
    """A namespace only this module's controller watches, with the Secret `db`."""
    name = f"{PREFIX}-{secrets.token_hex(3)}"
    core.create_namespace({"metadata": {"name": name}})
    wait_for(
        lambda: any(sa.metadata.name == "default"
                    for sa in core.list_namespaced_service_account(name).items),
        30, f"ServiceAccount default in {name}",
    )  # fmt: skip
    core.create_namespaced_secret(name, {
        "metadata": {"name": "db"},
        "stringData": {"user": str(mariadb["user"]), "password": str(mariadb["password"])},
    })  # fmt: skip
    yield name
    core.delete_namespace(name)


@pytest.fixture
def pd() -> Iterator[FakePD]:
    with FakePD() as fake:
        yield fake


def wait_step_running(api: client.ApiClient, namespace: str, name: str, index: int) -> None:
    """Until step `index` (from 0) of the run has its pods started (a second into the step)."""

    def running() -> bool:
        steps = (get_run(api, namespace, name).get("status") or {}).get("steps") or []
        return len(steps) > index and steps[index].get("phase") == "Running"

    wait_for(running, 300, f"step {index + 1} of {name} running", interval=0.2)
    time.sleep(1.0)


def standin(**more: StandinGroup) -> dict[str, StandinGroup]:
    """v2.1's basic example as a stand-in, two PD groups, DB pods off node1 (the bench node)."""
    return {
        "pd": StandinGroup("pd", ["node2"]),
        "pd-b": StandinGroup("pd", ["node3"]),
        "tikv": StandinGroup("tikv", ["node2", "node3", "node3"]),
        "tidb": StandinGroup("tidb", ["node3"], spec={"maxSurge": 1}),
        **more,
    }


def v21_run(mariadb: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """The v2 example run with no pdURL: PD is what the Cluster says."""
    body = v2_example_run(mariadb, "", **spec)
    body["spec"]["target"].pop("pdURL")
    return body


def test_a_v21_run_succeeds_with_pd_reached_through_the_clusters_pd_service(
    api: client.ApiClient,
    core: client.CoreV1Api,
    ns: str,
    mariadb: dict[str, Any],
    routes: Path,
    pd: FakePD,
) -> None:
    # MultiPDGroup: the operator makes `basic-pd` and no `<pdgroup>-pd`; status.pd not yet
    # written, so the reader derives the cluster's Service itself.
    create_v2_standin_cluster(
        api, ns, "basic", standin(tikvworker=StandinGroup("tikv-worker", ["node3"])),
        pd_status=False, feature_gates=MULTI_PD, pd_services=True,
    )  # fmt: skip
    route_service(core, routes, ns, "basic-pd", 2379, pd.url.removeprefix("http://"))
    body = v21_run(mariadb, preflight={"policy": "Enforce", "timeoutSeconds": 20,
                                       "pdTransport": "HTTP"})  # fmt: skip
    create_run(api, ns, body)
    run = wait_run(api, ns, "v2-cluster-sweep", timeout=RUN_TIMEOUT)
    st = run["status"]
    assert st["phase"] == "Succeeded", st
    assert st["endpoint"]["pdURL"] == f"http://basic-pd.{ns}:2379"
    assert checks_of(run)["store-state"]["status"] == "Pass"
    assert checks_of(run)["bench-node-isolation"]["status"] == "Pass"
    assert "GET /pd/api/v1/stores" in pd.requests
    target = [e.message for e in run_events(core, ns, "v2-cluster-sweep") if e.reason == "Target"]
    assert target == [
        f"Cluster {ns}/basic: TiDB at {mariadb['host']}:{mariadb['port']} (spec.target), PD at "
        f"http://basic-pd.{ns}:2379 (PD through the cluster's Service basic-pd (MultiPDGroup) "
        "(2 PDGroups: pd, pd-b))"
    ]
    env = st["environment"]
    assert env["replicas"] == {"pd/pd": 1, "pd/pd-b": 1, "tikv": 3, "tikv-worker": 1, "tidb": 1}
    assert env["images"]["tikv-worker"] == "pingcap/tikv:v8.5.2"


def test_a_tikv_worker_on_the_bench_node_is_refused_by_bench_node_isolation_naming_it(
    api: client.ApiClient, ns: str, mariadb: dict[str, Any], routes: Path, pd: FakePD,
    core: client.CoreV1Api,
) -> None:  # fmt: skip
    create_v2_standin_cluster(
        api, ns, "basic", standin(tikvworker=StandinGroup("tikv-worker", ["node1"])),
        feature_gates=MULTI_PD, pd_services=True,
    )  # fmt: skip
    route_service(core, routes, ns, "basic-pd", 2379, pd.url.removeprefix("http://"))
    create_run(api, ns, v21_run(mariadb, preflight={"policy": "Enforce", "timeoutSeconds": 6}))
    run = wait_run(api, ns, "v2-cluster-sweep", timeout=RUN_TIMEOUT)
    assert run["status"]["phase"] == "Failed", run["status"]
    isolation = checks_of(run)["bench-node-isolation"]
    assert isolation["status"] == "Fail"
    assert (
        "pod tikvworker-tikv-worker-000x (tikv-worker) runs on bench node node1"
        in (isolation["message"])
    )
    assert not jobs_of(api, ns, "v2-cluster-sweep")


def test_a_tidb_rolling_restart_with_a_surge_pod_is_flagged_once_in_its_step(
    api: client.ApiClient, core: client.CoreV1Api, ns: str, mariadb: dict[str, Any],
    routes: Path, pd: FakePD,
) -> None:  # fmt: skip
    create_v2_standin_cluster(api, ns, "basic", standin(), feature_gates=MULTI_PD, pd_services=True)
    route_service(core, routes, ns, "basic-pd", 2379, pd.url.removeprefix("http://"))
    body = v21_run(mariadb, threads=[2, 4], durationSeconds=10, guard={"pdIntervalSeconds": 1})
    create_run(api, ns, body)
    wait_step_running(api, ns, "v2-cluster-sweep", 0)
    custom = client.CustomObjectsApi(api)

    def tidb_status(replicas: int, ready: int, updated: int) -> None:
        status = {"replicas": replicas, "readyReplicas": ready, "updatedReplicas": updated}
        custom.patch_namespaced_custom_object_status(
            GROUP, VERSION, ns, "tidbgroups", "tidb", {"status": status}
        )

    # TiDB Operator's rolling restart with maxSurge 1: the surge instance first, then the
    # old one goes, then the group settles.
    tidb_status(2, 1, 0)
    core.create_namespaced_pod(
        ns, v2_standin_pod("tidb-tidb-001x", ns, "basic", "tidb", "tidb", "tidb-001x", "node2")
    )
    time.sleep(2.5)
    core.delete_namespaced_pod("tidb-tidb-000x", ns, grace_period_seconds=0)
    tidb_status(1, 0, 1)
    time.sleep(2.5)
    tidb_status(1, 1, 1)
    run = wait_run(api, ns, "v2-cluster-sweep", timeout=RUN_TIMEOUT)
    st = run["status"]
    assert st["phase"] == "Succeeded", st
    first, second = st["steps"]
    flagged = [(d["what"], d["object"]) for d in first.get("disturbances") or []]
    assert flagged == [("ClusterProgressing", "basic")], first
    message = first["disturbances"][0]["message"]
    assert message.startswith("TiDBGroup tidb: 0/1 updated, 2 instances for 1 replicas "
                              "(maxSurge 1) (rollout pods: tidb-tidb-001x created"), message  # fmt: skip
    assert first["valid"] is False
    assert not second.get("disturbances"), second  # the settled rollout is not the next step's
