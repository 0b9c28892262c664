"""BenchmarkRun/BenchmarkSchedule spec and status models: the one source of field text.

Why over 500 lines: this is the schema of both CRDs, every field with the description
`kubectl explain` shows, and `crdgen` writes `crds/` from it. Split by resource, the pieces
both resources share (the run spec a schedule's template is, conditions, step results)
would need a third home, and a field's text would no longer be found in one place.
"""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    StringConstraints,
    ValidationError,
    WithJsonSchema,
    field_validator,
)

from tidb_bench_operator.domain.api.base import CamelModel, TolerantCamelModel
from tidb_bench_operator.domain.api.guard import Disturbance, Guard, GuardLook
from tidb_bench_operator.domain.api.results import Latency, StepResult
from tidb_bench_operator.domain.api.verdicts import (
    NOISY_CV_PERCENT,
    RunComparison,
    StepChangePoint,
    TrialSummary,
)
from tidb_bench_operator.domain.fingerprint import Fingerprint
from tidb_bench_operator.domain.preflight import CheckStatus
from tidb_bench_operator.domain.sysbench import Workload, validate_extra_args
from tidb_bench_operator.errors import SpecError

GROUP = "tidbbench.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"


class RunPhase(StrEnum):
    """Where a BenchmarkRun is in its life (docs/design.md, "A run's life")."""

    PENDING = "Pending"
    PREFLIGHT = "Preflight"
    PREPARING = "Preparing"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"


#: The one set of phases a run never leaves: the reconciler, the schedules, the handlers and
#: the metrics all ask this set whether a run is finished.
TERMINAL_PHASES: frozenset[RunPhase] = frozenset(
    {RunPhase.SUCCEEDED, RunPhase.FAILED, RunPhase.CANCELLED}
)
#: Phases in which a run is measuring (or about to) and so holds its cluster.
ACTIVE_PHASES: frozenset[RunPhase] = frozenset(
    {RunPhase.PREFLIGHT, RunPhase.PREPARING, RunPhase.RUNNING}
)


def is_terminal(phase: object) -> bool:
    """True for a finished run's phase (a plain string from a dict or a RunPhase)."""
    return phase in TERMINAL_PHASES


class StepPhase(StrEnum):
    """Where one step of the sweep is."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


def _require_terminal(phase: RunPhase) -> RunPhase:
    if phase not in TERMINAL_PHASES:
        raise ValueError(f"{phase.value} is not a final phase")
    return phase


#: A finished run's phase as a schema: HistoryEntry.outcome accepts only these.
TerminalPhase = Annotated[
    RunPhase,
    AfterValidator(_require_terminal),
    WithJsonSchema({"type": "string", "enum": [p.value for p in RunPhase if p in TERMINAL_PHASES]}),
]

PreflightCheckName = Literal[
    "bench-node-isolation",
    "topology-spread",
    "store-state",
    "leader-size-balance",
    "region-size-balance",
    "pending-operators",
    "table-leader-distribution",
]
PREFLIGHT_CHECK_NAMES: tuple[str, ...] = get_args(PreflightCheckName)

_CRON_MACROS = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)
_CRON_FIELD = re.compile(r"^[0-9A-Za-z*?,/-]+$")

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
SECRET_KEY = r"^[-._a-zA-Z0-9]+$"
QUANTITY = (
    r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)"
    r"(([KMGTPE]i)|[numkMGTPE]|[eE][+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+))?$"
)


def _quantity_text(value: object) -> object:
    """Accept `cpu: 2` as well as `cpu: "2"`, as Kubernetes does for quantities."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return value


Quantity = Annotated[
    str,
    BeforeValidator(_quantity_text),
    StringConstraints(pattern=QUANTITY),
    WithJsonSchema({"x-kubernetes-int-or-string": True, "pattern": QUANTITY}),
]


class _Spec(CamelModel):
    """Base of user-written models: camelCase on the wire, unknown fields are errors."""


class _Status(TolerantCamelModel):
    """Base of controller-written models: camelCase, tolerant of fields from other versions."""


# --------------------------------------------------------------------------- run spec


class ClusterRef(_Spec):
    """A TiDB cluster managed by TiDB Operator: a v1 TidbCluster or a v2 Cluster."""

    name: str = Field(
        min_length=1,
        max_length=63,
        pattern=DNS_LABEL,
        description="TidbCluster or Cluster name. TidbCluster (TiDB Operator v1): TiDB at "
        "`<name>-tidb:4000`, PD at `http://<name>-pd:2379`, pods "
        "`app.kubernetes.io/instance=<name>`. Cluster (v2): TiDB at `<tidbgroup>-tidb:<port>`, "
        "PD at the Cluster's `status.pd`, pods `pingcap.com/cluster=<name>`.",
    )
    namespace: str | None = Field(
        default=None,
        min_length=1,
        max_length=63,
        pattern=DNS_LABEL,
        description="Namespace of the cluster; defaults to the BenchmarkRun's namespace.",
    )
    kind: Literal["TidbCluster", "Cluster"] | None = Field(
        default=None,
        description="TidbCluster (TiDB Operator v1, pingcap.com) or Cluster (v2, "
        "core.pingcap.com). Unset: whichever of the two exists under `name`; the run fails "
        "saying so when both or neither do.",
    )
    tidb_group: str | None = Field(
        default=None,
        min_length=1,
        max_length=63,
        pattern=DNS_LABEL,
        description="Cluster (v2) only: the TiDBGroup whose Service `<group>-tidb` the clients "
        "use. Unset: the cluster's only TiDBGroup, or the first by name when it has several "
        "(status.endpoint says which).",
    )


class Target(_Spec):
    """Explicit endpoints, for TiDB not run by TiDB Operator or to override derived ones."""

    host: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        description="TiDB (MySQL protocol) host; overrides `<cluster>-tidb` when both are given.",
    )
    port: int = Field(default=4000, ge=1, le=65535, description="TiDB (MySQL protocol) port.")
    pd_url: str | None = Field(
        default=None,
        alias="pdURL",
        pattern=r"^https?://\S+$",
        description="PD base URL, e.g. `http://basic-pd.tidb-cluster:2379`; overrides the one "
        "derived from `cluster`. PD-based preflight checks need a PD address from one of the two.",
    )


class SecretRef(_Spec):
    """A Secret in the BenchmarkRun's namespace."""

    name: str = Field(
        min_length=1, max_length=253, pattern=DNS_SUBDOMAIN, description="Secret name."
    )


class Credentials(_Spec):
    """Where the database user and password come from; never a plain password in the spec."""

    secret_ref: SecretRef = Field(
        description="Secret holding the user and password; benchmark pods read it through "
        "environment variables, so the password never appears in Job arguments or status."
    )
    user_key: str = Field(
        default="user",
        max_length=253,
        pattern=SECRET_KEY,
        description="Key in the Secret whose value is the database user.",
    )
    password_key: str = Field(
        default="password",
        max_length=253,
        pattern=SECRET_KEY,
        description="Key in the Secret whose value is the database password.",
    )


class TlsSide(_Spec):
    """TLS for one kind of connection: whether it is on, and the client certificate's Secret."""

    enabled: bool | None = Field(
        default=None,
        description="Use TLS with a client certificate. Unset: as the cluster object says "
        "(off for a run with only `target`).",
    )
    secret_ref: SecretRef | None = Field(
        default=None,
        description="Secret in the run's namespace with `ca.crt`, `tls.crt` and `tls.key` "
        "(TiDB Operator's layout). Unset: the client Secret TiDB Operator names for the "
        "cluster; required with `enabled: true` and no `cluster`.",
    )


class Tls(_Spec):
    """TLS to a secured cluster: PD's API (mutual TLS) and TiDB's MySQL protocol."""

    cluster: TlsSide = Field(
        default_factory=TlsSide,
        description="TLS between components (`tlsCluster`): PD over HTTPS with the client "
        "certificate, for the HTTP API and pd-ctl. Default Secret: "
        "`<cluster>-cluster-client-secret`.",
    )
    mysql: TlsSide = Field(
        default_factory=TlsSide,
        description="TLS for MySQL clients (v1 `spec.tidb.tlsClient`, v2 the TiDBGroup's "
        "`security.tls.mysql`): sysbench and the controller's SQL connect over TLS with the "
        "client certificate, the server verified against `ca.crt`. Default Secret: "
        "`<cluster>-tidb-client-secret` (v1), `<tidbgroup>-tidb-client-secret` (v2).",
    )


class Dataset(_Spec):
    """The sysbench tables the workloads run against."""

    tables: int = Field(
        default=1, ge=1, le=1024, description="Number of tables (sysbench --tables)."
    )
    table_size: int = Field(
        default=10000,
        ge=1,
        le=1_000_000_000,
        description="Rows per table (sysbench --table-size).",
    )
    prepare: Literal["IfMissing", "Always", "Never"] = Field(
        default="IfMissing",
        description="IfMissing: run `sysbench prepare` unless all tables exist with the expected "
        "row count; Always: drop and recreate them; Never: use the tables as they are.",
    )
    cleanup: bool = Field(
        default=False,
        description="Run `sysbench cleanup` (drop the tables) after the last step.",
    )
    auto_inc: bool = Field(
        default=True,
        description="sysbench --auto-inc: AUTO_INCREMENT primary keys; TiDB Cloud's published "
        "runs use false to avoid the auto-increment hotspot.",
    )
    analyze: bool = Field(
        default=True,
        description="After prepare (or reuse), ANALYZE TABLE every table, so the optimizer "
        "measures with fresh statistics, as TiDB's sysbench procedure does.",
    )
    warm_up: bool = Field(
        default=True,
        description="After prepare (or reuse), read every table through its secondary index "
        "(SELECT COUNT(pad) FROM sbtestN USE INDEX (k_N)), so the first step does not measure "
        "a cold cache.",
    )


class Slo(_Spec):
    """The latency objective used to pick the recommended step."""

    latency_ms: float = Field(
        gt=0,
        description="Bound, in milliseconds, on the `percentile` latency of a step; the "
        "recommended step is the highest-QPS one within it (TiDB Cloud uses p95 < 105 ms).",
    )


class Toleration(_Spec):
    """A Kubernetes toleration for the benchmark pods."""

    key: str | None = Field(
        default=None, description="Taint key to tolerate; empty with Exists tolerates every taint."
    )
    operator: Literal["Exists", "Equal"] = Field(
        default="Equal", description="Exists matches any value; Equal matches `value`."
    )
    value: str | None = Field(default=None, description="Taint value matched by Equal.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        default=None, description="Taint effect to tolerate; empty tolerates all effects."
    )
    toleration_seconds: int | None = Field(
        default=None,
        ge=0,
        description="For NoExecute: how long the pod stays bound after the taint appears.",
    )


class Placement(_Spec):
    """Where benchmark pods may run: never beside the cluster's PD, TiKV or TiDB pods."""

    node_selector: dict[str, str] = Field(
        default_factory=dict,
        description="Node labels the benchmark pods require, e.g. "
        '`tidbbench.io/bench-node: "true"` to pin them to dedicated nodes. Empty: any node '
        "that anti-affinity and taints allow.",
    )
    tolerations: list[Toleration] = Field(
        default_factory=list,
        max_length=32,
        description="Tolerations for the benchmark pods, e.g. for a tainted benchmark node.",
    )
    anti_affinity: Literal["Required", "Preferred", "Off"] = Field(
        default="Required",
        description="Pod anti-affinity against the cluster's pd/tikv/tidb pods on "
        "`kubernetes.io/hostname`: a client sharing a node with the database corrupts the "
        "result. Preferred lets the scheduler break it; Off is for clusters without pods.",
    )


class Preflight(_Spec):
    """Checks that the cluster is in a fair state to be measured, before any step runs."""

    policy: Literal["Enforce", "Warn", "Off"] = Field(
        default="Enforce",
        description="Enforce: a failing check fails the run; Warn: record it and run anyway; "
        "Off: skip all checks.",
    )
    timeout_seconds: int = Field(
        default=300,
        ge=0,
        le=86400,
        description="How long to keep re-evaluating failing checks (e.g. waiting for pending "
        "PD operators to drain) before the policy applies.",
    )
    max_leader_size_skew: float = Field(
        default=0.5,
        ge=0,
        description="Largest allowed (max-min)/mean of leader_size over Up TiKV stores.",
    )
    max_region_size_skew: float = Field(
        default=0.5,
        ge=0,
        description="Largest allowed (max-min)/mean of region_size over Up TiKV stores.",
    )
    pd_transport: Literal["Auto", "HTTP", "Exec"] = Field(
        default="Auto",
        description="How to reach PD: HTTP to its API, Exec of pd-ctl in a PD pod, or Auto "
        "(HTTP, falling back to Exec when PD is not reachable from the controller).",
    )
    skip: list[PreflightCheckName] = Field(
        default_factory=list,
        description="Checks not to run, by name; they are reported as Warn with the reason.",
    )


class Resources(_Spec):
    """Compute resources of each benchmark client pod."""

    requests: dict[str, Quantity] = Field(
        default_factory=lambda: {"cpu": "1", "memory": "512Mi"},
        description="Resource requests, e.g. cpu and memory.",
    )
    limits: dict[str, Quantity] = Field(
        default_factory=dict,
        description="Resource limits. No CPU limit by default: CFS throttling would make the "
        "client the bottleneck.",
    )


def _default_workloads() -> list[Workload]:
    """The default sweep workload: point selects, the usual first number people ask for."""
    return ["oltp_point_select"]


class BenchmarkRunSpec(_Spec):
    """What to benchmark and how: one sysbench thread sweep per workload."""

    cluster: ClusterRef | None = Field(
        default=None,
        description="TidbCluster to benchmark; endpoints and pod selectors derive from it.",
    )
    target: Target | None = Field(
        default=None,
        description="Explicit endpoints; required (with `host`) when `cluster` is not given.",
    )
    credentials: Credentials = Field(description="Database credentials, from a Secret.")
    tls: Tls = Field(
        default_factory=Tls,
        description="TLS to PD and TiDB; unset, as the cluster object turns it on (docs/tls.md).",
    )
    database: str = Field(
        default="sbtest",
        max_length=64,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="Database holding the sysbench tables (sysbench --mysql-db).",
    )
    dataset: Dataset = Field(default_factory=Dataset, description="Tables to prepare and use.")
    workloads: list[Workload] = Field(
        default_factory=_default_workloads,
        min_length=1,
        max_length=11,
        description="sysbench 1.0.20 Lua tests to run, in order; each gets the full sweep.",
    )
    threads: list[Annotated[int, Field(ge=1, le=4096)]] = Field(
        default_factory=lambda: [64, 128, 256],
        min_length=1,
        max_length=32,
        description="The sweep: sysbench --threads per client, one step each, run in the order "
        "given (the summary compares steps by thread count, not by order).",
    )
    clients: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Client pods per step, started together on distinct nodes; their results "
        "are combined (QPS summed).",
    )
    duration_seconds: int = Field(
        default=60, ge=1, le=86400, description="Measured time per step (sysbench --time)."
    )
    warmup_seconds: int = Field(
        default=0,
        ge=0,
        le=3600,
        description="sysbench 1.0.20 has no --warmup-time: each step first runs the same "
        "workload and threads for this long and discards that output.",
    )
    report_interval_seconds: int = Field(
        default=10,
        ge=1,
        le=3600,
        description="sysbench --report-interval; interval lines are kept for diagnosis only.",
    )
    repeats: int = Field(
        default=1,
        ge=1,
        le=20,
        description="Trials per step. Several are measured in whole-sweep rounds (every step "
        "once, then every step again), so drift during the run reaches every step alike; the "
        "step shows the median, a 95% interval and the coefficient of variation. Schedules "
        "need 3 or more for a regression verdict with a p-value.",
    )
    noisy_cv_percent: float = Field(
        default=NOISY_CV_PERCENT,
        gt=0,
        le=100,
        description="A step whose trials' coefficient of variation exceeds this (percent) is "
        "marked noisy.",
    )
    percentile: int = Field(
        default=95,
        ge=1,
        le=100,
        description="Latency percentile reported and compared with the SLO "
        "(sysbench --percentile).",
    )
    rand_type: Literal["uniform", "gaussian", "special", "pareto"] | None = Field(
        default=None,
        description="sysbench --rand-type; unset keeps sysbench 1.0.20's default (special).",
    )
    ignore_errors: str | None = Field(
        default=None,
        pattern=r"^(all|[0-9]+(,[0-9]+)*)$",
        description="sysbench --mysql-ignore-errors, e.g. `1062,2013,8028,9007` or `all`; unset "
        "keeps sysbench's default (1213,1020,1205).",
    )
    extra_args: list[Annotated[str, Field(pattern=r"^--[A-Za-z][A-Za-z0-9_-]*(=.*)?$")]] = Field(
        default_factory=list,
        max_length=32,
        description="Further sysbench options as `--name=value`, from an allow-list of workload "
        "and RNG options (e.g. --range-size, --point-selects, --rand-seed, --db-ps-mode).",
    )
    slo: Slo | None = Field(
        default=None,
        description="Latency objective; without it the recommended step is the peak step.",
    )
    placement: Placement = Field(
        default_factory=Placement, description="Where the benchmark pods may run."
    )
    preflight: Preflight = Field(
        default_factory=Preflight, description="Cluster fairness checks before the sweep."
    )
    image: str | None = Field(
        default=None,
        min_length=1,
        description="Benchmark pod image (sysbench and this package); defaults to the "
        "controller's configured runner image.",
    )
    resources: Resources = Field(
        default_factory=Resources, description="Compute resources of each client pod."
    )
    guard: Guard = Field(
        default_factory=Guard,
        description="Watch every measured step for changes that falsify it (pods moving, "
        "restarting or landing on the benchmark node, the operator upgrading or scaling, PD "
        "stores, operators and leaders, sysbench stalls and errors) and what to do then.",
    )
    step_retries: int = Field(
        default=2,
        ge=0,
        le=10,
        description="How many times a step runs again when a client pod is lost (deleted, "
        "evicted, OOM-killed, its node gone) or loses the database, before the run fails; "
        "steps already measured are kept.",
    )
    ttl_seconds_after_finished: int | None = Field(
        default=None,
        ge=0,
        description="Delete the run's Jobs and pods this long after it finishes; the "
        "BenchmarkRun and its results are kept. Unset: keep them.",
    )

    def validate_semantics(self, prefix: str = "") -> None:
        """Raise SpecError for what the schema cannot say; `prefix` is prepended to field paths."""
        if self.cluster is None and (self.target is None or self.target.host is None):
            raise SpecError(
                f"{prefix}cluster",
                "neither cluster nor target.host is set, so there is nothing to benchmark",
                "set cluster.name to a TidbCluster, or target.host to a TiDB address",
            )
        if (
            self.cluster is not None
            and self.cluster.tidb_group
            and self.cluster.kind == "TidbCluster"
        ):
            raise SpecError(
                f"{prefix}cluster.tidbGroup",
                "only a TiDB Operator v2 Cluster has TiDB groups",
                "remove tidbGroup, or set kind: Cluster",
            )
        if self.credentials.user_key == self.credentials.password_key:
            raise SpecError(
                f"{prefix}credentials.passwordKey",
                f"same Secret key as userKey ({self.credentials.user_key!r})",
                "the user and the password must come from different keys",
            )
        _no_duplicates(f"{prefix}workloads", self.workloads)
        _no_duplicates(f"{prefix}threads", self.threads)
        if "bulk_insert" in self.workloads and len(self.workloads) > 1:
            raise SpecError(
                f"{prefix}workloads",
                "bulk_insert cannot share a run with other workloads",
                "bulk_insert.lua creates sbtest tables with only (id, k) columns, which the "
                "oltp_* tests cannot use; benchmark it in its own BenchmarkRun",
            )
        if self.dataset.prepare == "Never" and self.dataset.cleanup:
            raise SpecError(
                f"{prefix}dataset.cleanup",
                "cleanup would drop tables this run did not create (prepare is Never)",
                "set cleanup: false, or prepare: IfMissing",
            )
        if self.report_interval_seconds > self.duration_seconds:
            raise SpecError(
                f"{prefix}reportIntervalSeconds",
                f"{self.report_interval_seconds}s is longer than durationSeconds "
                f"({self.duration_seconds}s), so sysbench would print no interval line",
                "lower reportIntervalSeconds or raise durationSeconds",
            )
        # The one allow-list (domain/sysbench.py), which the runner applies again: checking
        # here fails a bad value like `--range-size=1; rm -rf /` before any Job exists.
        validate_extra_args(self.extra_args, field=f"{prefix}extraArgs")
        for i, toleration in enumerate(self.placement.tolerations):
            _check_toleration(f"{prefix}placement.tolerations[{i}]", toleration)


def _no_duplicates(field: str, values: list[Any]) -> None:
    """Raise SpecError naming the first repeated item of a list."""
    seen: set[Any] = set()
    for i, value in enumerate(values):
        if value in seen:
            raise SpecError(
                f"{field}[{i}]", f"{value!r} is listed twice", "each value runs once; remove it"
            )
        seen.add(value)


def _check_toleration(field: str, toleration: Toleration) -> None:
    """Raise SpecError for tolerations the API server would reject on the pod."""
    if toleration.operator == "Exists" and toleration.value:
        raise SpecError(
            f"{field}.value", "must be empty when operator is Exists", "remove value or use Equal"
        )
    if toleration.operator == "Equal" and not toleration.key:
        raise SpecError(
            f"{field}.key", "is required when operator is Equal", "set key, or use Exists"
        )
    if toleration.toleration_seconds is not None and toleration.effect != "NoExecute":
        raise SpecError(
            f"{field}.tolerationSeconds",
            "only applies to the NoExecute effect",
            "set effect: NoExecute or remove tolerationSeconds",
        )


# --------------------------------------------------------------------------- run status


class Condition(_Status):
    """A Kubernetes-style condition."""

    type: str = Field(description="Condition type, e.g. Ready, PreflightPassed, Complete.")
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str = Field(default="", description="CamelCase reason for the last transition.")
    message: str = Field(default="", description="Human-readable detail of the last transition.")
    last_transition_time: datetime | None = Field(
        default=None, description="When the status last changed."
    )


class PreflightCheck(_Status):
    """One preflight check's verdict."""

    name: str = Field(description="Check name: " + ", ".join(PREFLIGHT_CHECK_NAMES) + ".")
    status: CheckStatus = Field(description="Pass, Warn or Fail.")
    message: str = Field(default="", description="What was measured and what to do about it.")
    stores: list[int] = Field(
        default_factory=list, description="TiKV store ids the verdict is about, if any."
    )


class PreflightStatus(_Status):
    """The latest preflight evaluation."""

    checks: list[PreflightCheck] = Field(default_factory=list, description="Check verdicts.")
    last_evaluated: datetime | None = Field(
        default=None, description="When the checks were last evaluated."
    )
    attempts: int = Field(default=0, ge=0, description="How many evaluations have run so far.")


def _result_text(name: str) -> str | None:
    """The description of a StepResult field, so step status and results say the same."""
    return StepResult.model_fields[name].description


class Trial(_Status):
    """One measurement of a step; with spec.repeats > 1 a step has several."""

    round: int = Field(ge=0, description="Sweep round the trial was measured in, from 0.")
    result: StepResult = Field(description="The trial's numbers (clients combined).")
    valid: bool | None = Field(default=None, description="Whether the trial can be trusted.")
    client_saturated: bool | None = Field(
        default=None, description="True when the clients, not the database, were the bottleneck."
    )
    finished_at: datetime | None = Field(default=None, description="When the trial ended.")
    notes: list[str] = Field(default_factory=list, description="How the trial was measured.")
    disturbances: list[Disturbance] = Field(
        default_factory=list,
        description="What the guard saw change while the trial ran; any makes it invalid.",
    )


class StepStatus(_Status):
    """One step of the sweep: a (workload, threads) point, its progress and numbers."""

    index: int = Field(ge=0, description="Position of the step in the sweep, from 0.")
    workload: Workload = Field(description=_result_text("workload"))
    threads: int = Field(ge=1, description=_result_text("threads"))
    phase: StepPhase = Field(
        default=StepPhase.PENDING, description="Pending, Running, Succeeded or Failed."
    )
    clients: int | None = Field(default=None, description=_result_text("clients"))
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
    events: int | None = Field(default=None, description=_result_text("events"))
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
    qps_trials: TrialSummary | None = Field(
        default=None,
        description="The valid trials' QPS together: n, median, mean, the 95% interval of "
        "the mean (Student t), the coefficient of variation, and noisy when it exceeds "
        "spec.noisyCvPercent.",
    )
    attempt: int = Field(
        default=0, ge=0, description="Retries so far (spec.stepRetries bounds them); 0: first run."
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
        default=0, ge=0, description="Times the step was measured again after a disturbance."
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


class SweepNumbers(_Status):
    """A sweep's verdict: the numbers every summary has (run, workload, analysis)."""

    peak_qps: float | None = Field(default=None, description="Highest QPS of any valid step.")
    peak_threads: int | None = Field(default=None, description="Threads of the peak-QPS step.")
    peak_latency_ms: float | None = Field(
        default=None,
        description="Latency at spec.percentile (p95 by default) of the peak-QPS step, in ms.",
    )
    recommended_threads: int | None = Field(
        default=None,
        description="Threads of the highest-QPS step whose percentile latency meets the SLO "
        "(the peak step when no SLO is set); null when no step meets it.",
    )
    recommended_qps: float | None = Field(default=None, description="QPS of the recommended step.")
    saturation_threads: int | None = Field(
        default=None,
        description="Threads of the knee: the first step after which QPS stops rising while "
        "latency keeps growing; null when the sweep did not reach it.",
    )
    headline: str | None = Field(default=None, description="One-sentence verdict for people.")


class WorkloadSummary(SweepNumbers):
    """The sweep's verdict for one workload."""

    workload: Workload = Field(description="sysbench test the numbers are for.")


class SweepSummary(SweepNumbers):
    """The sweep's verdict; the top-level numbers are for the first workload in spec.workloads."""

    workload: Workload | None = Field(
        default=None, description="sysbench test the top-level numbers are for."
    )
    per_workload: list[WorkloadSummary] = Field(
        default_factory=list, description="The same verdict for every workload."
    )


class Environment(_Status):
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
    replicas: dict[str, int] = Field(
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


class ResolvedEndpoint(_Status):
    """The TiDB and PD addresses a run uses and the cluster object they came from."""

    cluster_kind: str | None = Field(
        default=None,
        description="TidbCluster (TiDB Operator v1) or Cluster (v2); unset with spec.target alone.",
    )
    host: str = Field(description="TiDB (MySQL protocol) host the clients connect to.")
    port: int = Field(description="TiDB (MySQL protocol) port.")
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


class BenchmarkRunStatus(_Status):
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
        default=None, description="metadata.generation the status describes."
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
        default=None, description="Index in `steps` of the step running now."
    )
    steps: list[StepStatus] = Field(
        default_factory=list, description="One entry per (workload, threads), in run order."
    )
    summary: SweepSummary | None = Field(default=None, description="The sweep's verdict.")
    environment: Environment | None = Field(default=None, description="What was measured.")
    invalid_steps: int | None = Field(
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
        default=None, description="Sweep round (trial) running now, from 0 (spec.repeats)."
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


# --------------------------------------------------------------------------- schedule


class Regression(_Spec):
    """When a scheduled run counts as a regression."""

    baseline_runs: int = Field(
        default=5,
        ge=1,
        le=50,
        description="How many previous successful runs form the baseline (their median peak QPS).",
    )
    max_qps_drop_percent: float = Field(
        default=10,
        ge=0,
        le=100,
        description="The minimum effect: a step regressed when its QPS is significantly "
        "lower than the baseline's (Mann-Whitney U, corrected over the steps) AND by at least "
        "this much; a gain as large is Improved.",
    )
    trend_runs: int = Field(
        default=30,
        ge=0,
        le=200,
        description="Successful runs kept in status.history for the change-point search over "
        "the schedule's trend (0: none beyond baselineRuns).",
    )


class BenchmarkScheduleSpec(_Spec):
    """Runs a BenchmarkRun on a cron schedule and watches its peak QPS for regressions."""

    schedule: str = Field(
        min_length=1,
        description="Cron expression (5 fields, e.g. `0 2 * * *`) or a macro such as @daily.",
    )
    time_zone: str | None = Field(
        default=None,
        description="IANA time zone of the schedule, e.g. Asia/Shanghai; default UTC.",
    )
    suspend: bool = Field(default=False, description="Create no new runs while true.")
    concurrency_policy: Literal["Forbid", "Allow", "Replace"] = Field(
        default="Forbid",
        description="When a run is still active at the next time: Forbid skips the new run, "
        "Allow starts it too (it waits for the cluster), Replace cancels the active one.",
    )
    starting_deadline_seconds: int | None = Field(
        default=None,
        ge=0,
        description="A run not started within this many seconds of its time is skipped.",
    )
    successful_runs_history_limit: int = Field(
        default=3, ge=0, le=100, description="Succeeded BenchmarkRuns to keep."
    )
    failed_runs_history_limit: int = Field(
        default=1, ge=0, le=100, description="Failed or cancelled BenchmarkRuns to keep."
    )
    template: BenchmarkRunSpec = Field(description="Spec of each BenchmarkRun created.")
    regression: Regression = Field(
        default_factory=Regression, description="How a regression is detected."
    )

    def validate_semantics(self) -> None:
        """Raise SpecError for a bad cron expression, time zone or template."""
        _check_cron("schedule", self.schedule)
        if self.time_zone is not None:
            try:
                zoneinfo.ZoneInfo(self.time_zone)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                raise SpecError(
                    "timeZone",
                    f"unknown time zone {self.time_zone!r}",
                    "use an IANA name such as UTC or Asia/Shanghai",
                ) from None
        self.template.validate_semantics(prefix="template.")


def _check_cron(field: str, expression: str) -> None:
    """Raise SpecError unless `expression` looks like a 5-field cron line or a macro."""
    text = expression.strip()
    if text in _CRON_MACROS:
        return
    parts = text.split()
    if len(parts) != 5 or not all(_CRON_FIELD.match(part) for part in parts):
        raise SpecError(
            field,
            f"{expression!r} is not a cron expression",
            "use 5 fields (minute hour day-of-month month day-of-week), e.g. '0 2 * * *', "
            "or one of " + ", ".join(sorted(_CRON_MACROS)),
        )


class HistoryStep(_Status):
    """One step's numbers kept in a schedule's history, for later regression baselines."""

    workload: str = Field(description="sysbench test name.")
    threads: int = Field(ge=1, description="Threads per client.")
    qps: float = Field(description="The step's QPS (all clients combined).")
    latency_ms: float | None = Field(
        default=None, description="The step's percentile latency, in milliseconds."
    )
    trials: list[float] = Field(
        default_factory=list, description="QPS of each valid trial (spec.repeats)."
    )


class HistoryEntry(_Status):
    """One finished run of a schedule."""

    name: str = Field(description="BenchmarkRun name.")
    outcome: TerminalPhase = Field(description="The run's final phase.")
    peak_qps: float | None = Field(default=None, description="The run's peak QPS.")
    baseline_qps: float | None = Field(
        default=None, description="Baseline peak QPS the run was compared with."
    )
    regressed: bool | None = Field(
        default=None, description="Whether the run's peak QPS fell below the regression bound."
    )
    started_at: datetime | None = Field(default=None, description="When the run started.")
    finished_at: datetime | None = Field(default=None, description="When the run finished.")
    steps: list[HistoryStep] = Field(
        default_factory=list,
        description="QPS per valid step, so regression baselines outlive deleted runs.",
    )
    verdict: str | None = Field(
        default=None,
        description="Regressed, Improved, NoChange or Inconclusive against the baseline.",
    )
    invalid_trials: int | None = Field(
        default=None,
        description="Trials (or steps measured once) left out of comparisons as invalid.",
    )
    fingerprint: Fingerprint | None = Field(
        default=None,
        description="The run's environment fingerprint; kept for the newest baselineRuns "
        "successful runs, so a verdict can say what changed.",
    )


class BenchmarkScheduleStatus(_Status):
    """What the schedule has done; written only by the controller."""

    last_schedule_time: datetime | None = Field(
        default=None, description="When a run was last created."
    )
    last_successful_run: str | None = Field(
        default=None, description="Name of the latest Succeeded run."
    )
    last_peak_qps: float | None = Field(
        default=None, description="Peak QPS of the latest Succeeded run."
    )
    active: list[str] = Field(default_factory=list, description="Runs not yet finished.")
    history: list[HistoryEntry] = Field(
        default_factory=list,
        description="Finished runs, oldest first; kept beyond the run history limits so the "
        "regression baseline survives run deletion.",
    )
    regressed: bool = Field(
        default=False, description="Whether the latest Succeeded run is a regression."
    )
    verdict: str | None = Field(
        default=None, description="The latest Succeeded run's verdict against its baseline."
    )
    change_points: list[StepChangePoint] = Field(
        default_factory=list,
        description="Where a step's QPS moved to another level over the history (E-Divisive "
        "means), oldest first.",
    )
    conditions: list[Condition] = Field(default_factory=list, description="Latest observations.")
    observed_generation: int | None = Field(
        default=None, description="metadata.generation the status describes."
    )
    message: str | None = Field(default=None, description="Latest notable event, in one sentence.")


# --------------------------------------------------------------------------- resources


# The resources as a whole; apiVersion, kind and metadata are ignored (extra="ignore").


class BenchmarkRun(_Status):
    """A sysbench thread sweep against a TiDB cluster, with its results in status."""

    spec: BenchmarkRunSpec = Field(description="What to benchmark and how.")
    status: BenchmarkRunStatus | None = Field(
        default=None, description="What the controller observed and measured."
    )


class BenchmarkSchedule(_Status):
    """Creates BenchmarkRuns on a cron schedule and flags peak-QPS regressions."""

    spec: BenchmarkScheduleSpec = Field(description="When to run what, and what is a regression.")
    status: BenchmarkScheduleStatus | None = Field(
        default=None, description="What the schedule has done."
    )


def parse_run_spec(data: Mapping[str, Any]) -> BenchmarkRunSpec:
    """Validate a BenchmarkRun spec fully, raising SpecError with the field path on any problem."""
    try:
        spec = BenchmarkRunSpec.model_validate(data)
    except ValidationError as exc:
        raise _spec_error(exc) from None
    spec.validate_semantics()
    return spec


def parse_schedule_spec(data: Mapping[str, Any]) -> BenchmarkScheduleSpec:
    """Validate a BenchmarkSchedule spec fully, raising SpecError with the field path."""
    try:
        spec = BenchmarkScheduleSpec.model_validate(data)
    except ValidationError as exc:
        raise _spec_error(exc) from None
    spec.validate_semantics()
    return spec


def field_path(loc: tuple[int | str, ...]) -> str:
    """`("threads", 1)` -> `threads[1]`: a pydantic error location as a spec field path."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else part)
    return path


def _spec_error(exc: ValidationError) -> SpecError:
    """The first pydantic error as a SpecError (the others usually follow from the same typo)."""
    error = exc.errors()[0]
    more = exc.error_count() - 1
    hint = f"{more} more problem(s) after fixing this one" if more else ""
    return SpecError(field_path(error["loc"]), error["msg"], hint)
