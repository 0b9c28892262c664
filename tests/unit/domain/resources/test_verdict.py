"""The bottleneck verdict, in its order: clients, a component pod, a hot store, else none."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from tidb_bench_operator.domain.api.metrics_spec import MetricsSpec
from tidb_bench_operator.domain.api.runner_message import ClientCpu
from tidb_bench_operator.domain.api.step_resources import Bottleneck
from tidb_bench_operator.domain.resources.derive import compute_step_resources
from tidb_bench_operator.domain.resources.verdict import store_leaders
from unit.domain.resources.support import CLIENT_POD, QUIET, client_pods, nodes, reading, v1_pods

CALM = {CLIENT_POD: ClientCpu(used=1.55, available=8.0, saturated=False)}
ADDRESS = "{}.basic-tikv-peer.tidb-cluster.svc:20160"


def verdict(
    cores: Mapping[str, float],
    runner: Mapping[str, ClientCpu] = CALM,
    spec: MetricsSpec | None = None,
    leaders: Mapping[str, int] | None = None,
) -> Bottleneck:
    r = compute_step_resources(reading({**QUIET, **cores}), v1_pods(), client_pods(), nodes(),
                               41_000.0, runner, spec or MetricsSpec(), leaders)  # fmt: skip
    assert r.bottleneck is not None
    return r.bottleneck


def test_nothing_saturated_names_the_busiest_pod_and_puts_the_limit_elsewhere() -> None:
    b = verdict({"basic-tidb-0": 4.96})
    assert (b.kind, b.subject) == ("none", None)
    assert b.message == (
        "no server resource saturated (highest 31%: tidb `basic-tidb-0` on node1): the limit "
        "is elsewhere — client path, network, or the software"
    )


def test_a_pod_at_its_limit_is_the_bottleneck_with_the_limit_named() -> None:
    b = verdict({"basic-tikv-0": 7.52})
    assert (b.kind, b.subject) == ("component", "basic-tikv-0")
    assert b.message == "tikv `basic-tikv-0` on node1 at 94% of its 8-core limit"


def test_an_unlimited_pod_is_judged_against_its_node_s_allocatable_cores() -> None:
    b = verdict({"basic-tidb-2": 14.0})
    assert (b.kind, b.subject) == ("component", "basic-tidb-2")
    assert b.message == "tidb `basic-tidb-2` on node3 at 88% of node3's 15.9 allocatable cores"


def test_the_threshold_comes_from_the_spec() -> None:
    tikv = {"basic-tikv-0": 7.52}
    assert verdict(tikv, spec=MetricsSpec(saturatedPercent=95)).kind == "hot-store"
    assert verdict({"basic-tidb-0": 4.96}, spec=MetricsSpec(saturatedPercent=30)).kind == (
        "component"
    )


def test_a_saturated_client_comes_before_a_saturated_server_pod() -> None:
    b = verdict({CLIENT_POD: 7.9, "basic-tikv-0": 7.52})
    assert (b.kind, b.subject) == ("client", "clients")
    assert b.message == (
        f"the clients: client `{CLIENT_POD}` on bench at 99% of the 8 CPUs its runner may use"
    )


def test_the_runner_finding_its_client_saturated_is_enough() -> None:
    runner = {CLIENT_POD: ClientCpu(used=1.9, available=2.0, saturated=True)}
    b = verdict({}, runner=runner)
    assert (b.kind, b.subject) == ("client", "clients")
    assert b.message == (
        f"the clients: client `{CLIENT_POD}` on bench at 95% of the 2 CPUs its runner may use"
    )
    # A client the pods listed missed is still named, from the runner's word alone.
    b = verdict({}, runner={"other-pod": runner[CLIENT_POD], **CALM})
    assert b.message == (
        "the clients: `other-pod` used 1.90 of the 2 CPUs its runner may use (the runner "
        "found it saturated)"
    )


def test_one_tikv_far_busier_than_the_median_is_a_hot_store() -> None:
    b = verdict({"basic-tikv-1": 2.0, "basic-tikv-0": 0.5, "basic-tikv-2": 0.6})
    assert (b.kind, b.subject) == ("hot-store", "basic-tikv-1")
    assert b.message == (
        "hot store: tikv `basic-tikv-1` on node3 uses 2.00 cores, 3.3× the median TiKV's 0.60"
    )


@pytest.mark.parametrize(
    ("leaders", "said"),
    [({"basic-tikv-1": 900, "basic-tikv-0": 300, "basic-tikv-2": 300},
      "PD's leader counts agree: it leads 900 of 1,500 regions, the most"),
     ({"basic-tikv-1": 200, "basic-tikv-0": 1000, "basic-tikv-2": 300},
      "PD's leader counts do not: it leads 200 of 1,500 regions, `basic-tikv-0` the most (1,000)"),
     ({"basic-tikv-0": 1000}, "PD's leader counts name no store of this pod")],
)  # fmt: skip
def test_a_hot_store_is_cross_checked_with_pd_s_leaders_by_store_address(
    leaders: dict[str, int], said: str
) -> None:
    by_address = {ADDRESS.format(pod): n for pod, n in leaders.items()}
    b = verdict({"basic-tikv-1": 2.0, "basic-tikv-0": 0.5, "basic-tikv-2": 0.6},
                leaders=by_address)  # fmt: skip
    assert b.kind == "hot-store"
    assert b.message.endswith(f"; {said}"), b.message


def test_idle_tikvs_or_even_ones_are_no_hot_store() -> None:
    # Three times the median, but a fifth of a core: background work, not load.
    assert verdict({"basic-tikv-1": 0.2, "basic-tikv-0": 0.05, "basic-tikv-2": 0.06}).kind == (
        "none"
    )
    assert verdict({"basic-tikv-1": 1.2, "basic-tikv-0": 1.0, "basic-tikv-2": 0.9}).kind == "none"
    assert verdict({"basic-tikv-1": 1.2, "basic-tikv-0": 1.0, "basic-tikv-2": 0.9},
                   spec=MetricsSpec(hotStoreRatio=1.1)).kind == "hot-store"  # fmt: skip


def test_store_leaders_match_a_pod_by_name_or_address_and_not_a_longer_name() -> None:
    leaders = {"basic-tikv-1": 7, ADDRESS.format("basic-tikv-2"): 9, "basic-tikv-10:20160": 3}
    assert store_leaders("basic-tikv-1", leaders) == 7
    assert store_leaders("basic-tikv-2", leaders) == 9
    assert store_leaders("basic-tikv-0", leaders) is None
