"""The BenchmarkRuns an experiment makes, and what their status tells the experiment."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from tidb_bench_operator.domain.api.common import API_VERSION
from tidb_bench_operator.domain.api.experiment import VariantSummary
from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec
from tidb_bench_operator.domain.api.run_status import BenchmarkRunStatus
from tidb_bench_operator.domain.manifests import MANAGED_BY, RunRef, label_value
from tidb_bench_operator.domain.preflight.verdict import BENCH_NODE_ISOLATION

#: The label on an experiment's runs: the experiment's name.
LABEL_EXPERIMENT = "tidbbench.io/experiment"


def build_experiment_run(experiment: RunRef, name: str, spec: BenchmarkRunSpec) -> dict[str, Any]:
    """The run of the baseline, a variant or the operation: labelled and owned by the
    experiment, its spec as the template was written (plus what the experiment set)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "BenchmarkRun",
        "metadata": {
            "name": name,
            "namespace": experiment.namespace,
            "labels": {**MANAGED_BY, LABEL_EXPERIMENT: label_value(experiment.name)},
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": "BenchmarkExperiment",
                    "name": experiment.name,
                    "uid": experiment.uid,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec.model_dump(by_alias=True, mode="json", exclude_unset=True),
    }


def unfair_finding(run_status: Mapping[str, Any]) -> str | None:
    """The run's preflight finding that a database pod shares a benchmark node (its message
    names the pod and the node), or None."""
    preflight = run_status.get("preflight") or {}
    for check in preflight.get("checks") or []:
        if check.get("name") == BENCH_NODE_ISOLATION and check.get("status") == "Fail":
            return str(check.get("message") or BENCH_NODE_ISOLATION)
    return None


def variant_summary(run_status: Mapping[str, Any]) -> VariantSummary:
    """What the experiment keeps of a variant's finished run: its peak (status.summary) and,
    from the peak step's resources, QPS per server core, server CPU per query and the
    bottleneck (docs/resources.md): what the variant changed in the cluster's efficiency."""
    try:
        status = BenchmarkRunStatus.model_validate(run_status)
    except ValidationError:  # not as the controller writes it: keep what can be read
        raw = run_status.get("summary")
        raw = raw if isinstance(raw, Mapping) else {}
        qps, threads = raw.get("peakQps"), raw.get("peakThreads")
        return VariantSummary(
            peak_qps=float(qps) if isinstance(qps, int | float) else None,
            peak_threads=threads if isinstance(threads, int) and threads > 0 else None,
        )
    summary = status.summary
    if summary is None:
        return VariantSummary()
    peak = next(
        (
            s
            for s in status.steps
            if s.valid is not False
            and s.qps is not None
            and s.qps == summary.peak_qps
            and s.threads == summary.peak_threads
            and summary.workload in (None, s.workload)
        ),
        None,
    )
    res = peak.resources if peak is not None else None
    return VariantSummary(
        peak_qps=summary.peak_qps,
        peak_threads=summary.peak_threads,
        peak_latency_ms=summary.peak_latency_ms,
        qps_per_core=res.qps_per_core if res else None,
        cpu_ms_per_query=res.cpu_ms_per_query if res else None,
        bottleneck=res.bottleneck.message if res and res.bottleneck else None,
    )
