"""The database password and TLS private keys never leave their Secrets: searched for in
everything a run produced.

Runs as deploy/'s ServiceAccount, with the controller at debug verbosity: one that succeeds
with the real password, one whose Secret holds a wrong (but equally searched for) password,
one over TLS with a client certificate (the MariaDB that requires X509), and one whose client
certificate the server refuses, so the failure paths, where a leak is likeliest, are
covered too. The private keys are searched for whole and line by line of their PEM body.
"""

from __future__ import annotations

import base64
import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from e2e.conftest import Controller, TlsBed
from testbed.certs import secret_data
from testbed.cluster import Testbed
from testbed.deploy import (
    create_namespace,
    delete_namespace,
    enable_namespace,
    install,
    operator_kubeconfig,
    uninstall,
)
from testbed.runs import GROUP, PLURAL, VERSION, create_run, run_manifest, wait_run

pytestmark = pytest.mark.e2e


def needles(password: str) -> list[str]:
    """The password as it could leak: plain, base64 (as in a Secret's data), JSON-escaped."""
    return [password, base64.b64encode(password.encode()).decode(), json.dumps(password)[1:-1]]


def key_needles(pem: str) -> list[str]:
    """A private key as it could leak: whole, base64 of it, JSON-escaped, each body line."""
    body = [ln for ln in pem.splitlines() if ln and not ln.startswith("-----")]
    assert body and all(len(ln) >= 16 for ln in body[:-1])
    return [*needles(pem), *body]


def found(haystacks: dict[str, str], words: list[str]) -> list[str]:
    return [f"{where}: {w!r}" for where, text in haystacks.items() for w in words if w in text]


@pytest.fixture(scope="module")
def finished(
    testbed: Testbed,
    api: client.ApiClient,
    core: client.CoreV1Api,
    mariadb: dict[str, Any],
    crds: None,
    tls_bed: TlsBed,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[str, Controller, str]]:
    """Namespace, controller and wrong password once all runs are finished."""
    uninstall(testbed)
    install(testbed)
    ns = create_namespace(testbed, "tbsecrets")
    enable_namespace(testbed, ns)
    wrong = f"canary-{secrets.token_hex(8)}"
    db = tls_bed.db
    for name, data in (
        ("db", {"user": str(mariadb["user"]), "password": str(mariadb["password"])}),
        ("wrong", {"user": str(mariadb["user"]), "password": wrong}),
        ("dbtls", {"user": str(db["user"]), "password": str(db["password"])}),
        ("mysql-client", secret_data(tls_bed.ca, tls_bed.client)),
        ("mysql-foreign", secret_data(tls_bed.ca, tls_bed.foreign_client)),
    ):
        core.create_namespaced_secret(ns, {"metadata": {"name": name}, "stringData": data})
    ctl = Controller(
        testbed,
        operator_kubeconfig(testbed, tmp_path_factory.mktemp("sa") / "kubeconfig"),
        testbed.logs / f"controller-deploy-{ns}.log",
        {"TIDB_BENCH_LIVENESS": "", "TIDB_BENCH_DEBUG": "1"},
        namespaces=(ns,),
    )
    ctl.start()
    try:
        # Preflight Warn: the controller itself connects with the password, too.
        create_run(api, ns, run_manifest("good", mariadb, preflight={"policy": "Warn"}))
        create_run(
            api,
            ns,
            run_manifest(
                "bad",
                mariadb,
                credentials={"secretRef": {"name": "wrong"}},
                preflight={"policy": "Warn"},
            ),
        )
        for name, secret in (("tls", "mysql-client"), ("tlsbad", "mysql-foreign")):
            body = run_manifest(
                name,
                db,
                credentials={"secretRef": {"name": "dbtls"}},
                tls={"mysql": {"enabled": True, "secretRef": {"name": secret}}},
                preflight={"policy": "Warn"},
            )
            create_run(api, ns, body)
        good = wait_run(api, ns, "good", timeout=300)
        bad = wait_run(api, ns, "bad", timeout=300)
        tls = wait_run(api, ns, "tls", timeout=300)
        tlsbad = wait_run(api, ns, "tlsbad", timeout=300)
        assert good["status"]["phase"] == "Succeeded", good["status"]
        assert bad["status"]["phase"] == "Failed", bad["status"]
        assert tls["status"]["phase"] == "Succeeded", tls["status"]
        assert tlsbad["status"]["phase"] == "Failed", tlsbad["status"]
        yield ns, ctl, wrong
    finally:
        ctl.stop()
        delete_namespace(testbed, ns)
        uninstall(testbed)


def everything_written(api: client.ApiClient, ns: str, ctl: Controller) -> dict[str, str]:
    """Run objects with status, Events, ConfigMaps, Jobs, pods (with termination messages),
    pod logs, the runner ServiceAccount and the controller's log, as text."""
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    raw = client.ApiClient.sanitize_for_serialization
    out: dict[str, str] = {"controller log": ctl.log.read_text()}
    runs = client.CustomObjectsApi(api).list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)
    out |= {f"BenchmarkRun {r['metadata']['name']}": json.dumps(r) for r in runs["items"]}
    out |= {
        f"Event {e.metadata.name}": json.dumps(raw(api, e))
        for e in core.list_namespaced_event(ns).items
    }
    out |= {
        f"ConfigMap {c.metadata.name}": json.dumps(raw(api, c))
        for c in core.list_namespaced_config_map(ns).items
    }
    out |= {
        f"Job {j.metadata.name}": json.dumps(raw(api, j))
        for j in batch.list_namespaced_job(ns).items
    }
    for pod in core.list_namespaced_pod(ns).items:
        out[f"Pod {pod.metadata.name}"] = json.dumps(raw(api, pod))
        try:
            out[f"log of {pod.metadata.name}"] = core.read_namespaced_pod_log(pod.metadata.name, ns)
        except client.exceptions.ApiException as exc:
            # A finished Job's pod can be deleted between the list and this read; its log is
            # then gone for every reader, which is what the search is about.
            if exc.status != 404:
                raise
    for sa in core.list_namespaced_service_account(ns).items:
        out[f"ServiceAccount {sa.metadata.name}"] = json.dumps(raw(api, sa))
    return out


def test_the_password_appears_nowhere_the_controller_or_its_pods_wrote(
    api: client.ApiClient,
    mariadb: dict[str, Any],
    tls_bed: TlsBed,
    finished: tuple[str, Controller, str],
) -> None:
    ns, ctl, wrong = finished
    written = everything_written(api, ns, ctl)
    kinds = {k.split()[0] for k in written}
    assert {"BenchmarkRun", "Event", "ConfigMap", "Job", "Pod", "log", "controller"} <= kinds
    assert any(k.startswith("ConfigMap good-results") for k in written)
    # The runs really used the Secrets: one measured, one was refused by the server.
    assert "Access denied" in written["BenchmarkRun bad"], written["BenchmarkRun bad"][-2000:]
    assert found(written, needles(str(mariadb["password"])) + needles(wrong)) == []
    # The TLS runs really used the client certificates: one measured, one was refused.
    # MariaDB refuses a foreign CA's certificate with the TLS alert, or (TLS 1.3: the client
    # finishes its side before the server checks the certificate) by closing the connection.
    refused = ("TLSV1_ALERT_UNKNOWN_CA", "most often because it refused our client certificate")
    tlsbad = written["BenchmarkRun tlsbad"]
    assert any(r in tlsbad for r in refused), tlsbad[-2000:]
    keys = key_needles(tls_bed.client.key) + key_needles(tls_bed.foreign_client.key)
    assert found(written, keys + needles(str(tls_bed.db["password"]))) == []


def test_the_search_would_have_found_a_leak(
    api: client.ApiClient, core: client.CoreV1Api, finished: tuple[str, Controller, str]
) -> None:
    """A control: the same search finds the password where it is meant to be, the Secret."""
    ns, _, wrong = finished
    secret = client.ApiClient.sanitize_for_serialization(
        api, core.read_namespaced_secret("wrong", ns)
    )
    assert found({"Secret wrong": json.dumps(secret)}, needles(wrong)) != []


def test_the_search_would_have_found_a_leaked_key(
    api: client.ApiClient,
    core: client.CoreV1Api,
    tls_bed: TlsBed,
    finished: tuple[str, Controller, str],
) -> None:
    """A control for the keys: found in their Secret, and in one line of a log."""
    ns, _, _ = finished
    secret = client.ApiClient.sanitize_for_serialization(
        api, core.read_namespaced_secret("mysql-client", ns)
    )
    assert found({"Secret": json.dumps(secret)}, key_needles(tls_bed.client.key)) != []
    line = tls_bed.client.key.splitlines()[2]
    assert found({"a log": f"x {line} y"}, key_needles(tls_bed.client.key)) != []
