"""Controller settings, from the environment (the Deployment sets them)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from tidb_bench_operator.domain.manifests import DEFAULT_IMAGE


@dataclass(frozen=True)
class Settings:
    """What the controller needs to know about where it runs."""

    kubeconfig: str | None
    runner_image: str
    metrics_port: int
    scheduling_timeout_seconds: float
    crd_wait_seconds: float = 60.0

    @classmethod
    def from_env(cls) -> Settings:
        """From KUBECONFIG (unset in a pod: in-cluster) and the TIDB_BENCH_* variables."""
        return cls(
            kubeconfig=os.environ.get("KUBECONFIG") or None,
            runner_image=os.environ.get("TIDB_BENCH_RUNNER_IMAGE", DEFAULT_IMAGE),
            # Empty or 0 turns the metrics endpoint off.
            metrics_port=int(os.environ.get("TIDB_BENCH_METRICS_PORT", "9090") or 0),
            scheduling_timeout_seconds=float(
                os.environ.get("TIDB_BENCH_SCHEDULING_TIMEOUT_SECONDS", "120")
            ),
            # How long to wait at start for API discovery to serve our CRDs before exiting.
            crd_wait_seconds=float(os.environ.get("TIDB_BENCH_CRD_WAIT_SECONDS", "60")),
        )
