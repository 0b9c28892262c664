"""The 24 KiB bound on a step's resources, and their short human lines."""

from __future__ import annotations

import pytest

from tidb_bench_operator.domain.api.metrics_spec import MetricsSpec
from tidb_bench_operator.domain.resources.bound import (
    MAX_STEP_RESOURCES_BYTES,
    bound_resources,
    serialized_size,
)
from tidb_bench_operator.domain.resources.derive import (
    compute_step_resources,
    unavailable_resources,
)
from tidb_bench_operator.domain.resources.describe import describe_resources
from tidb_bench_operator.domain.resources.facts import NodeFacts, PodFacts
from unit.domain.resources import support as s
from unit.domain.resources.support import QUIET, quiet_step, reading


def test_500_pods_are_cut_to_the_busiest_within_24_kib_with_a_note_counting_the_rest() -> None:
    pods = [PodFacts(namespace="big", name=f"big-tikv-{i}", component="tikv",
                     node=f"worker-{i % 60:02d}", cpu_request=4.0, cpu_limit=8.0)
            for i in range(500)]  # fmt: skip
    cores = {p.name: round(0.5 + (i * 37 % 500) / 100, 2) for i, p in enumerate(pods)}
    workers = [NodeFacts(f"worker-{i:02d}", 64.0) for i in range(60)]
    r = compute_step_resources(reading(cores, namespace="big"), pods, [], workers, 90_000.0, {},
                               MetricsSpec())  # fmt: skip
    assert serialized_size(r) <= MAX_STEP_RESOURCES_BYTES
    kept = len(r.pods)
    assert 20 < kept < 500
    # The busiest kept, and the sums still over all 500 pods.
    assert min(p.cores or 0 for p in r.pods) >= max(
        c for name, c in cores.items() if name not in {p.name for p in r.pods}
    )
    assert r.server_cores == pytest.approx(sum(cores.values()))
    assert r.components[0].pods == 500
    assert r.notes[-1] == (
        f"left out the {500 - kept} least busy of 500 pods and {60 - len(r.nodes)} of 60 "
        "nodes, to keep this block under 24 KiB"
    )
    kept_names = {p.name for p in r.pods}
    assert all(set(n.pods) <= kept_names for n in r.nodes)
    # The verdict was drawn from every pod, before the cut: the median of all 500 TiKVs (the
    # kept, busiest ones alone have a median above 5 cores).
    assert r.bottleneck is not None and r.bottleneck.kind == "hot-store"
    assert r.bottleneck.message.endswith("1.8× the median TiKV's 3.00"), r.bottleneck.message


def test_a_small_step_is_left_whole() -> None:
    r = quiet_step()
    assert bound_resources(r) is r
    assert len(r.pods) == 10 and len(r.nodes) == 4


def test_the_lines_give_cores_per_component_per_core_per_query_nodes_and_the_bottleneck() -> None:
    r = quiet_step(reading(QUIET, node_cores={"node1": 4.06, "node3": 1.64}))
    assert describe_resources(r) == [
        "server 1.07 cores (tidb 0.68, tikv 0.30, pd 0.09); 38,300 QPS per core; "
        "0.0261 CPU ms per query",
        "clients 1.55 cores",
        "nodes: node1 4.06 of 16, node3 1.64 of 15.9, bench 1.55 of 8, node2 0.33 of 16",
        "bottleneck: no server resource saturated (highest 2%: pd `basic-pd-0` on node1): the "
        "limit is elsewhere — client path, network, or the software",
    ]


def test_an_unavailable_step_is_one_line_saying_why() -> None:
    r = unavailable_resources(s.SOURCE, "no source configured", s.START, s.END)
    assert describe_resources(r) == ["server metrics unavailable: no source configured"]


def test_a_smaller_limit_keeps_the_sums_and_the_verdict_and_one_note() -> None:
    r = quiet_step(reading({k: v for k, v in QUIET.items() if k != "basic-tidb-2"}))
    full = serialized_size(r)
    half = bound_resources(r, full // 2)
    assert serialized_size(half) <= full // 2 and 0 < len(half.pods) < 10
    assert half.notes[-1].endswith(f"to keep this block under {full // 2:,} bytes")
    tiny = bound_resources(r, 750)
    assert (tiny.pods, tiny.nodes) == ([], []) and serialized_size(tiny) <= 750
    assert tiny.notes == [
        "left out the 10 least busy of 10 pods and 4 of 4 nodes, to keep this block under 750 bytes"
    ]
    assert (tiny.server_cores, tiny.components, tiny.bottleneck) == (
        r.server_cores, r.components, r.bottleneck,
    )  # fmt: skip
