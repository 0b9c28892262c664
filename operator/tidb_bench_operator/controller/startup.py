"""Start-up: wait until API discovery serves our resources, before kopf scans it."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

from tidb_bench_operator.domain.api.common import GROUP, VERSION
from tidb_bench_operator.errors import CrdsNotServed, KubeError

#: What API discovery must list before kopf scans it (kopf only looks again on a CRD event).
SERVED_RESOURCES = ("benchmarkruns", "benchmarkschedules")


class Discovery(Protocol):
    """API discovery, as wait_until_served reads it (adapters.k8s.Kube has it)."""

    def served_resources(self, group: str, version: str) -> set[str]:
        """The resources discovery lists for group/version (KubeError when it cannot say)."""
        ...


def wait_until_served(
    kube: Discovery,
    *,
    timeout: float,
    log: Callable[[str], None],
    poll: float = 0.5,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Return once discovery lists every resource in SERVED_RESOURCES; else CrdsNotServed.

    kopf scans API discovery once at start and again only when a CRD changes. A controller
    that starts while its CRDs are being created (`kubectl apply -k deploy/` creates both
    together) can scan between `Established` and discovery listing the resource, and would
    then never serve BenchmarkRuns. Waiting here, before kopf's scan, closes that gap.
    """
    deadline = clock() + timeout
    next_note = clock()
    while True:
        problem = ""
        try:
            served = kube.served_resources(GROUP, VERSION)
        except KubeError as exc:
            served, problem = set(), f" ({exc})"
        missing = [f"{r}.{GROUP}/{VERSION}" for r in SERVED_RESOURCES if r not in served]
        if not missing:
            return
        now = clock()
        if now >= deadline:
            raise CrdsNotServed(
                f"API discovery does not list {', '.join(missing)} after {timeout:.0f} s"
                f"{problem}; install the CRDs first (kubectl apply -k crds/, or kubectl apply "
                "-k deploy/ which includes them), or raise TIDB_BENCH_CRD_WAIT_SECONDS"
            )
        if now >= next_note:
            log(f"waiting for API discovery to list {', '.join(missing)}{problem}")
            next_note = now + 10
        sleep(poll)
