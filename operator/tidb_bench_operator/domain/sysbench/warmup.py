"""After prepare: ANALYZE every table and warm the cache, as PingCAP's sysbench procedure does.

TiDB's "How to Test TiDB Using Sysbench"
(https://docs.pingcap.com/tidb/stable/benchmark-tidb-using-sysbench) analyzes each table so
the optimizer has statistics, and reads each table through its secondary index so the first
measured step does not pay for a cold block cache. Without it, the first step of a fresh
dataset measures stale statistics and cold caches. docs/statistics.md has the details.
"""

from __future__ import annotations

from collections.abc import Sequence


def has_secondary_index(extra_args: Sequence[str]) -> bool:
    """False when sysbench was told not to create the `k_N` index (--create-secondary=off)."""
    for arg in extra_args:
        name, _, value = arg.partition("=")
        if name == "--create-secondary" and value.lower() in ("off", "false", "0", "no"):
            return False
    return True


def analyze_statements(database: str, tables: int) -> list[str]:
    """`ANALYZE TABLE db.sbtestN` for every table (names follow sysbench's pattern)."""
    return [f"ANALYZE TABLE `{database}`.`sbtest{i}`" for i in range(1, tables + 1)]


def warmup_statements(database: str, tables: int, secondary_index: bool = True) -> list[str]:
    """`SELECT COUNT(pad) FROM db.sbtestN USE INDEX (k_N)` for every table.

    Reading `pad` through `k_N` touches the index and every row, so both are cached; without
    the secondary index the table is read in full instead.
    """
    return [
        f"SELECT COUNT(pad) FROM `{database}`.`sbtest{i}`"
        + (f" USE INDEX (k_{i})" if secondary_index else "")
        for i in range(1, tables + 1)
    ]
