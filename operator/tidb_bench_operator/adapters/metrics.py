"""Prometheus metrics adapter: what the reconcilers wrote into run and schedule status, as series.

The numbers come from the custom resources' status, never from the reconcilers' memory, so
they are the same numbers `kubectl get benchmarkruns` shows, and a restarted controller
serves them again as soon as its watch lists the objects. Series of a deleted run or
schedule are removed. The registry is our own (not prometheus_client's global one), so the
exposition holds only these metrics and tests can make as many as they like.

Counters count what this process saw happen: a run is counted when it is seen to enter a
final phase, and once only; a run that finished before the process started is not counted
(Prometheus' increase() treats the restart as a counter reset).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from tidb_bench_operator.domain.api.common import is_terminal
from tidb_bench_operator.domain.api.schedule import BenchmarkScheduleSpec
from tidb_bench_operator.domain.manifests import LABEL_SCHEDULE, owner_name
from tidb_bench_operator.domain.schedule import period_seconds
from tidb_bench_operator.errors import TidbBenchError

STEP_LABELS = ("namespace", "run", "schedule", "cluster", "workload", "threads")
RUN_LABELS = ("namespace", "run", "schedule", "cluster")
SCHEDULE_LABELS = ("namespace", "schedule")

Labels = tuple[str, ...]


def _merged_status(body: Mapping[str, Any], patch: Mapping[str, Any] | None) -> dict[str, Any]:
    """The status after a merge patch (top-level keys; None removes), as the API server would."""
    status = dict(body.get("status") or {})
    for key, value in (patch or {}).items():
        if value is None:
            status.pop(key, None)
        else:
            status[key] = value
    return status


def cluster_label(spec: Mapping[str, Any]) -> str:
    """What the `cluster` label says: the TidbCluster's name, else the target's host:port."""
    cluster = spec.get("cluster") or {}
    target = spec.get("target") or {}
    if target.get("host"):
        return f"{target['host']}:{target.get('port', 4000)}"
    return str(cluster.get("name") or "")


def _timestamp(text: object) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class Metrics:
    """The controller's metrics, in their own registry; feed it bodies, serve it over HTTP."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self.step_qps = Gauge(
            "tidb_bench_step_qps",
            "Queries per second of one step (all clients combined), from BenchmarkRun status.",
            STEP_LABELS,
            registry=r,
        )
        self.step_qps_interval = Gauge(
            "tidb_bench_step_qps_interval",
            "Ends (label `bound`: low, high) of the 95% confidence interval of a step's mean "
            "QPS over its trials (spec.repeats > 1).",
            (*STEP_LABELS, "bound"),
            registry=r,
        )
        self.step_tps = Gauge(
            "tidb_bench_step_tps", "Transactions per second of one step.", STEP_LABELS, registry=r
        )
        self.step_latency = Gauge(
            "tidb_bench_step_latency_seconds",
            "Latency of one step at spec.percentile (label `percentile`), in seconds.",
            (*STEP_LABELS, "percentile"),
            registry=r,
        )
        self.step_errors = Gauge(
            "tidb_bench_step_errors_per_second",
            "SQL errors per second sysbench reported for one step.",
            STEP_LABELS,
            registry=r,
        )
        self.step_valid = Gauge(
            "tidb_bench_step_valid",
            "1 when a step's numbers can be trusted, 0 when it is invalid (a late client or a "
            "disturbance the guard saw); join on it to leave invalid steps out.",
            STEP_LABELS,
            registry=r,
        )
        self.step_disturbances = Gauge(
            "tidb_bench_step_disturbances",
            "Disturbances the guard recorded on a step (its trials' included).",
            STEP_LABELS,
            registry=r,
        )
        self.step_qps_per_core = Gauge(
            "tidb_bench_step_qps_per_core",
            "Queries per second per server core of one step (status resources.qpsPerCore).",
            STEP_LABELS,
            registry=r,
        )
        self.step_cpu_per_query = Gauge(
            "tidb_bench_step_cpu_seconds_per_query",
            "Server CPU seconds per query of one step, per component (label `component`; "
            "`all`: the cluster's pods together).",
            (*STEP_LABELS, "component"),
            registry=r,
        )
        self.run_peak_qps = Gauge(
            "tidb_bench_run_peak_qps",
            "Peak QPS of a run (status.summary.peakQps).",
            (*RUN_LABELS, "workload"),
            registry=r,
        )
        self.run_regressed = Gauge(
            "tidb_bench_run_regressed",
            "1 when the run's Regressed condition is True, 0 when False (absent when unknown).",
            RUN_LABELS,
            registry=r,
        )
        self.runs_finished = Counter(
            "tidb_bench_runs_finished",
            "BenchmarkRuns seen entering a final phase, by outcome.",
            (*SCHEDULE_LABELS, "cluster", "outcome"),
            registry=r,
        )
        self.preflight_failures = Counter(
            "tidb_bench_preflight_failures",
            "Preflight checks seen failing, once per run and check.",
            ("namespace", "cluster", "check"),
            registry=r,
        )
        self.schedule_last_success = Gauge(
            "tidb_bench_schedule_last_success_timestamp_seconds",
            "When the schedule's latest Succeeded run finished (Unix seconds).",
            SCHEDULE_LABELS,
            registry=r,
        )
        self.schedule_last_peak_qps = Gauge(
            "tidb_bench_schedule_last_peak_qps",
            "Peak QPS of the schedule's latest Succeeded run: the nightly trend.",
            SCHEDULE_LABELS,
            registry=r,
        )
        self.schedule_regressed = Gauge(
            "tidb_bench_schedule_regressed",
            "1 when the schedule's latest Succeeded run regressed against its baseline, else 0.",
            SCHEDULE_LABELS,
            registry=r,
        )
        self.schedule_efficiency_regressed = Gauge(
            "tidb_bench_schedule_efficiency_regressed",
            "1 when the schedule's latest Succeeded run's server CPU per query regressed "
            "against its baseline, else 0; absent when that run had no resource data.",
            SCHEDULE_LABELS,
            registry=r,
        )
        self.schedule_period = Gauge(
            "tidb_bench_schedule_period_seconds",
            "Seconds between the schedule's next two fire times (absent while suspended): "
            "alerts compare it with the time since the last success.",
            SCHEDULE_LABELS,
            registry=r,
        )
        self._lock = threading.Lock()
        self._series: dict[str, list[tuple[Gauge, Labels]]] = {}
        self._phases: dict[str, str] = {}
        self._failed_checks: set[tuple[str, str]] = set()
        self._started = time.time()

    # ---- runs ---------------------------------------------------------------------------
    def observe_run(
        self, body: Mapping[str, Any], status_patch: Mapping[str, Any] | None = None
    ) -> None:
        """Update a run's series from its body (and a status patch about to be applied)."""
        meta = body.get("metadata") or {}
        uid = _uid(meta)
        status = _merged_status(body, status_patch)
        ns, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        schedule = owner_name(meta, "BenchmarkSchedule") or str(
            (meta.get("labels") or {}).get(LABEL_SCHEDULE, "")
        )
        cluster = cluster_label(body.get("spec") or {})
        values: list[tuple[Gauge, Labels, float]] = []
        for step in status.get("steps") or []:
            if step.get("qps") is None:
                continue  # not measured yet
            workload, threads = str(step.get("workload", "")), str(step.get("threads", ""))
            labels: Labels = (ns, name, schedule, cluster, workload, threads)
            values.append((self.step_qps, labels, float(step["qps"])))
            trials = step.get("qpsTrials") or {}
            for bound in ("low", "high"):
                end = trials.get(f"ci{bound.capitalize()}")
                if end is not None:
                    values.append((self.step_qps_interval, (*labels, bound), float(end)))
            if step.get("valid") is not None:
                values.append((self.step_valid, labels, 1.0 if step["valid"] else 0.0))
            # A trial in status keeps its disturbances' count (`disturbed`), the list is in
            # the results store; runs of earlier releases kept the list.
            disturbed = len(step.get("disturbances") or []) + sum(
                max(int(t.get("disturbed") or 0), len(t.get("disturbances") or []))
                for t in step.get("trials") or []
            )
            values.append((self.step_disturbances, labels, float(disturbed)))
            if step.get("tps") is not None:
                values.append((self.step_tps, labels, float(step["tps"])))
            if step.get("errorsPerSec") is not None:
                values.append((self.step_errors, labels, float(step["errorsPerSec"])))
            values += self._efficiency(labels, step.get("resources") or {})
            latency = step.get("latencyMs") or {}
            if latency.get("value") is not None:
                percentile = str(latency.get("percentile", ""))
                seconds = float(latency["value"]) / 1000.0
                values.append((self.step_latency, (*labels, percentile), seconds))
        for item in (status.get("summary") or {}).get("perWorkload") or []:
            if item.get("peakQps") is not None:
                peak_labels = (ns, name, schedule, cluster, str(item.get("workload", "")))
                values.append((self.run_peak_qps, peak_labels, float(item["peakQps"])))
        regressed = next(
            (c for c in status.get("conditions") or [] if c.get("type") == "Regressed"), None
        )
        if regressed is not None and regressed.get("status") in ("True", "False"):
            flag = 1.0 if regressed["status"] == "True" else 0.0
            values.append((self.run_regressed, (ns, name, schedule, cluster), flag))
        with self._lock:
            current = [(gauge, labels) for gauge, labels, _ in values]
            for gauge, labels in self._series.get(uid, []):
                if (gauge, labels) not in current:
                    _remove(gauge, labels)  # e.g. a relabelled run
            for gauge, labels, value in values:
                gauge.labels(*labels).set(value)
            self._series[uid] = current
            self._count_outcome(uid, ns, schedule, cluster, status)
            for check in (status.get("preflight") or {}).get("checks") or []:
                key = (uid, str(check.get("name", "")))
                if check.get("status") == "Fail" and key not in self._failed_checks:
                    self._failed_checks.add(key)
                    self.preflight_failures.labels(ns, cluster, key[1]).inc()

    def _efficiency(
        self, labels: Labels, resources: Mapping[str, Any]
    ) -> list[tuple[Gauge, Labels, float]]:
        """A step's QPS per core and CPU seconds per query (all, and per component)."""
        values: list[tuple[Gauge, Labels, float]] = []
        if resources.get("qpsPerCore") is not None:
            values.append((self.step_qps_per_core, labels, float(resources["qpsPerCore"])))
        per = [("all", resources.get("cpuMsPerQuery"))] + [
            (str(c.get("component", "")), c.get("cpuMsPerQuery"))
            for c in resources.get("components") or []
        ]
        for component, ms in per:
            if ms is not None:
                values.append((self.step_cpu_per_query, (*labels, component), float(ms) / 1000))
        return values

    def _count_outcome(
        self, uid: str, ns: str, schedule: str, cluster: str, status: Mapping[str, Any]
    ) -> None:
        phase = str(status.get("phase") or "Pending")
        before = self._phases.get(uid)
        self._phases[uid] = phase
        if not is_terminal(phase) or is_terminal(before):
            return
        if before is None:
            # First sight of a finished run: count it only if it finished while we ran
            # (a watch event can arrive after the final patch); older ones were counted by
            # the process that saw them finish.
            finished = _timestamp(status.get("finishedAt"))
            if finished is None or finished < self._started:
                return
        self.runs_finished.labels(ns, schedule, cluster, phase).inc()

    def forget_run(self, body: Mapping[str, Any]) -> None:
        """Drop a deleted run's series (counters keep what they counted)."""
        uid = _uid(body.get("metadata") or {})
        with self._lock:
            for gauge, labels in self._series.pop(uid, []):
                _remove(gauge, labels)
            self._phases.pop(uid, None)
            self._failed_checks = {k for k in self._failed_checks if k[0] != uid}

    # ---- schedules ----------------------------------------------------------------------
    def observe_schedule(
        self, body: Mapping[str, Any], status_patch: Mapping[str, Any] | None = None
    ) -> None:
        """Update a schedule's series from its status: latest success, its peak, regression."""
        meta = body.get("metadata") or {}
        labels = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        status = _merged_status(body, status_patch)
        successes = [h for h in status.get("history") or [] if h.get("outcome") == "Succeeded"]
        with self._lock:
            finished = _timestamp(successes[-1].get("finishedAt")) if successes else None
            if finished is not None:
                self.schedule_last_success.labels(*labels).set(finished)
            peak = status.get("lastPeakQps")
            if peak is not None:
                self.schedule_last_peak_qps.labels(*labels).set(float(peak))
            self.schedule_regressed.labels(*labels).set(1.0 if status.get("regressed") else 0.0)
            efficiency = status.get("efficiency")
            if efficiency is None:
                _remove(self.schedule_efficiency_regressed, labels)
            else:
                flag = 1.0 if efficiency == "Regressed" else 0.0
                self.schedule_efficiency_regressed.labels(*labels).set(flag)
            period = _period(body.get("spec") or {})
            if period is None:
                _remove(self.schedule_period, labels)
            else:
                self.schedule_period.labels(*labels).set(period)

    def forget_schedule(self, body: Mapping[str, Any]) -> None:
        """Drop a deleted schedule's series."""
        meta = body.get("metadata") or {}
        labels = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        with self._lock:
            for gauge in (
                self.schedule_last_success,
                self.schedule_last_peak_qps,
                self.schedule_regressed,
                self.schedule_efficiency_regressed,
                self.schedule_period,
            ):
                _remove(gauge, labels)

    # ---- serving ------------------------------------------------------------------------
    def serve(self, port: int, addr: str = "0.0.0.0") -> Any:
        """Serve /metrics on `port` in a daemon thread; returns the server (for shutdown()).

        Raises OSError when the port cannot be bound.
        """
        server, _thread = start_http_server(port, addr=addr, registry=self.registry)
        return server


def _period(spec: Mapping[str, Any]) -> float | None:
    """The schedule's period in seconds; None while suspended or when the spec is invalid
    (the reconciler reports that on the schedule itself)."""
    if spec.get("suspend"):
        return None
    try:
        parsed = BenchmarkScheduleSpec.model_validate(spec)
        return period_seconds(parsed, datetime.now(UTC))
    except (ValueError, TidbBenchError):
        return None


def _uid(meta: Mapping[str, Any]) -> str:
    return str(meta.get("uid") or f"{meta.get('namespace')}/{meta.get('name')}")


def _remove(gauge: Gauge, labels: Labels) -> None:
    # prometheus_client < 0.21 raises KeyError for a label set never set or already removed.
    with contextlib.suppress(KeyError):
        gauge.remove(*labels)
