"""`tidb-bench run`: the same sweep as a BenchmarkRun, from this machine, without Kubernetes."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

from tidb_bench_operator.adapters import mysql
from tidb_bench_operator.adapters.documents import load_yaml
from tidb_bench_operator.adapters.pd import HTTPPDClient
from tidb_bench_operator.config import Credentials
from tidb_bench_operator.domain.api import load_shape
from tidb_bench_operator.domain.api.common import StepPhase
from tidb_bench_operator.domain.api.resources import parse_run_spec
from tidb_bench_operator.domain.api.results import StepResult
from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec
from tidb_bench_operator.domain.api.run_status import StepStatus
from tidb_bench_operator.domain.api.runner_message import StepReport, combine_clients
from tidb_bench_operator.domain.api.trial import Trial
from tidb_bench_operator.domain.preflight import (
    BENCH_NODE_ISOLATION,
    TOPOLOGY_SPREAD,
)
from tidb_bench_operator.domain.stats.analysis import compute_status_summary
from tidb_bench_operator.domain.stats.capacity import following, layout, with_capacity
from tidb_bench_operator.domain.stats.trials import with_trial
from tidb_bench_operator.domain.sysbench.rate import client_rates, rate_outcome
from tidb_bench_operator.domain.sysbench.rate import describe as describe_rate
from tidb_bench_operator.errors import ParseError, SpecError, TidbBenchError
from tidb_bench_operator.reconcile.run import gate
from tidb_bench_operator.runner import (
    StepPlan,
    analyze_and_warm,
    cleanup_dataset,
    prepare_dataset,
    run_step,
)


def load_spec_text(text: str) -> dict[str, Any]:
    """A RUN.yaml may be a whole BenchmarkRun manifest or just its spec."""
    try:
        doc = load_yaml(text, "RUN.yaml")
    except ParseError as exc:
        raise SpecError("", str(exc)) from None
    if not isinstance(doc, dict):
        raise SpecError("", "RUN.yaml must hold a BenchmarkRun or its spec (a mapping)")
    if doc.get("kind") == "BenchmarkRun":
        spec = doc.get("spec")
        if not isinstance(spec, dict):
            raise SpecError("", "the BenchmarkRun in RUN.yaml has no spec")
        return spec
    return doc


#: Checks that look at Kubernetes nodes and pods: a run from this machine has neither.
KUBERNETES_CHECKS = (BENCH_NODE_ISOLATION, TOPOLOGY_SPREAD)
#: How often failing checks are looked at again within spec.preflight.timeoutSeconds.
RECHECK_SECONDS = 5.0


class _NoCluster:
    """The gate's Kubernetes reader for a run without Kubernetes (its checks are skipped)."""

    def nodes(self) -> list[dict[str, Any]]:
        return []

    def pods(self, namespace: str | None, selector: str) -> list[dict[str, Any]]:
        return []

    def tidb_cluster(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    def v2_cluster(self, namespace: str, name: str) -> dict[str, Any] | None:
        return None

    def v2_groups(self, namespace: str) -> list[dict[str, Any]]:
        return []


def local_preflight(
    spec: BenchmarkRunSpec,
    *,
    creds: Credentials,
    pd_url: str,
    out: TextIO | None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """The controller's PD and table checks against `pd_url`, under spec.preflight's policy.

    Failing checks are looked at again every RECHECK_SECONDS until timeoutSeconds, as the
    controller does (operators drain, a store comes back). Enforce then raises
    TidbBenchError before anything ran; Warn returns the findings with the results.
    """
    skip = set(spec.preflight.skip)
    local = spec.model_copy(
        update={
            "preflight": spec.preflight.model_copy(
                update={"skip": sorted(skip | set(KUBERNETES_CHECKS))}
            )
        }
    )
    target = spec.target
    assert target is not None  # run_local_sweep sets it from --host/--port

    db = mysql.connector(
        lambda: mysql.DSN(target.host or "", target.port, creds.user, creds.password)
    )
    deadline = clock() + spec.preflight.timeout_seconds
    while True:
        outcome = gate.with_skipped(
            gate.run_preflight(local, "default", kube=_NoCluster(), pd=HTTPPDClient(pd_url), db=db),
            spec,
        )
        checks, verdict = outcome.checks, outcome.verdict
        failing = [c for c in checks if c.status == "Fail"]
        if verdict.proceed:  # all passed, or Warn: recorded, and the run goes on at once
            break
        if clock() >= deadline:
            raise TidbBenchError(
                f"{verdict.message} after {spec.preflight.timeout_seconds} s: "
                + "; ".join(f"{c.name}: {c.message}" for c in failing)
                + ". Nothing was run. Fix the cluster, or set spec.preflight.policy: Warn to "
                "record the findings and measure anyway"
            )
        if out is not None:
            out.write(
                f"tidb-bench: preflight: {', '.join(c.name for c in failing)} failing; checking "
                f"again in {RECHECK_SECONDS:.0f} s (up to {spec.preflight.timeout_seconds} s)\n"
            )
            out.flush()
        sleep(RECHECK_SECONDS)
    if out is not None:
        for c in checks:
            out.write(f"tidb-bench: preflight {c.status:<4} {c.name}: {c.message}\n")
        out.write(
            f"tidb-bench: {verdict.message}; not run here: {', '.join(KUBERNETES_CHECKS)} "
            "(they need Kubernetes)\n"
        )
    return {
        "policy": spec.preflight.policy,
        "status": verdict.status,
        "message": verdict.message,
        "checks": [c.model_dump(by_alias=True, exclude_defaults=True) for c in checks],
    }


def run_local_sweep(
    text: str,
    *,
    host: str,
    port: int,
    user: str,
    password: str,
    out: TextIO | None,
    pd_url: str | None = None,
) -> dict[str, Any]:
    """Prepare, run every (workload, threads) step (or a capacity search's) with `clients`
    local clients, summarise.

    With `pd_url`, the PD checks of the controller's preflight come first (local_preflight).
    """
    raw = load_spec_text(text)
    # Credentials come from the command line here; the Secret reference is not used.
    raw.setdefault("credentials", {"secretRef": {"name": "unused"}})
    target = raw.get("target") or {}
    if not isinstance(target, dict):
        raise SpecError("target", f"{target!r:.60} is not a mapping", "e.g. target: {port: 4000}")
    raw["target"] = {**target, "host": host, "port": port}
    if pd_url is not None:
        raw["target"]["pdURL"] = pd_url
    spec = parse_run_spec(raw)
    if spec.custom_workloads:
        raise SpecError(
            "customWorkloads",
            "`tidb-bench run` runs only sysbench's built-in tests: a custom workload's script "
            "comes from a ConfigMap, which only the controller mounts",
            "run it with `sysbench <script> ...` yourself, or create the BenchmarkRun in a "
            "cluster (docs/workloads.md)",
        )
    creds = Credentials(user, password)
    preflight = None
    if pd_url is not None and spec.preflight.policy != "Off":
        preflight = local_preflight(spec, creds=creds, pd_url=pd_url, out=out)

    def plan(workload: str, threads: int = 1, start_at: datetime | None = None) -> StepPlan:
        return StepPlan(
            workload=workload,
            threads=threads,
            duration=spec.duration_seconds,
            host=host,
            port=port,
            db=spec.database,
            tables=spec.dataset.tables,
            table_size=spec.dataset.table_size,
            warmup=spec.warmup_seconds,
            report_interval=spec.report_interval_seconds,
            percentile=spec.percentile,
            rand_type=load_shape.rand_type(spec),
            events=load_shape.events_for(spec, workload, threads),
            ignore_errors=spec.ignore_errors,
            auto_inc=spec.dataset.auto_inc,
            extra_args=list(spec.extra_args),
            start_at=start_at,
        )

    first = plan(spec.workloads[0])
    analyze_and_warm(
        first,
        creds,
        prepare_dataset(first, creds, spec.dataset.prepare, out),
        analyze=spec.dataset.analyze,
        warm_up=spec.dataset.warm_up,
        out=out,
    )
    measured: list[StepStatus] = [
        StepStatus(index=i, workload=w, threads=t, target_rate=r)
        for i, (w, t, r) in enumerate(layout(spec))
    ]
    notes: list[list[str]] = [[] for _ in measured]

    def measure(i: int, round_: int) -> None:
        workload, threads, rate = measured[i].workload, measured[i].threads, measured[i].target_rate
        # Several local clients start together, as the pods of a step do.
        start_at = datetime.now(UTC) + timedelta(seconds=1) if spec.clients > 1 else None
        shares: list[int | None] = [None] * spec.clients
        if rate:
            shares = list(client_rates(rate, spec.clients))
        reports = _run_clients(plan(workload, threads, start_at), creds, shares, out)
        combined = combine_clients(reports)
        trial = Trial(round=round_, result=combined.result, valid=not combined.late)
        if spec.repeats == 1:
            measured[i] = measured[i].with_result(combined.result)
            measured[i].valid = trial.valid
        else:
            measured[i] = with_trial(measured[i], trial, spec.noisy_cv_percent)
        prefix = f"trial {round_ + 1}: " if spec.repeats > 1 else ""
        notes[i] += [prefix + n for n in combined.notes]
        if rate:
            outcome = rate_outcome(
                rate, measured[i].tps or 0.0, spec.rate_tolerance_percent,
                [r.queue_max for r in reports], [r.queue_last for r in reports],
            )  # fmt: skip
            measured[i].rate = outcome
            notes[i].append(prefix + describe_rate(outcome))

    if spec.capacity_search is None:
        # Several trials run in whole-sweep rounds, as the controller runs them
        # (reconcile/steps.py).
        for round_ in range(spec.repeats):
            for i in range(len(measured)):
                measure(i, round_)
    else:
        # A search measures a step's trials together, then chooses the next (docs/capacity.md).
        for i in itertools.count():
            for round_ in range(spec.repeats):
                measure(i, round_)
            measured[i].phase = StepPhase.SUCCEEDED
            chosen = following(spec, measured)
            if chosen is None:
                break
            measured.append(StepStatus(index=i + 1, workload=chosen[0], threads=chosen[1]))
            notes.append([])
    steps: list[dict[str, Any]] = []
    results: list[StepResult] = []
    for status, step_notes in zip(measured, notes, strict=True):
        step_result = status.to_result()
        assert step_result is not None, "every step was measured"
        results.append(step_result)
        doc = {**step_result.to_json_dict(), "notes": step_notes}
        if status.rate is not None:
            doc["targetRate"] = status.target_rate
            doc["rate"] = status.rate.model_dump(by_alias=True, mode="json", exclude_none=True)
        if status.qps_trials is not None:
            doc["trials"] = [t.qps for t in status.trials]
            doc["qpsTrials"] = status.qps_trials.model_dump(by_alias=True, mode="json")
        steps.append(doc)
    if spec.dataset.cleanup:
        cleanup_dataset(plan(spec.workloads[0]), creds, out)
    summary = with_capacity(
        compute_status_summary(
            results, spec.workloads, spec.slo.latency_ms if spec.slo else None,
            [m.rate for m in measured] if spec.rates else [],
        ),
        spec,
        measured,
    )  # fmt: skip
    result: dict[str, Any] = {
        "steps": steps,
        "summary": summary.model_dump(by_alias=True, exclude_none=True, mode="json")
        if summary
        else None,
    }
    if preflight is not None:
        result["preflight"] = preflight
    return result


def _run_clients(
    plan: StepPlan, creds: Credentials, rates: list[int | None], out: TextIO | None
) -> list[StepReport]:
    """One client runs inline; several run in threads that start together. `rates` has each
    client's share of a rate step's target (None in a thread sweep), one per client."""
    clients = len(rates)
    if clients == 1:
        return [run_step(replace(plan, rate=rates[0]), creds, out)]
    docs: list[StepReport | None] = [None] * clients
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            docs[i] = run_step(replace(plan, rate=rates[i]), creds, out if i == 0 else None)
        except BaseException as exc:  # re-raised below, in the caller's thread
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0] if isinstance(errors[0], TidbBenchError) else TidbBenchError(str(errors[0]))
    return [d for d in docs if d is not None]
