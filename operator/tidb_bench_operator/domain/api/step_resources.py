"""StepStatus.resources: the server's (and the clients') CPU and memory over a step's measured
window, what they give per query and per core, and the bottleneck named (docs/resources.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from tidb_bench_operator.domain.api.common import MAX_STATUS_INT, StatusModel

#: What limits the step: the clients, one server pod, one TiKV far busier than its peers, or
#: nothing saturated (the limit is elsewhere: the client path, the network or the software).
BottleneckKind = Literal["client", "component", "hot-store", "none", "unknown"]


class ComponentUsage(StatusModel):
    """One component (pd, tikv, tidb, tiflash, ...) over the window."""

    component: str = Field(max_length=63, description="Component name, e.g. tikv.")
    pods: int = Field(ge=0, le=MAX_STATUS_INT, description="Pods of the component measured.")
    cores: float = Field(description="CPU cores used, all its pods together (mean).")
    cpu_ms_per_query: float | None = Field(
        default=None, description="CPU milliseconds per query: cores × seconds / queries."
    )


class PodResources(StatusModel):
    """One pod of the cluster or of the benchmark over the window."""

    name: str = Field(max_length=253, description="Pod name.")
    component: str = Field(max_length=63, description="Component (or `client`).")
    node: str | None = Field(default=None, max_length=253, description="Node the pod ran on.")
    cores: float | None = Field(default=None, description="CPU cores used (mean).")
    cpu_request: float | None = Field(default=None, description="CPU request, in cores.")
    cpu_limit: float | None = Field(default=None, description="CPU limit, in cores.")
    utilization_percent: float | None = Field(
        default=None,
        description="Cores against the CPU limit, or the node's allocatable when unlimited.",
    )
    memory_bytes: float | None = Field(default=None, description="Peak working set, bytes.")
    rx_bytes_per_sec: float | None = Field(default=None, description="Network received, B/s.")
    tx_bytes_per_sec: float | None = Field(default=None, description="Network sent, B/s.")


class NodeResources(StatusModel):
    """One node: its CPU used and allocatable, with the cluster's and the benchmark's pods."""

    name: str = Field(max_length=253, description="Node name.")
    cores: float | None = Field(default=None, description="CPU cores used on the node (mean).")
    allocatable_cores: float | None = Field(default=None, description="Allocatable CPU cores.")
    pods: list[str] = Field(
        default_factory=list, description="The cluster's and the benchmark's pods on it."
    )
    from_pods: bool = Field(
        default=False,
        description="True when `cores` adds up the listed pods (the source had no node total).",
    )


class Bottleneck(StatusModel):
    """What limits the step, with its evidence in one sentence."""

    kind: BottleneckKind = Field(description="client, component, hot-store, none or unknown.")
    subject: str | None = Field(
        default=None, max_length=253, description="The pod (or `clients`) named, if any."
    )
    message: str = Field(max_length=1024, description="The verdict and its evidence.")


class StepResources(StatusModel):
    """Server resources over a step's measured window (warm-up excluded)."""

    source: str = Field(max_length=512, description="Where the numbers came from.")
    window_start: datetime | None = Field(default=None, description="Measured window start.")
    window_end: datetime | None = Field(default=None, description="Measured window end.")
    unavailable: str | None = Field(
        default=None,
        max_length=1024,
        description="Why server metrics are unavailable for this step (the step stays valid).",
    )
    server_cores: float | None = Field(
        default=None, description="Cores of the cluster's pods together (mean)."
    )
    qps_per_core: float | None = Field(default=None, description="QPS per server core.")
    cpu_ms_per_query: float | None = Field(
        default=None, description="Server CPU milliseconds per query, all components."
    )
    client_cores: float | None = Field(default=None, description="The clients' cores together.")
    components: list[ComponentUsage] = Field(default_factory=list, description="Per component.")
    pods: list[PodResources] = Field(default_factory=list, description="Per pod.")
    nodes: list[NodeResources] = Field(default_factory=list, description="Per node.")
    bottleneck: Bottleneck | None = Field(default=None, description="The bottleneck verdict.")
    notes: list[str] = Field(default_factory=list, description="What was missing or estimated.")
