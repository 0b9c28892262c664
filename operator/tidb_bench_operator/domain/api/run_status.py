"""The BenchmarkRun status: what the controller writes back (steps, summary, environment)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import (
    Field,
    field_validator,
)

from tidb_bench_operator.domain.api.capacity import CapacityResult
from tidb_bench_operator.domain.api.common import (
    MAX_STATUS_INT,
    PREFLIGHT_CHECK_NAMES,
    RunPhase,
    StatusInt,
    StatusModel,
    StepPhase,
)
from tidb_bench_operator.domain.api.guard import Disturbance, GuardLook
from tidb_bench_operator.domain.api.results import Latency, RateOutcome, StepResult
from tidb_bench_operator.domain.api.step_resources import StepResources
from tidb_bench_operator.domain.api.trial import (
    MORE_NOTES,
    STATUS_DISTURBANCES,
    STATUS_NOTES,
    Trial,
    cut,
)
from tidb_bench_operator.domain.api.verdicts import (
    RunComparison,
    TrialSummary,
)
from tidb_bench_operator.domain.api.workload import WorkloadName
from tidb_bench_operator.domain.fingerprint import Fingerprint
from tidb_bench_operator.domain.preflight import CheckStatus

# --------------------------------------------------------------------------- run status


class Condition(StatusModel):
    """A Kubernetes-style condition."""

    type: str = Field(description="Condition type, e.g. Ready, PreflightPassed, Complete.")
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str = Field(default="", description="CamelCase reason for the last transition.")
    message: str = Field(default="", description="Human-readable detail of the last transition.")
    last_transition_time: datetime | None = Field(
        default=None, description="When the status last changed."
    )


class PreflightCheck(StatusModel):
    """One preflight check's verdict."""

    name: str = Field(description="Check name: " + ", ".join(PREFLIGHT_CHECK_NAMES) + ".")
    status: CheckStatus = Field(description="Pass, Warn or Fail.")
    message: str = Field(default="", description="What was measured and what to do about it.")
    stores: list[StatusInt] = Field(
        default_factory=list, description="TiKV store ids the verdict is about, if any."
    )


class PreflightStatus(StatusModel):
    """The latest preflight evaluation."""

    checks: list[PreflightCheck] = Field(default_factory=list, description="Check verdicts.")
    last_evaluated: datetime | None = Field(
        default=None, description="When the checks were last evaluated."
    )
    attempts: int = Field(
        le=MAX_STATUS_INT, default=0, ge=0, description="How many evaluations have run so far."
    )


def _result_text(name: str) -> str | None:
    """The description of a StepResult field, so step status and results say the same."""
    return StepResult.model_fields[name].description


class StepStatus(StatusModel):
    """One step of the sweep: a (workload, threads) point, its progress and numbers."""

    index: int = Field(
        le=MAX_STATUS_INT, ge=0, description="Position of the step in the sweep, from 0."
    )
    workload: WorkloadName = Field(description=_result_text("workload"))
    threads: int = Field(le=MAX_STATUS_INT, ge=1, description=_result_text("threads"))
    target_rate: int | None = Field(
        default=None,
        ge=1,
        le=MAX_STATUS_INT,
        description="A rate step's target events per second over all clients (spec.rates); "
        "unset in a thread sweep.",
    )
    rate: RateOutcome | None = Field(
        default=None,
        description="A rate step's outcome: the rate reached, whether within the tolerance, and "
        "sysbench's queue.",
    )
    phase: StepPhase = Field(
        default=StepPhase.PENDING, description="Pending, Running, Succeeded or Failed."
    )
    clients: int | None = Field(
        le=MAX_STATUS_INT, default=None, description=_result_text("clients")
    )
    tps: float | None = Field(default=None, description=_result_text("tps"))
    qps: float | None = Field(default=None, description=_result_text("qps"))
    read_qps: float | None = Field(default=None, description=_result_text("read_qps"))
    write_qps: float | None = Field(default=None, description=_result_text("write_qps"))
    other_qps: float | None = Field(default=None, description=_result_text("other_qps"))
    latency_ms: Latency | None = Field(default=None, description=_result_text("latency_ms"))
    errors_per_sec: float | None = Field(default=None, description=_result_text("errors_per_sec"))
    reconnects_per_sec: float | None = Field(
        default=None, description=_result_text("reconnects_per_sec")
    )
    events: int | None = Field(le=MAX_STATUS_INT, default=None, description=_result_text("events"))
    duration_seconds: float | None = Field(
        default=None, description=_result_text("duration_seconds")
    )
    sysbench_version: str | None = Field(default=None, description=_result_text("sysbench_version"))
    started_at: datetime | None = Field(default=None, description="When the step's pods started.")
    finished_at: datetime | None = Field(default=None, description="When the step ended.")
    valid: bool | None = Field(
        default=None,
        description="Whether the numbers can be trusted: every client started on time and "
        "the guard saw no disturbance; the notes and disturbances say why not.",
    )
    client_saturated: bool | None = Field(
        default=None,
        description="True when the client pods, not the database, were the bottleneck; null "
        "when not measured.",
    )
    notes: list[str] = Field(
        default_factory=list,
        description="How the numbers were obtained or why they are doubtful, e.g. how client "
        "percentiles were merged.",
    )
    job_names: list[str] = Field(default_factory=list, description="Jobs that ran this step.")
    trials: list[Trial] = Field(
        default_factory=list,
        description="Every trial, in the order measured. With several, the step's numbers are "
        "those of its median trial and qps is the median of the valid trials.",
    )
    trials_stored: int | None = Field(
        default=None,
        ge=0,
        le=MAX_STATUS_INT,
        description="How many trials the step has when status lists fewer (a run of more "
        "than MAX_STATUS_TRIALS trials): the results store has them all.",
    )
    qps_trials: TrialSummary | None = Field(
        default=None,
        description="The valid trials' QPS together: n, median, mean, the 95% interval of "
        "the mean (Student t), the coefficient of variation, and noisy when it exceeds "
        "spec.noisyCvPercent.",
    )
    attempt: int = Field(
        le=MAX_STATUS_INT,
        default=0,
        ge=0,
        description="Retries so far (spec.stepRetries bounds them); 0: first run.",
    )
    pod_names: list[str] = Field(
        default_factory=list,
        description="Client pods seen running this attempt; one that disappears is retried.",
    )
    disturbances: list[Disturbance] = Field(
        default_factory=list,
        description="What the guard saw change while the step ran (when, source, what, the "
        "object); any makes the step invalid. With trials, each trial has its own.",
    )
    guard_retries: int = Field(
        le=MAX_STATUS_INT,
        default=0,
        ge=0,
        description="Times the step was measured again after a disturbance.",
    )
    resources: StepResources | None = Field(
        default=None,
        description="Server CPU and memory per component, pod and node over the measured "
        "window, QPS per core and the bottleneck (docs/resources.md); with trials, the median "
        "trial's.",
    )
    guard_wait_since: datetime | None = Field(
        default=None,
        description="Under guard policy Retry: since when the step waits for the preflight "
        "checks to pass again before it is measured again.",
    )

    @field_validator("latency_ms", mode="before")
    @classmethod
    def _missing_value_is_null(cls, value: object) -> object:
        """A dump with exclude_none drops `value: null`; Latency requires the key."""
        if isinstance(value, dict) and "value" not in value:
            return {**value, "value": None}
        return value

    def bounded(self, keep_trials: int, keep_disturbances: int = STATUS_DISTURBANCES) -> StepStatus:
        """The step as status keeps it once measured (the bound: docs/how-a-run-goes.md).

        Every note, disturbance and trial is in the results store (document st<index>, and
        each trial's t<index>m<n>); status keeps the first and last notes, each cut at
        STATUS_NOTE_CHARS, a line saying where the rest are, `keep_disturbances`
        disturbances (one of each kind first), at most `keep_trials` compact trials (valid
        ones first; `trialsStored` counts them all when some are left out), and no Job or
        pod names.
        """
        notes = [n for n in self.notes if not n.startswith(MORE_NOTES)]
        if len(notes) > STATUS_NOTES or len(notes) < len(self.notes):
            head, tail = STATUS_NOTES // 2, STATUS_NOTES - STATUS_NOTES // 2
            more = f"{MORE_NOTES} in the run's results store (document st{self.index})"
            notes = [*notes[:head], more, *notes[head:][-tail:]]
        trials = [t.compact() for t in self.trials]
        stored = None
        if len(trials) > keep_trials:
            stored = len(trials)
            order = sorted(range(len(trials)), key=lambda i: (trials[i].valid is not True, i))
            trials = [trials[i] for i in sorted(order[:keep_trials])]
        # One of each kind first (a step flagged for a pod on the bench node shows that one).
        by_kind: dict[str, Disturbance] = {}
        for d in self.disturbances:
            by_kind.setdefault(d.what, d)
        first = list(by_kind.values())
        rest = [d for d in self.disturbances if d not in first]
        disturbances = [
            d.model_copy(update={"message": cut(d.message), "object": cut(d.object)})
            for d in sorted([*first, *rest][:keep_disturbances], key=self.disturbances.index)
        ]
        return self.model_copy(
            update={
                "notes": [cut(n) for n in notes],
                "disturbances": disturbances,
                "trials": trials,
                "trials_stored": stored,
                "job_names": [],
                "pod_names": [],
            }
        )

    def with_result(self, result: StepResult) -> StepStatus:
        """A copy carrying `result`'s numbers (the step's identity fields are kept)."""
        numbers = {
            name: getattr(result, name)
            for name in StepResult.model_fields
            if name not in ("workload", "threads")
        }
        return self.model_copy(update=numbers)

    def to_result(self) -> StepResult | None:
        """The fixed step result, or None while any number is missing."""
        data = self.model_dump(include=set(StepResult.model_fields))
        if any(value is None for value in data.values()):
            return None
        return StepResult.model_validate(data)


class SweepNumbers(StatusModel):
    """A sweep's verdict: the numbers every summary has (run, workload, analysis)."""

    peak_qps: float | None = Field(default=None, description="Highest QPS of any valid step.")
    peak_threads: int | None = Field(
        le=MAX_STATUS_INT, default=None, description="Threads of the peak-QPS step."
    )
    peak_latency_ms: float | None = Field(
        default=None,
        description="Latency at spec.percentile (p95 by default) of the peak-QPS step, in ms.",
    )
    recommended_threads: int | None = Field(
        le=MAX_STATUS_INT,
        default=None,
        description="Threads of the highest-QPS step whose percentile latency meets the SLO "
        "(the peak step when no SLO is set); null when no step meets it.",
    )
    recommended_qps: float | None = Field(default=None, description="QPS of the recommended step.")
    saturation_threads: int | None = Field(
        le=MAX_STATUS_INT,
        default=None,
        description="Threads of the knee: the first step after which QPS stops rising while "
        "latency keeps growing; null when the sweep did not reach it.",
    )
    recommended_rate: int | None = Field(
        le=MAX_STATUS_INT,
        default=None,
        description="A rate sweep's (spec.rates) highest target rate that was reached and whose "
        "percentile latency meets the SLO; null in a thread sweep or when none does.",
    )
    highest_reached_rate: int | None = Field(
        le=MAX_STATUS_INT,
        default=None,
        description="A rate sweep's highest target rate reached within rateTolerancePercent.",
    )
    headline: str | None = Field(default=None, description="One-sentence verdict for people.")


class WorkloadSummary(SweepNumbers):
    """The sweep's verdict for one workload."""

    workload: WorkloadName = Field(description="sysbench test the numbers are for.")


class SweepSummary(SweepNumbers):
    """The sweep's verdict; the top-level numbers are for the first workload in spec.workloads."""

    workload: WorkloadName | None = Field(
        default=None, description="sysbench test the top-level numbers are for."
    )
    per_workload: list[WorkloadSummary] = Field(
        default_factory=list, description="The same verdict for every workload."
    )
    capacity: list[CapacityResult] = Field(
        default_factory=list,
        description="With spec.capacitySearch: each workload's capacity at the SLO and the "
        "maximum throughput its search measured; the headline says it.",
    )


class Environment(StatusModel):
    """What was measured: versions, images, replicas and nodes."""

    tidb_version: str | None = Field(
        default=None, description="TiDB release version from tidb_version(), e.g. v8.1.0."
    )
    server_version: str | None = Field(
        default=None, description="SELECT VERSION() of the target server."
    )
    sysbench_version: str | None = Field(
        default=None, description="sysbench version the benchmark pods printed."
    )
    images: dict[str, str] = Field(
        default_factory=dict, description="Image per component (pd, tikv, tidb, tiflash, bench)."
    )
    replicas: dict[str, StatusInt] = Field(
        default_factory=dict, description="Replicas per component (pd, tikv, tidb, tiflash)."
    )
    nodes: list[str] = Field(
        default_factory=list, description="Nodes the benchmark client pods ran on."
    )
    versions: dict[str, str] = Field(
        default_factory=dict,
        description="Desired version per component (per `component/group` when a v2 cluster "
        "has several groups of one component).",
    )


class ResolvedEndpoint(StatusModel):
    """The TiDB and PD addresses a run uses and the cluster object they came from."""

    cluster_kind: str | None = Field(
        default=None,
        description="TidbCluster (TiDB Operator v1) or Cluster (v2); unset with spec.target alone.",
    )
    host: str = Field(description="TiDB (MySQL protocol) host the clients connect to.")
    port: int = Field(le=MAX_STATUS_INT, description="TiDB (MySQL protocol) port.")
    pd_url: str | None = Field(default=None, alias="pdURL", description="PD base URL, if any.")
    pd_tls_secret: str | None = Field(
        default=None,
        alias="pdTLSSecret",
        description="Secret holding PD's client certificate (names only, never contents).",
    )
    mysql_tls_secret: str | None = Field(
        default=None,
        alias="mysqlTLSSecret",
        description="Secret holding the MySQL client certificate the clients use.",
    )
    pd_tls_ca_secret: str | None = Field(
        default=None,
        alias="pdTLSCASecret",
        description="Secret holding PD's CA (ca.crt) when the Cluster names it apart from the "
        "client certificate (TiDB Operator v2.1 spec.security.tls.client.ca).",
    )
    tidb_group: str | None = Field(
        default=None,
        description="Cluster (v2): the TiDBGroup measured (an Event says why when it has several).",
    )


class AdmittedSpec(StatusModel):
    """The spec a run was admitted with: it governs the run from Preflight on (docs/trust.md)."""

    generation: int | None = Field(
        default=None,
        ge=0,
        le=MAX_STATUS_INT,
        description="metadata.generation of the spec admitted.",
    )
    spec: str = Field(
        default="{}",
        description="The spec as written when the run left Pending, as JSON text. Later edits "
        "of .spec are ignored (condition SpecChangeIgnored): the queue, the Jobs and the "
        "results use this.",
    )

    @classmethod
    def of(cls, spec: Mapping[str, Any], generation: int | None) -> AdmittedSpec:
        """The copy a run keeps of `spec` (as its body holds it) when it leaves Pending."""
        text = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return cls(generation=generation, spec=text)

    def data(self) -> dict[str, Any]:
        """The admitted spec as a mapping (empty when the text is not a JSON object)."""
        try:
            value = json.loads(self.spec)
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}


class BenchmarkRunStatus(StatusModel):
    """What the controller observed and measured; written only by the controller."""

    phase: RunPhase = Field(
        default=RunPhase.PENDING,
        description="Pending, Preflight, Preparing, Running, Succeeded, Failed or Cancelled.",
    )
    message: str | None = Field(
        default=None, description="Why the run is in this phase, in one sentence."
    )
    conditions: list[Condition] = Field(default_factory=list, description="Latest observations.")
    observed_generation: int | None = Field(
        le=MAX_STATUS_INT, default=None, description="metadata.generation the status describes."
    )
    waiting_for: str | None = Field(
        default=None,
        description="Name of another BenchmarkRun against the same cluster that must finish "
        "first; two sweeps at once would measure each other.",
    )
    started_at: datetime | None = Field(default=None, description="When the run left Pending.")
    finished_at: datetime | None = Field(default=None, description="When the run finished.")
    preflight: PreflightStatus | None = Field(default=None, description="Preflight verdicts.")
    current_step: int | None = Field(
        le=MAX_STATUS_INT, default=None, description="Index in `steps` of the step running now."
    )
    steps: list[StepStatus] = Field(
        default_factory=list,
        description="One entry per (workload, threads), in run order; with spec.capacitySearch "
        "the search appends each step once it has chosen its threads.",
    )
    summary: SweepSummary | None = Field(default=None, description="The sweep's verdict.")
    environment: Environment | None = Field(default=None, description="What was measured.")
    invalid_steps: int | None = Field(
        le=MAX_STATUS_INT,
        default=None,
        description="Steps measured but not valid (late clients or disturbances): their "
        "numbers are kept and never recommended.",
    )
    guard_look: GuardLook | None = Field(
        default=None,
        description="What the guard saw when the running step started (compared with later).",
    )
    results_config_map: str | None = Field(
        default=None,
        description="ConfigMap in the run's namespace holding the step results as JSON.",
    )
    current_round: int | None = Field(
        le=MAX_STATUS_INT,
        default=None,
        description="Sweep round (trial) running now, from 0 (spec.repeats).",
    )
    fingerprint: Fingerprint | None = Field(
        default=None,
        description="What the run measured against: images and digests, replicas, server "
        "variables and configuration, sysbench version, the spec.",
    )
    regression: RunComparison | None = Field(
        default=None,
        description="The schedule's verdict on this run against its baseline runs, per step.",
    )
    efficiency: RunComparison | None = Field(
        default=None,
        description="The schedule's efficiency verdict on this run: server CPU per query per "
        "step against its baseline runs (metric cpuMsPerQuery; a rise is a regression).",
    )
    fingerprint_diff: list[str] | None = Field(
        default=None,
        description="What differs from the baseline runs' fingerprints, one item per line "
        "(empty: nothing recorded differs).",
    )
    endpoint: ResolvedEndpoint | None = Field(
        default=None,
        description="Where the run measures, resolved once from spec.cluster and spec.target "
        "before preflight.",
    )
    admitted: AdmittedSpec | None = Field(
        default=None,
        description="The spec the run left Pending with; what it runs, whatever .spec says now.",
    )
