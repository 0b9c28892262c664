"""The Driver's part for BenchmarkExperiments: their looks and the holds they put on clusters.

An experiment between its stash and its end changes its cluster; while it does, only its
own runs may be admitted on that cluster's queue and every other run waits, naming it
(reconcile/experiment/hold.py). The Driver (driver.py) keeps `holds` equal to the watched
experiments' phases and wakes the cluster's runs when a hold begins or ends. An experiment
is looked at when it is created, its spec changes or it is being deleted, when one of its
runs changes phase, and then when its reconciler says.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from tidb_bench_operator.controller.ghosts import Ghost
from tidb_bench_operator.domain.objects import JSON, newer_version
from tidb_bench_operator.domain.queue import QueueEntry
from tidb_bench_operator.reconcile.experiment.hold import Hold, cluster_busy, experiment_hold
from tidb_bench_operator.reconcile.experiment.reconciler import ExperimentOutcome

#: (kind, namespace, name), as the Driver keys its objects.
ExperimentKey = tuple[str, str, str]


class ExperimentsReconciler(Protocol):
    def reconcile(self, body: JSON, busy: str | None = None) -> ExperimentOutcome: ...


class _Host(Protocol):
    """What of the Driver the experiments' part uses."""

    bodies: Any
    holds: dict[str, Hold]
    claims: dict[str, str]
    ghosts: dict[str, Ghost]
    experiments: ExperimentsReconciler | None

    def schedule(self, key: Any, delay: float) -> None: ...

    def wake_cluster(self, qkey: str, *, everyone: bool = False) -> None: ...

    def _forget(self, key: Any) -> None: ...

    def _entries(self, qkey: str) -> list[QueueEntry]: ...

    async def _call(self, fn: Callable[..., Any], *args: Any) -> Any: ...

    def _update_hold(self, key: ExperimentKey, body: JSON | None) -> None: ...

    def _cluster_busy(self, experiment: JSON) -> str | None: ...


def _key(body: Mapping[str, Any]) -> ExperimentKey:
    meta = body["metadata"]
    return ("experiment", str(meta["namespace"]), str(meta["name"]))


def _generation(body: Mapping[str, Any] | None) -> Any:
    return ((body or {}).get("metadata") or {}).get("generation")


def _deleting(body: Mapping[str, Any] | None) -> bool:
    return bool(((body or {}).get("metadata") or {}).get("deletionTimestamp"))


class ExperimentLooks:
    """Mixed into the Driver: see the module docstring."""

    def experiment_event(self: _Host, type_: str | None, body: JSON) -> None:
        """A BenchmarkExperiment event."""
        key = _key(body)
        old = self.bodies.get(key)
        if type_ == "DELETED":
            self._forget(key)
            self._update_hold(key, None)
            return
        if newer_version(old, body):
            self.bodies[key] = body
        new_spec = old is None or _generation(old) != _generation(body)
        if new_spec or (_deleting(body) and not _deleting(old)):
            self.schedule(key, 0.0)
        self._update_hold(key, self.bodies.get(key))

    def _update_hold(self: _Host, key: ExperimentKey, body: JSON | None) -> None:
        """Keep `holds` equal to the experiments' phases; wake the runs of a cluster whose
        hold changed (its own runs may go, the others wait, or all may go again)."""
        ref = f"{key[1]}/{key[2]}"
        hold = experiment_hold(body) if body is not None else None
        for qkey in [q for q, h in self.holds.items() if h.experiment == ref]:
            if hold is None or hold.queue != qkey:
                del self.holds[qkey]
                self.wake_cluster(qkey, everyone=True)
        if hold is not None and self.holds.get(hold.queue) != hold:
            self.holds[hold.queue] = hold
            self.wake_cluster(hold.queue, everyone=True)

    def _wake_experiment_of(self: _Host, run: JSON) -> None:
        meta = run.get("metadata") or {}
        owners: Iterable[Mapping[str, Any]] = meta.get("ownerReferences") or []
        for owner in owners:
            if owner.get("kind") == "BenchmarkExperiment":
                key = ("experiment", str(meta.get("namespace")), str(owner.get("name")))
                if key in self.bodies:
                    self.schedule(key, 0.0)

    async def _look_experiment(self: _Host, key: ExperimentKey) -> float | None:
        body = self.bodies.get(key)
        if body is None or self.experiments is None:
            return None
        out: ExperimentOutcome = await self._call(
            self.experiments.reconcile, body, self._cluster_busy(body)
        )
        if out.stored is not None and newer_version(self.bodies.get(key), out.stored):
            self.bodies[key] = out.stored
            self._update_hold(key, out.stored)
        return out.requeue_seconds

    def _cluster_busy(self: _Host, experiment: JSON) -> str | None:
        """Why the experiment's cluster is not free (reconcile/experiment/hold.py)."""
        hold = experiment_hold(experiment, holding=True)
        if hold is None:
            return None
        ghost = self.ghosts.get(hold.queue)
        return cluster_busy(
            hold, self._entries(hold.queue), self.claims.get(hold.queue),
            ghost.ref if ghost else None, self.holds.get(hold.queue),
        )  # fmt: skip
