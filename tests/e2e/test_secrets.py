"""The database password and TLS private keys never leave their Secrets: searched for in
everything a run produced, and so is every other key of every Secret of the namespace.

Runs as deploy/'s ServiceAccount, with the controller at debug verbosity: one that succeeds
with the real password, one whose Secret holds a wrong (but equally searched for) password,
one over TLS with a client certificate (the MariaDB that requires X509), and one whose client
certificate the server refuses, so the failure paths, where a leak is likeliest, are
covered too. The private keys are searched for whole and line by line of their PEM body.

And any password MariaDB accepts works end to end: users created here with passwords that
hold spaces (leading and trailing too), `#`, `"`, `'`, `\\`, `=`, `;`, non-ASCII letters and
over 64 characters each get a run that Succeeds (sysbench's config file quotes them).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from e2e.conftest import Controller, TlsBed
from testbed import leaks
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
from testbed.leaks import found, key_needles, needles
from testbed.runs import create_run, run_manifest, wait_run
from testbed.services import root_sql

# On one xdist worker with the other files that install deploy/ (SHARED in conftest.py).
pytestmark = pytest.mark.e2e

#: Two passwords holding every awkward character between them (one quote kind each: no
#: password can hold both, docs/bad-input.md), by the run (and Secret) that uses each. The
#: MariaDB users are named apart from the runs: a user is searched for like any Secret value.
AWKWARD_USERS = {"pwdouble": "awk" + secrets.token_hex(4), "pwsingle": "awk" + secrets.token_hex(4)}
AWKWARD_PASSWORDS = {
    "pwdouble": ' lead #\\=;"ünï cödé" trail ',
    "pwsingle": "it's 'single' ÄÖÜ ß " + "x" * 50 + " end",
}


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
    for run, password in AWKWARD_PASSWORDS.items():
        user = AWKWARD_USERS[run]
        quoted = password.replace("\\", "\\\\").replace("'", "\\'")
        root_sql(
            mariadb,
            f"SET NAMES utf8mb4; DROP USER IF EXISTS '{user}'@'%'; CREATE USER '{user}'@'%' IDENTIFIED BY "
            f"'{quoted}'; GRANT ALL ON *.* TO '{user}'@'%';",
        )
    for name, data in (
        *((r, {"user": AWKWARD_USERS[r], "password": p}) for r, p in AWKWARD_PASSWORDS.items()),
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
        for user in AWKWARD_PASSWORDS:
            fast = {"threads": [1], "durationSeconds": 1, "reportIntervalSeconds": 1}
            body = run_manifest(
                user, mariadb, credentials={"secretRef": {"name": user}},
                preflight={"policy": "Warn"}, **fast,
            )  # fmt: skip
            create_run(api, ns, body)
        good = wait_run(api, ns, "good", timeout=300)
        bad = wait_run(api, ns, "bad", timeout=300)
        tls = wait_run(api, ns, "tls", timeout=300)
        tlsbad = wait_run(api, ns, "tlsbad", timeout=300)
        assert good["status"]["phase"] == "Succeeded", good["status"].get("message")
        assert bad["status"]["phase"] == "Failed", bad["status"].get("message")
        assert tls["status"]["phase"] == "Succeeded", tls["status"].get("message")
        assert tlsbad["status"]["phase"] == "Failed", tlsbad["status"].get("message")
        for user in AWKWARD_PASSWORDS:
            run = wait_run(api, ns, user, timeout=300)
            assert run["status"]["phase"] == "Succeeded", (user, run["status"].get("message"))
        yield ns, ctl, wrong
    finally:
        ctl.stop()
        delete_namespace(testbed, ns)
        uninstall(testbed)


def everything_written(api: client.ApiClient, ns: str, ctl: Controller) -> dict[str, str]:
    return leaks.everything_written(api, ns, ctl.log)


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


def test_no_key_of_any_secret_of_the_namespace_appears_anywhere(
    api: client.ApiClient, core: client.CoreV1Api, finished: tuple[str, Controller, str]
) -> None:
    """Not only the passwords and keys the runs use: every value of every Secret."""
    ns, ctl, _ = finished
    searched = leaks.secret_needles(core, ns)
    assert {"db/password", "wrong/password", "mysql-client/tls.key", "pwdouble/password",
            "pwsingle/password", "pwdouble/user", "pwsingle/user"} <= set(searched)  # fmt: skip
    hits = leaks.found_secrets(everything_written(api, ns, ctl), searched)
    assert hits == [], "\n".join(hits[:40])


def test_the_search_of_every_secret_key_would_have_found_a_leak(
    api: client.ApiClient, core: client.CoreV1Api, finished: tuple[str, Controller, str]
) -> None:
    """A control: each Secret's values are found in that Secret, read as any reader would."""
    ns, _, _ = finished
    raw = client.ApiClient.sanitize_for_serialization
    texts = {
        f"Secret {s.metadata.name}": json.dumps(raw(api, s))
        for s in core.list_namespaced_secret(ns).items
    }
    hits = leaks.found_secrets(texts, leaks.secret_needles(core, ns))
    for name in leaks.secret_needles(core, ns):
        assert any(h.startswith(f"{name} in Secret {name.split('/')[0]}:") for h in hits), name


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
