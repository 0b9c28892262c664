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

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from tidb_bench_operator.domain.api.common import TERMINAL_PHASES, RunPhase, is_terminal
from tidb_bench_operator.domain.api.resources import parse_run_spec
from tidb_bench_operator.domain.api.run_status import AdmittedSpec, BenchmarkRunStatus, Condition
from tidb_bench_operator.domain.jobs import run_selector
from tidb_bench_operator.domain.manifests import RunRef, endpoint_of
from tidb_bench_operator.domain.objects import JSON
from tidb_bench_operator.domain.queue import ADMITTED, Turn
from tidb_bench_operator.domain.results_store import DEFAULT_BUDGET
from tidb_bench_operator.domain.status import (
    condition_reason,
    parse_time,
    set_condition,
    status_patch,
    utc_now,
)
from tidb_bench_operator.domain.trust.frozen import (
    SPEC_CHANGE_IGNORED,
    changed_fields,
    ignored_message,
)
from tidb_bench_operator.domain.trust.reach import Reach
from tidb_bench_operator.errors import SpecError
from tidb_bench_operator.reconcile.run import admission, dataset, finish, preflight, steps
from tidb_bench_operator.reconcile.run.context import (
    Deps,
    PdLookFn,
    PreflightFn,
    RunContext,
    RunKube,
    RunState,
    ServerFactsFn,
    UsageFn,
)

#: A client pod the scheduler cannot place within this long fails the run with its reason.
SCHEDULING_TIMEOUT = timedelta(seconds=120)
#: Upper bound of state transitions one reconcile call may chain (Pending → … → first Job).
MAX_TRANSITIONS_PER_CALL = 6
#: A run whose reconciles keep failing (any exception: API errors, a bug) for this long is
#: failed with the last error; until then its status says so in a ReconcileFailing condition.
RECONCILE_FAILURE_LIMIT = timedelta(seconds=300)
#: The controller's /healthz turns red while a run's reconciles have failed for this long.
HEALTH_FAILURE_LIMIT = timedelta(seconds=120)
#: The longest wait between two attempts of a failing reconcile.
MAX_BACKOFF_SECONDS = 30.0


log = logging.getLogger(__name__)


@dataclass
class Failing:
    """A run whose reconciles fail: since when, how often, and the last error."""

    since: datetime
    count: int = 0
    error: str = ""


@dataclass
class Outcome:
    """The result of one reconcile: a merge patch for .status, and when to look again.

    `requeue_seconds` is the hint the controller schedules the next look by; `parked` says
    the run waits in its cluster's queue and needs no look until the queue moves.
    """

    status: dict[str, Any]
    requeue_seconds: float | None = None
    parked: bool = False


def _failing_condition(body: JSON) -> datetime | None:
    """When the run's ReconcileFailing condition turned True (survives restarts), or None."""
    for c in (body.get("status") or {}).get("conditions") or []:
        if (
            isinstance(c, dict)
            and c.get("type") == "ReconcileFailing"
            and c.get("status") == "True"
        ):
            try:
                return parse_time(c.get("lastTransitionTime"))
            except ValueError:
                return None
    return None


def _frozen(state: RunState, current: Mapping[str, Any]) -> Mapping[str, Any]:
    """The spec a run that left Pending goes on with: the admitted one (domain/trust/frozen.py).

    An edit of .spec since is ignored, with a SpecChangeIgnored condition and, once per new
    generation, an Event. A run admitted by a controller that kept no copy is frozen now.
    """
    st, generation = state.st, state.body["metadata"].get("generation")
    if st.admitted is None:
        st.admitted = AdmittedSpec.of(current, generation)
        return current
    admitted = st.admitted.data()
    changed = changed_fields(admitted, current)
    if changed:
        message = ignored_message(changed, st.admitted.generation, generation)
        if st.observed_generation != generation:
            state.event("Warning", SPEC_CHANGE_IGNORED, message)
        state.condition(SPEC_CHANGE_IGNORED, "True", "SpecFrozen", message)
    elif condition_reason(st.conditions, SPEC_CHANGE_IGNORED) is not None:
        state.condition(SPEC_CHANGE_IGNORED, "False", "SpecAsAdmitted",
                        "spec is the one the run was admitted with again")  # fmt: skip
    return admitted


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
        server_facts: ServerFactsFn | None = None,
        results_budget: int = DEFAULT_BUDGET,
        pd_look: PdLookFn | None = None,
        usage: UsageFn | None = None,
        reach: Reach | None = None,
    ) -> None:
        self.deps = Deps(
            kube=kube,
            preflight=preflight,
            image=image,
            scheduling_timeout=scheduling_timeout,
            server_facts=server_facts,
            results_budget=results_budget,
            pd_look=pd_look,
            usage=usage,
            reach=reach or Reach(),
        )
        self.clock = clock
        #: Runs (by uid) whose last reconcile failed.
        self.failing: dict[str, Failing] = {}

    # ---- failures of a look (the Driver calls these around reconcile + status write) -------
    def settled(self, body: JSON, status: JSON) -> JSON:
        """The status patch of a look that succeeded, with ReconcileFailing cleared if set.

        The Driver writes the result; a failure of the reconcile or of that write goes to
        `failed` instead, so no error ever stops a run from being looked at again.
        """
        uid = str(body["metadata"].get("uid"))
        if uid in self.failing or _failing_condition(body) is not None:
            status = {**status, **self._condition_patch(body, status, None)}
        self.failing.pop(uid, None)
        return status

    def failed(self, body: JSON, exc: Exception) -> float:
        """A look failed (an API error of any kind, a bug): count it and show it; back-off.

        It is logged, shown in the run's ReconcileFailing condition and in `health()`, and
        after RECONCILE_FAILURE_LIMIT ends the run as Failed with the error. Never raises;
        returns when to look again (seconds).
        """
        return self._failed(body, exc)

    def _failed(self, body: JSON, exc: Exception) -> float:
        meta = body["metadata"]
        uid, now = str(meta.get("uid")), self.clock()
        error = f"{type(exc).__name__}: {exc}"[:1000]
        seen = _failing_condition(body)
        since = min(
            self.failing[uid].since if uid in self.failing else now,
            seen or now,
        )
        failing = self.failing.setdefault(uid, Failing(since=since))
        failing.since, failing.error = since, error
        failing.count += 1
        log.warning(
            "reconcile of BenchmarkRun %s/%s failed (%d in a row since %s): %s",
            meta["namespace"], meta["name"], failing.count, since.isoformat(), error,
        )  # fmt: skip
        try:
            if now - since >= RECONCILE_FAILURE_LIMIT:
                self._give_up(body, failing)
            else:
                patch = self._condition_patch(body, {}, failing)
                self.deps.kube.patch_benchmark_run_status(meta["namespace"], meta["name"], patch)
        except Exception as again:
            log.warning("cannot write the status of %s/%s either: %s", meta["namespace"],
                        meta["name"], again)  # fmt: skip
        return min(MAX_BACKOFF_SECONDS, 2.0 ** min(failing.count, 5))

    def _condition_patch(self, body: JSON, patch: JSON, failing: Failing | None) -> JSON:
        """The conditions (as in `patch`, else in the body) with ReconcileFailing set."""
        raw = patch.get("conditions", (body.get("status") or {}).get("conditions") or [])
        try:
            conditions = [Condition.model_validate(c) for c in raw]
        except ValidationError:
            conditions = []
        now = self.clock()
        if failing is None:
            set_condition(conditions, "ReconcileFailing", "False", "Recovered",
                          "reconciles succeed again", now)  # fmt: skip
        else:
            set_condition(
                conditions, "ReconcileFailing", "True", "Error",
                f"{failing.count} reconcile(s) in a row failed since {failing.since.isoformat()}"
                f"; the run fails at {(failing.since + RECONCILE_FAILURE_LIMIT).isoformat()} "
                f"unless one succeeds: {failing.error}",
                now,
            )  # fmt: skip
            # Keep the first failure's time across controller restarts.
            for c in conditions:
                if c.type == "ReconcileFailing":
                    c.last_transition_time = failing.since
        return {"conditions": [c.model_dump(by_alias=True, mode="json", exclude_none=True)
                               for c in conditions]}  # fmt: skip

    def _give_up(self, body: JSON, failing: Failing) -> None:
        """The run's reconciles failed for RECONCILE_FAILURE_LIMIT: fail it, Jobs deleted."""
        meta = body["metadata"]
        run = RunRef(meta["name"], meta["namespace"], meta["uid"])
        old = dict(body.get("status") or {})
        try:
            st = BenchmarkRunStatus.model_validate(old)
        except ValidationError:
            st = BenchmarkRunStatus()
        state = RunState(deps=self.deps, run=run, body=body, st=st, now=self.clock())
        waited = (state.now - failing.since).total_seconds()
        state.fail(
            "ReconcileFailed",
            f"the controller could not reconcile this run for {waited:.0f}s "
            f"({failing.count} attempts); last error: {failing.error}",
        )
        patch = status_patch(old, st)
        patch.update(self._condition_patch(body, patch, failing))
        self.deps.kube.patch_benchmark_run_status(run.namespace, run.name, patch)
        self.failing.pop(run.uid, None)

    def health(self) -> dict[str, str]:
        """Runs whose reconciles have failed for HEALTH_FAILURE_LIMIT, with their last error."""
        now = self.clock()
        return {
            uid: f"failing since {f.since.isoformat()} ({f.count} attempts): {f.error}"
            for uid, f in self.failing.items()
            if now - f.since >= HEALTH_FAILURE_LIMIT
        }

    def forget(self, uid: str) -> None:
        """A deleted run's failures no longer count."""
        self.failing.pop(uid, None)

    # ---- one reconcile -----------------------------------------------------------------------
    def reconcile(self, body: JSON, turn: Turn = ADMITTED) -> Outcome:
        """One step of the state machine for the run in `body` (a plain dict).

        `turn` is the run's place in its cluster's queue (domain/queue.py), which only the
        controller's in-memory queue knows; it matters only while the run is Pending.
        """
        meta = body["metadata"]
        run = RunRef(meta["name"], meta["namespace"], meta["uid"])
        old = dict(body.get("status") or {})
        try:
            st = BenchmarkRunStatus.model_validate(old)
        except ValidationError as exc:
            return self._invalid_status(run, body, old, exc)
        state = RunState(deps=self.deps, run=run, body=body, st=st, now=self.clock(), turn=turn)
        if st.phase in TERMINAL_PHASES:
            finish.expire(state)
            return Outcome(status={})
        data: Mapping[str, Any] = body.get("spec") or {}
        if st.phase != RunPhase.PENDING:
            data = _frozen(state, data)
        try:
            spec = parse_run_spec(data)
        except SpecError as exc:
            state.fail("InvalidSpec", str(exc))
            return Outcome(status=status_patch(old, st), requeue_seconds=state.requeue)
        ctx = RunContext(
            deps=self.deps, run=run, body=body, st=st, now=state.now,
            spec=spec, endpoint=endpoint_of(spec, run.namespace, st.endpoint), turn=turn,
        )  # fmt: skip
        st.observed_generation = meta.get("generation")
        # Transitions that need no waiting (a phase entered, a step finished) continue in the
        # same call: the controller's latency is then one look, not one per phase.
        for _ in range(MAX_TRANSITIONS_PER_CALL):
            ctx.again = False
            ctx.now = self.clock()  # a chained step's start time counts from now
            task = TASKS.get(st.phase)
            if task is None:
                break
            task(ctx)
            if not ctx.again:
                break
        return Outcome(status=status_patch(old, st), requeue_seconds=ctx.requeue, parked=ctx.parked)

    def _invalid_status(self, run: RunRef, body: JSON, old: JSON, exc: ValidationError) -> Outcome:
        """A status this version cannot read (edited by hand, or cut): fail the run precisely.

        A finished run is left as it is. The measured steps stay in the results ConfigMaps.
        """
        if is_terminal(old.get("phase")):
            return Outcome(status={})
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        st = BenchmarkRunStatus()
        state = RunState(deps=self.deps, run=run, body=body, st=st, now=self.clock())
        self.deps.kube.delete_jobs(run.namespace, run_selector(run))
        state.fail(
            "InvalidStatus",
            f"status.{where}: {first['msg']} (found {first.get('input')!r}); the status is "
            "the controller's record of the run and was changed by someone else, so the run "
            "cannot go on: create it again. Steps measured so far stay in its results "
            "ConfigMaps (kubectl get configmaps -l tidbbench.io/run=NAME)",
        )
        if isinstance(old.get("resultsConfigMap"), str):
            st.results_config_map = old["resultsConfigMap"]
        return Outcome(status=status_patch(old, st))
