"""The field story's experiments as specs, and the TidbCluster they change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tidb_bench_operator.domain.api.experiment import BenchmarkExperimentSpec

DATA = Path(__file__).resolve().parents[3] / "data"
TC: dict[str, Any] = yaml.safe_load((DATA / "experiment" / "tidbcluster-basic.yaml").read_text())
KEY = ("TidbCluster", "basic")


def experiment(**overrides: Any) -> BenchmarkExperimentSpec:
    """Attempt 2 of docs/field-story.md: TiKV 3 → 4 spread by hostname, and TiDB 2 → 3."""
    spread = [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
               "whenUnsatisfiable": "DoNotSchedule"}]  # fmt: skip
    body: dict[str, Any] = {
        "cluster": {"name": "basic", "namespace": "tidb-cluster", "kind": "TidbCluster"},
        "run": {"cluster": {"name": "basic"}, "credentials": {"secretRef": {"name": "root"}}},
        "variants": [
            {
                "name": "tikv-4",
                "patch": {"tikv": {"replicas": 4, "topologySpreadConstraints": spread}},
            },
            {"name": "tidb-3", "patch": {"tidb": {"replicas": 3}}},
        ],
        **overrides,
    }
    spec = BenchmarkExperimentSpec.model_validate(body)
    spec.validate_semantics()
    return spec
