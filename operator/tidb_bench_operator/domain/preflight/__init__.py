"""Preflight checks: pure judgements of whether a TiDB cluster is fair to measure right now.

Why each check exists is told in docs/field-story.md, the rules they apply in
docs/preflight.md. Modules:

- verdict: the fixed check names, CheckResult, statuses and the gate's decision (evaluate);
- stores: the PD checks (store-state, leader/region size balance, pending operators);
- placement: bench-node-isolation and the taint rules;
- topology: topology-spread for v1 (topologySpreadConstraints) and v2 (EvenlySpread);
- table: table-leader-distribution and recognising TiDB by its version strings;
- pdcheck: the offline verdict behind `tidb-bench pd-check`.
"""

from tidb_bench_operator.domain.preflight.placement import (
    blocking_taints,
    check_bench_node_isolation,
    toleration_tolerates,
    untolerated_taints,
)
from tidb_bench_operator.domain.preflight.stores import (
    check_leader_size_balance,
    check_pending_operators,
    check_region_size_balance,
    check_store_state,
    compute_skew,
)
from tidb_bench_operator.domain.preflight.table import (
    check_table_leader_distribution,
    is_tidb_server_version,
    not_tidb_skip,
    parse_tidb_version,
)
from tidb_bench_operator.domain.preflight.topology import (
    check_schedule_policies,
    check_topology,
    check_topology_spread,
)
from tidb_bench_operator.domain.preflight.verdict import (
    BENCH_NODE_ISOLATION,
    CHECK_NAMES,
    DEFAULT_MAX_LEADER_SIZE_SKEW,
    DEFAULT_MAX_REGION_SIZE_SKEW,
    LEADER_SIZE_BALANCE,
    PENDING_OPERATORS,
    REGION_SIZE_BALANCE,
    STORE_STATE,
    TABLE_LEADER_DISTRIBUTION,
    TOPOLOGY_SPREAD,
    CheckResult,
    CheckStatus,
    GateDecision,
    Policy,
    evaluate,
    worst_status,
)

__all__ = [
    "BENCH_NODE_ISOLATION",
    "CHECK_NAMES",
    "DEFAULT_MAX_LEADER_SIZE_SKEW",
    "DEFAULT_MAX_REGION_SIZE_SKEW",
    "LEADER_SIZE_BALANCE",
    "PENDING_OPERATORS",
    "REGION_SIZE_BALANCE",
    "STORE_STATE",
    "TABLE_LEADER_DISTRIBUTION",
    "TOPOLOGY_SPREAD",
    "CheckResult",
    "CheckStatus",
    "GateDecision",
    "Policy",
    "blocking_taints",
    "check_bench_node_isolation",
    "check_leader_size_balance",
    "check_pending_operators",
    "check_region_size_balance",
    "check_schedule_policies",
    "check_store_state",
    "check_table_leader_distribution",
    "check_topology",
    "check_topology_spread",
    "compute_skew",
    "evaluate",
    "is_tidb_server_version",
    "not_tidb_skip",
    "parse_tidb_version",
    "toleration_tolerates",
    "untolerated_taints",
    "worst_status",
]
