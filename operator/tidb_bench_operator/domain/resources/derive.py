"""A step's resources: what a usage source read, with the pods' and nodes' facts, turned into
cores per pod, component and node, QPS per core, CPU per query and the bottleneck.

Evidence, never a gate: when the source could not be read the step says why and stays valid
(`unavailable_resources`). The clients' CPU comes from the source when it has a series for
the client pod, else from what the runner measured inside the pod (ClientCpu).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

from tidb_bench_operator.domain.api.metrics_spec import MetricsSpec
from tidb_bench_operator.domain.api.runner_message import ClientCpu
from tidb_bench_operator.domain.api.step_resources import (
    Bottleneck,
    ComponentUsage,
    NodeResources,
    PodResources,
    StepResources,
)
from tidb_bench_operator.domain.cluster.view import component_rank
from tidb_bench_operator.domain.resources.bound import MAX_STEP_RESOURCES_BYTES, bound_resources
from tidb_bench_operator.domain.resources.facts import NodeFacts, PodFacts
from tidb_bench_operator.domain.resources.usage import PodUsage, UsageReading
from tidb_bench_operator.domain.resources.verdict import judge_bottleneck

#: At most this many pod names in one note (the rest are counted).
NOTE_NAMES = 5
UNAVAILABLE = "server metrics unavailable"


def unavailable_resources(
    source: str, why: str, start: datetime | None, end: datetime | None
) -> StepResources:
    """The block of a step whose server metrics could not be read: why, and nothing else."""
    message = f"{UNAVAILABLE}: {why}"
    return StepResources(
        source=source[:512],
        window_start=start,
        window_end=end,
        unavailable=why[:1024],
        bottleneck=Bottleneck(kind="unknown", message=message[:1024]),
    )


def compute_step_resources(
    reading: UsageReading,
    cluster_pods: Sequence[PodFacts],
    client_pods: Sequence[PodFacts],
    nodes: Sequence[NodeFacts],
    qps: float | None,
    client_cpu: Mapping[str, ClientCpu],
    spec: MetricsSpec,
    leaders: Mapping[str, int] | None = None,
    limit: int = MAX_STEP_RESOURCES_BYTES,
) -> StepResources:
    """The step's resources over the reading's window, at most `limit` bytes serialized.

    `client_cpu` is the runner's measurement by client pod name; `leaders` is PD's leader
    count by TiKV store address or pod name (the hot store's cross-check), when known.
    """
    if reading.unavailable is not None:
        return unavailable_resources(reading.source, reading.unavailable, reading.start,
                                     reading.end)  # fmt: skip
    usage = {(u.namespace, u.name): u for u in reading.pods}
    allocatable = {n.name: n.allocatable_cores for n in nodes}
    notes = list(reading.notes)
    server = [_pod(p, usage.get((p.namespace, p.name)), allocatable) for p in cluster_pods]
    clients = [_client(p, usage.get((p.namespace, p.name)), client_cpu.get(p.name),
                       allocatable) for p in client_pods]  # fmt: skip
    notes += _missing("cluster pod", [p for p in server if p.cores is None], len(server))
    notes += _missing("client pod", [p for p in clients if p.cores is None], len(clients))
    measured = [p.cores for p in server if p.cores is not None]
    server_cores = sum(measured) if measured else None
    if not cluster_pods:
        notes.append("no pod of the cluster was found to measure")
    client_known = [p.cores for p in clients if p.cores is not None]
    resources = StepResources(
        source=reading.source[:512],
        window_start=reading.start,
        window_end=reading.end,
        server_cores=_round(server_cores),
        qps_per_core=_round(qps / server_cores) if qps and server_cores else None,
        cpu_ms_per_query=_round(_ms_per_query(server_cores, qps)),
        client_cores=_round(sum(client_known)) if client_known else None,
        components=_components(server, qps),
        pods=_busiest(server + clients),
        nodes=_nodes(server + clients, reading, allocatable),
        notes=notes,
    )
    resources.bottleneck = judge_bottleneck(resources, client_cpu, spec, leaders)
    return bound_resources(resources, limit)


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _ms_per_query(cores: float | None, qps: float | None) -> float | None:
    """Cores × 1000 ms per second ÷ queries per second: CPU milliseconds each query cost."""
    return cores * 1000 / qps if cores is not None and qps else None


def _utilization(
    cores: float | None,
    limit: float | None,
    node: str | None,
    allocatable: Mapping[str, float | None],
) -> float | None:
    """Percent of the CPU limit, or of the node's allocatable cores when unlimited."""
    capacity = limit if limit else allocatable.get(node) if node else None
    if cores is None or not capacity:
        return None
    return round(cores / capacity * 100, 1)


def _pod(
    facts: PodFacts, usage: PodUsage | None, allocatable: Mapping[str, float | None]
) -> PodResources:
    cores = usage.cpu_cores if usage is not None else None
    return PodResources(
        name=facts.name,
        component=facts.component,
        node=facts.node,
        cores=_round(cores),
        cpu_request=facts.cpu_request,
        cpu_limit=facts.cpu_limit,
        utilization_percent=_utilization(cores, facts.cpu_limit, facts.node, allocatable),
        memory_bytes=usage.memory_bytes if usage is not None else None,
        rx_bytes_per_sec=_round(usage.rx_bytes_per_sec, 1) if usage is not None else None,
        tx_bytes_per_sec=_round(usage.tx_bytes_per_sec, 1) if usage is not None else None,
    )


def _client(
    facts: PodFacts,
    usage: PodUsage | None,
    cpu: ClientCpu | None,
    allocatable: Mapping[str, float | None],
) -> PodResources:
    """A client pod: the source's series when it has one, else the runner's own measure
    (against the CPUs the runner found it may use: its cgroup quota or affinity)."""
    pod = _pod(facts, usage, allocatable)
    if cpu is None:
        return pod
    if pod.cores is None:
        pod.cores = _round(cpu.used)
    if facts.cpu_limit is None and cpu.available > 0 and pod.cores is not None:
        # What the runner may use (its cgroup quota or CPU affinity) is the client's true
        # capacity; the node's allocatable would overstate it.
        pod.utilization_percent = round(pod.cores / cpu.available * 100, 1)
    return pod


def _missing(what: str, pods: Sequence[PodResources], total: int) -> list[str]:
    if not pods:
        return []
    names = ", ".join(p.name for p in pods[:NOTE_NAMES])
    more = f" and {len(pods) - NOTE_NAMES} more" if len(pods) > NOTE_NAMES else ""
    return [f"no CPU series for {len(pods)} of {total} {what}s: {names}{more}"]


def _components(pods: Sequence[PodResources], qps: float | None) -> list[ComponentUsage]:
    by: dict[str, list[float]] = {}
    for pod in pods:
        if pod.cores is not None:
            by.setdefault(pod.component, []).append(pod.cores)
    return [
        ComponentUsage(
            component=name,
            pods=len(cores),
            cores=round(sum(cores), 4),
            cpu_ms_per_query=_round(_ms_per_query(sum(cores), qps)),
        )
        for name, cores in sorted(by.items(), key=lambda item: component_rank(item[0]))
    ]


def _busiest(pods: Sequence[PodResources]) -> list[PodResources]:
    """Busiest first (the bound keeps the head); unmeasured last, then by name."""
    return sorted(pods, key=lambda p: (p.cores is None, -(p.cores or 0.0), p.name))


def _nodes(
    pods: Sequence[PodResources], reading: UsageReading, allocatable: Mapping[str, float | None]
) -> list[NodeResources]:
    """The nodes the listed pods ran on: the source's node total, else their pods' sum."""
    totals = {n.name: n.cpu_cores for n in reading.nodes}
    on: dict[str, list[PodResources]] = {}
    for pod in pods:
        if pod.node:
            on.setdefault(pod.node, []).append(pod)
    nodes = []
    for name, its in on.items():
        known = [p.cores for p in its if p.cores is not None]
        total = totals.get(name)
        nodes.append(
            NodeResources(
                name=name,
                cores=_round(total if total is not None else sum(known) if known else None),
                allocatable_cores=allocatable.get(name),
                pods=sorted(p.name for p in its),
                from_pods=total is None and bool(known),
            )
        )
    return sorted(nodes, key=lambda n: (n.cores is None, -(n.cores or 0.0), n.name))
