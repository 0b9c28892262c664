"""Preflight checks on recorded PD output, docs/field-story.md's cluster, and placements."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from testbed.fake_pd import store_info
from tidb_bench_operator.domain.pd import Store, parse_operators, parse_stores
from tidb_bench_operator.domain.preflight import (
    CHECK_NAMES,
    CheckResult,
    blocking_taints,
    check_bench_node_isolation,
    check_leader_size_balance,
    check_pending_operators,
    check_region_size_balance,
    check_store_state,
    check_table_leader_distribution,
    check_topology_spread,
    compute_skew,
    evaluate,
    is_tidb_server_version,
    not_tidb_skip,
    parse_tidb_version,
    toleration_tolerates,
)
from tidb_bench_operator.errors import ParseError

DATA = Path(__file__).resolve().parents[3] / "data" / "pd"
STORES_V81 = DATA / "pd-api-v1-stores_v8.1.0_tidb-operator-testdata.json"
FRAGMENT = (
    DATA / "pd-ctl-store-check-offline_operator-address_v5.1.0-alpha_pd-issue3780_FRAGMENT.txt"
)


def field_note_stores() -> list[Store]:
    """docs/field-story.md after TiKV-3 landed on node1: the `region_count` table."""
    rows = [  # store id, pod, region_count, region_size, leader_count, leader_size
        (1, "basic-tikv-0", 130, 771, 29, 86),
        (2, "basic-tikv-1", 121, 779, 37, 141),
        (3, "basic-tikv-2", 110, 795, 30, 122),
        (4, "basic-tikv-3", 41, 769, 38, 689),
    ]
    body = {
        "count": len(rows),
        "stores": [
            store_info(sid, pod, region_count=rc, region_size=rs, leader_count=lc, leader_size=ls)
            for sid, pod, rc, rs, lc, ls in rows
        ],
    }
    return parse_stores(body)


# --- store-state -----------------------------------------------------------------------------


def test_all_tikv_stores_of_the_v8_1_sample_are_up_and_tiflash_is_not_counted() -> None:
    result = check_store_state(parse_stores(STORES_V81.read_text()))
    assert result.status == "Pass"
    assert result.stores == [1, 4, 5]
    assert "TiFlash store(s) 20 not counted" in result.message


def test_the_offline_store_of_the_pd_issue_fragment_fails_store_state_naming_it() -> None:
    result = check_store_state(parse_stores(FRAGMENT.read_text()))
    assert result.status == "Fail"
    assert result.stores == [1531026]
    assert "store 1531026 (t1-tikv-2.t1-tikv-peer.xxx.svc:20160) is Offline" in result.message


@pytest.mark.parametrize("state", ["Disconnected", "Down", "Offline"])
def test_a_tikv_store_that_is_not_up_fails_store_state(state: str) -> None:
    stores = parse_stores(
        [store_info(1, "basic-tikv-0"), store_info(2, "basic-tikv-1", state=state)]
    )
    result = check_store_state(stores)
    assert result.status == "Fail"
    assert result.stores == [2]
    assert f"store 2 (basic-tikv-1.basic-tikv-peer.tidb-cluster.svc:20160) is {state}" in (
        result.message
    )


def test_tombstone_tikv_stores_and_down_tiflash_stores_do_not_fail_store_state() -> None:
    stores = parse_stores(
        [
            store_info(1, "basic-tikv-0"),
            store_info(2, "basic-tikv-1", state="Tombstone"),
            store_info(9, "basic-tiflash-0", state="Down", engine="tiflash"),
        ]
    )
    result = check_store_state(stores)
    assert result.status == "Pass"
    assert "Tombstone store(s) 2 ignored" in result.message


def test_no_tikv_store_at_all_fails_store_state() -> None:
    result = check_store_state(parse_stores([store_info(9, "tf", engine="tiflash")]))
    assert result.status == "Fail"
    assert "no TiKV store" in result.message


# --- size balance ----------------------------------------------------------------------------


def test_field_note_leader_size_689_on_tikv_3_fails_leader_size_balance_naming_store_4() -> None:
    result = check_leader_size_balance(field_note_stores(), 0.5)
    assert result.status == "Fail"
    assert result.stores[0] == 4
    assert "leader_size skew 2.32 > 0.50" in result.message
    assert "store 4 (basic-tikv-3.basic-tikv-peer.tidb-cluster.svc:20160) holds 689 MiB" in (
        result.message
    )
    assert "vs mean 259.5 MiB" in result.message
    assert "wait for PD balance-leader or check pending operators" in result.message
    assert "region_count 1=130, 2=121, 3=110, 4=41" in result.message


def test_field_note_region_size_is_even_so_region_size_balance_passes() -> None:
    result = check_region_size_balance(field_note_stores(), 0.5)
    assert result.status == "Pass"
    assert "region_size skew 0.03 <= 0.50" in result.message


def test_a_skewed_region_count_alone_never_fails_but_is_reported() -> None:
    result = check_region_size_balance(field_note_stores(), 0.05)
    assert result.status == "Pass"
    assert "region_count 1=130, 2=121, 3=110, 4=41" in result.message
    assert "never fails" in result.message


def test_the_v8_1_sample_is_balanced_and_tiflash_zeros_do_not_skew_it() -> None:
    stores = parse_stores(STORES_V81.read_text())
    leader = check_leader_size_balance(stores, 0.5)
    assert leader.status == "Pass"
    assert "leader_size skew 0.40 <= 0.50 over 3 Up TiKV stores" in leader.message
    assert check_region_size_balance(stores, 0.5).status == "Pass"
    assert check_leader_size_balance(stores, 0.3).status == "Fail"


def test_stores_that_are_not_up_are_left_out_of_the_skew() -> None:
    stores = parse_stores(
        [
            store_info(1, "a", leader_size=100),
            store_info(2, "b", leader_size=100),
            store_info(3, "c", leader_size=0, state="Disconnected"),
        ]
    )
    assert check_leader_size_balance(stores, 0.1).status == "Pass"


def test_skew_is_max_minus_min_over_mean_and_zero_for_degenerate_sets() -> None:
    assert compute_skew([86, 141, 122, 689]) == pytest.approx(603 / 259.5)
    assert compute_skew([0, 0, 0]) == 0.0
    assert compute_skew([5]) == 0.0


def test_no_up_tikv_store_makes_balance_a_warning_not_a_pass() -> None:
    assert check_leader_size_balance([], 0.5).status == "Warn"


# --- pending-operators -----------------------------------------------------------------------


def test_an_empty_operator_queue_passes() -> None:
    assert check_pending_operators(parse_operators("[]")).status == "Pass"


def test_pending_operators_fail_with_count_examples_and_stores() -> None:
    ops = parse_operators(
        [
            "balance-leader {transfer leader: store 2 to 1} (kind:leader, region:28977(365, 35), "
            "createAt:x, startAt:y, currentStep:0, size:95, steps:[0:{transfer leader from store "
            "2 to store 1}], timeout:[1m0s])",
            "balance-region {mv peer: store [1] to [4]} (kind:region, region:7(5, 5), createAt:x, "
            "startAt:y, currentStep:0, size:92, steps:[], timeout:[17m0s]) finished",
        ]
    )
    result = check_pending_operators(ops)
    assert result.status == "Fail"
    assert result.message.startswith("1 PD operator(s) pending (balance-leader x1)")
    assert "region 28977: balance-leader {transfer leader: store 2 to 1}" in result.message
    assert "1 finished/timed-out entries ignored" in result.message
    assert result.stores == [1, 2]
    assert check_pending_operators(ops, status_if_pending="Warn").status == "Warn"


# --- topology-spread -------------------------------------------------------------------------


def node(
    name: str, *, taints: list[dict[str, str]] | None = None, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"taints": taints or []},
    }


def pod(
    name: str, component: str, node_name: str | None, instance: str = "basic"
) -> dict[str, Any]:
    spec = {"nodeName": node_name} if node_name else {}
    return {
        "metadata": {
            "name": name,
            "namespace": "tidb-cluster",
            "labels": {
                "app.kubernetes.io/instance": instance,
                "app.kubernetes.io/component": component,
                "app.kubernetes.io/name": "tidb-cluster",
            },
        },
        "spec": spec,
        "status": {"phase": "Running" if node_name else "Pending"},
    }


CONTROL_PLANE = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
SPREAD = [{"topologyKey": "kubernetes.io/hostname", "maxSkew": 1}]


def tidb_cluster(
    spec_extra: dict[str, Any] | None = None, **component_extra: Any
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "pd": {"replicas": 3},
        "tikv": {"replicas": 3},
        "tidb": {"replicas": 2},
    }
    for component, extra in component_extra.items():
        spec[component].update(extra)
    spec.update(spec_extra or {})
    return {"metadata": {"name": "basic", "namespace": "tidb-cluster"}, "spec": spec}


def field_note_placement() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """docs/field-story.md on the morning of the run: node1 tainted, nothing of the DB on it."""
    nodes = [node("node1", taints=[CONTROL_PLANE]), node("node2"), node("node3")]
    pods = [
        pod("basic-pd-0", "pd", "node3"),
        pod("basic-pd-1", "pd", "node2"),
        pod("basic-pd-2", "pd", "node3"),
        pod("basic-tikv-0", "tikv", "node2"),
        pod("basic-tikv-1", "tikv", "node2"),
        pod("basic-tikv-2", "tikv", "node3"),
        pod("basic-tidb-0", "tidb", "node2"),
        pod("basic-tidb-1", "tidb", "node3"),
        pod("basic-discovery-6bb656bfd-xl5pb", "discovery", "node3"),
    ]
    return nodes, pods


def test_tikv_two_one_zero_over_node2_node3_node1_fails_topology_spread_naming_node2() -> None:
    nodes, pods = field_note_placement()
    result = check_topology_spread(tidb_cluster({"topologySpreadConstraints": SPREAD}), pods, nodes)
    assert result.status == "Fail"
    assert "TiKV node2:2 node3:1 node1:0" in result.message
    assert "skew 2 > maxSkew 1 on kubernetes.io/hostname (spec): node2 over-loaded" in (
        result.message
    )
    assert "node2: basic-tikv-0, basic-tikv-1" in result.message
    assert "PD node3:2 node2:1 node1:0" in result.message
    assert "TiDB node2:1 node3:1 node1:0 — skew 1 <= maxSkew 1" in result.message


def test_a_tikv_kept_off_the_bench_node_by_required_node_affinity_does_not_count_it_a_domain() -> (
    None
):
    # As the scheduler reads nodeAffinityPolicy Honor: node1 fails the TiKV's affinity, so
    # TiKV node2:2 node3:1 has skew 1 (node1:0 would make it 2, and the pod could not go there).
    nodes, pods = field_note_placement()
    nodes[0]["metadata"]["labels"]["tidbbench.io/bench-node"] = "true"
    off_bench = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "tidbbench.io/bench-node", "operator": "DoesNotExist"}]}]}}}  # fmt: skip
    tc = tidb_cluster(tikv={"topologySpreadConstraints": SPREAD, "affinity": off_bench})
    result = check_topology_spread(tc, pods, nodes)
    assert "TiKV node2:2 node3:1 — skew 1 <= maxSkew 1" in result.message, result.message
    # The cluster-level affinity counts for a component without its own; NotIn by name too.
    by_name = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "NotIn", "values": ["node1"]}]}]}}}  # fmt: skip
    tc = tidb_cluster({"affinity": by_name}, tikv={"topologySpreadConstraints": SPREAD})
    assert "TiKV node2:2 node3:1 — skew 1" in check_topology_spread(tc, pods, nodes).message
    # Without it, node1 is a domain again.
    tc = tidb_cluster(tikv={"topologySpreadConstraints": SPREAD})
    assert "TiKV node2:2 node3:1 node1:0" in check_topology_spread(tc, pods, nodes).message


def test_an_empty_control_plane_tainted_node_gets_a_sentence_about_the_taint() -> None:
    nodes, pods = field_note_placement()
    result = check_topology_spread(tidb_cluster({"topologySpreadConstraints": SPREAD}), pods, nodes)
    assert (
        "node1 carries node-role.kubernetes.io/control-plane:NoSchedule, which keeps database "
        "pods off it (remove it with `kubectl taint nodes node1 "
        "node-role.kubernetes.io/control-plane:NoSchedule-`" in result.message
    )


def test_missing_constraints_warn_with_the_kubectl_patch_that_adds_them() -> None:
    nodes = [node("node1"), node("node2"), node("node3")]
    pods = [pod(f"basic-{c}-{i}", c, f"node{i + 1}") for c in ("pd", "tikv") for i in range(3)]
    pods += [pod("basic-tidb-0", "tidb", "node1"), pod("basic-tidb-1", "tidb", "node2")]
    result = check_topology_spread(tidb_cluster(), pods, nodes)
    assert result.status == "Warn"
    assert (
        "kubectl -n tidb-cluster patch tc basic --type=merge -p "
        """'{"spec":{"topologySpreadConstraints":[{"topologyKey":"kubernetes.io/hostname","""
        """"maxSkew":1}]}}'""" in result.message
    )
    assert "TiKV node1:1 node2:1 node3:1" in result.message


def test_missing_constraints_do_not_hide_an_unfair_placement() -> None:
    nodes, pods = field_note_placement()
    result = check_topology_spread(tidb_cluster(), pods, nodes)
    assert result.status == "Fail"
    assert "(no constraint set; default)" in result.message
    assert "patch tc basic" in result.message


def test_constraints_on_some_components_only_patch_the_others() -> None:
    nodes = [node("node1"), node("node2"), node("node3")]
    pods = [
        pod(f"basic-{c}-{i}", c, f"node{i + 1}") for c in ("pd", "tikv", "tidb") for i in range(3)
    ]
    result = check_topology_spread(
        tidb_cluster(tikv={"topologySpreadConstraints": SPREAD}), pods, nodes
    )
    assert result.status == "Warn"
    assert "PD/TiDB: no topologySpreadConstraints" in result.message
    assert '{"spec":{"pd":{"topologySpreadConstraints":' in result.message
    assert '"tidb":{"topologySpreadConstraints":' in result.message


def test_a_component_level_max_skew_wins_over_the_cluster_level_one() -> None:
    nodes, pods = field_note_placement()
    loose = [{"topologyKey": "kubernetes.io/hostname", "maxSkew": 2}]
    tc = tidb_cluster(
        {"topologySpreadConstraints": SPREAD},
        tikv={"topologySpreadConstraints": loose},
        pd={"topologySpreadConstraints": loose},
    )
    result = check_topology_spread(tc, pods, nodes)
    assert result.status == "Pass"
    assert (
        "TiKV node2:2 node3:1 node1:0 — skew 2 <= maxSkew 2 on kubernetes.io/hostname (spec.tikv)"
        in result.message
    )


def test_the_runbook_sample_placement_is_even_and_passes() -> None:
    text = (DATA / "kubectl-get-tidbcluster-and-pods_v8.1.0_tidb-operator_runbook.txt").read_text()
    pods = []
    for line in text.splitlines():
        m = re.match(r"^(basic-(pd|tikv|tidb)-\d)\s.*\s(node\d)\s*$", line)
        if m:
            pods.append(pod(m.group(1), m.group(2), m.group(3)))
    assert len(pods) == 9
    nodes = [node("node1"), node("node2"), node("node3")]
    tc = tidb_cluster({"topologySpreadConstraints": SPREAD}, tidb={"replicas": 3})
    result = check_topology_spread(tc, pods, nodes)
    assert result.status == "Pass", result.message
    assert "TiKV node1:1 node2:1 node3:1" in result.message


def test_a_zone_topology_key_counts_pods_per_zone() -> None:
    zone = "topology.kubernetes.io/zone"
    nodes = [
        node("n1", labels={zone: "a"}),
        node("n2", labels={zone: "a"}),
        node("n3", labels={zone: "b"}),
    ]
    pods = [pod("basic-tikv-0", "tikv", "n1"), pod("basic-tikv-1", "tikv", "n2")]
    tc = tidb_cluster(
        tikv={"replicas": 2, "topologySpreadConstraints": [{"topologyKey": zone}]},
        pd={"replicas": 0},
        tidb={"replicas": 0},
    )
    result = check_topology_spread(tc, pods, nodes)
    assert result.status == "Fail"
    assert "TiKV (topology.kubernetes.io/zone) a:2 b:0" in result.message


def test_an_unscheduled_database_pod_makes_topology_spread_warn() -> None:
    nodes = [node("node1"), node("node2"), node("node3")]
    pods = [pod(f"basic-tikv-{i}", "tikv", f"node{i + 1}") for i in range(3)]
    pods.append(pod("basic-tikv-3", "tikv", None))
    tc = tidb_cluster(
        {"topologySpreadConstraints": SPREAD}, pd={"replicas": 0}, tidb={"replicas": 0}
    )
    result = check_topology_spread(tc, pods, nodes)
    assert result.status == "Warn"
    assert "TiKV pods not scheduled yet: basic-tikv-3" in result.message


def test_pods_of_another_cluster_are_not_counted() -> None:
    nodes = [node("node1"), node("node2")]
    pods = [
        pod("basic-tikv-0", "tikv", "node1"),
        pod("basic-tikv-1", "tikv", "node2"),
        pod("other-tikv-0", "tikv", "node1", instance="other"),
        pod("other-tikv-1", "tikv", "node1", instance="other"),
    ]
    tc = tidb_cluster(
        {"topologySpreadConstraints": SPREAD}, pd={"replicas": 0}, tidb={"replicas": 0}
    )
    assert check_topology_spread(tc, pods, nodes).status == "Pass"


# --- bench-node-isolation --------------------------------------------------------------------

BENCH_TAINT = {"key": "tidbbench.io/dedicated", "value": "bench", "effect": "NoSchedule"}
BENCH_TOLERATION = {"key": "tidbbench.io/dedicated", "operator": "Equal", "value": "bench",
                    "effect": "NoSchedule"}  # fmt: skip
BENCH_SELECTOR = {"tidbbench.io/role": "bench"}


def bench_nodes() -> list[dict[str, Any]]:
    return [
        node("node1", taints=[BENCH_TAINT], labels={"tidbbench.io/role": "bench"}),
        node("node2"),
        node("node3"),
    ]


def test_a_tikv_pod_on_the_bench_node_fails_isolation_naming_pod_and_node() -> None:
    pods = [pod("basic-tikv-3", "tikv", "node1"), pod("basic-tikv-0", "tikv", "node2")]
    result = check_bench_node_isolation(
        bench_nodes(), pods, BENCH_SELECTOR, [BENCH_TOLERATION], 1, cluster_name="basic"
    )
    assert result.status == "Fail"
    assert "pod basic-tikv-3 (tikv) runs on bench node node1" in result.message
    assert "basic-tikv-0" not in result.message


def test_a_bench_node_free_of_database_pods_passes_isolation() -> None:
    pods = [pod("basic-tikv-0", "tikv", "node2"), pod("basic-tidb-0", "tidb", "node3")]
    result = check_bench_node_isolation(bench_nodes(), pods, BENCH_SELECTOR, [BENCH_TOLERATION], 1)
    assert result.status == "Pass"
    assert "1 eligible benchmark node(s) (node1) for 1 client(s)" in result.message


def test_fewer_eligible_nodes_than_clients_fails_isolation() -> None:
    result = check_bench_node_isolation(bench_nodes(), [], BENCH_SELECTOR, [BENCH_TOLERATION], 2)
    assert result.status == "Fail"
    assert "matches 1 node(s) (node1) but clients=2" in result.message


def test_a_selector_matching_nothing_fails_isolation_saying_so() -> None:
    result = check_bench_node_isolation(bench_nodes(), [], {"role": "nope"}, [], 1)
    assert result.status == "Fail"
    assert "placement.nodeSelector {role=nope} with the given tolerations matches no" in (
        result.message
    )


def test_an_untolerated_taint_makes_the_only_bench_node_ineligible() -> None:
    result = check_bench_node_isolation(bench_nodes(), [], BENCH_SELECTOR, [], 1)
    assert result.status == "Fail"
    assert "node1: untolerated taint tidbbench.io/dedicated=bench:NoSchedule" in result.message


def test_a_cordoned_bench_node_is_not_eligible() -> None:
    nodes = bench_nodes()
    nodes[0]["spec"]["unschedulable"] = True
    result = check_bench_node_isolation(nodes, [], BENCH_SELECTOR, [BENCH_TOLERATION], 1)
    assert result.status == "Fail"
    assert "node.kubernetes.io/unschedulable:NoSchedule" in result.message


def test_database_pods_of_other_clusters_do_not_count_when_a_cluster_is_named() -> None:
    pods = [pod("other-tikv-0", "tikv", "node1", instance="other")]
    args = (bench_nodes(), pods, BENCH_SELECTOR, [BENCH_TOLERATION], 1)
    assert check_bench_node_isolation(*args, cluster_name="basic").status == "Pass"
    assert check_bench_node_isolation(*args).status == "Fail"


TAINT = {"key": "dedicated", "value": "bench", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        ({"key": "dedicated", "operator": "Equal", "value": "bench", "effect": "NoSchedule"}, True),
        ({"key": "dedicated", "value": "bench", "effect": "NoSchedule"}, True),  # "" = Equal
        ({"key": "dedicated", "operator": "Equal", "value": "other"}, False),
        ({"key": "dedicated", "operator": "Exists"}, True),  # any value, any effect
        ({"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}, False),
        ({"operator": "Exists"}, True),  # empty key + Exists tolerates everything
        ({"operator": "Exists", "effect": "NoSchedule"}, True),
        ({"key": "other", "operator": "Exists"}, False),
        ({"key": "dedicated", "operator": "Lt", "value": "bench"}, False),
    ],
)
def test_toleration_matching_follows_kubernetes_rules(
    toleration: dict[str, str], tolerated: bool
) -> None:
    assert toleration_tolerates(toleration, TAINT) is tolerated


def test_prefer_no_schedule_taints_do_not_block_a_node() -> None:
    n = node("n", taints=[{"key": "soft", "effect": "PreferNoSchedule"}, TAINT])
    assert blocking_taints(n) == [TAINT]


# --- table-leader-distribution ---------------------------------------------------------------


def mysql_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Each `+---+`-framed mysql client table in `text` as (columns, rows)."""
    tables = []
    for block in re.findall(r"(\+[-+]+\+\n\|.*?\n\+[-+]+\+\n(?:\|.*\n)*?\+[-+]+\+)", text):
        lines = [ln for ln in block.splitlines() if ln.startswith("|")]
        cells = [[c.strip() for c in ln.strip("|").split("|")] for ln in lines]
        tables.append((cells[0], cells[1:]))
    return tables


def show_table_regions() -> list[tuple[list[str], list[list[str]]]]:
    return mysql_tables((DATA / "tidb-show-table-regions_13cols_docs.txt").read_text())


def test_the_13_column_sample_with_leaders_spread_over_four_stores_passes() -> None:
    _, (columns, rows) = show_table_regions()
    assert len(columns) == 13
    result = check_table_leader_distribution(rows, columns, [1, 7, 8, 9], table="t")
    assert result.status == "Pass"
    assert "leaders of 6 region(s) of table t per store: 1=1, 7=3, 8=1, 9=1" in result.message


def test_the_same_rows_in_the_11_column_form_give_the_same_verdict() -> None:
    _, (columns, rows) = show_table_regions()
    result = check_table_leader_distribution([r[:11] for r in rows], columns[:11], [1, 7, 8, 9])
    assert result.status == "Pass"


def test_all_leaders_of_the_t1_sample_on_store_1_of_three_fail() -> None:
    (columns, rows), _ = show_table_regions()
    result = check_table_leader_distribution(rows, columns, [1, 2, 3], table="t1")
    assert result.status == "Fail"
    assert result.stores == [1]
    assert "every leader is on store 1" in result.message


def test_a_store_with_more_than_twice_its_fair_share_warns() -> None:
    columns = ["REGION_ID", "LEADER_STORE_ID"]
    rows = [[i, 1] for i in range(7)] + [[7, 2], [8, 3]]
    result = check_table_leader_distribution(rows, columns, [1, 2, 3])
    assert result.status == "Warn"
    assert "store 1 holds 7, more than twice its fair share" in result.message


def test_a_table_with_fewer_regions_than_stores_warns_to_split_it() -> None:
    result = check_table_leader_distribution([[1, 5]], ["REGION_ID", "LEADER_STORE_ID"], [1, 5, 6])
    assert result.status == "Warn"
    assert "SPLIT TABLE" in result.message


def test_a_result_without_leader_store_id_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="no LEADER_STORE_ID column"):
        check_table_leader_distribution([[1]], ["REGION_ID"], [1])


# --- TiDB version, skipping --------------------------------------------------------------------


def tidb_version_values() -> list[str]:
    """The three printings of tidb_version() in the sample: \\G twice and a table cell."""
    text = (DATA / "tidb-tidb_version_v8.1.x.txt").read_text()
    starts = [
        m.start() for m in re.finditer(r"(tidb_version\(\)|TIDB_VERSION\(\)): |\| Release", text)
    ]
    values = []
    for start in starts:
        end = text.index("Store: tikv", start) + len("Store: tikv")
        values.append(text[start : end + 2].rstrip())
    return values


@pytest.mark.parametrize(("index", "version"), [(0, "v8.1.0"), (1, "v8.1.2"), (2, "v8.1.1")])
def test_every_printing_of_tidb_version_in_the_sample_parses(index: int, version: str) -> None:
    info = parse_tidb_version(tidb_version_values()[index])
    assert info["release_version"] == version
    assert info["edition"] == "Community"
    assert info["store"] == "tikv"
    assert info["goversion"].startswith("go1.21")


def test_text_without_a_release_version_is_not_tidb() -> None:
    with pytest.raises(ParseError, match="is the server TiDB"):
        parse_tidb_version("10.11.6-MariaDB-0+deb12u1")


def test_a_non_tidb_server_passes_the_check_saying_it_was_skipped() -> None:
    result = not_tidb_skip("table-leader-distribution", "10.11.6-MariaDB-0+deb12u1")
    assert result.status == "Pass"
    assert result.message == "not TiDB (server says 10.11.6-MariaDB-0+deb12u1), skipped"
    assert is_tidb_server_version("8.0.11-TiDB-v8.1.0")
    assert not is_tidb_server_version("10.11.6-MariaDB-0+deb12u1")


# --- result model and gate ---------------------------------------------------------------------


def test_check_results_serialise_with_camel_case_and_default_empty_stores() -> None:
    result = CheckResult(name="store-state", status="Pass", message="ok")
    assert result.model_dump(by_alias=True) == {
        "name": "store-state",
        "status": "Pass",
        "message": "ok",
        "stores": [],
    }
    assert "leader-size-balance" in CHECK_NAMES and len(CHECK_NAMES) == 7


def checks(*statuses: str) -> list[CheckResult]:
    return [
        CheckResult.model_validate({"name": f"c{i}", "status": s, "message": "m"})
        for i, s in enumerate(statuses)
    ]


def test_enforce_blocks_the_run_on_any_failed_check() -> None:
    verdict = evaluate(checks("Pass", "Fail", "Warn"), "Enforce")
    assert (verdict.status, verdict.proceed, verdict.failed, verdict.warned) == (
        "Fail",
        False,
        ["c1"],
        ["c2"],
    )
    assert "run blocked" in verdict.message


def test_policy_warn_records_failures_and_lets_the_run_continue() -> None:
    verdict = evaluate(checks("Fail"), "Warn")
    assert (verdict.status, verdict.proceed) == ("Fail", True)


def test_policy_off_and_all_passing_checks_proceed() -> None:
    assert evaluate([], "Off").proceed
    verdict = evaluate(checks("Pass", "Pass"), "Enforce")
    assert (verdict.status, verdict.proceed, verdict.message) == (
        "Pass",
        True,
        "preflight passed (2 checks)",
    )


def test_a_deliberately_tainted_bench_node_gets_no_taint_sentence_but_a_master_taint_does() -> None:
    nodes = [node(f"node{i}") for i in (1, 2, 3)]
    nodes.append(node("bench", taints=[BENCH_TAINT]))
    nodes.append(
        node("old", taints=[{"key": "node-role.kubernetes.io/master", "effect": "NoSchedule"}])
    )
    pods = [pod(f"basic-tikv-{i}", "tikv", f"node{i + 1}") for i in range(3)]
    tc = tidb_cluster(
        {"topologySpreadConstraints": SPREAD}, pd={"replicas": 0}, tidb={"replicas": 0}
    )
    result = check_topology_spread(tc, pods, nodes)
    assert result.status == "Pass"
    assert "TiKV node1:1 node2:1 node3:1 bench:0 old:0" in result.message
    assert "bench carries" not in result.message
    assert "old carries node-role.kubernetes.io/master:NoSchedule" in result.message
