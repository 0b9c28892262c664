"""Fixtures for the e2e suite: one local test bed per session, a fresh namespace per test.

A test of a run takes `bed` (its namespace with the Secret `db`, run and stand-in cluster
builders: testbed.runs.RunBed), the controller it runs under (`controller`, the session's)
and, when PD is read, `fake_pd` (tests/conftest.py).
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from testbed import prometheus
from testbed.bed import bring_up, tear_down
from testbed.certs import CA, Pem
from testbed.cluster import Testbed
from testbed.crds import install_project_crds
from testbed.kube import (
    api_client,
    delete_namespace,
    has_default_service_account,
    wait_for,
)
from testbed.runs import CONTROLLER_LOG_ENV, RunBed, add_db_secret
from testbed.services import connect, mariadb_info, start_mariadb_tls, stop_mariadb_tls

#: Files that share something global, each group run on one pytest-xdist worker, one file
#: after the other (`make e2e`): each of these installs deploy/ cluster-wide
#: (tidb-bench-system, the same ClusterRoles) and removes it again.
SHARED = {
    name: "deploy"
    for name in ("test_bad_input.py", "test_controller_pod.py", "test_deploy.py", "test_secrets.py")
}


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Each file on one worker (its module-scoped fixtures, e.g. a controller restarted with
    other settings, set up once), the files of a SHARED group on the same one.

    xdist's own `--dist loadgroup` cannot do the second here: it renames items, which
    pytest 9 no longer reads (every test ran wherever).
    """
    from xdist.scheduler import LoadScopeScheduling  # only under xdist

    class ByFile(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return SHARED.get(Path(path).name, path)

    return ByFile(config, log)


@pytest.fixture(scope="session")
def testbed() -> Iterator[Testbed]:
    """The test bed: reused when `make testbed-up` left one running, else started and stopped."""
    tb = Testbed()
    started = bring_up(tb)
    try:
        yield tb
    finally:
        if started:
            tear_down(tb)


@pytest.fixture(scope="session")
def api(testbed: Testbed) -> client.ApiClient:
    return api_client(testbed)


@pytest.fixture(scope="session")
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture(scope="session")
def mariadb(testbed: Testbed) -> dict[str, Any]:
    """The MariaDB stand-in, with a database of this pytest-xdist worker's own beyond the
    first: `make e2e` runs two files at once, and one's dataset cleanup (or a test's own
    sysbench prepare) dropped the tables the other's run was measuring."""
    info = mariadb_info(testbed)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    if worker != "gw0":
        info["database"] = f"sbtest_{re.sub(r'[^a-z0-9]', '_', worker)}"
        conn = connect(info)
        try:
            with conn.cursor() as cur:
                cur.execute(f"CREATE DATABASE IF NOT EXISTS `{info['database']}`")
        finally:
            conn.close()
    return info


# Every namespace of this pytest session starts with SESSION, and the session's controller
# watches only those: two suites on one test bed never reconcile each other's runs.
SESSION = "e" + secrets.token_hex(2)


@pytest.fixture
def namespace(request: pytest.FixtureRequest, core: client.CoreV1Api) -> Iterator[str]:
    """A namespace for one test, deleted afterwards (pods with it, via the namespace controller)."""
    base = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower().removeprefix("test_"))[:36]
    name = f"{SESSION}-{base.strip('-')}-{secrets.token_hex(2)}"
    core.create_namespace({"metadata": {"name": name}})
    # The service-account controller creates `default`; pods are refused until it exists.
    wait_for(
        lambda: has_default_service_account(core, name), 30, f"ServiceAccount default in {name}"
    )
    yield name
    delete_namespace(core, name)


# ---------------------------------------------------------------------- the controller
REPO = Path(__file__).resolve().parents[2]


class Controller:
    """`tidb-bench operator` as a real subprocess (so a test can kill and restart it)."""

    def __init__(
        self,
        testbed: Testbed,
        kubeconfig: Path,
        log: Path,
        env: dict[str, str],
        namespaces: tuple[str, ...] = (f"{SESSION}-*",),
    ):
        self.namespaces = namespaces
        self.testbed = testbed
        self.kubeconfig = kubeconfig
        self.log = log
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, wait_ready: bool = True) -> None:
        os.environ[CONTROLLER_LOG_ENV] = str(self.log)  # named when a run never moves
        env = {**os.environ, **self.env, "KUBECONFIG": str(self.kubeconfig)}
        seen = self.log.stat().st_size if self.log.exists() else 0
        out = self.log.open("ab")
        try:
            self.proc = subprocess.Popen(
                [str(Path(sys.executable).parent / "tidb-bench"), "operator"]
                + [f"--namespace={ns}" for ns in self.namespaces],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        finally:
            out.close()
        if not wait_ready:
            return
        # Only this start's lines count: after a restart the log already says "ready".
        wait_for(
            lambda: "tidb-bench-operator ready" in self.log.read_text()[seen:],
            30,
            "controller start",
        )

    def kill(self) -> None:
        """SIGKILL: no graceful shutdown, as when a node dies."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()


def module_controller(
    testbed: Testbed, prefix: str, settings: dict[str, str]
) -> Iterator[Controller]:
    """A controller of one module's own namespaces (`<prefix>-*`) with its own `settings`,
    for a module-scoped fixture to `yield from`: started, then stopped."""
    ctl = Controller(
        testbed, testbed.kubeconfig, testbed.logs / f"controller-{prefix}.log",
        {"TIDB_BENCH_SCHEDULING_TIMEOUT_SECONDS": "20", "TIDB_BENCH_LIVENESS": "",
         "TIDB_BENCH_METRICS_PORT": "0", **settings},
        namespaces=(f"{prefix}-*",),
    )  # fmt: skip
    ctl.start()
    yield ctl
    ctl.stop()


@pytest.fixture(scope="session")
def crds(api: client.ApiClient) -> None:
    install_project_crds(api)


@pytest.fixture(scope="session")
def controller(testbed: Testbed, crds: None) -> Iterator[Controller]:
    """The controller, running as the test bed admin, for the whole session."""
    ctl = Controller(
        testbed,
        testbed.kubeconfig,
        testbed.logs / f"controller-{SESSION}.log",
        # No metrics port: the default (9090) would collide with another test bed's
        # controller on the same machine; test_metrics_report starts its own on a free port.
        {
            "TIDB_BENCH_SCHEDULING_TIMEOUT_SECONDS": "20",
            "TIDB_BENCH_LIVENESS": "",
            "TIDB_BENCH_METRICS_PORT": "0",
        },
    )
    ctl.start()
    yield ctl
    ctl.stop()


@pytest.fixture
def db_secret(core: client.CoreV1Api, namespace: str, mariadb: dict[str, Any]) -> str:
    """A Secret `db` with the MariaDB stand-in's user and password."""
    add_db_secret(core, namespace, mariadb)
    return "db"


@pytest.fixture
def bed(
    api: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    mariadb: dict[str, Any],
    db_secret: str,
) -> Iterator[RunBed]:
    """A fresh namespace holding the Secret `db`, with builders for runs and stand-in clusters
    (what they started, e.g. a TiDB proxy, stopped afterwards)."""
    rb = RunBed(api, core, namespace, mariadb)
    try:
        yield rb
    finally:
        rb.close()


# ---------------------------------------------------------------------- Prometheus
@pytest.fixture(scope="module")
def kubelet_prometheus(testbed: Testbed) -> Iterator[str]:
    """This worker's Prometheus scraping the node agent's cAdvisor as the kubelet job
    (testbed.prometheus.kubelet_job), up with its target; yields its URL. A test may stop it
    (`prometheus.stop(testbed, worker=os.environ.get("PYTEST_XDIST_WORKER"))`)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    url = prometheus.start(testbed, prometheus.kubelet_job(testbed), worker=worker)
    try:
        wait_for(lambda: prometheus.query(url, 'up{job="kubelet"} == 1'), 30, "kubelet job up")
        yield url
    finally:
        prometheus.stop(testbed, worker=worker)


# ---------------------------------------------------------------------- TLS
@dataclass(frozen=True)
class TlsBed:
    """A CA with a client certificate, a foreign CA's, and a MariaDB that requires TLS."""

    ca: CA
    client: Pem
    #: A client certificate signed by another CA: the servers refuse it.
    foreign_client: Pem
    db: dict[str, Any]


@pytest.fixture(scope="session")
def tls_bed(testbed: Testbed) -> Iterator[TlsBed]:
    """A second MariaDB (require_secure_transport, a REQUIRE X509 user), started on demand."""
    ca = CA("tidb-bench test CA")
    server = ca.issue("tidb", server=True)
    # Under `make e2e` each pytest-xdist worker has its own (testbed.services.tls_db_slot).
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    db = start_mariadb_tls(testbed, ca.pem, server.cert, server.key, worker=worker)
    try:
        yield TlsBed(ca, ca.issue("tidb-bench"), CA("another CA").issue("tidb-bench"), db)
    finally:
        stop_mariadb_tls(testbed, worker=worker)
