"""The offline balance verdict behind `tidb-bench pd-check` (saved pd-ctl / PD API output)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tidb_bench_operator.domain.pd import parse_operators, parse_stores
from tidb_bench_operator.domain.preflight.stores import (
    check_leader_size_balance,
    check_pending_operators,
    check_region_size_balance,
    check_store_state,
)
from tidb_bench_operator.domain.preflight.verdict import (
    DEFAULT_MAX_LEADER_SIZE_SKEW,
    DEFAULT_MAX_REGION_SIZE_SKEW,
    CheckResult,
)


def run_pd_check(
    stores_text: str | bytes,
    operators_text: str | bytes | None = None,
    max_leader_skew: float = DEFAULT_MAX_LEADER_SIZE_SKEW,
    max_region_skew: float = DEFAULT_MAX_REGION_SIZE_SKEW,
) -> dict[str, list[dict[str, Any]]]:
    """`{"checks": [{"name", "status", "message", "stores"}]}` (a fixed shape: scripts read it).

    Raises ParseError / PDError when the saved output is not store JSON or is a pd-ctl error.
    """
    stores = parse_stores(stores_text)
    checks: list[CheckResult] = [
        check_store_state(stores),
        check_leader_size_balance(stores, max_leader_skew),
        check_region_size_balance(stores, max_region_skew),
    ]
    if operators_text is not None:
        checks.append(check_pending_operators(parse_operators(operators_text)))
    return {
        "checks": [
            {"name": c.name, "status": c.status, "message": c.message, "stores": list(c.stores)}
            for c in checks
        ]
    }


def render_pd_check_table(result: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """A plain-text table of `run_pd_check`'s result: CHECK, STATUS, STORES, MESSAGE."""
    header = ("CHECK", "STATUS", "STORES", "MESSAGE")
    rows = [
        (
            str(c.get("name", "")),
            str(c.get("status", "")),
            ",".join(str(s) for s in c.get("stores") or []) or "-",
            " ".join(str(c.get("message", "")).split()),
        )
        for c in result.get("checks", [])
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(3)]
    lines = []
    for row in [header, *rows]:
        cells = [row[i].ljust(widths[i]) for i in range(3)]
        lines.append("  ".join([*cells, row[3]]).rstrip())
    return "\n".join(lines) + "\n"
