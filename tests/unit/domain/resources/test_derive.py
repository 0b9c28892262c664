"""A step's resources from a reading and the recorded pods and nodes (domain/resources/derive.py)."""

from __future__ import annotations

import pytest

from tidb_bench_operator.domain.api.metrics_spec import MetricsSpec
from tidb_bench_operator.domain.resources.derive import (
    compute_step_resources,
    unavailable_resources,
)
from tidb_bench_operator.domain.resources.usage import UsageReading
from unit.domain.resources import support as s
from unit.domain.resources.support import CLIENT_POD, QUIET, quiet_step, reading


def test_cores_per_component_per_query_and_per_core_add_up_from_the_pods() -> None:
    r = quiet_step()
    assert (r.source, r.window_start, r.window_end, r.unavailable) == (
        s.SOURCE, s.START, s.END, None,
    )  # fmt: skip
    assert r.server_cores == pytest.approx(1.07)
    assert r.qps_per_core == pytest.approx(41_000 / 1.07, rel=1e-4)
    assert r.cpu_ms_per_query == pytest.approx(1.07 * 1000 / 41_000, rel=1e-3)
    assert [(c.component, c.pods, c.cores) for c in r.components] == [
        ("pd", 3, pytest.approx(0.09)), ("tikv", 3, pytest.approx(0.30)),
        ("tidb", 3, pytest.approx(0.68)),
    ]  # fmt: skip
    assert r.components[2].cpu_ms_per_query == pytest.approx(0.68 * 1000 / 41_000, rel=1e-3)
    assert r.notes == []


def test_each_pod_carries_its_node_request_limit_and_utilization_busiest_first() -> None:
    r = quiet_step()
    # The client (1.55 cores, the runner's measure) is busiest; unmeasured pods would be last.
    assert [p.name for p in r.pods[:3]] == [CLIENT_POD, "basic-tidb-0", "basic-tidb-1"]
    pods = {p.name: p for p in r.pods}
    tikv = pods["basic-tikv-0"]
    assert (tikv.node, tikv.cpu_request, tikv.cpu_limit, tikv.memory_bytes) == (
        "node1", 4.0, 8.0, 2.0**30,
    )  # fmt: skip
    assert tikv.utilization_percent == pytest.approx(1.2, abs=0.05)  # 0.10 of its 8-core limit
    # TiDB has no limit: against its node's allocatable (node3: 15.9 cores, system-reserved).
    assert pods["basic-tidb-2"].utilization_percent == pytest.approx(0.21 / 15.9 * 100, abs=0.05)
    # The client has no limit: against the 8 CPUs the runner found it may use.
    client = pods[CLIENT_POD]
    assert (client.component, client.cores, client.utilization_percent) == ("client", 1.55, 19.4)
    assert r.client_cores == 1.55


def test_nodes_add_up_their_pods_unless_the_source_has_the_node_total() -> None:
    r = quiet_step()
    node1 = next(n for n in r.nodes if n.name == "node1")
    assert node1.cores == pytest.approx(0.40) and node1.from_pods
    assert node1.allocatable_cores == 16.0
    assert node1.pods == ["basic-pd-0", "basic-tidb-0", "basic-tikv-0"]
    assert [n.name for n in r.nodes] == ["bench", "node1", "node3", "node2"]  # busiest first
    r = quiet_step(reading(QUIET, node_cores={"node1": 4.06, "node3": 1.64}))
    by = {n.name: n for n in r.nodes}
    assert (by["node1"].cores, by["node1"].from_pods) == (4.06, False)
    assert (by["node2"].cores, by["node2"].from_pods) == (pytest.approx(0.33), True)
    assert [n.name for n in r.nodes][:2] == ["node1", "node3"]


def test_a_cluster_pod_without_a_series_is_noted_and_left_out_of_the_sums() -> None:
    r = quiet_step(reading({k: v for k, v in QUIET.items() if k != "basic-tidb-2"}))
    assert r.server_cores == pytest.approx(0.86)
    assert r.notes == ["no CPU series for 1 of 9 cluster pods: basic-tidb-2"]
    assert [c.pods for c in r.components] == [3, 3, 2]
    assert r.pods[-1].name == "basic-tidb-2" and r.pods[-1].cores is None


def test_the_source_s_client_series_wins_over_the_runner_s_measure() -> None:
    r = quiet_step(reading({**QUIET, CLIENT_POD: 2.0}))
    assert r.client_cores == 2.0
    assert next(p for p in r.pods if p.name == CLIENT_POD).utilization_percent == 25.0


def test_no_client_measure_at_all_is_noted_and_the_clients_have_no_cores() -> None:
    r = compute_step_resources(reading(QUIET), s.v1_pods(), s.client_pods(), s.nodes(),
                               41_000.0, {}, MetricsSpec())  # fmt: skip
    assert r.client_cores is None
    assert r.notes == [f"no CPU series for 1 of 1 client pods: {CLIENT_POD}"]


def test_a_step_without_queries_has_cores_but_no_per_query_figures() -> None:
    r = compute_step_resources(reading(QUIET), s.v1_pods(), [], s.nodes(), 0.0, {}, MetricsSpec())
    assert r.server_cores == pytest.approx(1.07)
    assert (r.qps_per_core, r.cpu_ms_per_query, r.components[0].cpu_ms_per_query) == (
        None, None, None,
    )  # fmt: skip


def test_an_unreadable_source_makes_the_step_say_why_and_nothing_else() -> None:
    why = "Prometheus did not answer within 5s (3 attempts)"
    r = quiet_step(UsageReading(source=s.SOURCE, start=s.START, end=s.END, unavailable=why))
    assert r == unavailable_resources(s.SOURCE, why, s.START, s.END)
    assert r.unavailable == why
    assert (r.server_cores, r.pods, r.nodes) == (None, [], [])
    assert r.bottleneck is not None and r.bottleneck.kind == "unknown"
    assert r.bottleneck.message == f"server metrics unavailable: {why}"


def test_a_cluster_with_no_pod_found_says_so() -> None:
    r = compute_step_resources(reading({}), [], [], s.nodes(), 41_000.0, {}, MetricsSpec())
    assert r.server_cores is None and r.components == []
    assert r.notes == ["no pod of the cluster was found to measure"]
    assert r.bottleneck is not None and r.bottleneck.kind == "unknown"
