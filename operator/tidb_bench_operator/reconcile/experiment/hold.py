"""One experiment or run per cluster: the hold an experiment puts on its cluster's queue.

From the moment its stash is written until it ends, an experiment changes its cluster: the
Driver then admits only the experiment's own runs on that cluster's queue (domain/queue.py
keys it), and every other run waits, its status naming the experiment. Before that, the
experiment itself waits while a run of someone else measures the cluster or another
experiment changes it: `cluster_busy` says which.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from tidb_bench_operator.domain.api.experiment import EXPERIMENT_TERMINAL, ExperimentPhase
from tidb_bench_operator.domain.api.resources import parse_experiment_spec
from tidb_bench_operator.domain.experiment.machine import aimed_run_spec, run_names
from tidb_bench_operator.domain.queue import QueueEntry, queue_key
from tidb_bench_operator.domain.trust.frozen import governing_spec
from tidb_bench_operator.errors import SpecError


@dataclass(frozen=True)
class Hold:
    """An experiment's claim on a cluster's queue."""

    queue: str
    #: namespace/name of the experiment.
    experiment: str
    #: namespace/name of each run the experiment makes.
    runs: frozenset[str]

    @property
    def waiting_text(self) -> str:
        """What a run kept waiting by the hold shows as the one it waits for."""
        return f"BenchmarkExperiment {self.experiment}"


def experiment_hold(body: Mapping[str, Any], *, holding: bool = False) -> Hold | None:
    """The hold of an experiment whose phase holds its cluster (any phase but Pending and
    the final ones), or with `holding` whatever its phase; None for a spec that does not
    validate (it changes nothing)."""
    meta = body.get("metadata") or {}
    phase = (body.get("status") or {}).get("phase") or ExperimentPhase.PENDING
    if not holding and (phase == ExperimentPhase.PENDING or phase in EXPERIMENT_TERMINAL):
        return None
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    try:
        spec = parse_experiment_spec(governing_spec(body))
    except (SpecError, ValidationError, ValueError):
        return None
    return Hold(
        queue=queue_key(aimed_run_spec(spec), namespace),
        experiment=f"{namespace}/{name}",
        runs=frozenset(f"{namespace}/{run}" for run in run_names(spec, name)),
    )


def cluster_busy(
    hold: Hold,
    entries: Sequence[QueueEntry],
    claimed: str | None,
    ghost: str | None,
    current: Hold | None,
) -> str | None:
    """Why the experiment may not start changing its cluster now, or None.

    `entries`: the runs of the cluster's queue; `claimed`: the uid of a run just admitted;
    `ghost`: a deleted run whose pods still run; `current`: the hold on the queue now.
    """
    for e in entries:
        if e.ref not in hold.runs and (e.holds or e.uid == claimed):
            return f"BenchmarkRun {e.ref} is measuring the cluster"
    if ghost is not None:
        return f"the pods of deleted BenchmarkRun {ghost} are still running"
    if current is not None and current.experiment != hold.experiment:
        return f"BenchmarkExperiment {current.experiment} is changing the cluster"
    return None
