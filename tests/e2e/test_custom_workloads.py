"""A team's own sysbench Lua workload from a ConfigMap (docs/workloads.md), on the test bed.

The order-entry mix of examples/workloads/order-entry (orders.lua `require`s
order_common.lua) runs from a ConfigMap across two clients with real sysbench against the
MariaDB stand-in, its own prepare and cleanup included, and its clients' results combined
as for the built-in tests. The errors name the ConfigMap and key: a missing ConfigMap or
script key fails at Pending creating nothing; a missing required file, a Lua error and a
script that prints no summary fail in the step or dataset message. The session's controller
(default settings) refuses custom workloads; this module's own controller allows them.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest
from kubernetes import client

from e2e.conftest import SESSION, Controller, module_controller
from testbed.cluster import REPO_ROOT, Testbed
from testbed.kube import delete_namespace, has_default_service_account, wait_for
from testbed.runs import RunBed, add_db_secret, condition, why_not

pytestmark = pytest.mark.e2e

PREFIX = f"lw{SESSION}"
ORDER_ENTRY = REPO_ROOT / "examples" / "workloads" / "order-entry"
#: Every node of the bed (node1 is the only bench node, and two clients need two nodes).
ANY_NODE = {
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}],
}
ORDERS = {
    "name": "orders",
    "configMapRef": {"name": "order-entry"},
    "script": "orders.lua",
    "options": {"warehouses": "int", "mix": "word"},
    "args": ["--warehouses=2", "--mix=standard"],
}
#: Scripts that go wrong, each in a ConfigMap of its own.
BROKEN = {
    # A Lua error at run time, in a function of the file it requires.
    "lua-error": {
        "broken.lua": 'local c = require "broken_common"\nfunction event() c.go() end\n',
        "broken_common.lua": "local M = {}\nfunction M.go() M.missing() end\nreturn M\n",
    },
    # A file it requires is not in the ConfigMap.
    "missing-file": {"needs.lua": 'local x = require "order_helpers"\nfunction event() end\n'},
    # It replaces sysbench's report hooks: sysbench exits 0 having printed no summary.
    "silent": {
        "silent.lua": "function thread_init() con = sysbench.sql.driver():connect() end\n"
        'function event() con:query("SELECT 1") end\n'
        "function sysbench.hooks.report_cumulative() end\n"
        "function sysbench.hooks.report_intermediate() end\n"
    },
}


def custom(name: str, configmap: str, script: str) -> dict[str, Any]:
    return {"name": name, "configMapRef": {"name": configmap}, "script": script}


def configmap(core: client.CoreV1Api, ns: str, name: str, files: dict[str, str]) -> None:
    core.create_namespaced_config_map(ns, {"metadata": {"name": name}, "data": files})


@pytest.fixture(scope="module")
def open_controller(testbed: Testbed, crds: None) -> Iterator[Controller]:
    """A controller that allows custom workloads, for this module's namespaces."""
    yield from module_controller(testbed, PREFIX, {"TIDB_BENCH_ALLOW_CUSTOM_WORKLOADS": "true"})


@pytest.fixture
def lua_bed(
    api: client.ApiClient, core: client.CoreV1Api, mariadb: dict[str, Any]
) -> Iterator[RunBed]:
    """A namespace with the Secret `db`, the order-entry ConfigMap and the broken ones."""
    ns = f"{PREFIX}-{secrets.token_hex(2)}"
    core.create_namespace({"metadata": {"name": ns}})
    wait_for(lambda: has_default_service_account(core, ns), 30, f"ServiceAccount in {ns}")
    add_db_secret(core, ns, mariadb)
    configmap(core, ns, "order-entry", {p.name: p.read_text() for p in ORDER_ENTRY.glob("*.lua")})
    for name, files in BROKEN.items():
        configmap(core, ns, name, files)
    yield RunBed(api, core, ns, mariadb)
    delete_namespace(core, ns)


def tables(mariadb: dict[str, Any]) -> set[str]:
    """The order-entry tables in the run's database."""
    conn = pymysql.connect(
        host=str(mariadb["host"]), port=int(mariadb["port"]),
        user=str(mariadb["user"]), password=str(mariadb["password"]),
        database=str(mariadb.get("database") or "sbtest"),
    )  # fmt: skip
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW TABLES LIKE 'oe\\_%'")
            return {str(row[0]) for row in cur.fetchall()}
    finally:
        conn.close()


def client_messages(bed: RunBed, run: str, want: int, timeout: float) -> list[dict[str, Any]]:
    """The step pods' termination messages, read while the pods are there (a step's Jobs
    go once its result is stored)."""
    messages: dict[str, str] = {}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(messages) < want:
        selector = f"tidbbench.io/run={run},tidbbench.io/role=step"
        for pod in bed.core.list_namespaced_pod(bed.namespace, label_selector=selector).items:
            done = (pod.status.container_statuses or [None])[0]
            if done is not None and done.state.terminated and done.state.terminated.message:
                messages[pod.metadata.name] = done.state.terminated.message
        time.sleep(0.1)
    return [json.loads(text) for text in messages.values()]


def test_a_two_file_lua_workload_runs_on_two_clients_and_their_results_are_combined(
    lua_bed: RunBed, open_controller: Controller, mariadb: dict[str, Any]
) -> None:
    bed = lua_bed
    bed.create(bed.manifest(
        "orders", workloads=["orders"], customWorkloads=[ORDERS], clients=2, threads=[2],
        durationSeconds=3, placement=ANY_NODE, dataset={"cleanup": True},
    ))  # fmt: skip
    per_client = client_messages(bed, "orders", 2, timeout=150)
    run = bed.wait("orders", timeout=120)
    st = run["status"]
    assert st["phase"] == "Succeeded", why_not(st)
    step = st["steps"][0]
    assert (step["workload"], step["clients"], step["threads"]) == ("orders", 2, 2)
    assert len(per_client) == 2, per_client
    results = [m["result"] for m in per_client]
    assert all(r["workload"] == "orders" and r["qps"] > 0 for r in results), results
    # Combined as for built-in tests: rates summed, counts summed, the worst latency kept.
    assert step["qps"] == pytest.approx(sum(r["qps"] for r in results), rel=1e-6)
    assert step["tps"] == pytest.approx(sum(r["tps"] for r in results), rel=1e-6)
    assert step["events"] == sum(r["events"] for r in results)
    assert step["latencyMs"]["max"] == max(r["latencyMs"]["max"] for r in results)
    # The mix ran both files' code: new orders and payments write, order status reads.
    assert step["writeQps"] > 0 and step["readQps"] > 0 and step["otherQps"] > 0, step
    assert st["summary"]["workload"] == "orders" and st["summary"]["peakQps"] > 0, st["summary"]
    # Its own prepare ran (DatasetReady says so) and its own cleanup dropped its tables.
    ready = condition(run, "DatasetReady")
    assert "ran the prepare of custom workload(s) orders" in ready["message"], ready
    assert "no sbtest tables" in ready["message"], ready
    # ANALYZE and the cache warm-up are the sbtest tables': not done, and said so.
    assert condition(run, "DatasetAnalyzed")["reason"] == "NoSbtestTables"
    assert condition(run, "CacheWarmed")["reason"] == "NoSbtestTables"
    assert tables(mariadb) == set()


def test_each_error_names_the_configmap_and_the_key(
    lua_bed: RunBed, open_controller: Controller
) -> None:
    bed, ns = lua_bed, lua_bed.namespace
    fast = {"threads": [1], "durationSeconds": 2}
    runs = {
        "no-cm": custom("gone", "no-such-configmap", "gone.lua"),
        "no-key": custom("nokey", "order-entry", "order_entry.lua"),
        "lua-error": custom("broken", "lua-error", "broken.lua"),
        "missing-file": custom("needs", "missing-file", "needs.lua"),
        "silent": custom("silent", "silent", "silent.lua"),
    }
    for name, entry in runs.items():
        bed.create(bed.manifest(name, workloads=[entry["name"]], customWorkloads=[entry], **fast))

    # Known before running: Failed at Pending, nothing created.
    for name, reason, said in (
        ("no-cm", "WorkloadConfigMapNotFound",
         f"spec.customWorkloads[0].configMapRef.name: ConfigMap 'no-such-configmap' of custom "
         f"workload 'gone' not found in namespace '{ns}'; create it"),
        ("no-key", "WorkloadKeyMissing",
         f"spec.customWorkloads[0].script: ConfigMap {ns}/order-entry has no key "
         "'order_entry.lua' (it has: order_common.lua, orders.lua)"),
    ):  # fmt: skip
        run = bed.wait(name, phases=("Failed", "Preflight", "Running", "Succeeded"), timeout=60)
        failed = condition(run, "Failed")
        assert run["status"]["phase"] == "Failed" and failed["reason"] == reason, why_not(
            run["status"]
        )
        assert said in failed["message"], failed
        warned = [e.message for e in bed.events(name) if e.reason == reason]
        assert warned and said in warned[0], warned
        assert bed.jobs(name) == [] and "admitted" not in run["status"]

    # Known only when sysbench runs the script: the failure message says which file and why.
    for name, reason, said in (
        ("lua-error", "StepFailed",
         f"custom workload 'broken' (ConfigMap {ns}/lua-error key 'broken.lua'): sysbench "
         "1.0.20 failed: `thread_run' function failed: key broken_common.lua:2: attempt to "
         "call field 'missing' (a nil value)"),
        ("missing-file", "DatasetFailed",
         f"custom workload 'needs' (ConfigMap {ns}/missing-file key 'needs.lua'): sysbench "
         "1.0.20 failed: key needs.lua:1: module 'order_helpers' not found"),
        ("silent", "StepFailed",
         f"custom workload 'silent' (ConfigMap {ns}/silent key 'silent.lua'): sysbench exited "
         "0 but printed no end-of-run report"),
    ):  # fmt: skip
        run = bed.wait(name, timeout=120)
        failed = condition(run, "Failed")
        assert run["status"]["phase"] == "Failed" and failed["reason"] == reason, why_not(
            run["status"]
        )
        assert said in failed["message"], failed
    missing = condition(bed.get("missing-file"), "Failed")["message"]
    assert f"add order_helpers.lua to ConfigMap {ns}/missing-file" in missing, missing
    # A script that prints no summary is its author's doing: not retried like a lost client.
    # (the first attempt's Job, silent-s0-c0, failed the run; a retry's would end in -a1).
    silent = condition(bed.get("silent"), "Failed")["message"]
    assert silent.startswith("step 1 (silent, 1 threads), Job silent-s0-c0: "), silent


def test_the_default_controller_refuses_a_custom_workload_creating_nothing(
    bed: RunBed, controller: Controller
) -> None:
    bed.core.create_namespaced_config_map(
        bed.namespace,
        {"metadata": {"name": "order-entry"},
         "data": {p.name: p.read_text() for p in ORDER_ENTRY.glob("*.lua")}},
    )  # fmt: skip
    bed.create(bed.manifest("mine", workloads=["orders"], customWorkloads=[ORDERS]))
    run = bed.wait("mine", phases=("Failed", "Preflight", "Running", "Succeeded"), timeout=60)
    failed = condition(run, "Failed")
    assert run["status"]["phase"] == "Failed", run["status"]
    assert failed["reason"] == "CustomWorkloadNotAllowed", failed
    assert "TIDB_BENCH_ALLOW_CUSTOM_WORKLOADS=true" in failed["message"], failed
    warned = [e.message for e in bed.events("mine") if e.reason == "CustomWorkloadNotAllowed"]
    assert warned, "a Warning Event says why"
    mine = "tidbbench.io/run=mine"
    assert bed.jobs("mine") == []
    assert bed.core.list_namespaced_pod(bed.namespace, label_selector=mine).items == []
    assert bed.core.list_namespaced_config_map(bed.namespace, label_selector=mine).items == []
    assert "admitted" not in run["status"] and "endpoint" not in run["status"]
