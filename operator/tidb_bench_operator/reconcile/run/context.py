"""What every task of a run's life shares: the run's state for one reconcile, and its actions.

A `RunContext` lives for one reconcile call. The tasks (admission, preflight, dataset,
steps, finish) read the spec and status from it, change the status in place, and act
through its few verbs: `event`, `condition`, `enter` (a phase), `fail` (the run),
`wait` (look again later), `park` (wait for the queue to move). Everything they need from
Kubernetes is in `RunKube`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Protocol

from tidb_bench_operator.domain.api.common import RunPhase
from tidb_bench_operator.domain.api.run_spec import BenchmarkRunSpec
from tidb_bench_operator.domain.api.run_status import BenchmarkRunStatus
from tidb_bench_operator.domain.fingerprint import Fingerprint
from tidb_bench_operator.domain.guard import PdLook
from tidb_bench_operator.domain.jobs import run_selector
from tidb_bench_operator.domain.manifests import Endpoint, RunRef, build_event
from tidb_bench_operator.domain.objects import JSON
from tidb_bench_operator.domain.queue import ADMITTED, Turn
from tidb_bench_operator.domain.resources.usage import UsageSource
from tidb_bench_operator.domain.results_store import DEFAULT_BUDGET
from tidb_bench_operator.domain.status import ConditionStatus, set_condition
from tidb_bench_operator.domain.trust.reach import Reach
from tidb_bench_operator.reconcile.run.gate import PreflightOutcome

#: The preflight gate as the run reconciler calls it (reconcile.gate.run_preflight, wired).
PreflightFn = Callable[[BenchmarkRunSpec, str, Endpoint], PreflightOutcome]
#: What the server says about itself over SQL for the fingerprint (connections.build_server_facts):
#: global variables, TiDB's SHOW CONFIG, the version. Never raises: it answers what it could.
ServerFactsFn = Callable[[BenchmarkRunSpec, str, Endpoint], Fingerprint]
#: One poll of PD for the guard (connections.build_pd_look): stores, operators, leader. Never
#: raises: what could not be read is in PdLook.errors.
PdLookFn = Callable[[BenchmarkRunSpec, str, Endpoint], PdLook]
#: Where a run reads its steps' server resources (connections.build_usage): a source, the
#: reason there is none (a str, said in each step), or None when spec.metrics.source is none.
UsageFn = Callable[[BenchmarkRunSpec, str], UsageSource | str | None]


class RunKube(Protocol):
    """The Kubernetes operations the run reconciler uses (adapters.k8s.Kube has them all).

    Objects are plain camelCase dicts. Failures other than "not found" raise
    errors.KubeError (KubeForbidden for a 403).
    """

    def secret_keys(self, namespace: str, name: str) -> set[str] | None:
        """The keys of a Secret (never its values), or None when it does not exist."""
        ...

    def secret_value(self, namespace: str, name: str, key: str) -> str | None:
        """One decoded Secret value, for a check in memory only: never logged or stored."""
        ...

    def nodes(self) -> list[JSON]:
        """All Nodes."""
        ...

    def pods(self, namespace: str | None, selector: str) -> list[JSON]:
        """Pods matching a label selector; namespace None means all namespaces."""
        ...

    def jobs(self, namespace: str, selector: str) -> list[JSON]:
        """Jobs in a namespace matching a label selector."""
        ...

    def pod_log(self, namespace: str, name: str, container: str) -> str | None:
        """A container's log, or None when it cannot be read."""
        ...

    def tidb_cluster(self, namespace: str, name: str) -> JSON | None:
        """The TidbCluster, or None when it does not exist."""
        ...

    def v2_cluster(self, namespace: str, name: str) -> JSON | None:
        """The TiDB Operator v2 Cluster, or None when it does not exist."""
        ...

    def v2_groups(self, namespace: str) -> list[JSON]:
        """The TiDB Operator v2 PD/TiKV/TiDB groups of a namespace."""
        ...

    def create_job(self, body: JSON) -> JSON:
        """Create a Job, or return the existing one of that name."""
        ...

    def delete_jobs(self, namespace: str, selector: str) -> int:
        """Delete the matching Jobs and their pods; how many there were."""
        ...

    def upsert_configmap(self, body: JSON) -> None:
        """Create or replace a ConfigMap."""
        ...

    def configmap(self, namespace: str, name: str) -> JSON | None:
        """One ConfigMap, or None when it does not exist."""
        ...

    def ensure_service_account(self, body: JSON) -> None:
        """Create a ServiceAccount unless it exists."""
        ...

    def create_event(self, body: JSON) -> None:
        """Post an Event (best effort)."""
        ...

    def patch_benchmark_run_status(self, namespace: str, name: str, status: JSON) -> object:
        """Merge-patch a BenchmarkRun's status (what it returns is not used here)."""
        ...


@dataclass(frozen=True)
class Deps:
    """What a RunReconciler is built with (controller/wiring.py composes the real one)."""

    kube: RunKube
    preflight: PreflightFn | None
    image: str | None
    scheduling_timeout: timedelta
    server_facts: ServerFactsFn | None = None
    #: Characters of results per ConfigMap (domain.results_store.DEFAULT_BUDGET).
    results_budget: int = DEFAULT_BUDGET
    #: PD as the guard polls it while a step runs; None: PD is not watched.
    pd_look: PdLookFn | None = None
    #: The steps' server resources (docs/resources.md); None: not measured.
    usage: UsageFn | None = None
    #: What runs may ask beyond their namespace and the runner image (domain/trust/reach.py).
    reach: Reach = field(default_factory=Reach)


@dataclass
class RunState:
    """One reconcile of one run: its identity and status (changed in place), and the verbs.

    Enough to fail a run whose spec cannot be read; the tasks get a RunContext.
    """

    deps: Deps
    run: RunRef
    body: JSON
    st: BenchmarkRunStatus
    now: datetime
    #: Seconds until the run should be looked at again (the handler's hint); None: no hint.
    requeue: float | None = None
    #: A transition happened that the next phase can act on in the same reconcile.
    again: bool = False
    #: The run's place in its cluster's queue (what admission acts on; see domain/queue.py).
    turn: Turn = ADMITTED
    #: Waiting in the queue: nothing to look at until the queue moves (no timed look).
    parked: bool = False

    @property
    def kube(self) -> RunKube:
        return self.deps.kube

    # ---- verbs -----------------------------------------------------------------------------
    def event(self, type_: str, reason: str, message: str) -> None:
        """Post an Event about the run."""
        self.kube.create_event(
            build_event(
                self.run,
                reason=reason,
                message=message,
                type_=type_,
                now=self.now,
                name_suffix=f"{reason.lower()}-{int(datetime.now(UTC).timestamp() * 1e6):x}",
            )
        )

    def condition(self, type_: str, status: ConditionStatus, reason: str, message: str) -> bool:
        """Upsert a condition on the run; True when its status or reason changed."""
        return set_condition(self.st.conditions, type_, status, reason, message, self.now)

    def wait(self, seconds: float) -> None:
        """Nothing more to do now: look again in about `seconds`."""
        self.requeue = seconds

    def park(self) -> None:
        """Nothing to do until the cluster's queue moves: the controller wakes the run then."""
        self.requeue = None
        self.parked = True

    def enter(self, phase: RunPhase, message: str) -> None:
        """Move the run to `phase` (with an Event), and let that phase act in this reconcile."""
        self.st.phase = phase
        self.st.message = message
        self.event("Normal", phase.value, message)
        self.requeue = 0.2
        self.again = True

    def fail(self, reason: str, message: str) -> None:
        """End the run as Failed: conditions, an Event, and no Job left behind.

        What went wrong is in status and Events, which outlive the Jobs and pods.
        """
        st = self.st
        if st.phase != RunPhase.PENDING:
            self.delete_jobs()
        st.phase = RunPhase.FAILED
        st.message = message
        st.finished_at = self.now
        st.waiting_for = None
        self.condition("Complete", "True", reason, message)
        self.condition("Failed", "True", reason, message)
        self.event("Warning", reason, message)

    def delete_jobs(
        self, role: str | None = None, step: int | None = None, round_: int | None = None
    ) -> None:
        """Delete the run's Jobs (and, by garbage collection, their pods)."""
        self.kube.delete_jobs(self.run.namespace, run_selector(self.run, role, step, round_))


@dataclass(kw_only=True)
class RunContext(RunState):
    """A RunState whose spec is valid, with the endpoints derived from it."""

    spec: BenchmarkRunSpec
    endpoint: Endpoint
