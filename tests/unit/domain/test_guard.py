"""The guard's judgements (domain/guard.py): each rule, and quiet inputs that must not trip it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from tidb_bench_operator.domain.api.guard import MAX_DISTURBANCES, Disturbance, Guard, GuardLook
from tidb_bench_operator.domain.cluster.readers import read_tidb_cluster
from tidb_bench_operator.domain.guard import (
    PdLook,
    client_disturbances,
    kube_disturbances,
    merged,
    pd_disturbances,
    pd_entries,
    pod_entries,
    rollout_signals,
    series_disturbances,
    summary,
)
from tidb_bench_operator.domain.pd import Store

T0 = datetime(2026, 1, 1, 2, 0, tzinfo=UTC)
BOUNDS = Guard()


def pod(
    name: str, node: str, component: str = "tikv", restarts: int = 0, uid: str = ""
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name, "namespace": "tidb", "uid": uid or f"uid-{name}",
            "labels": {"app.kubernetes.io/instance": "basic", "app.kubernetes.io/component": component},
        },
        "spec": {"nodeName": node},
        "status": {"phase": "Running", "containerStatuses": [{"name": component, "restartCount": restarts}]},
    }  # fmt: skip


def tc(phase: dict[str, str] | None = None, tikv: int = 2, generation: int = 3) -> dict[str, Any]:
    status = {comp: {"phase": p} for comp, p in (phase or {}).items()}
    return {
        "metadata": {"name": "basic", "namespace": "tidb", "generation": generation},
        "spec": {"version": "v8.1.0", "pd": {"replicas": 1}, "tikv": {"replicas": tikv}},
        "status": status,
    }


START_PODS = [
    pod("basic-pd-0", "node2", "pd"),
    pod("basic-tikv-0", "node2"),
    pod("basic-tikv-1", "node3"),
]


def start_look(**extra: Any) -> GuardLook:
    view = read_tidb_cluster(tc({"tikv": "Normal"}))
    phases, digest, unsettled = rollout_signals(view)
    return GuardLook(
        step="s1r0a0", at=T0, pods=pod_entries(view, START_PODS), bench_nodes=["node1"],
        phases=phases, spec_digest=digest, unsettled=unsettled, **extra,
    )  # fmt: skip


def judge(pods: list[dict[str, Any]], cluster: dict[str, Any] | None = None) -> list[Disturbance]:
    view = read_tidb_cluster(cluster or tc({"tikv": "Normal"}))
    phases, generation, unsettled = rollout_signals(view)
    return kube_disturbances(
        start_look(), pod_entries(view, pods), phases, generation, unsettled, cluster="basic", at=T0
    )


def whats(found: list[Disturbance]) -> list[tuple[str, str]]:
    return [(d.what, d.object) for d in found]


def test_nothing_changed_is_no_disturbance() -> None:
    assert judge(START_PODS) == []


def test_a_tikv_pod_landing_on_the_bench_node_names_the_pod_and_the_node() -> None:
    found = judge([*START_PODS, pod("basic-tikv-2", "node1")])
    assert ("PodOnBenchNode", "basic-tikv-2") in whats(found)
    assert ("PodCreated", "basic-tikv-2") in whats(found)
    landed = next(d for d in found if d.what == "PodOnBenchNode")
    assert "node1" in landed.message and landed.source == "Kubernetes"


def test_restart_recreate_move_and_delete_are_each_named() -> None:
    now = [
        pod("basic-pd-0", "node2", "pd", restarts=1),
        pod("basic-tikv-0", "node3", uid="uid-new"),
    ]
    found = whats(judge(now))
    assert ("PodRestarted", "basic-pd-0") in found
    assert ("PodRecreated", "basic-tikv-0") in found
    assert ("PodDeleted", "basic-tikv-1") in found
    message = next(d.message for d in judge(now) if d.what == "PodRecreated")
    assert "moved from node2" in message


def test_the_operator_upgrading_or_changing_the_spec_is_a_disturbance() -> None:
    found = judge(START_PODS, tc({"tikv": "Upgrade"}, tikv=3))
    assert ("ClusterPhase", "basic") in whats(found)
    assert ("ClusterSpecChanged", "basic") in whats(found)
    # A status write moves a TidbCluster's generation (no status subresource): not a change.
    assert judge(START_PODS, tc({"tikv": "Normal"}, generation=9)) == []
    assert "Upgrade" in next(d.message for d in found if d.what == "ClusterPhase")


def test_a_restarted_client_pod_is_a_disturbance() -> None:
    client = {"metadata": {"name": "run-s1-c0-x"}, "spec": {"nodeName": "node1"},
              "status": {"containerStatuses": [{"restartCount": 2}]}}  # fmt: skip
    assert whats(client_disturbances([client], at=T0)) == [("ClientRestarted", "run-s1-c0-x")]


def store(sid: int, state: str = "Up", leaders: int = 10) -> Store:
    return Store(id=sid, address=f"basic-tikv-{sid}:20160", state_name=state, leader_count=leaders)


def pd_start() -> GuardLook:
    look = start_look()
    base = PdLook(stores=[store(1), store(4), store(5)], pending_operators=0, leader="pd-0")
    look.stores, look.leaders = pd_entries(base)
    look.pd_leader, look.pd_read = base.leader, True
    return look


def test_pd_unchanged_is_quiet_and_each_pd_change_is_named() -> None:
    quiet = PdLook(stores=[store(1), store(4), store(5)], pending_operators=3, leader="pd-0")
    assert pd_disturbances(pd_start(), quiet, BOUNDS, at=T0) == []  # 3 operators: the bound
    busy = PdLook(
        stores=[store(1, leaders=0), store(4, leaders=20), store(5, "Down")],
        pending_operators=5, first_operator="balance-region {mv peer}", leader="pd-1",
    )  # fmt: skip
    found = pd_disturbances(pd_start(), busy, BOUNDS, at=T0)
    assert whats(found) == [
        ("StoreState", "store 5"),
        ("PendingOperators", "pd"),
        ("LeadersMoved", "pd"),
        ("PDLeaderChanged", "pd-1"),
    ]
    assert "Down (was Up)" in found[0].message
    assert "10 of 30 leaders (33.3%)" in found[2].message


def series(qps: list[float], errors: float = 0.0, reconnects: float = 0.0) -> list[dict[str, Any]]:
    return [
        {"t": i + 1.0, "qps": q, "tps": q, "errorsPerSec": errors, "reconnectsPerSec": reconnects}
        for i, q in enumerate(qps)
    ]


def test_a_quiet_but_swinging_series_is_no_stall() -> None:
    # The test bed at one thread under other load: 59k..77k then 13k (measured, docs/guard.md).
    swings = [59542.78, 77291.22, 73368.70, 23616.19, 16215.12, 13332.30, 12997.35, 12935.09]
    assert series_disturbances({"c0": series(swings)}, BOUNDS, started=T0) == []
    # A quiet step whose one interval another test bed starved to 0.19 of the median.
    starved = [42124.0, 7930.0, 42500.0, 41800.0]
    assert series_disturbances({"c0": series(starved)}, BOUNDS, started=T0) == []


def test_a_neighbour_collapse_is_a_stall_naming_the_client_and_the_times() -> None:
    # A 128-connection neighbour for 3 s (measured, docs/guard.md).
    found = series_disturbances(
        {"c0": series([14389.19, 13379.05, 12981.29, 12784.55, 4381.66, 181.56, 502.66, 14514.24])},
        BOUNDS, started=T0,
    )  # fmt: skip
    assert whats(found) == [("Stall", "c0")]
    assert "2 interval(s)" in found[0].message and "6s, 7s" in found[0].message
    assert found[0].at == datetime(2026, 1, 1, 2, 0, 6, tzinfo=UTC)


def test_errors_and_reconnects_above_their_bounds() -> None:
    found = series_disturbances(
        {"c0": series([1000.0] * 4, errors=20.0, reconnects=1.0)}, BOUNDS, started=T0
    )
    assert whats(found) == [("Errors", "c0"), ("Reconnects", "c0")]
    few = series_disturbances({"c0": series([1000.0] * 4, errors=5.0)}, BOUNDS, started=T0)
    assert few == []  # 0.5% of the transactions: within the 1% bound


def test_a_rollout_recorded_before_its_pods_were_seen_takes_their_names_at_a_later_look() -> None:
    first = Disturbance(
        at=T0, source="Kubernetes", what="ClusterProgressing", object="basic",
        message="TiDBGroup tidb: 0/1 updated, 2 instances for 1 replicas (maxSurge 1)",
    )  # fmt: skip
    later = first.model_copy(
        update={"message": first.message + " (rollout pods: tidb-tidb-001x created)"}
    )
    kept, added = merged([first], [later])
    assert added == [] and [d.message for d in kept] == [later.message]
    assert kept[0].at == T0, "still the time it was first seen"
    # Another message for the same key (not an extension) leaves the first one as it was.
    other = first.model_copy(update={"message": "TiKVGroup tikv: 1/3 updated"})
    assert merged([first], [other]) == ([first], [])


def test_merged_keeps_each_disturbance_once_and_bounds_the_list() -> None:
    one = Disturbance(at=T0, source="PD", what="StoreState", object="store 5", message="Down")
    kept, added = merged([one], [one])
    assert kept == [one] and added == []
    many = [one.model_copy(update={"object": f"store {i}"}) for i in range(MAX_DISTURBANCES + 3)]
    kept, added = merged([], many)
    assert len(kept) == MAX_DISTURBANCES and len(added) == MAX_DISTURBANCES + 3
    assert kept[-1].message.endswith("(and more, not kept)")
    assert summary(kept, 2).endswith(f"(+{MAX_DISTURBANCES - 2} more)")
