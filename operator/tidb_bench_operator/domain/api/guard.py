"""The guard's wire models: `spec.guard`, a step's `disturbances`, and the look it compares with.

The guard (domain/guard.py judges, reconcile/guard.py observes) watches every measured step
for changes that make its numbers doubtful — the cluster's pods moving, restarting or
landing on the benchmark node, the operator upgrading or scaling the cluster, PD's stores,
operators and leaders moving, sysbench stalling or failing queries. What it saw is a
`Disturbance` on the step (or trial), and such a step is `valid: false`. docs/guard.md
says what is watched and why the bounds are what they are.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import Field

from tidb_bench_operator.domain.api.base import CamelModel, TolerantCamelModel
from tidb_bench_operator.domain.api.common import MAX_COUNT, StatusInt

GuardPolicy = Literal["Flag", "Retry", "Abort", "Off"]
DisturbanceSource = Literal["Kubernetes", "PD", "sysbench"]

#: Disturbances kept per step (or trial): more are counted in the last one's message.
MAX_DISTURBANCES = 20


class Guard(CamelModel):
    """What the guard watches while a step runs, its bounds, and what a disturbance does."""

    policy: GuardPolicy = Field(
        default="Flag",
        description="Flag: record the disturbance, mark the step invalid and go on; Retry: "
        "also measure the step again once the preflight checks pass again (up to retries "
        "times, the disturbed measurement kept as an invalid trial); Abort: fail the run "
        "naming the disturbance; Off: do not watch.",
    )
    retries: int = Field(
        default=2,
        ge=0,
        le=10,
        description="Under Retry, how many times a disturbed step is measured again; after "
        "that it stays invalid and the run goes on.",
    )
    pd_interval_seconds: int = Field(
        default=10,
        ge=1,
        le=600,
        description="How often PD is polled while a step runs (stores, operators, leaders).",
    )
    max_pending_operators: int = Field(
        default=3,
        ge=0,
        le=MAX_COUNT,
        description="More pending PD operators than this during a step is a disturbance.",
    )
    max_leader_move_percent: float = Field(
        default=10.0,
        ge=0,
        le=100,
        description="Leaders that moved between stores since the step started, in percent of "
        "all leaders; more is a disturbance.",
    )
    stall_fraction: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="An interval of a client's sysbench series whose QPS is below this "
        "fraction of the client's median QPS in that step is a stall (0 turns it off).",
    )
    max_error_percent: float = Field(
        default=1.0,
        ge=0,
        description="An interval whose errors/s exceed this percent of its transactions/s "
        "is a disturbance (sysbench counts the errors spec.ignoreErrors hides).",
    )
    max_reconnects_per_sec: float = Field(
        default=0.0,
        ge=0,
        description="An interval with more reconnects/s than this is a disturbance (a "
        "reconnect means the server dropped a client's connection).",
    )


class Disturbance(TolerantCamelModel):
    """One change seen while a step ran that makes its numbers doubtful."""

    at: datetime = Field(description="When it was seen (for sysbench: the interval's time).")
    source: DisturbanceSource = Field(description="Kubernetes, PD or sysbench.")
    what: str = Field(
        description="What happened: PodOnBenchNode, PodCreated, PodDeleted, PodRecreated, "
        "PodMoved, PodRestarted, ClientRestarted, ClusterPhase, ClusterSpecChanged, "
        "ClusterProgressing, StoreState, PendingOperators, LeadersMoved, PDLeaderChanged, "
        "Stall, Errors, Reconnects, Unjudged (evidence that could not be read: a client's "
        "log, the cluster at every look)."
    )
    object: str = Field(description="The object's name: a pod, a store, the cluster, a client.")
    message: str = Field(default="", description="What was seen, with the numbers.")

    def key(self) -> tuple[str, str, str]:
        """A disturbance is recorded once per step: same source, what and object."""
        return (self.source, self.what, self.object)

    def text(self) -> str:
        """`PodOnBenchNode basic-tikv-3: pod basic-tikv-3 (tikv) runs on bench node node1`."""
        return f"{self.what} {self.object}: {self.message}"


class GuardLook(TolerantCamelModel):
    """What the guard saw when the step started, to compare each later look with.

    Kept in status so that a restarted controller compares with the same start.
    """

    step: str = Field(description="The step, round and attempt this look belongs to.")
    at: datetime = Field(description="When it was taken.")
    pods: dict[str, str] = Field(
        default_factory=dict,
        description="The cluster's pd/tikv/tidb pods: name → 'uid node restarts component'.",
    )
    bench_nodes: list[str] = Field(
        default_factory=list, description="Nodes a benchmark client may run on."
    )
    phases: dict[str, str] = Field(
        default_factory=dict, description="TidbCluster status phase per component (v1)."
    )
    spec_digest: str | None = Field(
        default=None, description="A digest of the cluster object's spec."
    )
    unsettled: list[str] = Field(
        default_factory=list, description="v2 groups in a rollout or scale, and Progressing."
    )
    stores: dict[str, str] = Field(
        default_factory=dict, description="PD store id → state name (empty: PD not read)."
    )
    leaders: dict[str, StatusInt] = Field(
        default_factory=dict, description="PD store id → leader count."
    )
    pd_leader: str | None = Field(default=None, description="PD's leader member name.")
    pd_read: bool = Field(default=False, description="True once PD answered for this step.")
    cluster_read: bool = Field(
        default=False,
        description="True once the cluster's pods were read for this step (its baseline).",
    )
    cluster_error: str | None = Field(
        default=None, description="Why the last look could not read the cluster."
    )
    pd_polled_at: datetime | None = Field(default=None, description="When PD was last polled.")
