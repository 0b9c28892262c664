"""A TLS-secured cluster on the test bed: PD over mutual TLS, TiDB's SQL requiring TLS.

The TidbCluster `basic` turns on `spec.tlsCluster` and `spec.tidb.tlsClient`, so the run
uses TiDB Operator's client Secrets `basic-cluster-client-secret` and
`basic-tidb-client-secret` without naming them. PD is a FakePD serving HTTPS that demands a
client certificate signed by the test CA; the SQL layer is a second MariaDB with
`require_secure_transport=ON` whose user is `REQUIRE X509`. The server's Performance Schema
shows which client library opened each session and its cipher, which is how the test sees
sysbench's own connections were TLS.
"""

from __future__ import annotations

import ssl
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from e2e.conftest import TlsBed
from testbed.certs import Pem, secret_data
from testbed.fake_pd import FakePD
from testbed.kube import create_standin_cluster, wait_for
from testbed.runs import create_run, example_manifest, jobs_of, run_events, wait_run
from testbed.services import root_sql
from testbed.v2cluster import StandinGroup, create_v2_standin_cluster

pytestmark = pytest.mark.e2e

# Every component spread over hostnames (as in test_preflight), none on the bench node.
PLACEMENT = {"pd": ["node2", "node3"], "tikv": ["node2", "node3"], "tidb": ["node2"]}
SPREAD = {"pd": 1, "tikv": 1, "tidb": 1}

# The sysbench user's sessions: client library (connect attribute `_client_name`: libmariadb
# for sysbench 1.0.20 on Debian, pymysql for the controller and the runner) and cipher.
SESSIONS_SQL = (
    "SELECT a.ATTR_VALUE, s.VARIABLE_VALUE FROM performance_schema.threads t "
    "JOIN performance_schema.status_by_thread s USING (THREAD_ID) "
    "LEFT JOIN performance_schema.session_connect_attrs a "
    "ON a.PROCESSLIST_ID = t.PROCESSLIST_ID AND a.ATTR_NAME = '_client_name' "
    "WHERE s.VARIABLE_NAME = 'Ssl_cipher' AND t.PROCESSLIST_USER = '{user}'"
)


@pytest.fixture(scope="module")
def tls_pd(tls_bed: TlsBed) -> Iterator[FakePD]:
    """FakePD over HTTPS, requiring a client certificate signed by the test CA."""
    server = tls_bed.ca.issue("basic-pd", server=True)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cadata=tls_bed.ca.pem)
    ctx.verify_mode = ssl.CERT_REQUIRED
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "tls.crt").write_text(server.cert)
        Path(tmp, "tls.key").write_text(server.key)
        ctx.load_cert_chain(Path(tmp, "tls.crt"), Path(tmp, "tls.key"))
    with FakePD().start(tls=ctx) as pd:
        yield pd


class SessionWatch:
    """Samples the TLS MariaDB's sessions of one user while a run goes on."""

    def __init__(self, db: dict[str, Any]) -> None:
        self.db = db
        self.seen: set[tuple[str, str]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        sql = SESSIONS_SQL.format(user=self.db["user"])
        while not self._stop.is_set():
            for line in root_sql(self.db, sql).splitlines():
                library, _, cipher = line.partition("\t")
                self.seen.add((library, cipher))
            self._stop.wait(0.2)

    def stop(self) -> set[tuple[str, str]]:
        self._stop.set()
        self._thread.join(timeout=10)
        return self.seen


def tls_run(name: str, tls_bed: TlsBed, pd: FakePD, **spec: Any) -> dict[str, Any]:
    """examples/point-select-sweep.yaml on the TLS cluster, short, under Enforce."""
    db = tls_bed.db
    short: dict[str, Any] = {
        "threads": [1, 2],
        "durationSeconds": 3,
        "warmupSeconds": 0,
        "reportIntervalSeconds": 1,
        "dataset": {"tables": 1, "tableSize": 1000},
        "preflight": {"policy": "Enforce", "timeoutSeconds": 3},
    }
    body = example_manifest("point-select-sweep.yaml", db, **{**short, **spec})
    body["metadata"]["name"] = name
    body["spec"]["cluster"] = {"name": "basic"}
    # TiDB and PD addresses of the stand-ins; PD's scheme comes from the TidbCluster.
    body["spec"]["target"] = {
        "host": str(db["host"]),
        "port": int(db["port"]),
        "pdURL": pd.url.replace("https://", "http://"),
    }
    return body


def secured_cluster(
    api: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    tls_bed: TlsBed,
    *,
    client_cert: Pem,
    mysql_secret: bool = True,
) -> None:
    """The TidbCluster with TLS on, its stand-in pods, the credentials and client Secrets."""
    create_standin_cluster(api, namespace, "basic", PLACEMENT, spread=SPREAD, tls=True)
    db = tls_bed.db
    secrets = {"db": {"user": str(db["user"]), "password": str(db["password"])}}
    secrets["basic-cluster-client-secret"] = secret_data(tls_bed.ca, client_cert)
    if mysql_secret:
        secrets["basic-tidb-client-secret"] = secret_data(tls_bed.ca, client_cert)
    for name, data in secrets.items():
        core.create_namespaced_secret(namespace, {"metadata": {"name": name}, "stringData": data})


STEP_PODS = "tidbbench.io/run=secured,tidbbench.io/role=step"


def test_a_run_on_a_tls_cluster_passes_preflight_over_mutual_tls_and_sysbench_uses_tls(
    api: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    controller: Any,
    tls_bed: TlsBed,
    tls_pd: FakePD,
) -> None:
    secured_cluster(api, core, namespace, tls_bed, client_cert=tls_bed.client)
    served = len(tls_pd.requests)
    watch = SessionWatch(tls_bed.db)
    try:
        create_run(api, namespace, tls_run("secured", tls_bed, tls_pd))
        # A step's pod, read while it is there: its Job goes once the step is stored.
        pod = wait_for(
            lambda: next(iter(core.list_namespaced_pod(namespace, label_selector=STEP_PODS).items), None),
            180, "a step pod of run secured", 0.1,
        )  # fmt: skip
        run = wait_run(api, namespace, "secured")
    finally:
        sessions = watch.stop()
    status = run["status"]
    assert status["phase"] == "Succeeded", status
    # The Secrets TiDB Operator names, found from the TidbCluster; PD upgraded to HTTPS.
    endpoint = status["endpoint"]
    assert endpoint["pdTLSSecret"] == "basic-cluster-client-secret", endpoint
    assert endpoint["mysqlTLSSecret"] == "basic-tidb-client-secret", endpoint
    assert endpoint["pdURL"] == tls_pd.url
    # Preflight passed over mutual TLS: the PD checks read the FakePD's stores.
    checks = {c["name"]: c for c in status["preflight"]["checks"]}
    for name in ("store-state", "leader-size-balance", "region-size-balance", "pending-operators"):
        assert checks[name]["status"] == "Pass", checks[name]
    assert "GET /pd/api/v1/stores" in tls_pd.requests[served:]
    passed = next(c for c in status["conditions"] if c["type"] == "PreflightPassed")
    assert passed["status"] == "True", passed
    assert all(s["phase"] == "Succeeded" and s["qps"] > 100 for s in status["steps"])
    # sysbench's sessions (libmariadb) had a TLS cipher; no session of this user was seen
    # without one (the controller's pymysql sessions are too short to be sampled reliably;
    # the server admits none of them without a certificate anyway).
    assert "libmariadb" in {lib for lib, _ in sessions}, sessions
    assert all(cipher.startswith("TLS_") for _, cipher in sessions), sessions
    reasons = [e.reason for e in run_events(core, namespace, "secured")]
    assert "TLS" in reasons, reasons
    # The pods got the Secret read-only, with the hardening unchanged.
    mount = next(m for m in pod.spec.containers[0].volume_mounts if m.name == "mysql-tls")
    assert mount.read_only is True
    sc = pod.spec.containers[0].security_context
    assert sc.read_only_root_filesystem and sc.run_as_non_root
    assert pod.spec.automount_service_account_token is False


def test_a_missing_client_secret_fails_the_run_naming_it_and_creating_nothing(
    api: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    controller: Any,
    tls_bed: TlsBed,
    tls_pd: FakePD,
) -> None:
    secured_cluster(api, core, namespace, tls_bed, client_cert=tls_bed.client, mysql_secret=False)
    create_run(api, namespace, tls_run("nosecret", tls_bed, tls_pd))
    run = wait_run(api, namespace, "nosecret", timeout=60)
    status = run["status"]
    assert status["phase"] == "Failed", status
    failed = next(c for c in status["conditions"] if c["type"] == "Failed")
    assert failed["reason"] == "SecretNotFound"
    assert "Secret 'basic-tidb-client-secret'" in failed["message"]
    assert (
        f"kubectl -n {namespace} create secret generic basic-tidb-client-secret "
        "--from-file=ca.crt=<ca.crt> --from-file=tls.crt=<tls.crt> --from-file=tls.key=<tls.key>"
    ) in failed["message"]
    assert jobs_of(api, namespace, "nosecret") == []
    assert core.list_namespaced_pod(namespace, label_selector="tidbbench.io/run").items == []


def test_a_client_certificate_of_another_ca_fails_preflight_naming_the_refusal(
    api: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    controller: Any,
    tls_bed: TlsBed,
    tls_pd: FakePD,
) -> None:
    secured_cluster(api, core, namespace, tls_bed, client_cert=tls_bed.foreign_client)
    refused = len(tls_pd.tls_failures)
    create_run(api, namespace, tls_run("foreign", tls_bed, tls_pd))
    run = wait_run(api, namespace, "foreign", timeout=90)
    status = run["status"]
    assert status["phase"] == "Failed", status
    assert [c["reason"] for c in status["conditions"] if c["type"] == "Failed"] == [
        "PreflightFailed"
    ]
    checks = {c["name"]: c for c in status["preflight"]["checks"]}
    unknown_ca = "the server does not trust the CA that signed our client certificate"
    # PD (the HTTPS FakePD) and the database (MariaDB) both refused the certificate.
    assert unknown_ca in checks["store-state"]["message"], checks["store-state"]
    assert "TLSV1_ALERT_UNKNOWN_CA" in checks["store-state"]["message"]
    assert "Secret basic-cluster-client-secret" in checks["store-state"]["message"]
    # MariaDB's refusal reaches the client as the alert or, racing it, as the close (TLS 1.3).
    db = checks["table-leader-distribution"]["message"]
    assert unknown_ca in db or "most often because it refused our client certificate" in db, db
    assert "Secret " + namespace + "/basic-tidb-client-secret" in status["message"]
    assert any("UNKNOWN_CA" in f or "VERIFY_FAILED" in f for f in tls_pd.tls_failures[refused:])
    assert jobs_of(api, namespace, "foreign") == []


def test_a_v2_cluster_with_tls_uses_its_tidb_groups_client_secret_and_succeeds(
    api: client.ApiClient,
    core: client.CoreV1Api,
    namespace: str,
    controller: Any,
    tls_bed: TlsBed,
    tls_pd: FakePD,
) -> None:
    groups = {
        "pd": StandinGroup("pd", ["node2"]),
        "tikv": StandinGroup("tikv", ["node2", "node3"]),
        "tidb": StandinGroup("tidb", ["node3"]),
    }
    create_v2_standin_cluster(api, namespace, "basic", groups, tls=True)
    db = tls_bed.db
    for name, data in (
        ("db", {"user": str(db["user"]), "password": str(db["password"])}),
        ("basic-cluster-client-secret", secret_data(tls_bed.ca, tls_bed.client)),
        ("tidb-tidb-client-secret", secret_data(tls_bed.ca, tls_bed.client)),
    ):
        core.create_namespaced_secret(namespace, {"metadata": {"name": name}, "stringData": data})
    body = tls_run("v2tls", tls_bed, tls_pd, threads=[2])
    create_run(api, namespace, body)
    run = wait_run(api, namespace, "v2tls")
    status = run["status"]
    assert status["phase"] == "Succeeded", status
    endpoint = status["endpoint"]
    assert endpoint["clusterKind"] == "Cluster"
    assert endpoint["pdTLSSecret"] == "basic-cluster-client-secret"
    assert endpoint["mysqlTLSSecret"] == "tidb-tidb-client-secret"
    checks = {c["name"]: c for c in status["preflight"]["checks"]}
    assert checks["store-state"]["status"] == "Pass", checks["store-state"]
