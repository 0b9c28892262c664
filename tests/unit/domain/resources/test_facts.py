"""Pods' and nodes' facts from recorded objects (domain/resources/facts.py)."""

from __future__ import annotations

import pytest
from kubernetes.utils.quantity import parse_quantity as client_parse_quantity

from tidb_bench_operator.domain.resources.facts import (
    CLIENT,
    NodeFacts,
    PodFacts,
    node_facts,
    pod_component,
    pod_facts,
)
from tidb_bench_operator.domain.resources.quantity import parse_quantity
from unit.domain.resources.support import client_pods, load, nodes, v1_pods


@pytest.mark.parametrize(
    ("text", "value"),
    [("250m", 0.25), ("2", 2.0), ("1.5", 1.5), ("1k", 1000.0), ("15900m", 15.9),
     ("100n", 1e-7), ("4Gi", 4 * 2.0**30), ("65544356Ki", 65544356 * 1024.0), ("1e3", 1000.0),
     ("1E", 1e18), (".5", 0.5), ("+3", 3.0), (2, 2.0), (0.5, 0.5)],
)  # fmt: skip
def test_kubernetes_quantities_are_read_with_their_suffix(text: object, value: float) -> None:
    assert parse_quantity(text) == pytest.approx(value)


def test_quantities_are_read_as_the_kubernetes_client_reads_them() -> None:
    # The domain may not import the client library (layers); its parser is the reference.
    for text in ["250m", "2", "1.5", "1k", "15900m", "100n", "3u", "4Gi", "1Mi", "2Ti",
                 "65544356Ki", "1e3", "1E", "2P", "0.5e-2", ".5", "+3", "-1", "7T", "1G"]:  # fmt: skip
        assert parse_quantity(text) == pytest.approx(float(client_parse_quantity(text))), text


@pytest.mark.parametrize("text", ["", "two", "2 cores", "1K", "1mi", "m", None, True, "1e"])
def test_what_is_not_a_quantity_is_none(text: object) -> None:
    assert parse_quantity(text) is None


def test_v1_pods_give_their_node_component_and_cpu_summed_over_containers() -> None:
    facts = {p.name: p for p in v1_pods()}
    assert facts["basic-tikv-1"] == PodFacts(
        namespace="tidb-cluster", name="basic-tikv-1", component="tikv", node="node3",
        cpu_request=4.0, cpu_limit=8.0,
    )  # fmt: skip
    assert facts["basic-pd-0"].cpu_request == 0.5 and facts["basic-pd-0"].cpu_limit == 2.0
    # The slowlog sidecar asks nothing and TiDB has no limit: the pod is unlimited.
    tidb = facts["basic-tidb-0"]
    assert (tidb.component, tidb.cpu_request, tidb.cpu_limit) == ("tidb", 2.0, None)


def test_v2_pods_are_read_by_their_pingcap_labels_and_every_container_counts() -> None:
    facts = {p.name: p for p in (pod_facts(p) for p in load("pods-v2-basic.json")["items"])}
    tikv = facts["basic-tikv-q9w4z"]
    assert (tikv.namespace, tikv.component, tikv.node) == ("db", "tikv", "node2")
    assert tikv.cpu_request == pytest.approx(1.51) and tikv.cpu_limit == pytest.approx(1.6)
    assert {p.component for p in facts.values()} == {"pd", "tikv", "tidb"}


def test_a_benchmark_pod_is_the_client_by_its_run_label_whatever_else_it_carries() -> None:
    (client,) = client_pods()
    assert (client.component, client.node, client.cpu_request, client.cpu_limit) == (
        CLIENT, "bench", 4.0, None,
    )  # fmt: skip
    assert pod_component({"metadata": {"labels": {"app": "x"}}}) is None


def test_a_malformed_pod_gives_what_it_can_and_never_raises() -> None:
    pod = {"metadata": {"name": "odd"}, "spec": {"containers": [{"resources": {"limits": {
        "cpu": "lots"}}}]}}  # fmt: skip
    assert pod_facts(pod) == PodFacts(namespace="", name="odd", component="unknown")
    assert pod_facts({}, component="tidb").component == "tidb"


def test_nodes_give_their_allocatable_cores() -> None:
    assert nodes() == [NodeFacts("node1", 16.0), NodeFacts("node2", 16.0),
                       NodeFacts("node3", 15.9), NodeFacts("bench", 8.0)]  # fmt: skip
    assert node_facts({"metadata": {"name": "n"}, "status": {}}) == NodeFacts("n", None)
