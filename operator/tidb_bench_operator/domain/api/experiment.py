"""The BenchmarkExperiment spec and status: change the cluster, measure, put it back (#27)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema

from tidb_bench_operator.domain.api.common import (
    DNS_LABEL,
    MAX_SECONDS,
    MAX_STATUS_INT,
    SpecModel,
    StatusModel,
)
from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec
from tidb_bench_operator.domain.api.run_status import AdmittedSpec, Condition
from tidb_bench_operator.errors import SpecError

#: Arbitrary JSON (a merge patch, a stashed value): the CRD keeps it as written. Only these
#: fields carry `x-kubernetes-preserve-unknown-fields`; everything else stays structural.
JsonObject = Annotated[
    dict[str, Any],
    WithJsonSchema({"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
]
JsonValue = Annotated[Any, WithJsonSchema({"x-kubernetes-preserve-unknown-fields": True})]

#: Why the cluster is being restored, which says what follows the restore.
RestoreReason = Literal["End", "Failure", "Deletion", "Unfair"]
#: The name the baseline's entry has in status.variants (so no variant may take it).
BASELINE = "baseline"


class ExperimentPhase(StrEnum):
    """Where a BenchmarkExperiment is (docs/experiments.md)."""

    PENDING = "Pending"
    STASHING = "Stashing"
    APPLYING = "Applying"
    SETTLING = "Settling"
    MEASURING = "Measuring"
    RESTORING = "Restoring"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"


EXPERIMENT_TERMINAL: frozenset[ExperimentPhase] = frozenset(
    {ExperimentPhase.SUCCEEDED, ExperimentPhase.FAILED, ExperimentPhase.CANCELLED}
)


class VariantPhase(StrEnum):
    """Where one variant (or the baseline) is."""

    PENDING = "Pending"
    APPLYING = "Applying"
    SETTLING = "Settling"
    MEASURING = "Measuring"
    SUCCEEDED = "Succeeded"
    SKIPPED = "Skipped"
    FAILED = "Failed"


class ExperimentCluster(SpecModel):
    """The one cluster the experiment may change; naming it is the second opt-in."""

    name: str = Field(
        min_length=1, max_length=63, pattern=DNS_LABEL, description="TidbCluster or Cluster name."
    )
    namespace: str = Field(
        min_length=1,
        max_length=63,
        pattern=DNS_LABEL,
        description="Namespace of the cluster (required: the experiment changes it).",
    )
    kind: Literal["TidbCluster", "Cluster"] = Field(
        description="TidbCluster (TiDB Operator v1): variants patch its spec; Cluster (v2): "
        "variants patch its groups (PDGroup, TiKVGroup, TiDBGroup, ...)."
    )


class GroupPatch(SpecModel):
    """A JSON merge patch for one v2 group's spec."""

    kind: str = Field(
        min_length=1,
        max_length=63,
        pattern=r"^[A-Z][A-Za-z]*Group$",
        description="Group kind, e.g. TiKVGroup.",
    )
    name: str = Field(min_length=1, max_length=63, pattern=DNS_LABEL, description="Group name.")
    patch: JsonObject = Field(
        description="JSON merge patch (RFC 7386) for the group's spec, e.g. {replicas: 4}."
    )


class Variant(SpecModel):
    """One change to measure: applied alone to the cluster as found."""

    name: str = Field(
        min_length=1,
        max_length=30,
        pattern=DNS_LABEL,
        description="Variant name; its BenchmarkRun is `<experiment>-<name>`.",
    )
    patch: JsonObject | None = Field(
        default=None,
        description="TidbCluster (v1) only: JSON merge patch (RFC 7386) for the TidbCluster's "
        "spec, e.g. {tikv: {replicas: 4}}.",
    )
    groups: list[GroupPatch] = Field(
        default_factory=list,
        max_length=32,
        description="Cluster (v2) only: a merge patch per group, by kind and name.",
    )


class Operation(SpecModel):
    """An operations window: one load held while this change is applied and settles."""

    name: str = Field(
        default="operation",
        min_length=1,
        max_length=30,
        pattern=DNS_LABEL,
        description="Name of the operation; its BenchmarkRun is `<experiment>-<name>`.",
    )
    patch: JsonObject | None = Field(
        default=None,
        description="TidbCluster (v1) only: JSON merge patch for the TidbCluster's spec, e.g. "
        "{tidb: {annotations: {restartedAt: '2026-12-03T10:00'}}} for a rolling restart.",
    )
    groups: list[GroupPatch] = Field(
        default_factory=list,
        max_length=32,
        description="Cluster (v2) only: a merge patch per group, by kind and name.",
    )
    after_seconds: int = Field(
        default=20,
        ge=1,
        le=MAX_SECONDS,
        description="Seconds of measured load before the change is sent: the level the dip "
        "and the recovery are measured against.",
    )
    tolerance_percent: float = Field(
        default=10.0,
        gt=0,
        le=100,
        description="QPS back within this percentage of the level before the change counts "
        "as recovered.",
    )


class BenchmarkExperimentSpec(SpecModel):
    """Measure a cluster as found and under each variant, then put the cluster back."""

    cluster: ExperimentCluster = Field(description="The cluster the experiment may change.")
    run: BenchmarkRunSpec = Field(
        description="The BenchmarkRun measured for the baseline and each variant; its cluster "
        "must be the experiment's (set or left unset)."
    )
    baseline: bool = Field(
        default=True, description="Measure the cluster as found before the first variant."
    )
    variants: list[Variant] = Field(
        default_factory=list,
        max_length=32,
        description="The changes to measure, in order (or `operation` instead).",
    )
    operation: Operation | None = Field(
        default=None,
        description="An operations window instead of variants: the run's one step holds its "
        "load while this change is applied; status.window gets the QPS dip, the recovery "
        "time, errors and reconnects, and the operator's events.",
    )
    settle_timeout_seconds: int = Field(
        default=1800,
        ge=1,
        le=MAX_SECONDS,
        description="How long the cluster may take to settle after a patch or the restore; "
        "longer fails the experiment (after restoring).",
    )
    on_unfair_variant: Literal["Skip", "Stop"] = Field(
        default="Skip",
        description="When a variant's run finds the placement unfair (a database pod on the "
        "benchmark node): Skip restores and goes on with the next variant, Stop restores "
        "and fails the experiment.",
    )
    dry_run: bool = Field(
        default=False,
        description="Only write the plan (patches and restore) into status; change nothing.",
    )

    def changes(self) -> list[Variant]:
        """What the experiment may patch: the variants, or the operation as one variant."""
        if self.operation is None:
            return list(self.variants)
        op = self.operation
        return [Variant(name=op.name, patch=op.patch, groups=op.groups)]

    def validate_semantics(self) -> None:
        """Raise SpecError for duplicate names, a patch of the wrong generation or cluster."""
        if (self.operation is None) == (not self.variants):
            raise SpecError(
                "variants",
                "give either variants or operation (exactly one)",
                "list the changes to measure as variants, or hold one load through a change "
                "with operation",
            )
        if self.operation is not None:
            self._validate_operation(self.operation)
        seen: set[str] = {BASELINE}
        for i, variant in enumerate(self.variants):
            where = f"variants[{i}]"
            if variant.name in seen:
                raise SpecError(
                    f"{where}.name",
                    f"{variant.name!r} is taken",
                    "give each variant its own name; `baseline` is the cluster as found",
                )
            seen.add(variant.name)
            if self.cluster.kind == "TidbCluster" and (variant.groups or variant.patch is None):
                raise SpecError(
                    where, "a TidbCluster variant needs `patch`", "write the change as patch"
                )
            if self.cluster.kind == "Cluster" and (variant.patch is not None or not variant.groups):
                raise SpecError(
                    where,
                    "a Cluster (v2) variant needs `groups`",
                    "write one entry per group: kind, name, patch",
                )
        ref = self.run.cluster
        if (
            ref is None
            or ref.name != self.cluster.name
            or ref.kind not in (None, self.cluster.kind)
        ):
            raise SpecError(
                "run.cluster",
                "must name the experiment's cluster",
                f"set run.cluster.name to {self.cluster.name}",
            )
        self.run.validate_semantics(prefix="run.")

    def _validate_operation(self, op: Operation) -> None:
        """One step, long enough to hold the load before the change; the right patch kind."""
        if self.cluster.kind == "TidbCluster" and (op.groups or op.patch is None):
            raise SpecError(
                "operation", "a TidbCluster operation needs `patch`", "write it as patch"
            )
        if self.cluster.kind == "Cluster" and (op.patch is not None or not op.groups):
            raise SpecError(
                "operation", "a Cluster (v2) operation needs `groups`", "one entry per group"
            )
        steps = len(self.run.rates) if self.run.rates else len(self.run.threads)
        if steps != 1 or len(self.run.workloads) != 1:
            raise SpecError(
                "run",
                f"an operations window holds one load, but the run has {steps} step(s) of "
                f"{len(self.run.workloads)} workload(s)",
                "give run one workload and one threads (or rates) entry",
            )
        if self.run.duration_seconds <= op.after_seconds:
            raise SpecError(
                "operation.afterSeconds",
                f"{op.after_seconds} s is not before the end of the run's "
                f"{self.run.duration_seconds} s",
                "make run.durationSeconds long enough to hold the load through the change "
                "and its recovery",
            )


class StashEntry(StatusModel):
    """One field's original value, written before the first patch is sent."""

    kind: str = Field(description="Kind of the object: TidbCluster or a v2 group kind.")
    name: str = Field(description="Name of the object.")
    pointer: str = Field(description="JSON pointer (RFC 6901) into the object's spec.")
    absent: bool = Field(
        default=False, description="The field did not exist; restoring removes it."
    )
    value: JsonValue = Field(default=None, description="The original value (unless absent).")


class VariantSummary(StatusModel):
    """What the variant's run measured."""

    peak_qps: float | None = Field(default=None, description="The run's peak QPS.")
    peak_threads: int | None = Field(
        default=None, le=MAX_STATUS_INT, description="Threads at the peak."
    )
    peak_latency_ms: float | None = Field(
        default=None, description="The peak step's latency at the run's percentile, in ms."
    )
    qps_per_core: float | None = Field(
        default=None, description="QPS per server core at the peak step (its resources)."
    )
    cpu_ms_per_query: float | None = Field(
        default=None, description="Server CPU milliseconds per query at the peak step."
    )
    bottleneck: str | None = Field(
        default=None, max_length=1024, description="The peak step's bottleneck verdict."
    )


class VariantStatus(StatusModel):
    """One variant (or the baseline) as measured."""

    name: str = Field(description="Variant name; `baseline` for the cluster as found.")
    phase: VariantPhase = Field(default=VariantPhase.PENDING, description="Where the variant is.")
    run: str | None = Field(default=None, description="Its BenchmarkRun's name.")
    patch_applied_at: datetime | None = Field(
        default=None, description="When the variant's patch was first sent to the cluster."
    )
    settled_at: datetime | None = Field(default=None, description="When the cluster settled.")
    settle_seconds: float | None = Field(
        default=None,
        description="From the patch sent to the cluster seen settled (to within one look, "
        "about 2 s).",
    )
    summary: VariantSummary | None = Field(default=None, description="The run's result.")
    skipped_reason: str | None = Field(
        default=None, description="Why the variant was not measured (pod and node named)."
    )


class Restored(StatusModel):
    """The restore of the stashed fields."""

    at: datetime | None = Field(default=None, description="When the restore patch was seen.")
    settled: bool = Field(default=False, description="Whether the cluster settled after it.")
    left_alone: list[str] = Field(
        default_factory=list,
        description="Stashed fields changed by someone else meanwhile, so not put back.",
    )


class WindowEvent(StatusModel):
    """One thing seen during an operations window: the change, a pod, a phase, the settle."""

    at: datetime = Field(description="When it was seen.")
    source: str = Field(description="Experiment, Kubernetes or PD.")
    what: str = Field(description="e.g. OperationApplied, PodRecreated, ClusterPhase, Settled.")
    object: str = Field(default="", description="The object it concerns.")
    message: str = Field(default="", description="In one sentence.")


class OperationWindow(StatusModel):
    """What one load did while the operation was applied (status.window)."""

    run: str | None = Field(default=None, description="The BenchmarkRun holding the load.")
    applied_at: datetime | None = Field(default=None, description="When the change was sent.")
    settled_at: datetime | None = Field(
        default=None, description="When the cluster was seen settled after it."
    )
    level_qps: float | None = Field(
        default=None, description="Median QPS of the measured intervals before the change."
    )
    worst_qps: float | None = Field(
        default=None, description="Lowest interval QPS from the change to the end."
    )
    worst_at: datetime | None = Field(default=None, description="When the lowest interval ended.")
    dip_percent: float | None = Field(
        default=None, description="How far below the level the worst interval was, in percent."
    )
    recovered_at: datetime | None = Field(
        default=None,
        description="Start of the first interval after the dip from which QPS stayed within "
        "the tolerance of the level to the end.",
    )
    recovery_seconds: float | None = Field(
        default=None, description="From the change to recovered (None: not recovered)."
    )
    errors: int | None = Field(
        default=None, description="Ignored errors counted from the change to the end."
    )
    reconnects: int | None = Field(
        default=None, description="Reconnects counted from the change to the end."
    )
    events: list[WindowEvent] = Field(
        default_factory=list,
        max_length=64,
        description="The timeline: the change, what the guard saw the operator do, the settle.",
    )
    message: str | None = Field(default=None, description="The window in one sentence.")


class BenchmarkExperimentStatus(StatusModel):
    """What the experiment has done; written only by the controller."""

    phase: ExperimentPhase = Field(default=ExperimentPhase.PENDING, description="Where it is.")
    stash: list[StashEntry] = Field(
        default_factory=list,
        description="The original values of exactly the fields the variants touch.",
    )
    current: int | None = Field(
        default=None,
        le=MAX_STATUS_INT,
        description="Index in status.variants of the one in progress.",
    )
    variant: str | None = Field(
        default=None, description="Name of the variant in progress (or `baseline`)."
    )
    variants: list[VariantStatus] = Field(
        default_factory=list, description="The baseline (if measured) and each variant, in order."
    )
    failure: str | None = Field(
        default=None, description="Why the experiment fails, kept while the cluster is restored."
    )
    restore_reason: RestoreReason | None = Field(
        default=None, description="Why the cluster is being restored (what follows it)."
    )
    restore_started_at: datetime | None = Field(
        default=None, description="When the current restore began."
    )
    applied: str | None = Field(
        default=None,
        description="The variant whose values the cluster may hold (set before its patch is "
        "sent, cleared once the restore has settled).",
    )
    restored: Restored | None = Field(default=None, description="The last restore.")
    plan: list[str] = Field(
        default_factory=list, description="The steps: each transition's patch and the restore."
    )
    window: OperationWindow | None = Field(
        default=None, description="The operations window (spec.operation), as measured."
    )
    admitted: AdmittedSpec | None = Field(
        default=None,
        description="The spec as it was when the stash was written: it governs the experiment "
        "from then on (later edits of .spec are ignored, so the restore matches the stash).",
    )
    conditions: list[Condition] = Field(default_factory=list, description="Latest observations.")
    message: str | None = Field(default=None, description="Latest notable event, in one sentence.")
