"""The bottleneck of a step, named with its evidence (docs/resources.md#the-verdict).

In this order: the clients (a client pod at `saturatedPercent` of its CPU, or the runner
found sysbench using all it may), then one server pod at `saturatedPercent` of its limit (or
of its node's allocatable cores when unlimited), then a hot store (one TiKV using
`hotStoreRatio` times the median TiKV's cores, cross-checked with PD's leader counts when
known), else nothing saturated: the limit is elsewhere — the conclusion of
docs/field-story.md, drawn automatically.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from tidb_bench_operator.domain.api.metrics_spec import MetricsSpec
from tidb_bench_operator.domain.api.runner_message import ClientCpu
from tidb_bench_operator.domain.api.step_resources import Bottleneck, PodResources, StepResources
from tidb_bench_operator.domain.resources.facts import CLIENT

#: Below this, a TiKV's cores are its background work (heartbeats, ticks), and one idle TiKV
#: at three times another's hundredth of a core is noise, not a hot store.
HOT_STORE_MIN_CORES = 0.25
ELSEWHERE = "the limit is elsewhere — client path, network, or the software"


def judge_bottleneck(
    r: StepResources,
    client_cpu: Mapping[str, ClientCpu],
    spec: MetricsSpec,
    leaders: Mapping[str, int] | None = None,
) -> Bottleneck:
    """What limits the step, from its resources (server and clients) and the runner's CPU."""
    if r.unavailable is not None:
        return Bottleneck(kind="unknown", message=f"server metrics unavailable: {r.unavailable}")
    clients = [p for p in r.pods if p.component == CLIENT]
    server = [p for p in r.pods if p.component != CLIENT]
    verdict = _client(clients, client_cpu, spec, r)
    if verdict is None:
        verdict = _component(server, spec, r)
    if verdict is None:
        verdict = _hot_store(server, spec, leaders)
    if verdict is None:
        verdict = _none(server, r)
    return Bottleneck(kind=verdict.kind, subject=verdict.subject, message=verdict.message[:1024])


def _capacity(pod: PodResources, r: StepResources, cpu: ClientCpu | None) -> str:
    """What the pod's utilization was measured against, in words."""
    if pod.cpu_limit:
        return f"its {pod.cpu_limit:g}-core limit"
    if cpu is not None and cpu.available > 0:
        return f"the {cpu.available:g} CPUs its runner may use"
    node = next((n for n in r.nodes if n.name == pod.node), None)
    if node is not None and node.allocatable_cores:
        return f"{node.name}'s {node.allocatable_cores:g} allocatable cores"
    return "its capacity"


def pod_text(pod: PodResources, r: StepResources, cpu: ClientCpu | None = None) -> str:
    """`tikv `basic-tikv-0` on node2 at 94% of its 8-core limit`."""
    where = f" on {pod.node}" if pod.node else ""
    at = (
        f" at {pod.utilization_percent:.0f}% of {_capacity(pod, r, cpu)}"
        if pod.utilization_percent is not None
        else ""
    )
    return f"{pod.component} `{pod.name}`{where}{at}"


def _client(
    clients: Sequence[PodResources],
    client_cpu: Mapping[str, ClientCpu],
    spec: MetricsSpec,
    r: StepResources,
) -> Bottleneck | None:
    full = [p for p in clients if (p.utilization_percent or 0) >= spec.saturated_percent]
    said = [p for p in clients if (c := client_cpu.get(p.name)) is not None and c.saturated]
    busiest = max(full or said, key=lambda p: p.utilization_percent or 0, default=None)
    if busiest is None:
        # The runner's word alone, for a client whose pod was not listed.
        name = next((n for n, c in sorted(client_cpu.items()) if c.saturated), None)
        if name is None:
            return None
        alone = client_cpu[name]
        return Bottleneck(
            kind="client",
            subject="clients",
            message=f"the clients: `{name}` used {alone.used:.2f} of the {alone.available:g} "
            "CPUs its runner may use (the runner found it saturated)",
        )
    cpu = client_cpu.get(busiest.name)
    text = pod_text(busiest, r, cpu)
    if cpu is not None and cpu.saturated and busiest not in full:
        text += " (the runner found it saturated)"
    others = len(set(p.name for p in full + said)) - 1
    more = f", and {others} other client{'s' if others > 1 else ''}" if others > 0 else ""
    return Bottleneck(kind="client", subject="clients", message=f"the clients: {text}{more}")


def _component(
    server: Sequence[PodResources], spec: MetricsSpec, r: StepResources
) -> Bottleneck | None:
    full = [p for p in server if (p.utilization_percent or 0) >= spec.saturated_percent]
    if not full:
        return None
    pod = max(full, key=lambda p: p.utilization_percent or 0)
    return Bottleneck(kind="component", subject=pod.name, message=pod_text(pod, r))


def store_leaders(pod: str, leaders: Mapping[str, int]) -> int | None:
    """PD's leader count of the store of `pod`: keyed by the pod's name or its store address
    (`basic-tikv-0.basic-tikv-peer.ns.svc:20160`, as v1 and v2 name them)."""
    for key, count in leaders.items():
        if key == pod or key.startswith((f"{pod}.", f"{pod}:")):
            return count
    return None


def _hot_store(
    server: Sequence[PodResources], spec: MetricsSpec, leaders: Mapping[str, int] | None
) -> Bottleneck | None:
    tikv = [p for p in server if p.component == "tikv" and p.cores is not None]
    if len(tikv) < 2:
        return None
    cores = {p.name: p.cores or 0.0 for p in tikv}
    hot = max(tikv, key=lambda p: cores[p.name])
    median = statistics.median(cores.values())
    if cores[hot.name] < HOT_STORE_MIN_CORES or cores[hot.name] < spec.hot_store_ratio * median:
        return None
    times = f"{cores[hot.name] / median:.1f}× " if median > 0 else ""
    where = f" on {hot.node}" if hot.node else ""
    message = (
        f"hot store: tikv `{hot.name}`{where} uses {cores[hot.name]:.2f} cores, {times}the "
        f"median TiKV's {median:.2f}"
    )
    if leaders:
        message += "; " + _leaders_say(hot.name, [p.name for p in tikv], leaders)
    return Bottleneck(kind="hot-store", subject=hot.name, message=message)


def _leaders_say(hot: str, pods: Sequence[str], leaders: Mapping[str, int]) -> str:
    """Whether PD's leader counts point at the same store."""
    counts = {p: n for p in pods if (n := store_leaders(p, leaders)) is not None}
    mine = counts.get(hot)
    if mine is None:
        return "PD's leader counts name no store of this pod"
    total = sum(counts.values())
    top = max(counts, key=lambda p: (counts[p], p == hot))
    if top == hot:
        return f"PD's leader counts agree: it leads {mine:,} of {total:,} regions, the most"
    return (
        f"PD's leader counts do not: it leads {mine:,} of {total:,} regions, `{top}` the most "
        f"({counts[top]:,})"
    )


def _none(server: Sequence[PodResources], r: StepResources) -> Bottleneck:
    if not any(p.cores is not None for p in server):
        return Bottleneck(
            kind="unknown",
            message="no CPU series for the cluster's pods: the bottleneck is not known",
        )
    rated = [p for p in server if p.utilization_percent is not None]
    if not rated:
        return Bottleneck(
            kind="none",
            message="no server resource saturated (no pod's utilization known: no CPU limit "
            f"or node allocatable): {ELSEWHERE}",
        )
    top = max(rated, key=lambda p: p.utilization_percent or 0)
    where = f" on {top.node}" if top.node else ""
    return Bottleneck(
        kind="none",
        message=f"no server resource saturated (highest {top.utilization_percent:.0f}%: "
        f"{top.component} `{top.name}`{where}): {ELSEWHERE}",
    )
