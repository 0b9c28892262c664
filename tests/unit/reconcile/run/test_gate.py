"""The preflight gate end to end: an in-memory cluster, a real FakePD over HTTP, a fake database."""

from __future__ import annotations

import contextlib
import re
import socket
from typing import Any

import pymysql.err
import pytest

from testbed.fake_kube import FakeKube
from testbed.fake_pd import FakePD, field_note_stores, store_info
from tidb_bench_operator.adapters.pd import HTTPPDClient, PDClient
from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec
from tidb_bench_operator.domain.preflight import CHECK_NAMES, CheckResult
from tidb_bench_operator.errors import DatabaseError
from tidb_bench_operator.reconcile.run.gate import (
    DBFactory,
    PreflightOutcome,
    run_preflight,
    with_skipped,
)

NS = "tidb-cluster"
BENCH_LABEL = {"tidbbench.io/bench-node": "true"}
DB_NODE_LABEL = {"tidbbench.test/db": "true"}
TIDB_VERSION = "8.0.11-TiDB-v8.1.0"
TIDB_VERSION_TEXT = (
    "Release Version: v8.1.0\nEdition: Community\n"
    "Git Commit Hash: 945d07c5d5c7a1ae212f6013adfb187f2de24b23\nStore: tikv"
)
MARIADB_VERSION = "10.11.6-MariaDB-0+deb12u1"
# SHOW TABLE … REGIONS since TiDB v6.2: 13 columns (sample tidb-show-table-regions_13cols_docs).
REGION_COLUMNS = [
    "REGION_ID", "START_KEY", "END_KEY", "LEADER_ID", "LEADER_STORE_ID", "PEERS", "SCATTERING",
    "WRITTEN_BYTES", "READ_BYTES", "APPROXIMATE_SIZE(MB)", "APPROXIMATE_KEYS",
    "SCHEDULING_CONSTRAINTS", "SCHEDULING_STATE",
]  # fmt: skip


# --- an in-memory cluster ------------------------------------------------------------------------


def db_pod(name: str, component: str, node_name: str, instance: str = "basic") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {
                "app.kubernetes.io/instance": instance,
                "app.kubernetes.io/component": component,
            },
        },
        "spec": {"nodeName": node_name},
        "status": {"phase": "Running"},
    }


def tidb_cluster() -> dict[str, Any]:
    spread = [{"topologyKey": "kubernetes.io/hostname", "maxSkew": 1}]
    return {
        "apiVersion": "pingcap.com/v1alpha1",
        "kind": "TidbCluster",
        "metadata": {"name": "basic", "namespace": NS},
        "spec": {
            "nodeSelector": DB_NODE_LABEL,
            "topologySpreadConstraints": spread,
            "pd": {"replicas": 3},
            "tikv": {"replicas": 4},
            "tidb": {"replicas": 3},
        },
    }


def field_note_cluster_pods(tikv3_node: str = "node1") -> list[dict[str, Any]]:
    """docs/field-story.md's layout: 3 database nodes, TiKV-3 added beside TiKV-0."""
    pods = [db_pod(f"basic-pd-{i}", "pd", f"node{i + 1}") for i in range(3)]
    pods += [db_pod(f"basic-tidb-{i}", "tidb", f"node{i + 1}") for i in range(3)]
    pods += [db_pod(f"basic-tikv-{i}", "tikv", f"node{i + 1}") for i in range(3)]
    pods.append(db_pod("basic-tikv-3", "tikv", tikv3_node))
    return pods


def field_note_kube(tikv3_node: str = "node1") -> FakeKube:
    bench_taint = {"key": "tidbbench.io/bench-node", "value": "true", "effect": "NoSchedule"}
    kube = FakeKube()
    for i in (1, 2, 3):
        kube.add_node(f"node{i}", DB_NODE_LABEL, [])
    kube.add_node("bench1", BENCH_LABEL, [bench_taint])
    for pod in field_note_cluster_pods(tikv3_node):
        kube.add_pod(pod)
    kube.add_tidb_cluster(tidb_cluster())
    return kube


# --- PD ------------------------------------------------------------------------------------------


def balanced_stores_body() -> dict[str, Any]:
    rows = [(i, f"basic-tikv-{i - 1}", 100, 780, 30, 260) for i in (1, 2, 3, 4)]
    return {
        "count": len(rows),
        "stores": [
            store_info(sid, pod, region_count=rc, region_size=rs, leader_count=lc, leader_size=ls)
            for sid, pod, rc, rs, lc, ls in rows
        ],
    }


@pytest.fixture
def fake_pd(fake_pd: FakePD) -> FakePD:
    """The shared FakePD (tests/conftest.py) serving the field story's skewed stores."""
    fake_pd.set_body("/pd/api/v1/stores", field_note_stores())
    return fake_pd


@pytest.fixture
def closed_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


# --- a database ----------------------------------------------------------------------------------


class FakeCursor:
    """Just what adapters.mysql.query uses: execute, description, fetchall, a context."""

    def __init__(self, db: FakeDatabase) -> None:
        self._db = db
        self.description: list[tuple[str]] | None = None
        self._rows: list[tuple[Any, ...]] = []

    def __enter__(self) -> FakeCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def execute(self, sql: str, args: tuple[Any, ...] = ()) -> None:
        self._db.statements.append(sql)
        columns, rows = self._db.answer(sql)
        self.description = [(c,) for c in columns]
        self._rows = rows

    def fetchall(self) -> list[tuple[Any, ...]]:
        return self._rows


class FakeDatabase:
    """Answers the handful of statements the gate sends, like TiDB or MariaDB would."""

    def __init__(
        self, version: str = TIDB_VERSION, regions: dict[str, list[int]] | None = None
    ) -> None:
        self.version = version
        self.regions = {"sbtest1": [1, 2, 3, 4, 1, 2, 3, 4]} if regions is None else regions
        self.statements: list[str] = []

    def cursor(self) -> FakeCursor:
        return FakeCursor(self)

    def answer(self, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        if sql == "SELECT VERSION()":
            return ["VERSION()"], [(self.version,)]
        is_tidb = "TiDB" in self.version
        if sql == "SELECT tidb_version()" and is_tidb:
            return ["tidb_version()"], [(TIDB_VERSION_TEXT,)]
        if "information_schema.tables" in sql:
            return ["TABLE_NAME"], [(t,) for t in self.regions]
        match = re.fullmatch(r"SHOW TABLE `sbtest`\.`(\w+)` REGIONS", sql)
        if match and is_tidb and match.group(1) in self.regions:
            rows = [
                (100 + i, "", "", 200 + i, leader, "", 0, 0, 0, 1, 0, "", "")
                for i, leader in enumerate(self.regions[match.group(1)])
            ]
            return REGION_COLUMNS, rows
        raise pymysql.err.ProgrammingError(
            1064, f"You have an error in your SQL syntax near {sql!r}"
        )

    def factory(self) -> DBFactory:
        return lambda: contextlib.nullcontext(self)


def unreachable_db() -> contextlib.AbstractContextManager[Any]:
    raise DatabaseError(
        2003, "cannot connect to root@basic-tidb.tidb-cluster:4000: (2003) Can't connect"
    )


# --- helpers ---------------------------------------------------------------------------------------


def make_spec(**overrides: Any) -> BenchmarkRunSpec:
    doc: dict[str, Any] = {
        "cluster": {"name": "basic", "namespace": NS},
        "credentials": {"secretRef": {"name": "tidb-root"}},
        "placement": {
            "nodeSelector": BENCH_LABEL,
            "tolerations": [
                {"key": "tidbbench.io/bench-node", "operator": "Exists", "effect": "NoSchedule"}
            ],
        },
    }
    doc.update(overrides)
    return BenchmarkRunSpec.model_validate(doc)


def by_name(outcome: PreflightOutcome) -> dict[str, CheckResult]:
    return {c.name: c for c in outcome.checks}


def on_field_note(
    spec: BenchmarkRunSpec, *, pd: PDClient | None, db: DBFactory
) -> PreflightOutcome:
    """The gate's outcome for `spec` on docs/field-story.md's cluster (field_note_kube)."""
    return run_preflight(spec, "bench", kube=field_note_kube(), pd=pd, db=db)


def on_balanced_stores(fake_pd: FakePD, db: DBFactory, **spec: Any) -> PreflightOutcome:
    """The gate's outcome for the field story's cluster, PD's stores balanced, over `db`."""
    fake_pd.set_body("/pd/api/v1/stores", balanced_stores_body())
    return on_field_note(make_spec(**spec), pd=HTTPPDClient(fake_pd.url), db=db)


# --- the scenarios ---------------------------------------------------------------------------------


def test_the_field_note_cluster_fails_leader_size_balance_while_region_size_passes(
    fake_pd: FakePD,
) -> None:
    db = FakeDatabase()
    outcome = on_field_note(make_spec(), pd=HTTPPDClient(fake_pd.url), db=db.factory())
    checks = by_name(outcome)
    assert [c.name for c in outcome.checks] == list(CHECK_NAMES)
    assert checks["leader-size-balance"].status == "Fail"
    assert "store 4 (basic-tikv-3.basic-tikv-peer.tidb-cluster.svc:20160) holds 689 MiB" in (
        checks["leader-size-balance"].message
    )
    assert checks["region-size-balance"].status == "Pass"
    assert checks["store-state"].status == "Pass"
    assert checks["pending-operators"].status == "Pass"
    assert checks["bench-node-isolation"].status == "Pass", checks["bench-node-isolation"].message
    assert checks["topology-spread"].status == "Pass", checks["topology-spread"].message
    assert checks["table-leader-distribution"].status == "Pass"
    assert "1=2, 2=2, 3=2, 4=2" in checks["table-leader-distribution"].message
    assert outcome.verdict.proceed is False
    assert outcome.verdict.failed == ["leader-size-balance"]
    assert outcome.tidb_version == "v8.1.0"
    assert outcome.server_version == TIDB_VERSION


def test_a_tikv_pod_on_the_bench_node_fails_bench_node_isolation(fake_pd: FakePD) -> None:
    fake_pd.set_body("/pd/api/v1/stores", balanced_stores_body())
    outcome = run_preflight(
        make_spec(),
        "bench",
        kube=field_note_kube(tikv3_node="bench1"),
        pd=HTTPPDClient(fake_pd.url),
        db=FakeDatabase().factory(),
    )
    result = by_name(outcome)["bench-node-isolation"]
    assert result.status == "Fail"
    assert "pod basic-tikv-3 (tikv) runs on bench node bench1" in result.message
    assert outcome.verdict.failed == ["bench-node-isolation"]


def test_an_unreachable_pd_fails_each_pd_check_with_the_url_and_the_way_out(
    closed_url: str,
) -> None:
    outcome = on_field_note(
        make_spec(), pd=HTTPPDClient(closed_url, timeout=1), db=FakeDatabase().factory()
    )
    checks = by_name(outcome)
    for name in ("store-state", "leader-size-balance", "region-size-balance", "pending-operators"):
        assert checks[name].status == "Fail", name
        assert checks[name].message.startswith(
            f"not evaluated: PD at {closed_url} is unreachable from the controller: connection refused"
        ), name
        assert "spec.preflight.pdTransport: Exec" in checks[name].message
    # Leaders per store are still counted from SHOW TABLE REGIONS, but without PD's store list a
    # store holding none would be invisible, so the gate says so instead of passing.
    table = checks["table-leader-distribution"]
    assert table.status == "Warn"
    assert "PD's store list was unavailable" in table.message
    assert checks["bench-node-isolation"].status == "Pass"
    assert outcome.verdict.proceed is False


def test_warn_policy_records_the_failure_and_lets_the_run_proceed(fake_pd: FakePD) -> None:
    outcome = on_field_note(
        make_spec(preflight={"policy": "Warn"}),
        pd=HTTPPDClient(fake_pd.url),
        db=FakeDatabase().factory(),
    )
    assert outcome.verdict.status == "Fail"
    assert outcome.verdict.proceed is True
    assert "recorded, run continues (policy Warn)" in outcome.verdict.message


def test_skipped_checks_are_neither_run_nor_reported(fake_pd: FakePD) -> None:
    db = FakeDatabase()
    kube = field_note_kube()
    outcome = run_preflight(
        make_spec(
            preflight={
                "skip": ["leader-size-balance", "topology-spread", "table-leader-distribution"]
            }
        ),
        "bench",
        kube=kube,
        pd=HTTPPDClient(fake_pd.url),
        db=db.factory(),
    )
    assert [c.name for c in outcome.checks] == [
        "bench-node-isolation",
        "store-state",
        "region-size-balance",
        "pending-operators",
    ]
    assert outcome.verdict.proceed is True
    assert not any(s.startswith("SHOW TABLE") for s in db.statements)
    assert not any(a.startswith("tidbcluster") for a in kube.asked)


def test_a_server_that_is_not_tidb_still_gets_the_pd_checks_when_a_pd_address_is_given(
    fake_pd: FakePD,
) -> None:
    # PD's state is PD's whatever the SQL layer says (a proxy in front of TiDB, or the test
    # bed's MariaDB beside a fake PD): only SHOW TABLE … REGIONS needs TiDB itself.
    db = FakeDatabase(version=MARIADB_VERSION)
    outcome = on_field_note(make_spec(), pd=HTTPPDClient(fake_pd.url), db=db.factory())
    checks = by_name(outcome)
    table = checks["table-leader-distribution"]
    assert (table.status, table.message) == (
        "Pass",
        f"not TiDB (server says {MARIADB_VERSION}), skipped",
    )
    assert checks["store-state"].status == "Pass"
    assert checks["leader-size-balance"].status == "Fail"
    assert checks["leader-size-balance"].stores[0] == 4  # the most loaded store first
    assert checks["pending-operators"].status == "Pass"
    assert fake_pd.requests == ["GET /pd/api/v1/stores", "GET /pd/api/v1/operators"]
    assert db.statements == ["SELECT VERSION()"]
    assert outcome.server_version == MARIADB_VERSION
    assert outcome.tidb_version is None


def test_a_server_that_is_not_tidb_and_no_pd_address_skips_the_pd_checks_as_not_applicable() -> (
    None
):
    db = FakeDatabase(version=MARIADB_VERSION)
    spec = make_spec(cluster=None, target={"host": "mariadb.example"})
    outcome = run_preflight(spec, "bench", kube=field_note_kube(), pd=None, db=db.factory())
    checks = by_name(outcome)
    expected = f"not TiDB (server says {MARIADB_VERSION}), skipped"
    for name in (
        "table-leader-distribution",
        "store-state",
        "leader-size-balance",
        "region-size-balance",
        "pending-operators",
    ):
        assert (checks[name].status, checks[name].message) == ("Pass", expected), name
    assert outcome.verdict.proceed is True


def test_without_a_cluster_topology_spread_is_skipped_and_isolation_looks_at_every_namespace(
    fake_pd: FakePD,
) -> None:
    kube = field_note_kube()
    spec = make_spec(cluster=None, target={"host": "tidb.example", "pdURL": fake_pd.url})
    outcome = run_preflight(
        spec, "bench", kube=kube, pd=HTTPPDClient(fake_pd.url), db=FakeDatabase().factory()
    )
    checks = by_name(outcome)
    assert (checks["topology-spread"].status, checks["topology-spread"].message) == (
        "Pass",
        "no cluster named; skipped",
    )
    # Pods of either TiDB Operator generation count.
    assert "pods None app.kubernetes.io/component in (pd,tikv,tidb)" in kube.asked
    assert "pods None pingcap.com/component" in kube.asked  # v2: every component, by label
    assert checks["bench-node-isolation"].status == "Pass"
    assert "checked pd/tikv/tidb pods of every namespace" in checks["bench-node-isolation"].message


def test_no_pd_address_fails_the_pd_checks_saying_how_to_give_one() -> None:
    spec = make_spec(cluster=None, target={"host": "tidb.example"})
    outcome = run_preflight(
        spec, "bench", kube=field_note_kube(), pd=None, db=FakeDatabase().factory()
    )
    result = by_name(outcome)["store-state"]
    assert result.status == "Fail"
    assert "no PD address" in result.message
    assert "spec.target has no pdURL" in result.message


def test_a_failing_api_server_fails_only_the_kubernetes_checks(fake_pd: FakePD) -> None:
    fake_pd.set_body("/pd/api/v1/stores", balanced_stores_body())
    kube = field_note_kube()
    kube.nodes_error = ConnectionResetError(104, "Connection reset by peer")
    outcome = run_preflight(
        make_spec(), "bench", kube=kube, pd=HTTPPDClient(fake_pd.url), db=FakeDatabase().factory()
    )
    checks = by_name(outcome)
    for name in ("bench-node-isolation", "topology-spread"):
        assert checks[name].status == "Fail"
        assert "listing Nodes failed: ConnectionResetError" in checks[name].message
    assert outcome.verdict.failed == ["bench-node-isolation", "topology-spread"]


def test_an_unreachable_database_fails_table_leaders_while_pd_checks_still_run(
    fake_pd: FakePD,
) -> None:
    outcome = on_field_note(make_spec(), pd=HTTPPDClient(fake_pd.url), db=unreachable_db)
    checks = by_name(outcome)
    table = checks["table-leader-distribution"]
    assert table.status == "Fail"
    assert "cannot connect to root@basic-tidb.tidb-cluster:4000" in table.message
    assert checks["leader-size-balance"].status == "Fail"
    assert checks["region-size-balance"].status == "Pass"
    assert outcome.server_version is None


def test_pending_operators_fail_the_gate(fake_pd: FakePD) -> None:
    fake_pd.set_body("/pd/api/v1/stores", balanced_stores_body())
    operator = (
        "balance-leader {transfer leader: store 2 to 1} (kind:leader, region:28977(365, 35), "
        "createAt:2024-07-09 16:25:23.105733052 +0800 CST m=+1209042.707881308, startAt:0001-01-01 "
        "00:00:00 +0000 UTC, currentStep:0, size:95, steps:[0:{transfer leader from store 2 to store "
        "1}], timeout:[1m0s])"
    )
    fake_pd.set_body("/pd/api/v1/operators", [operator])
    outcome = on_field_note(make_spec(), pd=HTTPPDClient(fake_pd.url), db=FakeDatabase().factory())
    assert outcome.verdict.failed == ["pending-operators"]
    assert by_name(outcome)["pending-operators"].stores == [1, 2]


def test_all_leaders_of_a_table_on_one_store_fail_table_leader_distribution(
    fake_pd: FakePD,
) -> None:
    db = FakeDatabase(regions={"sbtest1": [1, 2, 3, 4], "sbtest2": [3, 3, 3, 3, 3]})
    outcome = on_balanced_stores(fake_pd, db.factory(), dataset={"tables": 3})
    result = by_name(outcome)["table-leader-distribution"]
    assert result.status == "Fail"
    assert "table sbtest.sbtest2" in result.message
    assert "every leader is on store 3" in result.message
    assert result.stores == [3]
    # sbtest3 does not exist yet, so it is not asked about.
    assert "SHOW TABLE `sbtest`.`sbtest3` REGIONS" not in db.statements


def test_no_benchmark_tables_yet_passes_table_leader_distribution_saying_so(
    fake_pd: FakePD,
) -> None:
    outcome = on_balanced_stores(fake_pd, FakeDatabase(regions={}).factory())
    result = by_name(outcome)["table-leader-distribution"]
    assert result.status == "Pass"
    assert result.message.startswith("no benchmark tables yet (sbtest.sbtest1..sbtest1 not found)")
    assert outcome.verdict.proceed is True


def test_several_balanced_tables_are_summarised_in_one_line(fake_pd: FakePD) -> None:
    db = FakeDatabase(regions={"sbtest1": [1, 2, 3, 4], "sbtest2": [4, 3, 2, 1]})
    outcome = on_balanced_stores(fake_pd, db.factory(), dataset={"tables": 2})
    result = by_name(outcome)["table-leader-distribution"]
    assert result.status == "Pass"
    assert (
        "leaders of 8 region(s) of table sbtest.sbtest* (2 tables) per store: 1=2, 2=2, 3=2, 4=2"
        in result.message
    )


def test_policy_off_runs_no_checks_but_still_reports_versions(fake_pd: FakePD) -> None:
    kube = field_note_kube()
    outcome = run_preflight(
        make_spec(preflight={"policy": "Off"}),
        "bench",
        kube=kube,
        pd=HTTPPDClient(fake_pd.url),
        db=FakeDatabase().factory(),
    )
    assert outcome.checks == []
    assert outcome.verdict.proceed is True
    assert outcome.tidb_version == "v8.1.0"
    assert kube.asked == []
    assert fake_pd.requests == []


def test_when_pd_gives_no_answer_at_all_the_gate_does_not_wait_for_it_twice() -> None:
    asked: list[str] = []

    def refused(url: str, timeout: float) -> tuple[int, bytes, str]:
        asked.append(url)
        raise ConnectionRefusedError(111, "Connection refused")

    pd = HTTPPDClient("http://basic-pd.tidb-cluster:2379", transport=refused)
    outcome = on_field_note(make_spec(), pd=pd, db=FakeDatabase().factory())
    assert asked == ["http://basic-pd.tidb-cluster:2379/pd/api/v1/stores"]
    assert by_name(outcome)["pending-operators"].status == "Fail"
    assert "connection refused" in by_name(outcome)["pending-operators"].message


def test_skipped_checks_are_recorded_as_warn_and_judged_by_the_policy(fake_pd: FakePD) -> None:
    fake_pd.set_body("/pd/api/v1/stores", balanced_stores_body())
    spec = make_spec(preflight={"policy": "Enforce", "skip": ["topology-spread"]})
    outcome = with_skipped(
        run_preflight(
            spec,
            "bench",
            kube=field_note_kube(),
            pd=HTTPPDClient(fake_pd.url),
            db=FakeDatabase().factory(),
        ),
        spec,
    )
    skipped = by_name(outcome)["topology-spread"]
    assert (skipped.status, skipped.message) == (
        "Warn",
        "skipped by spec.preflight.skip; not evaluated",
    )
    assert outcome.checks[-1] is skipped, "after the checks that ran"
    assert "topology-spread" in outcome.verdict.warned
