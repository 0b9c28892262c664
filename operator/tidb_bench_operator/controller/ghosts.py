"""Deleted runs that still hold their cluster (ghosts), kept by the Driver; and the ghosts a
restarted controller finds again from the pods left behind (there is no run to read)."""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from tidb_bench_operator.domain import queue
from tidb_bench_operator.domain.manifests import LABEL_RUN
from tidb_bench_operator.domain.objects import JSON

log = logging.getLogger("tidb_bench_operator.controller.driver")

#: Logged when the ghosts of a previous controller cannot be looked for (no right to list pods).
NO_GHOST_SEARCH = (
    "cannot look for the pods of runs deleted before this start (%s): runs are admitted "
    "without waiting for them; grant `list` on pods in every watched namespace, or cluster-wide "
    "when --namespace is a pattern"
)


@dataclass
class Ghost:
    """A deleted holder: its pods are listed until they are gone or `until` has come."""

    namespace: str
    name: str
    #: When it stops holding the cluster even if its pods are still listed (queue.py).
    until: datetime

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


class GhostKube(Protocol):
    """The reads that find the ghosts again (adapters.k8s.Kube has them)."""

    def pods(self, namespace: str | None, selector: str) -> list[JSON]:
        """Pods matching a label selector (None: every namespace)."""
        ...

    def benchmark_runs_in(self, namespace: str, selector: str) -> list[JSON]:
        """The BenchmarkRuns of a namespace matching a label selector."""
        ...


def left_behind(
    kube: GhostKube, now: datetime, watched: Sequence[str] | None = None
) -> dict[str, Ghost]:
    """The ghosts the runner pods show: every pod of a run whose uid no run has any more
    (domain/queue.ghosts_left), by queue key. One pod list per watched namespace (one for
    the cluster when it watches all, or patterns), and one run list per namespace with
    such pods (API errors propagate: the caller tries again)."""
    pods = [p for p in runner_pods(kube, watched) if not queue.pod_stopped(p)]
    namespaces = {str((p.get("metadata") or {}).get("namespace")) for p in pods}
    live = {
        str((run.get("metadata") or {}).get("uid"))
        for ns in sorted(namespaces)
        for run in kube.benchmark_runs_in(ns, "")
    }
    found = {}
    for qkey, left in queue.ghosts_left(pods, live, now).items():
        namespace, _, name = left.ref.partition("/")
        found[qkey] = Ghost(namespace, name, left.until)
        log.warning(
            "deleted BenchmarkRun %s still has pods: cluster %s stays held until they are "
            "gone, at the latest %s", left.ref, qkey, left.until.isoformat(),
        )  # fmt: skip
    return found


def runner_pods(kube: GhostKube, watched: Sequence[str] | None) -> list[JSON]:
    """The runner pods of the watched namespaces. A controller given plain namespace names
    (the namespaced install, rights in a Role) lists each; one watching the cluster lists
    every namespace, and one given kopf's patterns (`*`, `?`, `[`, `!` to exclude) every
    namespace, keeping the pods of the namespaces the patterns match: another
    controller's runs are not its ghosts."""
    if not watched:
        return kube.pods(None, LABEL_RUN)
    if not has_patterns(watched):
        return [pod for ns in dict.fromkeys(watched) for pod in kube.pods(ns, LABEL_RUN)]
    return [
        pod
        for pod in kube.pods(None, LABEL_RUN)
        if watches(watched, str((pod.get("metadata") or {}).get("namespace")))
    ]


def has_patterns(watched: Sequence[str]) -> bool:
    """Whether `--namespace` values hold kopf's patterns (`*`, `?`, `[`, `!`), not names."""
    return any(ch in ns for ns in watched for ch in "*?[!")


def watches(patterns: Sequence[str], namespace: str) -> bool:
    """Whether kopf, given these `--namespace` patterns, watches `namespace`: it matches a
    pattern and no `!pattern`; only exclusions: every namespace but those."""
    include = [p for p in patterns if not p.startswith("!")]
    if any(fnmatch.fnmatchcase(namespace, p[1:]) for p in patterns if p.startswith("!")):
        return False
    return not include or any(fnmatch.fnmatchcase(namespace, p) for p in include)


def warn_released(ghost: Ghost, qkey: str, alive: Iterable[JSON]) -> None:
    """Say which pods were still listed when a ghost was released at its bound."""
    names = ", ".join(sorted(str((p.get("metadata") or {}).get("name")) for p in alive)[:5])
    log.warning(
        "deleted BenchmarkRun %s still has pods listed (%s) at %s, past its step's "
        "end and its pods' grace period: their node does not answer; cluster %s is "
        "released to the next run",
        ghost.ref, names, ghost.until.isoformat(), qkey,
    )  # fmt: skip
