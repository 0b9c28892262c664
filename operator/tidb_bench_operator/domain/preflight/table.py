"""The SQL-side checks: table-leader-distribution and recognising TiDB."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tidb_bench_operator.domain.preflight.verdict import TABLE_LEADER_DISTRIBUTION, CheckResult
from tidb_bench_operator.errors import ParseError


def check_table_leader_distribution(
    rows: Sequence[Sequence[Any]],
    columns: Sequence[str],
    store_ids: Sequence[int],
    *,
    table: str = "",
) -> CheckResult:
    """Leaders of a table's regions per store, from `SHOW TABLE t REGIONS`.

    Bounds: Fail when at least 3 stores and at least as many regions as stores, yet every
    leader sits on one store; Warn when a store holds more than 2x its fair share
    (regions / stores) or the table has fewer regions than there are stores; else Pass.
    """
    # SHOW TABLE ... REGIONS has 13 columns since TiDB v6.2 and 11 before; both carry
    # LEADER_STORE_ID, so look it up by name (docs/preflight.md).
    upper = [str(c).upper() for c in columns]
    if "LEADER_STORE_ID" not in upper:
        raise ParseError(
            f"SHOW TABLE ... REGIONS result has no LEADER_STORE_ID column (columns: "
            f"{', '.join(map(str, columns))}); is the server TiDB?"
        )
    index = upper.index("LEADER_STORE_ID")
    what = f"table {table}" if table else "the table"
    leaders: dict[int, int] = {sid: 0 for sid in store_ids}
    for n, row in enumerate(rows):
        if len(row) != len(columns):
            raise ParseError(
                f"SHOW TABLE ... REGIONS row {n} has {len(row)} values for {len(columns)} columns"
            )
        try:
            sid = int(str(row[index]).strip())
        except ValueError as exc:
            raise ParseError(
                f"SHOW TABLE ... REGIONS row {n}: LEADER_STORE_ID {row[index]!r} is not a number"
            ) from exc
        leaders[sid] = leaders.get(sid, 0) + 1
    total = sum(leaders.values())
    n_stores = len(leaders)
    if total == 0:
        return CheckResult(
            name=TABLE_LEADER_DISTRIBUTION,
            status="Warn",
            message=f"SHOW TABLE REGIONS returned no regions for {what}",
        )
    fair = total / n_stores
    listing = ", ".join(f"{sid}={cnt}" for sid, cnt in sorted(leaders.items()))
    base = f"leaders of {total} region(s) of {what} per store: {listing} (fair share {fair:.1f})"
    if n_stores < 2:
        return CheckResult(
            name=TABLE_LEADER_DISTRIBUTION, status="Pass", message=f"{base}; single store"
        )
    top_sid, top = max(leaders.items(), key=lambda kv: (kv[1], -kv[0]))
    if n_stores >= 3 and total >= n_stores and top == total:
        return CheckResult(
            name=TABLE_LEADER_DISTRIBUTION,
            status="Fail",
            message=f"{base}: every leader is on store {top_sid}, so the benchmark would hit "
            "one TiKV; wait for PD balance-leader or scatter the table's regions",
            stores=[top_sid],
        )
    if total < n_stores:
        return CheckResult(
            name=TABLE_LEADER_DISTRIBUTION,
            status="Warn",
            message=f"{base}: fewer regions than stores, so leaders cannot spread; consider "
            "SPLIT TABLE (or more rows) before measuring",
            stores=[top_sid],
        )
    if top > 2 * fair:
        return CheckResult(
            name=TABLE_LEADER_DISTRIBUTION,
            status="Warn",
            message=f"{base}: store {top_sid} holds {top}, more than twice its fair share",
            stores=[top_sid],
        )
    return CheckResult(name=TABLE_LEADER_DISTRIBUTION, status="Pass", message=base)


def not_tidb_skip(name: str, server_version: str) -> CheckResult:
    """A PD/TiDB-only check against a server that is not TiDB: Pass, saying it was skipped."""
    # Pass, not Warn: the check does not apply (no PD, no regions on MySQL/MariaDB, e.g. the
    # local test bed's stand-in), and a Warn on every non-TiDB run would drown real warnings.
    # The message keeps it visible in status.
    return CheckResult(
        name=name, status="Pass", message=f"not TiDB (server says {server_version}), skipped"
    )


def is_tidb_server_version(version: str) -> bool:
    """True for TiDB's `SELECT VERSION()` form, e.g. '8.0.11-TiDB-v8.1.0'."""
    return "tidb" in version.lower()


def parse_tidb_version(text: str) -> dict[str, str]:
    """`SELECT tidb_version()` text → {'release_version': 'v8.1.0', 'edition': ..., ...}.

    Keys are the printed keys lower-cased with spaces as underscores (e.g. 'git_commit_hash',
    'goversion', 'store'). Tolerates the `tidb_version(): ` prefix of \\G output and the
    `| ... |` borders of table output (sample tidb-tidb_version_v8.1.x.txt).
    """
    result: dict[str, str] = {}
    for raw_line in text.splitlines():
        line = raw_line.strip().strip("|").strip()
        for prefix in ("tidb_version():", "TIDB_VERSION():"):
            if line.startswith(prefix):
                line = line[len(prefix) :].strip()
        key, sep, value = line.partition(":")
        if not sep or not key.strip():
            continue
        result.setdefault(key.strip().lower().replace(" ", "_"), value.strip())
    if "release_version" not in result:
        raise ParseError(
            "tidb_version() output has no 'Release Version:' line; is the server TiDB? "
            f"got: {' '.join(text.split())[:120]}"
        )
    return result
