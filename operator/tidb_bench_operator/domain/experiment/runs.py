"""The BenchmarkRuns an experiment makes, and what their status tells the experiment."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tidb_bench_operator.domain.api.common import API_VERSION
from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec
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
