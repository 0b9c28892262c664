"""The run reconciler: one call looks at a run's status and moves it along its life.

The status is the only state that survives a restart. One call observes the run's Jobs and
pods, acts (creates Jobs, posts Events, writes the results ConfigMap) and returns the
status patch. Every action is idempotent: Job names are deterministic and creating an
existing Job returns it, so a controller killed between acting and patching status
repeats nothing on restart.

Each phase is one task, in its own module, in the order of a run's life:

    Pending    admission.admit    inputs checked; wait for the cluster to be free
    Preflight  preflight.check    the gate, under the policy; wait or go on
    Preparing  dataset.prepare    the dataset Job; the steps laid out
    Running    steps.run_steps    one step at a time: Jobs, reports, numbers
               finish.finish      cleanup Job, summary, environment → Succeeded
    (final)    finish.expire      ttlSecondsAfterFinished
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from tidb_bench_operator.domain.manifests import RunRef, compute_endpoint
from tidb_bench_operator.domain.models import (
    TERMINAL_PHASES,
    BenchmarkRunStatus,
    RunPhase,
    parse_run_spec,
)
from tidb_bench_operator.domain.results_store import DEFAULT_BUDGET
from tidb_bench_operator.domain.status import status_patch, utc_now
from tidb_bench_operator.errors import SpecError
from tidb_bench_operator.reconcile import admission, dataset, finish, preflight, steps
from tidb_bench_operator.reconcile.context import (
    JSON,
    Deps,
    PreflightFn,
    RunContext,
    RunKube,
    RunState,
)

#: A client pod the scheduler cannot place within this long fails the run with its reason.
SCHEDULING_TIMEOUT = timedelta(seconds=120)
#: Upper bound of state transitions one reconcile call may chain (Pending → … → first Job).
MAX_TRANSITIONS_PER_CALL = 6


@dataclass
class Outcome:
    """The result of one reconcile: a merge patch for .status, and when to look again."""

    status: dict[str, Any]
    requeue_seconds: float | None = None


def _running(ctx: RunContext) -> None:
    if steps.run_steps(ctx):
        finish.finish(ctx)


#: The task of each phase that is not final.
TASKS: dict[RunPhase, Callable[[RunContext], None]] = {
    RunPhase.PENDING: admission.admit,
    RunPhase.PREFLIGHT: preflight.check,
    RunPhase.PREPARING: dataset.prepare,
    RunPhase.RUNNING: _running,
}


class RunReconciler:
    """Drives one BenchmarkRun through Pending → Preflight → Preparing → Running → done."""

    def __init__(
        self,
        kube: RunKube,
        *,
        preflight: PreflightFn | None = None,
        clock: Callable[[], datetime] = utc_now,
        image: str | None = None,
        scheduling_timeout: timedelta = SCHEDULING_TIMEOUT,
        results_budget: int = DEFAULT_BUDGET,
    ) -> None:
        self.deps = Deps(
            kube=kube, preflight=preflight, image=image, scheduling_timeout=scheduling_timeout,
            results_budget=results_budget,
        )  # fmt: skip
        self.clock = clock

    def reconcile(self, body: JSON) -> Outcome:
        """One step of the state machine for the run in `body` (a plain dict)."""
        meta = body["metadata"]
        run = RunRef(meta["name"], meta["namespace"], meta["uid"])
        old = dict(body.get("status") or {})
        st = BenchmarkRunStatus.model_validate(old)
        state = RunState(deps=self.deps, run=run, body=body, st=st, now=self.clock())
        if st.phase in TERMINAL_PHASES:
            finish.expire(state)
            return Outcome(status={})
        try:
            spec = parse_run_spec(body.get("spec") or {})
        except SpecError as exc:
            state.fail("InvalidSpec", str(exc))
            return Outcome(status=status_patch(old, st), requeue_seconds=state.requeue)
        ctx = RunContext(
            deps=self.deps, run=run, body=body, st=st, now=state.now,
            spec=spec, endpoint=compute_endpoint(spec, run.namespace),
        )  # fmt: skip
        st.observed_generation = meta.get("generation")
        # Transitions that need no waiting (a phase entered, a step finished) continue in the
        # same call: the controller's latency is then one timer tick, not one per phase.
        for _ in range(MAX_TRANSITIONS_PER_CALL):
            ctx.again = False
            ctx.now = self.clock()  # a chained step's start time counts from now
            task = TASKS.get(st.phase)
            if task is None:
                break
            task(ctx)
            if not ctx.again:
                break
        return Outcome(status=status_patch(old, st), requeue_seconds=ctx.requeue)
