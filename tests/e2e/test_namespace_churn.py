"""Watched namespaces that come and go do not stop the controller serving the others.

kopf (1.45.2), given a `--namespace` pattern, starts a watcher for each namespace it matches
and holds the handlers of every newly seen object until each watcher of an indexed resource
(the run queue's index) has listed once; a watcher stopped before its first listing never
released that hold, and no run of a namespace made after it was reconciled. A controller
restarted while its earlier namespaces were still terminating met exactly that (e2e: a
restarted controller that never made a run's cleanup Job). Given patterns, the controller
now has kopf watch the cluster and keeps the matching namespaces itself.
"""

from __future__ import annotations

import secrets
from typing import Any

import pytest
from kubernetes import client

from testbed.kube import delete_namespace, has_default_service_account, wait_for
from testbed.runs import RunBed, add_db_secret

pytestmark = pytest.mark.e2e

#: Matching namespaces still terminating when the controller starts.
TERMINATING = 20


def served_in_a_new_namespace(
    api: client.ApiClient, core: client.CoreV1Api, mariadb: dict[str, Any], prefix: str
) -> None:
    """A run in a namespace made now is reconciled to Succeeded."""
    ns = f"{prefix}after-{secrets.token_hex(2)}"
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


def test_a_controller_started_while_its_namespaces_terminate_serves_a_new_namespaces_run(
    controller: Any, api: client.ApiClient, core: client.CoreV1Api, mariadb: dict[str, Any]
) -> None:
    # The session controller's pattern (`e1a2b-*`): what the namespaces below match.
    prefix = controller.namespaces[0].removesuffix("*")
    controller.stop()
    names = [f"{prefix}gone-{secrets.token_hex(3)}" for _ in range(TERMINATING)]
    for name in names:
        core.create_namespace({"metadata": {"name": name}})
        core.create_namespaced_config_map(name, {"metadata": {"name": "x"}})
    for name in names:
        core.delete_namespace(name)
    controller.start()  # while they terminate: kopf's watchers for them stop soon after
    served_in_a_new_namespace(api, core, mariadb, prefix)


def test_namespaces_made_and_deleted_at_once_leave_a_new_namespaces_run_served(
    controller: Any, api: client.ApiClient, core: client.CoreV1Api, mariadb: dict[str, Any]
) -> None:
    prefix = controller.namespaces[0].removesuffix("*")
    for _ in range(TERMINATING):
        name = f"{prefix}churn-{secrets.token_hex(3)}"
        core.create_namespace({"metadata": {"name": name}})
        core.delete_namespace(name)
    served_in_a_new_namespace(api, core, mariadb, prefix)
