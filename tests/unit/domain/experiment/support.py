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


SYSBENCH = DATA / "sysbench"
#: Two clients of one step through a 4.16 s write lock (tests/data/sysbench/README.md).
LOCK_CLIENTS = {
    "0": "sysbench-1.0.20_oltp_read_write_client-a-of-2_read-lock-4s_recorded.txt",
    "1": "sysbench-1.0.20_oltp_read_write_client-b-of-2_read-lock-4s_recorded.txt",
}


def series(name: str) -> list[dict[str, Any]]:
    """A recorded sysbench output's interval lines as the runner stores them (runner.py)."""
    from tidb_bench_operator.domain.sysbench.parse import parse_sysbench_output

    parsed = parse_sysbench_output((SYSBENCH / name).read_text())
    return [i.model_dump(mode="json", by_alias=True) for i in parsed.intervals]


def coarse(lines: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """What --report-interval=k would have printed: k one-second lines' rates averaged,
    the worst latency, the last `t`."""
    out = []
    for i in range(0, len(lines) - k + 1, k):
        group = lines[i : i + k]
        point = dict(group[-1])
        for key in ("tps", "qps", "errors_per_sec", "reconnects_per_sec"):
            point[key] = sum(p[key] for p in group) / k
        point["latency_ms"] = max((p["latency_ms"] or 0.0) for p in group)
        out.append(point)
    return out
