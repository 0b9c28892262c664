"""A step's resources in a few short lines, for Events, `kubectl describe` and the report."""

from __future__ import annotations

from tidb_bench_operator.domain.api.step_resources import StepResources
from tidb_bench_operator.domain.resources.derive import UNAVAILABLE

#: Nodes named on the node line (busiest first); the status block has them all.
NODES_SHOWN = 4


def _cores(value: float) -> str:
    return f"{value:,.2f}"


def _significant(value: float, digits: int = 3) -> str:
    """`38,300`, `0.026`: a per-core or per-query figure to three significant digits."""
    if value == 0:
        return "0"
    rounded = float(f"{value:.{digits}g}")
    if abs(rounded) >= 10 ** (digits - 1):
        return f"{rounded:,.0f}"
    return f"{rounded:.{digits}g}"


def describe_resources(r: StepResources) -> list[str]:
    """e.g. `server 1.07 cores (tidb 0.68, tikv 0.30, pd 0.09); 38,300 QPS per core; 0.026 CPU
    ms per query`, the clients, the busiest nodes and `bottleneck: ...`."""
    if r.unavailable is not None:
        return [f"{UNAVAILABLE}: {r.unavailable}"]
    lines = []
    if r.server_cores is not None:
        parts = [f"server {_cores(r.server_cores)} cores"]
        if r.components:
            busiest = sorted(r.components, key=lambda c: -c.cores)
            each = ", ".join(f"{c.component} {_cores(c.cores)}" for c in busiest)
            parts[0] += f" ({each})"
        if r.qps_per_core is not None:
            parts.append(f"{_significant(r.qps_per_core)} QPS per core")
        if r.cpu_ms_per_query is not None:
            parts.append(f"{_significant(r.cpu_ms_per_query)} CPU ms per query")
        lines.append("; ".join(parts))
    if r.client_cores is not None:
        lines.append(f"clients {_cores(r.client_cores)} cores")
    nodes = [n for n in r.nodes if n.cores is not None][:NODES_SHOWN]
    if nodes:
        lines.append("nodes: " + ", ".join(
            f"{n.name} {_cores(n.cores or 0.0)}"
            + (f" of {n.allocatable_cores:g}" if n.allocatable_cores else "")
            for n in nodes
        ))  # fmt: skip
    if r.bottleneck is not None:
        lines.append(f"bottleneck: {r.bottleneck.message}")
    return lines
