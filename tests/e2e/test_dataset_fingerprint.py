"""After prepare: ANALYZE and the cache warm-up, seen in MariaDB's general query log, for a
fresh and a reused dataset; and a schedule's fingerprint diff naming a changed TiDB image."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest
from kubernetes import client

from testbed.cluster import Testbed
from testbed.runs import (
    GROUP,
    VERSION,
    RunBed,
    condition,
    run_manifest,
    tidb_bench_report,
)

pytestmark = pytest.mark.e2e

SCHEDULE_LABEL = "tidbbench.io/schedule"


def _connect(mariadb: dict[str, Any], database: str | None = None) -> Any:
    return pymysql.connect(
        host=mariadb["host"],
        port=int(mariadb["port"]),
        user=mariadb["user"],
        password=mariadb["password"],
        database=database,
        autocommit=True,
    )


class QueryLog:
    """MariaDB's general query log, in the mysql.general_log table while the test runs."""

    def __init__(self, mariadb: dict[str, Any]) -> None:
        self.mariadb = mariadb

    def statements(self, containing: str) -> list[str]:
        with _connect(self.mariadb) as conn, conn.cursor() as cur:
            cur.execute(
                # Not this very query, which the log records too.
                "SELECT argument FROM mysql.general_log WHERE command_type = 'Query' "
                "AND argument LIKE %s AND argument NOT LIKE '%%general_log%%' "
                "ORDER BY event_time",
                (f"%{containing}%",),
            )
            return [r[0].decode() if isinstance(r[0], bytes) else str(r[0]) for r in cur.fetchall()]

    def clear(self) -> None:
        with _connect(self.mariadb) as conn, conn.cursor() as cur:
            cur.execute("TRUNCATE TABLE mysql.general_log")


@contextlib.contextmanager
def query_log(mariadb: dict[str, Any]) -> Iterator[QueryLog]:
    """Turn the general log on (into a table) for the block; off and emptied afterwards."""
    with _connect(mariadb) as conn, conn.cursor() as cur:
        cur.execute("SET GLOBAL log_output = 'TABLE'")
        cur.execute("TRUNCATE TABLE mysql.general_log")
        cur.execute("SET GLOBAL general_log = 1")
    try:
        yield QueryLog(mariadb)
    finally:
        with _connect(mariadb) as conn, conn.cursor() as cur:
            cur.execute("SET GLOBAL general_log = 0")
            cur.execute("TRUNCATE TABLE mysql.general_log")


def event_reasons(core: client.CoreV1Api, namespace: str, name: str) -> list[str]:
    evs = core.list_namespaced_event(namespace, field_selector=f"involvedObject.name={name}").items
    return [e.reason for e in sorted(evs, key=lambda e: int(e.metadata.resource_version))]


def test_analyze_and_warm_up_run_after_prepare_and_again_for_a_reused_dataset(
    bed: RunBed, controller: Any
) -> None:
    database = "warm_" + bed.namespace.replace("-", "_")
    small = {"threads": [1], "durationSeconds": 2, "database": database}
    dataset = {"tables": 2, "tableSize": 500}
    try:
        with query_log(bed.mariadb) as log:
            bed.create(bed.manifest("fresh", dataset=dataset, **small))
            fresh = bed.wait("fresh", timeout=180)
            assert fresh["status"]["phase"] == "Succeeded", fresh["status"]
            assert condition(fresh, "DatasetReady")["reason"] == "Prepared"
            analyzed = log.statements(f"ANALYZE TABLE `{database}`")
            warmed = log.statements(f"FROM `{database}`.`sbtest")
            assert analyzed == [
                f"ANALYZE TABLE `{database}`.`sbtest1`",
                f"ANALYZE TABLE `{database}`.`sbtest2`",
            ]
            assert [w for w in warmed if "COUNT(pad)" in w] == [
                f"SELECT COUNT(pad) FROM `{database}`.`sbtest1` USE INDEX (k_1)",
                f"SELECT COUNT(pad) FROM `{database}`.`sbtest2` USE INDEX (k_2)",
            ]
            for type_ in ("DatasetAnalyzed", "CacheWarmed"):
                cond = condition(fresh, type_)
                assert (cond["status"], cond["reason"]) == ("True", "Done"), cond
                assert "on 2 table(s)" in cond["message"]
                assert "(prepared dataset)" in cond["message"]
            reasons = event_reasons(bed.core, bed.namespace, "fresh")
            assert reasons.index("DatasetReady") < reasons.index("DatasetAnalyzed")
            assert reasons.index("CacheWarmed") < reasons.index("StepStarted")

            log.clear()
            bed.create(bed.manifest("reused", dataset=dataset, **small))
            reused = bed.wait("reused", timeout=180)
            assert reused["status"]["phase"] == "Succeeded", reused["status"]
            assert condition(reused, "DatasetReady")["reason"] == "Reused"
            assert len(log.statements(f"ANALYZE TABLE `{database}`")) == 2
            # This database's only: another test's warm-up may share the server's log.
            assert len(log.statements(f"COUNT(pad) FROM `{database}`.")) == 2
            assert "(reused dataset)" in condition(reused, "CacheWarmed")["message"]

            log.clear()
            bed.create(
                run_manifest(
                    "switched-off",
                    bed.mariadb,
                    dataset={**dataset, "analyze": False, "warmUp": False},
                    **small,
                ),
            )
            off = bed.wait("switched-off", timeout=180)
            assert off["status"]["phase"] == "Succeeded", off["status"]
            assert log.statements(f"ANALYZE TABLE `{database}`") == []
            assert log.statements(f"COUNT(pad) FROM `{database}`.") == []
            assert condition(off, "CacheWarmed")["reason"] == "Disabled"
        print(
            f"\nfresh: {condition(fresh, 'DatasetAnalyzed')['message']}; "
            f"{condition(fresh, 'CacheWarmed')['message']}\n"
            f"reused: {condition(reused, 'CacheWarmed')['message']}"
        )
    finally:
        with _connect(bed.mariadb) as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{database}`")


def test_a_changed_tidb_image_between_two_nightly_runs_is_named_in_the_runs_status(
    bed: RunBed, controller: Any, testbed: Testbed
) -> None:
    custom = client.CustomObjectsApi(bed.api)
    bed.cluster("basic", {"pd": ["node2"], "tikv": ["node2", "node3"], "tidb": ["node3"]})
    template = bed.manifest("unused", threads=[1], durationSeconds=2)["spec"]
    template["cluster"] = {"name": "basic"}
    custom.create_namespaced_custom_object(
        GROUP, VERSION, bed.namespace, "benchmarkschedules",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "BenchmarkSchedule",
            "metadata": {"name": "nightly"},
            "spec": {"schedule": "0 3 * * *", "suspend": True, "template": template,
                     "regression": {"baselineRuns": 2, "maxQpsDropPercent": 50}},
        },
    )  # fmt: skip

    def night(name: str) -> dict[str, Any]:
        body = bed.manifest(name, **template)
        body["metadata"]["labels"] = {SCHEDULE_LABEL: "nightly"}
        bed.create(body)
        assert bed.wait(name, timeout=180)["status"]["phase"] == "Succeeded"
        deadline = 30
        for _ in range(deadline):
            run = bed.get(name)
            if any(c["type"] == "Regressed" for c in run["status"].get("conditions", [])):
                return run
            time.sleep(1)
        raise AssertionError(f"{name} was not judged by the schedule within {deadline}s")

    first = night("night-1")
    fp = first["status"]["fingerprint"]
    assert fp["images"]["tidb"] == "pingcap/tidb:v8.1.0"
    assert fp["replicas"] == {"pd": 1, "tikv": 2, "tidb": 1}
    assert "MariaDB" in fp["serverVersion"] and "innodb_buffer_pool_size" in fp["variables"]
    assert fp["sysbenchVersion"].startswith("1.0")

    custom.patch_namespaced_custom_object(
        "pingcap.com", "v1alpha1", bed.namespace, "tidbclusters", "basic",
        {"spec": {"tidb": {"version": "v8.1.1"}}},
    )  # fmt: skip
    second = night("night-2")
    assert second["status"]["fingerprintDiff"] == [
        "tidb image pingcap/tidb:v8.1.0 → pingcap/tidb:v8.1.1"
    ]
    cond = condition(second, "Regressed")
    assert (
        "differs from the baseline: tidb image pingcap/tidb:v8.1.0 → pingcap/tidb:v8.1.1"
        in (cond["message"])
    )
    print(f"\nnight-2 Regressed={cond['status']} ({cond['reason']}): {cond['message']}")
    # The report says it too, under the schedule's verdict.
    report = tidb_bench_report(testbed.kubeconfig, "night-2", "--namespace", bed.namespace)
    assert "## Against the schedule's baseline" in report
    assert "- tidb image pingcap/tidb:v8.1.0 → pingcap/tidb:v8.1.1" in report
