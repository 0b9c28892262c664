"""The recorded pods and nodes of tests/data/resources, as facts, and readings over them."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tidb_bench_operator.domain.api.metrics_spec import MetricsSpec
from tidb_bench_operator.domain.api.runner_message import ClientCpu
from tidb_bench_operator.domain.api.step_resources import StepResources
from tidb_bench_operator.domain.resources.derive import compute_step_resources
from tidb_bench_operator.domain.resources.facts import NodeFacts, PodFacts, node_facts, pod_facts
from tidb_bench_operator.domain.resources.usage import NodeUsage, PodUsage, UsageReading

DATA = Path(__file__).resolve().parents[3] / "data" / "resources"
START = datetime(2026, 11, 20, 9, 0, 30, tzinfo=UTC)
END = datetime(2026, 11, 20, 9, 1, 30, tzinfo=UTC)
SOURCE = "prometheus http://prometheus.monitoring:9090 (cadvisor)"
CLIENT_POD = "point-select-sweep-s2-c0-8dqwz"


def load(name: str) -> Any:
    return json.loads((DATA / name).read_text())


def v1_pods() -> list[PodFacts]:
    return [pod_facts(p) for p in load("pods-v1-basic.json")["items"]]


def client_pods() -> list[PodFacts]:
    return [pod_facts(load("pod-client.json"))]


def nodes() -> list[NodeFacts]:
    return [node_facts(n) for n in load("nodes.json")["items"]]


def reading(
    cores: dict[str, float],
    namespace: str = "tidb-cluster",
    node_cores: dict[str, float] | None = None,
    **fields: Any,
) -> UsageReading:
    """A reading with these pods' cores (1 GiB working set each) and node totals."""
    pods = tuple(
        PodUsage(namespace=("bench" if name == CLIENT_POD else namespace), name=name,
                 cpu_cores=value, memory_bytes=2.0**30)
        for name, value in cores.items()
    )  # fmt: skip
    totals = tuple(NodeUsage(name=n, cpu_cores=c) for n, c in (node_cores or {}).items())
    return UsageReading(source=SOURCE, start=START, end=END, pods=pods, nodes=totals, **fields)


#: The field story's step, in this cluster's shape: TiDB busiest, nothing saturated.
QUIET = {
    "basic-pd-0": 0.05, "basic-pd-1": 0.02, "basic-pd-2": 0.02,
    "basic-tikv-0": 0.10, "basic-tikv-1": 0.11, "basic-tikv-2": 0.09,
    "basic-tidb-0": 0.25, "basic-tidb-1": 0.22, "basic-tidb-2": 0.21,
}  # fmt: skip

#: The runner's measure of the one client: 1.55 of the 8 CPUs it may use (the field story's).
RUNNER = {CLIENT_POD: ClientCpu(used=1.55, available=8.0, saturated=False)}


def quiet_step(r: UsageReading | None = None, spec: MetricsSpec | None = None) -> StepResources:
    """The v1 cluster and its client at 41,000 QPS over `r` (default: QUIET's cores)."""
    return compute_step_resources(r or reading(QUIET), v1_pods(), client_pods(), nodes(),
                                  41_000.0, RUNNER, spec or MetricsSpec())  # fmt: skip
