"""Watched namespaces that come and go do not stop the controller serving the others.

Given a `--namespace` pattern, kopf starts a watcher for each namespace it matches as the
namespace appears and stops it as it goes, and holds the handlers of newly seen objects
until the indexed watchers have listed once (controller/handlers.py's queue index): dozens
of matching namespaces made and deleted at once must leave a run made after them served.
"""

from __future__ import annotations

import secrets
import threading
from typing import Any

import pytest
from kubernetes import client

from testbed.kube import delete_namespace, has_default_service_account, wait_for
from testbed.runs import RunBed, add_db_secret

pytestmark = pytest.mark.e2e

#: Namespaces made and deleted at once, from two threads, while the controller watches.
CHURN = 24


def churn(core: client.CoreV1Api, prefix: str, n: int) -> None:
    for _ in range(n):
        name = f"{prefix}churn-{secrets.token_hex(3)}"
        core.create_namespace({"metadata": {"name": name}})
        core.delete_namespace(name)


def test_namespaces_deleted_as_soon_as_made_leave_a_new_namespaces_run_served(
    controller: Any, api: client.ApiClient, core: client.CoreV1Api, mariadb: dict[str, Any]
) -> None:
    # The session controller's pattern (`e1a2b-*`): what the namespaces below must match.
    prefix = controller.namespaces[0].removesuffix("*")
    workers = [threading.Thread(target=churn, args=(core, prefix, CHURN // 2)) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    ns = f"{prefix}after-churn-{secrets.token_hex(2)}"
    core.create_namespace({"metadata": {"name": ns}})
    try:
        wait_for(lambda: has_default_service_account(core, ns), 30, f"ServiceAccount in {ns}")
        add_db_secret(core, ns, mariadb)
        bed = RunBed(api, core, ns, mariadb)
        bed.create(bed.manifest("served", threads=[1], durationSeconds=2))
        run = bed.wait("served", timeout=120)
        assert run["status"]["phase"] == "Succeeded", run["status"]
    finally:
        delete_namespace(core, ns)
