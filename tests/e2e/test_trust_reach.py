"""What a run's author can reach through the controller (docs/trust.md), on the test bed.

Refused by default at Pending, naming the setting, with nothing left behind and nothing of
the other namespace's cluster (a unique marker planted in it) in the run's status, Events or
ConfigMaps: a cross-namespace cluster, an image override; an explicit target under
TIDB_BENCH_OPERATOR_TARGETS_ONLY. Accepted with the settings on (a second controller for
namespaces the session's does not watch). And an edit after Pending changes neither what
runs nor the queue.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from e2e.conftest import SESSION, Controller, module_controller
from testbed.cluster import Testbed
from testbed.kube import (
    delete_namespace,
    has_default_service_account,
    tidbcluster_manifest,
    wait_for,
)
from testbed.runs import RunBed, add_db_secret, condition, jobs_of, run_events

pytestmark = pytest.mark.e2e

#: Namespaces of this module's own controller: outside the session controller's `SESSION-*`.
PREFIX = f"tr{SESSION}"
SETTINGS = {"TIDB_BENCH_ALLOW_CROSS_NAMESPACE": "true", "TIDB_BENCH_ALLOW_IMAGE_OVERRIDE": "true"}


def make_namespace(core: client.CoreV1Api, name: str) -> str:
    core.create_namespace({"metadata": {"name": name}})
    wait_for(lambda: has_default_service_account(core, name), 30, f"ServiceAccount in {name}")
    return name


@pytest.fixture
def foreign(api: client.ApiClient, core: client.CoreV1Api) -> Iterator[tuple[str, str]]:
    """Another team's namespace with a TidbCluster `basic` carrying a unique marker."""
    ns = make_namespace(core, f"{PREFIX}-foreign-{secrets.token_hex(2)}")
    marker = f"marker{secrets.token_hex(6)}"
    tc = tidbcluster_manifest("basic", ns, replicas={"pd": 1, "tikv": 1, "tidb": 1})
    tc["metadata"]["annotations"] = {"team-b/secret-plan": marker}
    tc["spec"]["tidb"]["baseImage"] = f"registry.local/{marker}/tidb"
    client.CustomObjectsApi(api).create_namespaced_custom_object(
        "pingcap.com", "v1alpha1", ns, "tidbclusters", tc
    )
    yield ns, marker
    delete_namespace(core, ns)


def everything_of(bed: RunBed, name: str) -> str:
    """The run's status, its Events and the namespace's ConfigMaps, as one text."""
    status = bed.get(name).get("status") or {}
    events = [(e.reason, e.message) for e in bed.events(name)]
    cms = [cm.data for cm in bed.core.list_namespaced_config_map(bed.namespace).items]
    return json.dumps([status, events, cms], default=str)


def assert_refused(bed: RunBed, name: str, reason: str, setting: str, marker: str) -> None:
    run = bed.wait(name, phases=("Failed", "Preflight", "Running", "Succeeded"), timeout=60)
    st = run["status"]
    assert st["phase"] == "Failed", st
    failed = condition(run, "Failed")
    assert failed["reason"] == reason and setting in failed["message"], failed
    said = [e.message for e in bed.events(name) if e.type == "Warning" and e.reason == reason]
    assert said and setting in said[0], said
    # Nothing left behind, nothing of the other namespace brought in.
    mine = f"tidbbench.io/run={name}"
    assert bed.jobs(name) == []
    assert bed.core.list_namespaced_pod(bed.namespace, label_selector=mine).items == []
    assert bed.core.list_namespaced_config_map(bed.namespace, label_selector=mine).items == []
    assert "endpoint" not in st and "environment" not in st and "admitted" not in st
    assert marker not in everything_of(bed, name)


def test_a_cross_namespace_cluster_and_an_image_override_are_refused_by_default(
    bed: RunBed, controller: Controller, foreign: tuple[str, str]
) -> None:
    ns, marker = foreign
    bed.create(bed.manifest("other-ns", cluster={"name": "basic", "namespace": ns}))
    bed.create(bed.manifest("own-image", image="registry.local/their-runner:1"))
    assert_refused(bed, "other-ns", "CrossNamespaceNotAllowed",
                   "TIDB_BENCH_ALLOW_CROSS_NAMESPACE", marker)  # fmt: skip
    assert_refused(bed, "own-image", "ImageOverrideNotAllowed",
                   "TIDB_BENCH_ALLOW_IMAGE_OVERRIDE", marker)  # fmt: skip


@pytest.fixture(scope="module")
def open_controller(testbed: Testbed, crds: None) -> Iterator[Controller]:
    """A controller with cross-namespace clusters and image overrides allowed."""
    yield from module_controller(testbed, f"{PREFIX}-run", SETTINGS)


@pytest.fixture
def open_bed(
    api: client.ApiClient, core: client.CoreV1Api, mariadb: dict[str, Any]
) -> Iterator[RunBed]:
    ns = make_namespace(core, f"{PREFIX}-run-{secrets.token_hex(2)}")
    add_db_secret(core, ns, mariadb)
    yield RunBed(api, core, ns, mariadb)
    delete_namespace(core, ns)


def test_with_the_settings_on_both_are_accepted_and_targets_only_refuses_a_target(
    open_bed: RunBed, open_controller: Controller, foreign: tuple[str, str]
) -> None:
    ns, marker = foreign
    bed = open_bed
    # The runner image is the test bed's host tree whatever the name (testbed/agent.py).
    bed.create(bed.manifest("reach", cluster={"name": "basic", "namespace": ns},
                            image="registry.local/tidb-bench:other", threads=[1],
                            ttlSecondsAfterFinished=0))  # fmt: skip
    run = bed.wait("reach", timeout=240)
    assert run["status"]["phase"] == "Succeeded", run["status"]
    # Allowed: the other namespace's cluster was read (its images are the run's record).
    assert marker in run["status"]["environment"]["images"]["tidb"]

    # Targets only: the same controller restarted with the setting; an explicit host fails.
    open_controller.stop()
    open_controller.env["TIDB_BENCH_OPERATOR_TARGETS_ONLY"] = "true"
    try:
        open_controller.start()
        bed.create(bed.manifest("target", cluster={"name": "basic", "namespace": ns}))
        assert_refused(bed, "target", "TargetNotAllowed", "TIDB_BENCH_OPERATOR_TARGETS_ONLY",
                       marker)  # fmt: skip
    finally:
        open_controller.stop()
        open_controller.env.pop("TIDB_BENCH_OPERATOR_TARGETS_ONLY")
        open_controller.start()


def job_args(api: client.ApiClient, ns: str, run: str) -> list[list[str]]:
    return [list(j.spec.template.spec.containers[0].args) for j in jobs_of(api, ns, run)]


def test_an_edit_after_pending_changes_neither_what_runs_nor_the_queue(
    bed: RunBed, controller: Controller
) -> None:
    host = str(bed.mariadb["host"])
    bed.start("frozen", threads=[1, 2])
    bed.wait("frozen", phases=("Running", "Succeeded", "Failed"), timeout=240)
    edit = {"spec": {"cluster": {"name": "elsewhere"}, "threads": [7],
                     "target": {"host": "tidb.elsewhere.invalid", "port": 4000}}}  # fmt: skip
    client.CustomObjectsApi(bed.api).patch_namespaced_custom_object(
        "tidbbench.io", "v1alpha1", bed.namespace, "benchmarkruns", "frozen", edit
    )
    # A run for the same database: it still waits for the edited one.
    bed.start("second", threads=[1])
    done = bed.wait("frozen", timeout=240)
    st = done["status"]
    assert st["phase"] == "Succeeded", st
    assert [s["threads"] for s in st["steps"]] == [1, 2]
    cond = condition(done, "SpecChangeIgnored")
    assert cond["status"] == "True" and "spec.cluster, spec.target, spec.threads" in cond["message"]
    assert [e.reason for e in bed.events("frozen")].count("SpecChangeIgnored") == 1
    for args in job_args(bed.api, bed.namespace, "frozen"):
        assert f"--host={host}" in args, args
        assert not any(a in ("--threads=7",) or "elsewhere" in a for a in args), args
    second = bed.wait("second", timeout=240)
    assert second["status"]["phase"] == "Succeeded", second["status"]
    assert second["status"]["startedAt"] >= st["finishedAt"], (second["status"], st)
    events = [e.message for e in run_events(bed.core, bed.namespace, "second")]
    assert any(f"waiting for BenchmarkRun {bed.namespace}/frozen" in m for m in events), events
