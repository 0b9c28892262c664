"""`tidb-bench run`: the same sweep as a BenchmarkRun, from this machine, without Kubernetes."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any, TextIO

import yaml

from tidb_bench_operator.domain.analysis import compute_status_summary
from tidb_bench_operator.domain.models import parse_run_spec
from tidb_bench_operator.domain.results import StepResult
from tidb_bench_operator.domain.sysbench import combine_step_results
from tidb_bench_operator.errors import SpecError, TidbBenchError
from tidb_bench_operator.runner import (
    Credentials,
    StepPlan,
    cleanup_dataset,
    prepare_dataset,
    run_step,
)


def load_spec_text(text: str) -> dict[str, Any]:
    """A RUN.yaml may be a whole BenchmarkRun manifest or just its spec."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecError("", f"RUN.yaml is not valid YAML: {exc}") from exc
    if not isinstance(doc, dict):
        raise SpecError("", "RUN.yaml must hold a BenchmarkRun or its spec (a mapping)")
    if doc.get("kind") == "BenchmarkRun":
        spec = doc.get("spec")
        if not isinstance(spec, dict):
            raise SpecError("", "the BenchmarkRun in RUN.yaml has no spec")
        return spec
    return doc


def run_local_sweep(
    text: str, *, host: str, port: int, user: str, password: str, out: TextIO | None
) -> dict[str, Any]:
    """Prepare, run every (workload, threads) step with `clients` local clients, summarise."""
    raw = load_spec_text(text)
    # Credentials come from the command line here; the Secret reference is not used.
    raw.setdefault("credentials", {"secretRef": {"name": "unused"}})
    raw["target"] = {**(raw.get("target") or {}), "host": host, "port": port}
    spec = parse_run_spec(raw)
    creds = Credentials(user, password)

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
            rand_type=spec.rand_type,
            ignore_errors=spec.ignore_errors,
            auto_inc=spec.dataset.auto_inc,
            extra_args=list(spec.extra_args),
            start_at=start_at,
        )

    prepare_dataset(plan(spec.workloads[0]), creds, spec.dataset.prepare, out)
    steps: list[dict[str, Any]] = []
    results: list[StepResult] = []
    for workload in spec.workloads:
        for threads in spec.threads:
            # Several local clients start together, as the pods of a step do.
            start_at = datetime.now(UTC) + timedelta(seconds=1) if spec.clients > 1 else None
            docs = _run_clients(plan(workload, threads, start_at), creds, spec.clients, out)
            step_results = [StepResult.model_validate(d["result"]) for d in docs]
            hists = [
                [(float(v), int(c)) for v, c in d.get("histogram") or []] or None for d in docs
            ]
            combined, notes = combine_step_results(step_results, hists)
            results.append(combined)
            entry = combined.to_json_dict()
            entry["notes"] = [n for d in docs for n in d.get("notes", [])] + (
                notes if len(docs) > 1 else []
            )
            steps.append(entry)
    if spec.dataset.cleanup:
        cleanup_dataset(plan(spec.workloads[0]), creds, out)
    summary = compute_status_summary(
        results, spec.workloads, spec.slo.latency_ms if spec.slo else None
    )
    return {
        "steps": steps,
        "summary": summary.model_dump(by_alias=True, exclude_none=True, mode="json")
        if summary
        else None,
    }


def _run_clients(
    plan: StepPlan, creds: Credentials, clients: int, out: TextIO | None
) -> list[dict[str, Any]]:
    """One client runs inline; several run in threads that start together."""
    if clients == 1:
        return [run_step(plan, creds, out)]
    docs: list[dict[str, Any] | None] = [None] * clients
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            docs[i] = run_step(plan, creds, out if i == 0 else None)
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
