"""Preflight gate: observe the cluster through the adapters, judge it with the domain checks."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, TypeVar

from tidb_bench_operator.adapters import mysql
from tidb_bench_operator.adapters.clusters import ClusterObjects, read_cluster
from tidb_bench_operator.adapters.pd import PDClient
from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec
from tidb_bench_operator.domain.cluster.view import (
    CLUSTER_KINDS,
    V1_KIND,
    database_pod_selector,
    labels_of,
)
from tidb_bench_operator.domain.manifests import Endpoint, compute_endpoint
from tidb_bench_operator.domain.objects import JSON
from tidb_bench_operator.domain.pd import STATE_UP, Store
from tidb_bench_operator.domain.preflight import (
    BENCH_NODE_ISOLATION,
    CHECK_NAMES,
    LEADER_SIZE_BALANCE,
    PENDING_OPERATORS,
    REGION_SIZE_BALANCE,
    STORE_STATE,
    TABLE_LEADER_DISTRIBUTION,
    TOPOLOGY_SPREAD,
    CheckResult,
    GateDecision,
    check_bench_node_isolation,
    check_leader_size_balance,
    check_pending_operators,
    check_region_size_balance,
    check_store_state,
    check_table_leader_distribution,
    check_topology,
    evaluate,
    is_tidb_server_version,
    not_tidb_skip,
    parse_tidb_version,
    worst_status,
)
from tidb_bench_operator.errors import (
    DatabaseError,
    KubeForbidden,
    ParseError,
    PDExecError,
    PDUnreachableError,
    TidbBenchError,
)

log = logging.getLogger(__name__)

DBFactory = mysql.Connector
"""Opens a MySQL-protocol connection (adapters.mysql.connector); it owns the timeouts."""

_T = TypeVar("_T")

PD_CHECKS = (STORE_STATE, LEADER_SIZE_BALANCE, REGION_SIZE_BALANCE, PENDING_OPERATORS)
_STORE_CHECKS = (STORE_STATE, LEADER_SIZE_BALANCE, REGION_SIZE_BALANCE)
# SHOW TABLE … REGIONS costs one PD round trip per region batch; a 1024-table dataset would
# hold the gate for minutes, and the first tables show a scatter problem as well as all do.
MAX_TABLES_CHECKED = 32


class ClusterReader(ClusterObjects, Protocol):
    """The reads of adapters.k8s.Kube that the gate uses (plain camelCase dicts)."""

    def nodes(self) -> list[JSON]:
        """All Nodes."""
        ...

    def pods(self, namespace: str | None, selector: str) -> list[JSON]:
        """Pods matching a label selector; namespace None means all namespaces."""
        ...


@dataclass(frozen=True)
class PreflightOutcome:
    """What the gate saw and decided."""

    checks: list[CheckResult]
    verdict: GateDecision
    tidb_version: str | None = None
    server_version: str | None = None


def with_skipped(outcome: PreflightOutcome, spec: BenchmarkRunSpec) -> PreflightOutcome:
    """The outcome with every check of spec.preflight.skip recorded as Warn, and judged again.

    A skipped check is never mistaken for a pass: it shows in status (or the local report)
    as Warn, saying it was not evaluated.
    """
    checks = [
        *outcome.checks,
        *(
            CheckResult(
                name=name, status="Warn", message="skipped by spec.preflight.skip; not evaluated"
            )
            for name in spec.preflight.skip
        ),
    ]
    return replace(outcome, checks=checks, verdict=evaluate(checks, spec.preflight.policy))


# ---------------------------------------------------------------------------
# Observation helpers: one failing source never crashes the others.


def _describe_error(exc: BaseException) -> str:
    """Our errors say what, where and what to do; anything else is named by its type."""
    if isinstance(exc, KubeForbidden):
        return f"{exc}; the controller's ServiceAccount lacks RBAC for it"
    if isinstance(exc, TidbBenchError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _observe(what: str, read: Callable[[], _T]) -> tuple[_T | None, str | None, Exception | None]:
    """(value, None, None) or (None, error text, exception): a source's failure is a finding."""
    try:
        return read(), None, None
    except Exception as exc:  # one failing source must never crash the other checks
        if isinstance(exc, TidbBenchError):
            return None, _describe_error(exc), exc  # ours say what, where and what to do
        log.warning("preflight: %s failed", what, exc_info=True)
        return None, f"{what} failed: {_describe_error(exc)}", exc


def _unobserved(name: str, why: str) -> CheckResult:
    # Fail, not Warn: an unobservable input is not evidence of fairness; the policy (the
    # gate) decides whether that blocks the run.
    return CheckResult(name=name, status="Fail", message=f"not evaluated: {why}")


# ---------------------------------------------------------------------------
# Database


@dataclass
class _DBView:
    server_version: str | None = None
    tidb_version: str | None = None
    error: str | None = None
    existing_tables: list[str] = field(default_factory=list)
    expected_tables: list[str] = field(default_factory=list)
    regions: dict[str, tuple[list[str], list[tuple[Any, ...]]]] = field(default_factory=dict)
    region_errors: dict[str, str] = field(default_factory=dict)

    @property
    def is_tidb(self) -> bool | None:
        if self.server_version is None:
            return None
        return is_tidb_server_version(self.server_version)


def _observe_db(db: DBFactory, spec: BenchmarkRunSpec, want_regions: bool) -> _DBView:
    view = _DBView()
    view.expected_tables = [f"sbtest{i}" for i in range(1, spec.dataset.tables + 1)]
    try:
        with db() as conn:
            view.server_version = mysql.server_version(conn)
            if not view.is_tidb:
                return view
            text = mysql.tidb_version(conn)
            if text is not None:
                try:
                    view.tidb_version = parse_tidb_version(text).get("release_version")
                except ParseError as exc:
                    log.warning("preflight: %s", exc)
            if not want_regions:
                return view
            _, rows = mysql.query(
                conn,
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                (spec.database,),
            )
            present = {str(r[0]) for r in rows}
            view.existing_tables = [t for t in view.expected_tables if t in present]
            for table in view.existing_tables[:MAX_TABLES_CHECKED]:
                try:
                    view.regions[table] = mysql.show_table_regions(conn, spec.database, table)
                except DatabaseError as exc:
                    view.region_errors[table] = str(exc)
    except Exception as exc:  # the DB is one source among several: record, don't crash
        if not isinstance(exc, TidbBenchError):
            log.warning("preflight: database probe failed", exc_info=True)
        view.error = _describe_error(exc)
    return view


def _table_leader_check(
    spec: BenchmarkRunSpec, view: _DBView, store_ids: list[int] | None, pd_error: str | None
) -> CheckResult:
    name = TABLE_LEADER_DISTRIBUTION
    db = spec.database
    if not view.existing_tables:
        return CheckResult(
            name=name,
            status="Pass",
            message=f"no benchmark tables yet ({db}.sbtest1..sbtest{spec.dataset.tables} not "
            "found), nothing to check; they are checked once they exist",
        )
    results: list[CheckResult] = []
    all_rows: list[tuple[Any, ...]] = []
    columns: list[str] | None = None
    for table in view.existing_tables[:MAX_TABLES_CHECKED]:
        if table in view.region_errors:
            results.append(
                _unobserved(name, f"SHOW TABLE {db}.{table} REGIONS: {view.region_errors[table]}")
            )
            continue
        cols, rows = view.regions[table]
        try:
            results.append(
                check_table_leader_distribution(rows, cols, store_ids or [], table=f"{db}.{table}")
            )
        except ParseError as exc:
            results.append(_unobserved(name, str(exc)))
            continue
        if columns is None or columns == cols:
            columns = cols
            all_rows.extend(rows)
    status = worst_status(r.status for r in results)
    checked = len(results)
    tail = ""
    if len(view.existing_tables) > checked:
        tail = f" (checked the first {checked} of {len(view.existing_tables)} tables)"
    if status == "Pass":
        if checked > 1 and columns is not None:
            # One line for all tables: per-table Pass lines say the same thing N times.
            combined = check_table_leader_distribution(
                all_rows, columns, store_ids or [], table=f"{db}.sbtest* ({checked} tables)"
            )
            message = f"{combined.message}; each table passes on its own"
        else:
            message = results[0].message
        if store_ids is None:
            # Without PD's store list, stores holding no leader at all are invisible, so an
            # all-on-one-store table could look like a one-store cluster.
            return CheckResult(
                name=name,
                status="Warn",
                message=f"{message}{tail}; PD's store list was unavailable ({pd_error}), so "
                "stores holding no leader are not counted",
            )
        return CheckResult(name=name, status="Pass", message=f"{message}{tail}")
    bad = [r for r in results if r.status != "Pass"]
    shown = "; ".join(r.message for r in bad[:3])
    more = f"; {len(bad) - 3} more table(s) not Pass" if len(bad) > 3 else ""
    stores = sorted({sid for r in bad for sid in r.stores})
    return CheckResult(name=name, status=status, message=f"{shown}{more}{tail}", stores=stores)


# ---------------------------------------------------------------------------
# The gate


def run_preflight(
    spec: BenchmarkRunSpec,
    run_namespace: str,
    *,
    kube: ClusterReader,
    pd: PDClient | None,
    db: DBFactory | None,
    endpoint: Endpoint | None = None,
) -> PreflightOutcome:
    """Run every preflight check not in spec.preflight.skip, once, and apply the policy.

    Checks come in the fixed order of domain.preflight.CHECK_NAMES. A check whose inputs
    cannot be observed (PD, the API server or the database failing) is a Fail saying why;
    re-running until spec.preflight.timeoutSeconds is the caller's loop. `endpoint` is the
    run's resolved one (status.endpoint); without it, it is computed from the spec.
    """
    policy = spec.preflight.policy
    endpoint = endpoint or compute_endpoint(spec, run_namespace)
    skip = set(spec.preflight.skip)
    wanted = [] if policy == "Off" else [n for n in CHECK_NAMES if n not in skip]
    results: dict[str, CheckResult] = {}

    # Database first: whether the server is TiDB decides whether table-leader-distribution
    # applies (SHOW TABLE … REGIONS is TiDB's), and whether a missing PD address is an error.
    view = _DBView()
    if db is not None:
        view = _observe_db(db, spec, want_regions=TABLE_LEADER_DISTRIBUTION in wanted)
    not_tidb = view.is_tidb is False
    if not wanted:
        return PreflightOutcome(
            checks=[],
            verdict=evaluate([], policy),
            tidb_version=view.tidb_version,
            server_version=view.server_version,
        )

    # --- Kubernetes: bench-node-isolation, topology-spread -------------------------------
    if BENCH_NODE_ISOLATION in wanted or TOPOLOGY_SPREAD in wanted:
        nodes, nodes_error, _ = _observe("listing Nodes", kube.nodes)
        if endpoint.cluster_name is not None:
            kind = endpoint.cluster_kind or V1_KIND
            selector = f"{labels_of(kind).cluster}={endpoint.cluster_name}"
            where = f"in namespace {endpoint.cluster_namespace}"
            pods, pods_error, _ = _observe(
                f"listing pods {selector} {where}",
                lambda: kube.pods(endpoint.cluster_namespace, selector),
            )
        else:
            # No cluster named: any pd/tikv/tidb pod, labelled by either operator generation.
            selectors = [database_pod_selector(k, None) for k in CLUSTER_KINDS]
            pods, pods_error, _ = _observe(
                f"listing pods {' or '.join(selectors)} in all namespaces",
                lambda: [p for sel in selectors for p in kube.pods(None, sel)],
            )
        k8s_error = nodes_error or pods_error
        if BENCH_NODE_ISOLATION in wanted:
            results[BENCH_NODE_ISOLATION] = _bench_node_isolation(
                spec, endpoint.cluster_name, nodes, pods, k8s_error
            )
        if TOPOLOGY_SPREAD in wanted:
            results[TOPOLOGY_SPREAD] = _topology_spread(
                kube, spec, endpoint, run_namespace, nodes, pods, k8s_error
            )

    # --- PD: store-state, size balance, pending operators --------------------------------
    wants_table = TABLE_LEADER_DISTRIBUTION in wanted and view.is_tidb is True
    stores: list[Store] | None = None
    stores_error: str | None = None
    pd_missing = (
        "no PD address: spec.cluster is not set and spec.target has no pdURL; set one so the "
        "PD checks can run, or list them in spec.preflight.skip"
    )
    # PD's state is PD's, whatever the SQL layer answers: with a PD address the PD checks
    # always run (a proxy or a MySQL-compatible front may hide TiDB's VERSION()). Only with
    # no PD address and a server that says it is not TiDB do they not apply at all.
    if pd is None and not_tidb:
        server = view.server_version or "?"
        for name in PD_CHECKS:
            if name in wanted:
                results[name] = not_tidb_skip(name, server)
    elif pd is None:
        stores_error = pd_missing
        for name in PD_CHECKS:
            if name in wanted:
                results[name] = _unobserved(name, pd_missing)
    else:
        transport_broken = False
        if any(n in wanted for n in _STORE_CHECKS) or wants_table:
            stores, stores_error, exc = _observe(
                f"reading PD stores via {pd.describe()}", pd.stores
            )
            # No answer at all: asking again for operators would only wait out the timeout
            # a second time with the same result.
            transport_broken = isinstance(exc, PDUnreachableError | PDExecError)
        if stores is not None:
            if STORE_STATE in wanted:
                results[STORE_STATE] = check_store_state(stores)
            if LEADER_SIZE_BALANCE in wanted:
                results[LEADER_SIZE_BALANCE] = check_leader_size_balance(
                    stores, spec.preflight.max_leader_size_skew
                )
            if REGION_SIZE_BALANCE in wanted:
                results[REGION_SIZE_BALANCE] = check_region_size_balance(
                    stores, spec.preflight.max_region_size_skew
                )
        else:
            for name in _STORE_CHECKS:
                if name in wanted:
                    results[name] = _unobserved(name, stores_error or "no stores")
        if PENDING_OPERATORS in wanted and transport_broken:
            results[PENDING_OPERATORS] = _unobserved(PENDING_OPERATORS, stores_error or "")
        elif PENDING_OPERATORS in wanted:
            operators, ops_error, _ = _observe(
                f"reading PD operators via {pd.describe()}", pd.operators
            )
            results[PENDING_OPERATORS] = (
                check_pending_operators(operators)
                if operators is not None
                else _unobserved(PENDING_OPERATORS, ops_error or "no operators")
            )

    # --- Database: table-leader-distribution --------------------------------------------
    if TABLE_LEADER_DISTRIBUTION in wanted:
        name = TABLE_LEADER_DISTRIBUTION
        if db is None:
            results[name] = _unobserved(name, "no database connection was given to the gate")
        elif view.error is not None:
            results[name] = _unobserved(name, f"database: {view.error}")
        elif not_tidb:
            results[name] = not_tidb_skip(name, view.server_version or "?")
        else:
            up_ids = (
                None
                if stores is None
                else sorted(s.id for s in stores if s.is_tikv and s.state_name == STATE_UP)
            )
            results[name] = _table_leader_check(spec, view, up_ids, stores_error)

    checks = [results[n] for n in wanted if n in results]
    return PreflightOutcome(
        checks=checks,
        verdict=evaluate(checks, policy),
        tidb_version=view.tidb_version,
        server_version=view.server_version,
    )


def _bench_node_isolation(
    spec: BenchmarkRunSpec,
    cluster_name: str | None,
    nodes: Sequence[JSON] | None,
    pods: Sequence[JSON] | None,
    error: str | None,
) -> CheckResult:
    if nodes is None or pods is None:
        return _unobserved(BENCH_NODE_ISOLATION, error or "no nodes or pods")
    placement = spec.placement
    tolerations = [t.model_dump(by_alias=True, exclude_none=True) for t in placement.tolerations]
    result = check_bench_node_isolation(
        nodes,
        pods,
        dict(placement.node_selector),
        tolerations,
        spec.clients,
        cluster_name=cluster_name,
    )
    if cluster_name is None:
        # Without a cluster we cannot tell its pods apart, and any TiDB cluster's pod on a
        # bench node competes with the client anyway.
        note = " (no cluster named: checked pd/tikv/tidb pods of every namespace)"
        return result.model_copy(update={"message": result.message + note})
    return result


def _topology_spread(
    kube: ClusterReader,
    spec: BenchmarkRunSpec,
    endpoint: Endpoint,
    run_namespace: str,
    nodes: Sequence[JSON] | None,
    pods: Sequence[JSON] | None,
    error: str | None,
) -> CheckResult:
    if spec.cluster is None:
        return CheckResult(name=TOPOLOGY_SPREAD, status="Pass", message="no cluster named; skipped")
    if nodes is None or pods is None:
        return _unobserved(TOPOLOGY_SPREAD, error or "no nodes or pods")
    # The kind resolved before preflight, so the cluster is not looked up twice.
    ref = spec.cluster.model_copy(update={"kind": endpoint.cluster_kind or spec.cluster.kind})
    where = f"{ref.kind or 'cluster'} {endpoint.cluster_namespace}/{ref.name}"
    view, view_error, _ = _observe(
        f"reading {where}", lambda: read_cluster(kube, ref, run_namespace)
    )
    if view is None:
        return _unobserved(TOPOLOGY_SPREAD, view_error or f"{where} not read")
    return check_topology(view, pods, nodes)
