"""The BenchmarkRun spec: what a run's author writes, each field with its `kubectl explain` text.

Why over 500 lines: this is one resource's spec, every field with the description `kubectl
explain` shows and its cross-field checks; `crdgen` writes crds/ from it, so a field's text
is found in one place.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    Field,
)

from tidb_bench_operator.domain.api.capacity import CapacitySearch
from tidb_bench_operator.domain.api.common import (
    DNS_LABEL,
    DNS_SUBDOMAIN,
    MAX_SECONDS,
    SECRET_KEY,
    PdUrl,
    PreflightCheckName,
    Quantity,
    SpecModel,
)
from tidb_bench_operator.domain.api.guard import Guard
from tidb_bench_operator.domain.api.load_shape import (
    DEFAULT_THREADS,
    check_load_shape,
    no_duplicates,
)
from tidb_bench_operator.domain.api.metrics_spec import MetricsSpec
from tidb_bench_operator.domain.api.verdicts import (
    NOISY_CV_PERCENT,
)
from tidb_bench_operator.domain.api.workload import (
    CustomWorkload,
    WorkloadName,
    check_custom_workloads,
)
from tidb_bench_operator.domain.sysbench import LUA_WORKLOADS, validate_extra_args
from tidb_bench_operator.errors import SpecError

# --------------------------------------------------------------------------- run spec


class ClusterRef(SpecModel):
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


class Target(SpecModel):
    """Explicit endpoints, for TiDB not run by TiDB Operator or to override derived ones."""

    host: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        description="TiDB (MySQL protocol) host; overrides `<cluster>-tidb` when both are given.",
    )
    port: int = Field(default=4000, ge=1, le=65535, description="TiDB (MySQL protocol) port.")
    pd_url: PdUrl | None = Field(
        default=None,
        alias="pdURL",
        description="PD base URL, e.g. `http://basic-pd.tidb-cluster:2379`: scheme, host, "
        "optional port and path prefix (no userinfo, query or fragment; redirects are not "
        "followed); overrides the one derived from `cluster`. PD-based preflight checks need a "
        "PD address from one of the two.",
    )


class SecretRef(SpecModel):
    """A Secret in the BenchmarkRun's namespace."""

    name: str = Field(
        min_length=1, max_length=253, pattern=DNS_SUBDOMAIN, description="Secret name."
    )


class Credentials(SpecModel):
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


class TlsSide(SpecModel):
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


class Tls(SpecModel):
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


class Dataset(SpecModel):
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


class Slo(SpecModel):
    """The latency objective used to pick the recommended step."""

    latency_ms: float = Field(
        gt=0,
        description="Bound, in milliseconds, on the `percentile` latency of a step; the "
        "recommended step is the highest-QPS one within it (TiDB Cloud uses p95 < 105 ms).",
    )


class Toleration(SpecModel):
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
        le=MAX_SECONDS,
        description="For NoExecute: how long the pod stays bound after the taint appears.",
    )


class Placement(SpecModel):
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


class Preflight(SpecModel):
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


class Resources(SpecModel):
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


def _default_workloads() -> list[str]:
    """The default sweep workload: point selects, the usual first number people ask for."""
    return ["oltp_point_select"]


class BenchmarkRunSpec(SpecModel):
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
    workloads: list[WorkloadName] = Field(
        default_factory=_default_workloads,
        min_length=1,
        max_length=11,
        description="What to run, in order (at most 11); each gets the full sweep: "
        "sysbench 1.0.20's Lua tests (oltp_point_select, oltp_read_only, oltp_read_write, "
        "oltp_write_only, oltp_update_index, oltp_update_non_index, oltp_insert, oltp_delete, "
        "select_random_points, select_random_ranges, bulk_insert) or names of "
        "customWorkloads.",
    )
    custom_workloads: list[CustomWorkload] = Field(
        default_factory=list,
        max_length=8,
        description="Your own sysbench Lua workloads, each a script (and the files it "
        "requires) from a ConfigMap, named in spec.workloads; refused unless the controller "
        "allows them (TIDB_BENCH_ALLOW_CUSTOM_WORKLOADS, docs/trust.md). Their prepare and "
        "cleanup run when spec.dataset.prepare is not Never and when spec.dataset.cleanup is "
        "true (docs/workloads.md).",
    )
    threads: list[Annotated[int, Field(ge=1, le=4096)]] = Field(
        default_factory=lambda: list(DEFAULT_THREADS),
        min_length=1,
        max_length=32,
        description="The sweep: sysbench --threads per client, one step each, run in the order "
        "given (the summary compares steps by thread count, not by order). With `rates`, the "
        "one thread count that serves every rate. Leave it out with capacitySearch, which "
        "chooses the threads.",
    )
    rates: list[Annotated[int, Field(ge=1, le=10_000_000)]] = Field(
        default_factory=list,
        max_length=32,
        description="A rate sweep instead of a thread sweep: target events (transactions) per "
        "second, one step each, in the order given, run with sysbench --rate (open loop: "
        "latency includes time queued) and split evenly over the clients. `threads` must then "
        "list one value. Each step records the rate reached and sysbench's queue; a step short "
        "of its target by more than rateTolerancePercent is marked and never meets the SLO.",
    )
    preset: Literal["PingCAP"] | None = Field(
        default=None,
        description="A published procedure's settings for what the run leaves unset. `PingCAP`: "
        "their TiDB v8.5.0 sysbench report's: pauseSeconds 60, randType uniform, and write "
        "workloads bounded by events (writeEvents 6,000,000 / 8,000,000 / 10,000,000 at 100 / "
        "200 / 400 threads); read workloads run durationSeconds (600 in the report).",
    )
    pause_seconds: int | None = Field(
        default=None,
        ge=0,
        le=3600,
        description="Idle seconds before every step but the first (the `sleep 60` between "
        "levels of PingCAP's procedure), so the previous level's flushes and compactions "
        "settle. Unset: 0, or 60 under preset PingCAP.",
    )
    write_events: list[Annotated[int, Field(ge=1, le=10_000_000_000)]] | None = Field(
        default=None,
        max_length=32,
        description="Write workloads (oltp_write_only, oltp_read_write, oltp_insert, oltp_delete, "
        "oltp_update_*, bulk_insert) end after writeEvents[i] events at threads[i] (one per "
        "thread count, in the same order) rather than after durationSeconds, which stays their "
        "cap (sysbench --events with --time). Read workloads keep durationSeconds.",
    )
    rate_tolerance_percent: float = Field(
        default=5.0,
        ge=0,
        le=50,
        description="How far below its target (percent) a rate step's achieved rate may fall "
        "and still count as reached.",
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
    capacity_search: CapacitySearch | None = Field(
        default=None,
        description="Instead of the `threads` sweep, search each workload's capacity at "
        "`slo` (required): the most threads per client whose percentile latency meets it, "
        "to `precision` threads, by bisection between minThreads and maxThreads; status."
        "summary.capacity has it and the maximum throughput seen (docs/capacity.md).",
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
    metrics: MetricsSpec = Field(
        default_factory=MetricsSpec,
        description="Server CPU and memory per step and the bottleneck (docs/resources.md).",
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
        le=MAX_SECONDS,
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
        no_duplicates(f"{prefix}workloads", self.workloads)
        check_custom_workloads(self, prefix)
        no_duplicates(f"{prefix}threads", self.threads)
        check_load_shape(self, prefix)
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

    def custom_workload(self, name: str) -> CustomWorkload | None:
        """The customWorkloads entry of that name; None for a built-in test."""
        return next((w for w in self.custom_workloads if w.name == name), None)

    def builtin_workloads(self) -> list[str]:
        """The built-in tests of spec.workloads, in order (they share the sbtest tables)."""
        return [w for w in self.workloads if w in LUA_WORKLOADS]


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
