"""Environment fingerprint of a run, and what differs between two of them.

A regression verdict is only as useful as its explanation: "tidb image v8.1.0 → v8.1.1" or
"tidb_enable_prepared_plan_cache ON → OFF" turns a red night into a lead. The fingerprint
records what the controller can read that changes performance: images and their digests
from the pods' status, replicas, the server's performance-relevant global variables, TiDB's
`SHOW CONFIG` for a few performance-relevant items (and a digest of all of it), the sysbench
version and the spec. docs/statistics.md lists the items and why.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import Field

from tidb_bench_operator.domain.api.base import TolerantCamelModel
from tidb_bench_operator.domain.api.common import StatusInt

#: Global variables that change how fast the same SQL runs. TiDB's first, then MySQL/MariaDB's
#: (the test bed's stand-in server); a name the server does not know is simply absent.
PERFORMANCE_VARIABLES: tuple[str, ...] = (
    "tidb_enable_prepared_plan_cache",
    "tidb_prepared_plan_cache_size",
    "tidb_enable_non_prepared_plan_cache",
    "tidb_txn_mode",
    "tidb_enable_async_commit",
    "tidb_enable_1pc",
    "tidb_distsql_scan_concurrency",
    "tidb_executor_concurrency",
    "tidb_mem_quota_query",
    "tidb_isolation_read_engines",
    "tidb_enable_clustered_index",
    "tidb_guarantee_linearizability",
    "tidb_enable_tso_follower_proxy",
    "tidb_tso_client_batch_max_wait_time",
    "tidb_enable_stmt_summary",
    "tidb_enable_collect_execution_info",
    "tidb_slow_log_threshold",
    "tidb_server_memory_limit",
    "transaction_isolation",
    "innodb_buffer_pool_size",
    "innodb_flush_log_at_trx_commit",
    "innodb_io_capacity",
    "sync_binlog",
    "max_connections",
    "thread_handling",
    "query_cache_type",
)

#: `SHOW CONFIG` items (TiDB only) recorded by value; everything else only by digest.
PERFORMANCE_CONFIG: tuple[str, ...] = (
    "tidb.performance.max-procs",
    "tidb.token-limit",
    "tidb.log.level",
    "tidb.prepared-plan-cache.enabled",
    "tikv.storage.block-cache.capacity",
    "tikv.storage.scheduler-worker-pool-size",
    "tikv.raftstore.apply-pool-size",
    "tikv.raftstore.store-pool-size",
    "tikv.readpool.unified.max-thread-count",
    "tikv.server.grpc-concurrency",
    "tikv.rocksdb.max-background-jobs",
    "tikv.log-level",
    "tikv.log.level",
    "pd.schedule.leader-schedule-limit",
    "pd.schedule.region-schedule-limit",
    "pd.replication.max-replicas",
)

#: The label TiDB Operator puts on every pod of a TidbCluster (its name as the value).
INSTANCE_LABEL = "app.kubernetes.io/instance"
#: Cluster components, in the order a diff names them.
COMPONENTS = ("pd", "tikv", "tidb", "tiflash")


class Fingerprint(TolerantCamelModel):
    """What a run measured against, as far as the controller can read it."""

    images: dict[str, str] = Field(
        default_factory=dict, description="Image per component from the TidbCluster spec."
    )
    image_digests: dict[str, str] = Field(
        default_factory=dict,
        description="Image digest(s) per component from the pods' status (imageID); several "
        "joined by `,` while pods run different images.",
    )
    replicas: dict[str, StatusInt] = Field(
        default_factory=dict, description="Replicas per component."
    )
    variables: dict[str, str] = Field(
        default_factory=dict, description="Performance-relevant global variables of the server."
    )
    config: dict[str, str] = Field(
        default_factory=dict,
        description="Performance-relevant `SHOW CONFIG` items as `<type>.<name>` (TiDB only).",
    )
    config_digests: dict[str, str] = Field(
        default_factory=dict,
        description="sha256 (first 16 hex digits) of every `SHOW CONFIG` item per component "
        "type, so a change outside the recorded items is still seen (TiDB only).",
    )
    server_version: str | None = Field(default=None, description="SELECT VERSION().")
    sysbench_version: str | None = Field(default=None, description="sysbench's version.")
    spec: dict[str, str] = Field(
        default_factory=dict,
        description="The run spec flattened to `path: value` (JSON values), credentials left out.",
    )


def server_fingerprint(
    variables: Mapping[str, str],
    config_rows: Sequence[Sequence[Any]] | None,
    server_version: str | None,
) -> Fingerprint:
    """The part of a fingerprint the server tells over SQL (config_rows None: not TiDB)."""
    items, digests = config_items(config_rows) if config_rows else ({}, {})
    return Fingerprint(
        variables=dict(sorted(variables.items())),
        config=items,
        config_digests=digests,
        server_version=server_version,
    )


def image_digests(
    pods: Iterable[Mapping[str, Any]],
    component_label: str = "app.kubernetes.io/component",
    *,
    any_component: bool = False,
) -> dict[str, str]:
    """Component → digest(s) from the `imageID` of the cluster pods' container statuses.

    The component is the pod's `component_label` (v1 `app.kubernetes.io/component`, one of
    COMPONENTS; v2 `pingcap.com/component`, any value with `any_component`, so tikv-worker
    and later kinds are fingerprinted too); the digest is the part after `@` of imageID
    (`docker-pullable://pingcap/tidb@sha256:…` → `sha256:…`), or the whole imageID when it
    has none. Pods without an imageID (not started yet) are skipped.
    """
    found: dict[str, set[str]] = {}
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        component = labels.get(component_label)
        if not isinstance(component, str) or not (
            component in COMPONENTS or (any_component and component)
        ):
            continue
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            image_id = str(cs.get("imageID") or "")
            if cs.get("name") != component or not image_id:
                continue
            found.setdefault(component, set()).add(image_id.rsplit("@", 1)[-1])
    return {c: ",".join(sorted(found[c])) for c in _ordered_keys(found, {})}


def config_items(rows: Sequence[Sequence[Any]]) -> tuple[dict[str, str], dict[str, str]]:
    """(recorded items, digest per type) from `SHOW CONFIG` rows (Type, Instance, Name, Value).

    The digest covers (type, name, value) without the instance address, so moving a pod to
    another address changes nothing, while any changed value on any instance does.
    """
    items: dict[str, str] = {}
    by_type: dict[str, set[tuple[str, str]]] = {}
    for row in rows:
        type_, _, name, value = (str(v) for v in row[:4])
        key = f"{type_}.{name}"
        by_type.setdefault(type_, set()).add((name, value))
        if key in PERFORMANCE_CONFIG:
            previous = items.get(key)
            items[key] = value if previous in (None, value) else f"{previous},{value}"
    digests = {
        t: hashlib.sha256(json.dumps(sorted(v)).encode()).hexdigest()[:16]
        for t, v in sorted(by_type.items())
    }
    return items, digests


def flatten_spec(spec: Mapping[str, Any]) -> dict[str, str]:
    """`{"dataset": {"tables": 4}}` → `{"dataset.tables": "4"}`; lists stay one JSON value."""
    flat: dict[str, str] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                if k != "credentials":
                    walk(f"{prefix}.{k}" if prefix else str(k), v)
        else:
            flat[prefix] = json.dumps(value, sort_keys=True)

    walk("", spec)
    return flat


def diff_fingerprints(before: Fingerprint, after: Fingerprint) -> list[str]:
    """What differs from `before` to `after`, one short line per item, most telling first.

    `tidb image pingcap/tidb:v8.1.0 → pingcap/tidb:v8.1.1`, `tidb_enable_prepared_plan_cache
    ON → OFF`, `tikv replicas 3 → 4`, `spec.threads [1, 2] → [1, 2, 4]`. An item present on one
    side only shows `(none)` on the other.
    """
    lines: list[str] = []
    groups: tuple[tuple[str, Mapping[str, Any], Mapping[str, Any], str], ...] = (
        ("image", before.images, after.images, "{k} image {a} → {b}"),
        ("digest", before.image_digests, after.image_digests, "{k} image digest {a} → {b}"),
        ("replicas", before.replicas, after.replicas, "{k} replicas {a} → {b}"),
        ("variables", before.variables, after.variables, "{k} {a} → {b}"),
        ("config", before.config, after.config, "config {k} {a} → {b}"),
        ("digests", before.config_digests, after.config_digests, "{k} config changed ({a} → {b})"),
        ("spec", before.spec, after.spec, "spec.{k} {a} → {b}"),
    )
    for _, old, new, text in groups:
        for key in _ordered_keys(old, new):
            a, b = old.get(key), new.get(key)
            if a != b:
                lines.append(text.format(k=key, a=_shown(a), b=_shown(b)))
    for label, a, b in (
        ("server version", before.server_version, after.server_version),
        ("sysbench", before.sysbench_version, after.sysbench_version),
    ):
        if a != b and a is not None and b is not None:
            lines.append(f"{label} {a} → {b}")
    return lines


def describe_diff(lines: Sequence[str], limit: int = 5) -> str:
    """One clause for a condition or Event: the first `limit` differences, or that none is."""
    if not lines:
        return "nothing recorded in the environment fingerprint differs from the baseline"
    head = "; ".join(lines[:limit])
    more = f" (and {len(lines) - limit} more)" if len(lines) > limit else ""
    return f"differs from the baseline: {head}{more}"


def _ordered_keys(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    keys = [k for k in COMPONENTS if k in old or k in new]
    keys += sorted(k for k in {*old, *new} if k not in keys)
    return keys


def _shown(value: object) -> str:
    return "(none)" if value is None else str(value)
